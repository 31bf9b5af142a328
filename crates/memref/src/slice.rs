//! numpy's basic slicing on memref arguments: `A.npy[::2, 1:]`, `A.npy[0]`,
//! `A.npy[::-1].T`. A slice changes the descriptor, never the data: the offset moves to
//! the first element taken, each sliced dimension's size shrinks and its stride is
//! multiplied by the step, an integer index drops its dimension, and `.T` reverses the
//! dimensions (numpy's transpose). The callee gets the file's buffer through a strided
//! descriptor; one whose parameter has the identity layout needs a row-major copy
//! ([`crate::CallOptions::copy_strided`]).
//!
//! ```
//! use locus_memref::slice::{split_argument, Slicing};
//!
//! let (path, text) = split_argument("A.npy[::2, 1:].T");
//! assert_eq!(path, "A.npy");
//! let slicing = Slicing::parse(text.unwrap_or("")).unwrap();
//! // A 4x3 array: rows 0 and 2, columns 1 and 2, transposed.
//! let (offset, sizes, strides) = slicing.apply(0, &[4, 3], &[3, 1]).unwrap();
//! assert_eq!((offset, sizes, strides), (1, vec![2, 2], vec![1, 6]));
//! ```

use crate::Error;

/// What one dimension keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimSlice {
    /// One index (negative counts from the end); the dimension goes away.
    Index(i64),
    /// `start:stop:step`, numpy's meaning (negative bounds count from the end; bounds
    /// out of range are clamped; a negative step walks backwards).
    Range {
        /// First index, or the start of the walk.
        start: Option<i64>,
        /// One past the last, or the end of the walk.
        stop: Option<i64>,
        /// Not zero.
        step: i64,
    },
}

/// A slicing: one [`DimSlice`] per leading dimension (the rest are kept whole), then an
/// optional transpose.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slicing {
    /// The slices, from the first dimension.
    pub dims: Vec<DimSlice>,
    /// Reverse the dimensions afterwards (`.T`).
    pub transpose: bool,
}

/// Splits a command-line argument into the file and the slicing written after it:
/// `A.npy[::2]` → (`A.npy`, `[::2]`), `A.npy.T` → (`A.npy`, `.T`), `A.npy` → (`A.npy`,
/// none). The slicing starts at the first `[` after the last `/`, or is a final `.T`.
pub fn split_argument(text: &str) -> (&str, Option<&str>) {
    let name_start = text.rfind('/').map_or(0, |i| i + 1);
    if let Some(open) = text[name_start..].find('[') {
        let at = name_start + open;
        return (&text[..at], Some(&text[at..]));
    }
    match text.strip_suffix(".T") {
        Some(path) if !path.is_empty() => (path, Some(".T")),
        _ => (text, None),
    }
}

fn error<T>(at: usize, message: impl Into<String>) -> Result<T, Error> {
    Err(Error::Parse {
        at,
        message: message.into(),
    })
}

impl Slicing {
    /// Parses `[s0, s1, ...]` (each `i` or `start:stop:step` with any part left out),
    /// optionally followed by `.T`, or `.T` alone. Errors give the byte offset in `text`.
    pub fn parse(text: &str) -> Result<Slicing, Error> {
        let (body, transpose) = match text.strip_suffix(".T") {
            Some(b) => (b, true),
            None => (text, false),
        };
        if body.is_empty() {
            return Ok(Slicing {
                dims: Vec::new(),
                transpose,
            });
        }
        let Some(inner) = body.strip_prefix('[').and_then(|b| b.strip_suffix(']')) else {
            return error(0, "expected `[slices]` or `.T` after the file name");
        };
        let mut dims = Vec::new();
        let mut at = 1;
        for part in inner.split(',') {
            dims.push(Self::dim(part, at)?);
            at += part.len() + 1;
        }
        Ok(Slicing { dims, transpose })
    }

    fn dim(part: &str, at: usize) -> Result<DimSlice, Error> {
        let number = |s: &str, what: &str| -> Result<Option<i64>, Error> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            match s.parse() {
                Ok(v) => Ok(Some(v)),
                Err(_) => error(at, format!("{what} `{s}` is not an integer")),
            }
        };
        let pieces: Vec<&str> = part.split(':').collect();
        match pieces[..] {
            [index] => match number(index, "index")? {
                Some(i) => Ok(DimSlice::Index(i)),
                None => error(at, "an empty slice (write `:` for a whole dimension)"),
            },
            [start, stop] | [start, stop, ""] => Ok(DimSlice::Range {
                start: number(start, "start")?,
                stop: number(stop, "stop")?,
                step: 1,
            }),
            [start, stop, step] => {
                let step = number(step, "step")?.unwrap_or(1);
                if step == 0 {
                    return error(at, "a step of 0");
                }
                Ok(DimSlice::Range {
                    start: number(start, "start")?,
                    stop: number(stop, "stop")?,
                    step,
                })
            }
            _ => error(at, format!("`{}` has more than two `:`", part.trim())),
        }
    }

    /// The descriptor after slicing one with `offset`, `sizes` and `strides` (in
    /// elements).
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] for more slices than dimensions or an index out of range,
    /// [`Error::Overflow`] if the new offset or strides do not fit an `i64`.
    pub fn apply(
        &self,
        offset: i64,
        sizes: &[i64],
        strides: &[i64],
    ) -> Result<(i64, Vec<i64>, Vec<i64>), Error> {
        if self.dims.len() > sizes.len() {
            return error(
                0,
                format!("{} slices for {} dimensions", self.dims.len(), sizes.len()),
            );
        }
        let overflow = |dim| Error::Overflow { dim };
        let mut offset = offset;
        let (mut new_sizes, mut new_strides) = (Vec::new(), Vec::new());
        for (dim, (&size, &stride)) in sizes.iter().zip(strides).enumerate() {
            let (first, len, step) = match self.dims.get(dim) {
                None => (0, size, 1),
                Some(DimSlice::Index(i)) => {
                    let at = if *i < 0 { i + size } else { *i };
                    if !(0..size).contains(&at) {
                        return error(
                            0,
                            format!("index {i} is out of range for size {size} in dimension {dim}"),
                        );
                    }
                    offset = stride
                        .checked_mul(at)
                        .and_then(|d| offset.checked_add(d))
                        .ok_or(overflow(dim))?;
                    continue;
                }
                Some(&DimSlice::Range { start, stop, step }) => {
                    let (first, len) = range(start, stop, step, size);
                    (first, len, step)
                }
            };
            offset = stride
                .checked_mul(first)
                .and_then(|d| offset.checked_add(d))
                .ok_or(overflow(dim))?;
            new_sizes.push(len);
            // A dimension of one element (or none) is never stepped through: its stride
            // does not matter, and a huge step must not overflow it.
            let new_stride = if len <= 1 {
                stride
            } else {
                stride.checked_mul(step).ok_or(overflow(dim))?
            };
            new_strides.push(new_stride);
        }
        if self.transpose {
            new_sizes.reverse();
            new_strides.reverse();
        }
        Ok((offset, new_sizes, new_strides))
    }
}

/// numpy's `slice.indices(size)` and the length of the walk: the first index taken and
/// how many.
fn range(start: Option<i64>, stop: Option<i64>, step: i64, size: i64) -> (i64, i64) {
    // Bounds are clamped to [0, size] walking forwards, to [-1, size - 1] backwards.
    let (low, high) = if step > 0 { (0, size) } else { (-1, size - 1) };
    let clamp = |v: i64| {
        let v = if v < 0 { v.saturating_add(size) } else { v };
        v.clamp(low, high)
    };
    let first = start.map_or(if step > 0 { 0 } else { size - 1 }, clamp);
    let end = stop.map_or(if step > 0 { size } else { -1 }, clamp);
    // In i128: the distance and the step's magnitude fit (|step| may be 2^63).
    let (distance, stride) = if step > 0 {
        (i128::from(end) - i128::from(first), i128::from(step))
    } else {
        (i128::from(first) - i128::from(end), -i128::from(step))
    };
    let len = if distance > 0 {
        (distance - 1) / stride + 1
    } else {
        0
    };
    // At most `size` elements, which is an i64.
    let len = i64::try_from(len).unwrap_or(size);
    (if len == 0 { 0 } else { first }, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The elements numpy takes for `start:stop:step` of `0..size`.
    fn taken(start: Option<i64>, stop: Option<i64>, step: i64, size: i64) -> Vec<i64> {
        let (first, len) = range(start, stop, step, size);
        (0..len).map(|k| first + k * step).collect()
    }

    #[test]
    fn ranges_as_numpy() {
        // Checked against Python's range(10)[s] for each slice s.
        assert_eq!(taken(None, None, 2, 10), [0, 2, 4, 6, 8]);
        assert_eq!(taken(Some(1), None, 1, 10), (1..10).collect::<Vec<_>>());
        assert_eq!(taken(None, None, -1, 10), (0..10).rev().collect::<Vec<_>>());
        assert_eq!(taken(Some(-3), None, 1, 10), [7, 8, 9]);
        assert_eq!(taken(Some(8), Some(2), -3, 10), [8, 5]);
        assert_eq!(taken(Some(20), None, -2, 10), [9, 7, 5, 3, 1]);
        assert_eq!(taken(Some(5), Some(5), 1, 10), Vec::<i64>::new());
        assert_eq!(taken(Some(-20), Some(3), 1, 10), [0, 1, 2]);
        assert_eq!(
            taken(None, Some(-20), -1, 10),
            (0..10).rev().collect::<Vec<_>>()
        );
        assert_eq!(taken(None, None, 1, 0), Vec::<i64>::new());
        // Steps of any size, i64::MIN included (numpy: one element, the first).
        assert_eq!(taken(None, None, i64::MIN, 10), [9]);
        assert_eq!(taken(None, None, i64::MAX, 10), [0]);
        let one = Slicing::parse(&format!("[::{}]", i64::MIN)).ok();
        let applied = one.and_then(|s| s.apply(0, &[10], &[1]).ok());
        assert_eq!(applied, Some((9, vec![1], vec![1])));
    }

    #[test]
    fn parse_errors_name_the_offset() {
        let Err(Error::Parse { at, message }) = Slicing::parse("[1:2, x]") else {
            panic!("parsed")
        };
        assert_eq!((at, message.as_str()), (5, "index `x` is not an integer"));
        assert!(Slicing::parse("[::0]").is_err());
        assert!(Slicing::parse("[1:2:3:4]").is_err());
        assert!(Slicing::parse("(1)").is_err());
        assert_eq!(Slicing::parse(".T").map(|s| s.transpose).ok(), Some(true));
    }
}
