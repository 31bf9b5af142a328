//! Result ownership: where each memref result's data lives (a global, an argument's buffer,
//! a fresh allocation) and who frees it.

use std::ffi::c_void;
use std::marker::PhantomData;

use super::args::{byte_len, for_each_linear};
use super::CallOptions;
use crate::owned::{freeable, reachable, Allocation};
use crate::signature::ElemType;
use crate::{Element, Error, MemRefView};

/// Where a returned memref's data lives, as [`Function::call`](super::Function::call) found out by
/// comparing its allocated and aligned pointers and the addresses it reaches
/// with every argument's buffer and every other result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A fresh allocation of the kernel's: [`ReturnedMemRef::owner`] is its
    /// guard, shared by every result pointing into it, and it is freed (with
    /// the call's deallocator) when the last of them is dropped. No guard
    /// when the allocated pointer is null.
    Fresh,
    /// Points into the buffer of argument `i` (the caller's: never freed),
    /// or into the copy made of it for the call (a shared view, or a strided
    /// view copied for an identity-layout parameter), which the result's
    /// [`ReturnedMemRef::owner`] then keeps alive.
    Argument(usize),
    /// A global (`memref.get_global`, allocated pointer `0xdeadbeef`): never
    /// freed.
    Global,
    /// The call said the kernel keeps its results
    /// ([`CallOptions::borrow_results`]): never freed.
    Kept,
}

/// A memref returned by a dynamic call, any rank.
///
/// It borrows the call's arguments and library for `'a` (it may point into
/// either), and holds a share of its allocation when it owns one (see
/// [`Origin`]): reading it is always reading live memory.
#[derive(Debug)]
pub struct ReturnedMemRef<'a> {
    /// The descriptor as the wrapper wrote it.
    pub(super) raw: RawResult,
    pub(super) origin: Origin,
    pub(super) owner: Option<Allocation>,
    pub(super) _borrow: PhantomData<&'a [u8]>,
}

impl ReturnedMemRef<'_> {
    /// Element type.
    pub fn elem(&self) -> ElemType {
        self.raw.elem
    }
    /// Rank.
    pub fn rank(&self) -> usize {
        self.raw.sizes.len()
    }
    /// Sizes.
    pub fn sizes(&self) -> &[i64] {
        &self.raw.sizes
    }
    /// Strides.
    pub fn strides(&self) -> &[i64] {
        &self.raw.strides
    }
    /// Offset.
    pub fn offset(&self) -> i64 {
        self.raw.offset
    }
    /// The allocated pointer (what an owned allocation frees).
    pub fn allocated(&self) -> *mut c_void {
        self.raw.allocated
    }
    /// The aligned pointer (what accesses are based on).
    pub fn aligned(&self) -> *mut c_void {
        self.raw.aligned
    }
    /// Whether it came back unranked (its heap descriptor was freed once read).
    pub fn was_unranked(&self) -> bool {
        self.raw.unranked
    }
    /// Where its data lives.
    pub fn origin(&self) -> Origin {
        self.origin
    }
    /// The guard of the allocation it points into, when the call's results
    /// own it (shared with every other result pointing into it).
    pub fn owner(&self) -> Option<&Allocation> {
        self.owner.as_ref()
    }
    /// Whether both results hold the same allocation's guard.
    pub fn shares_allocation_with(&self, other: &ReturnedMemRef<'_>) -> bool {
        matches!((&self.owner, &other.owner), (Some(a), Some(b)) if a == b)
    }

    /// The elements in row-major order as native-endian bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        let esz = self.raw.elem.size();
        // Also refuses negative sizes, before they are counted below.
        if reachable(self.raw.offset, &self.raw.sizes, &self.raw.strides)?.is_some()
            && self.raw.aligned.is_null()
        {
            return Err(Error::NullDescriptor);
        }
        // The sizes come from compiled code: a broadcast (stride 0) memref may
        // name more elements than memory holds, so count and reserve fallibly.
        let too_large = || Error::Result {
            index: self.raw.index,
            message: format!(
                "sizes {:?} of {} are too large to copy",
                self.raw.sizes, self.raw.elem
            ),
        };
        let nbytes = byte_len(self.raw.elem, &self.raw.sizes).ok_or_else(too_large)?;
        let mut out = Vec::new();
        out.try_reserve_exact(nbytes).map_err(|_| too_large())?;
        let base = self.raw.aligned.cast::<u8>();
        for_each_linear(&self.raw.sizes, &self.raw.strides, self.raw.offset, |lin| {
            // SAFETY: the callee's signature promises a valid memref of this
            // type, alive while `self` (its guard, its borrow) is.
            let p = unsafe { base.offset(lin as isize * esz as isize) };
            // SAFETY: as above.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, esz) });
        });
        Ok(out)
    }

    /// The result's elements in place, when they are contiguous in row-major order (its
    /// strides are the row-major ones of its sizes, whatever the strides of dimensions of
    /// size 1): what [`ReturnedMemRef::to_bytes`] would copy, without the copy.
    pub fn contiguous_bytes(&self) -> Result<Option<&[u8]>, Error> {
        let Some((lo, hi)) = reachable(self.raw.offset, &self.raw.sizes, &self.raw.strides)? else {
            return Ok(Some(&[]));
        };
        if self.raw.aligned.is_null() {
            return Err(Error::NullDescriptor);
        }
        let dense = crate::signature::row_major(&self.raw.sizes);
        let row_major = self
            .raw
            .sizes
            .iter()
            .zip(self.raw.strides.iter().zip(&dense))
            .all(|(&size, (&stride, &want))| size == 1 || stride == want);
        if !row_major || lo != self.raw.offset {
            return Ok(None);
        }
        let esz = self.raw.elem.size();
        let len = (hi - lo + 1) as usize * esz;
        let start = self
            .raw
            .aligned
            .cast::<u8>()
            .wrapping_add(lo as usize * esz);
        // SAFETY: the callee's signature promises a valid memref of this type, alive
        // while `self` (its guard, its borrow) is; row-major strides make its elements
        // the `len` bytes from its first one.
        Ok(Some(unsafe { std::slice::from_raw_parts(start, len) }))
    }

    /// A checked typed view of the result.
    pub fn view<T: Element, const N: usize>(&self) -> Result<MemRefView<'_, T, N>, Error> {
        if T::TYPE != self.raw.elem || N != self.raw.sizes.len() {
            return Err(Error::Result {
                index: self.raw.index,
                message: format!(
                    "is memref of rank {} of {}, asked for rank {N} of {}",
                    self.raw.sizes.len(),
                    self.raw.elem,
                    T::TYPE
                ),
            });
        }
        let mut sizes = [0i64; N];
        let mut strides = [0i64; N];
        sizes.copy_from_slice(&self.raw.sizes);
        strides.copy_from_slice(&self.raw.strides);
        let d = crate::MemRefDescriptor::new(
            self.raw.allocated.cast::<T>(),
            self.raw.aligned.cast::<T>(),
            self.raw.offset,
            sizes,
            strides,
        );
        // SAFETY: the memory is valid while `self` lives (its guard keeps a
        // fresh allocation, its borrow an argument's buffer); results give
        // only shared access, so nothing writes it meanwhile.
        unsafe { crate::owned::view_from_descriptor(&d) }
    }
}

/// A memref result as the wrapper wrote it (an unranked one's heap
/// descriptor already read).
#[derive(Debug)]
pub(super) struct RawResult {
    /// Position among the call's results, for errors.
    pub(super) index: usize,
    pub(super) elem: ElemType,
    pub(super) allocated: *mut c_void,
    pub(super) aligned: *mut c_void,
    pub(super) offset: i64,
    pub(super) sizes: Vec<i64>,
    pub(super) strides: Vec<i64>,
    pub(super) unranked: bool,
}

impl RawResult {
    /// The bytes `[start, end)` its elements cover, or `None` (no element,
    /// or sizes and strides that do not compute).
    fn bytes(&self) -> Option<(i128, i128)> {
        let (lo, hi) = reachable(self.offset, &self.sizes, &self.strides).ok()??;
        let esz = self.elem.size() as i128;
        let p = self.aligned as usize as i128;
        Some((p + i128::from(lo) * esz, p + (i128::from(hi) + 1) * esz))
    }
}

/// Whether address `p` lies in `[start, end)`.
fn within(p: *mut c_void, (start, end): (i128, i128)) -> bool {
    let p = p as usize as i128;
    start <= p && p < end
}

/// Whether two byte ranges overlap.
pub(super) fn overlap(a: (i128, i128), b: (i128, i128)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Finds where each memref result's data lives: in a global, in argument
/// `i`'s buffer (given by `args` as the argument's position, the bytes the
/// kernel got, and the copy made for the call if any), or in a fresh
/// allocation, one guard per allocation shared by every result in it.
/// Results are in one allocation when their allocated pointers are equal,
/// their bytes overlap, or one's pointers lie in the other's bytes.
pub(super) fn resolve(
    results: &[RawResult],
    args: &[(usize, (i128, i128), Option<Allocation>)],
    options: &CallOptions,
) -> Result<Vec<(Origin, Option<Allocation>)>, Error> {
    let n = results.len();
    let global: Vec<bool> = results
        .iter()
        .map(|r| r.allocated as usize == crate::owned::GLOBAL_ALLOCATED)
        .collect();
    let bytes: Vec<Option<(i128, i128)>> = results.iter().map(RawResult::bytes).collect();
    let into = |k: usize, span: (i128, i128)| {
        let r = &results[k];
        within(r.allocated, span)
            || within(r.aligned, span)
            || bytes[k].is_some_and(|b| overlap(b, span))
    };
    // The first argument each result points into.
    let arg_of: Vec<Option<usize>> = (0..n)
        .map(|k| match global[k] {
            true => None,
            false => args.iter().position(|a| into(k, a.1)),
        })
        .collect();
    // Results in one allocation: a union-find over the results.
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    for i in 0..n {
        for j in i + 1..n {
            if global[i] || global[j] {
                continue;
            }
            let (a, b) = (&results[i], &results[j]);
            let same = (a.allocated == b.allocated && freeable(a.allocated))
                || bytes[j].is_some_and(|bj| into(i, bj))
                || bytes[i].is_some_and(|bi| into(j, bi));
            if same {
                let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                parent[ri.max(rj)] = ri.min(rj);
            }
        }
    }
    let roots: Vec<usize> = (0..n).map(|k| root(&mut parent, k)).collect();
    // A group touching an argument is the argument's, whole.
    let group_arg = |g: usize| (0..n).filter(|&k| roots[k] == g).find_map(|k| arg_of[k]);
    // The allocated pointer each group of fresh results frees.
    let mut freed: Vec<Option<usize>> = vec![None; n];
    for k in 0..n {
        let g = roots[k];
        let a = results[k].allocated;
        if global[k] || options.borrow_results || group_arg(g).is_some() || !freeable(a) {
            continue;
        }
        match freed[g] {
            None => freed[g] = Some(k),
            Some(first) if results[first].allocated != a => {
                return Err(Error::Result {
                    index: results[k].index,
                    message: format!(
                        "overlaps result {} but its allocated pointer is {a:?}, not {:?}: \
                         which one to free is unknown",
                        results[first].index, results[first].allocated
                    ),
                });
            }
            Some(_) => {}
        }
    }
    let mut guards: Vec<Option<Allocation>> = vec![None; n];
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let g = roots[k];
        let arg = arg_of[k].or_else(|| group_arg(g));
        out.push(if global[k] {
            (Origin::Global, None)
        } else if let Some(i) = arg {
            let (position, span, copy) = &args[i];
            // Reading past the argument's bytes would write whatever memory is there (the
            // heap, another mapping) into the result, or fault.
            if let Some((lo, hi)) = bytes[k].filter(|&(lo, hi)| lo < span.0 || hi > span.1) {
                return Err(Error::Result {
                    index: results[k].index,
                    message: format!(
                        "points into argument {position} but reaches past its buffer (bytes \
                         {} to {} of it, which has {}): the kernel returned a view out of \
                         bounds",
                        lo - span.0,
                        hi - span.0,
                        span.1 - span.0
                    ),
                });
            }
            (Origin::Argument(*position), copy.clone())
        } else if options.borrow_results {
            (Origin::Kept, None)
        } else {
            if guards[g].is_none() {
                if let Some(first) = freed[g] {
                    // SAFETY: `Library::function`'s contract (or
                    // `CallOptions::free_with`'s): a result that is no global
                    // and points into no argument is a fresh allocation of the
                    // allocator `free` belongs to, now the caller's; the
                    // results sharing it are grouped here, so one guard frees it.
                    guards[g] = unsafe { Allocation::new(results[first].allocated, options.free) };
                }
            }
            (Origin::Fresh, guards[g].clone())
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! `resolve` on descriptors made up here: pointers are only compared,
    //! and "freed" by a deallocator that records them.

    use std::cell::RefCell;

    use super::*;

    thread_local! {
        static FREED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    /// Records the pointer instead of freeing it.
    unsafe extern "C" fn record(p: *mut c_void) {
        FREED.with(|f| f.borrow_mut().push(p as usize));
    }

    fn freed() -> Vec<usize> {
        FREED.with(|f| std::mem::take(&mut *f.borrow_mut()))
    }

    fn options() -> CallOptions {
        // SAFETY: `record` frees nothing.
        unsafe { CallOptions::default().free_with(record) }
    }

    /// A rank-1 f32 result `{allocated, aligned, offset, [size], [1]}`.
    fn result(index: usize, allocated: usize, aligned: usize, offset: i64, size: i64) -> RawResult {
        RawResult {
            index,
            elem: ElemType::F32,
            allocated: allocated as *mut c_void,
            aligned: aligned as *mut c_void,
            offset,
            sizes: vec![size],
            strides: vec![1],
            unranked: false,
        }
    }

    /// Argument 3, 64 bytes at 0x10000.
    fn argument() -> Vec<(usize, (i128, i128), Option<Allocation>)> {
        vec![(3, (0x10000, 0x10040), None)]
    }

    fn origins(found: &[(Origin, Option<Allocation>)]) -> Vec<Origin> {
        found.iter().map(|(o, _)| *o).collect()
    }

    /// A result in an argument's buffer that reaches past its end (or before its start) is
    /// refused, naming the bytes: copying it out would read memory that is not the
    /// argument's.
    #[test]
    fn a_result_reaching_out_of_its_argument_is_refused() {
        // Argument 3 is 64 bytes (16 f32) at 0x10000.
        for (offset, size) in [(2, 20), (-1, 4), (0, 17)] {
            let rs = [result(0, 0x10000, 0x10000, offset, size)];
            let err = resolve(&rs, &argument(), &options()).unwrap_err();
            assert!(
                matches!(&err, Error::Result { index: 0, message }
                    if message.contains("points into argument 3 but reaches past its buffer")),
                "{offset} {size}: {err}"
            );
        }
        let rs = [result(0, 0x10000, 0x10000, 2, 14)];
        let found = resolve(&rs, &argument(), &options()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(origins(&found), [Origin::Argument(3)]);
        assert!(freed().is_empty());
    }

    #[test]
    fn one_allocation_returned_twice_is_freed_once() {
        let rs = [
            result(0, 0x1000, 0x1000, 0, 4),
            result(1, 0x5000, 0x5000, 0, 4),
            result(2, 0x1000, 0x1000, 1, 3),
        ];
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert_eq!(origins(&found), [Origin::Fresh; 3]);
        let guards: Vec<&Allocation> = found.iter().filter_map(|(_, g)| g.as_ref()).collect();
        assert_eq!(guards.len(), 3);
        assert!(guards[0] == guards[2] && guards[0] != guards[1]);
        assert_eq!((guards[0].holders(), guards[1].holders()), (2, 1));
        let mut found = found;
        found.remove(0);
        assert_eq!(freed(), [0usize; 0]);
        found.remove(0);
        assert_eq!(freed(), [0x5000]);
        drop(found);
        assert_eq!(freed(), [0x1000]);
    }

    #[test]
    fn results_joined_by_bytes_or_pointers() {
        // The second (null allocated pointer) has its aligned pointer in the
        // first's bytes: one allocation, freed once.
        let rs = [result(0, 0x1000, 0x1000, 0, 16), result(1, 0, 0x1020, 0, 8)];
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert!(found
            .iter()
            .all(|(_, g)| g.as_ref().map(Allocation::ptr) == Some(0x1000 as *mut c_void)));
        drop(found);
        assert_eq!(freed(), [0x1000]);
        // Empty results are joined by their allocated pointers alone.
        let rs = [
            result(0, 0x2000, 0x2000, 0, 0),
            result(1, 0x2000, 0x2000, 0, 0),
        ];
        drop(resolve(&rs, &argument(), &options()).unwrap());
        assert_eq!(freed(), [0x2000]);
    }

    #[test]
    fn results_in_an_argument_are_never_freed() {
        let rs = [
            // The argument itself, a subview (aligned inside), one sharing its
            // allocated pointer, and two sharing another (bytes reaching out of
            // the argument are refused: see below).
            result(0, 0x10000, 0x10000, 0, 16),
            result(1, 0x7000, 0x10000, 4, 4),
            result(2, 0x7000, 0x10030, 0, 4),
            result(3, 0x20000, 0x10038, 0, 2),
            result(4, 0x20000, 0x10020, 0, 1),
            // A global, and a fresh buffer.
            result(5, GLOBAL, 0x8000, 0, 4),
            result(6, 0x30000, 0x30000, 0, 4),
        ];
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert_eq!(
            origins(&found),
            [
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Argument(3),
                Origin::Global,
                Origin::Fresh,
            ]
        );
        assert!(found[..6].iter().all(|(_, g)| g.is_none()));
        drop(found);
        assert_eq!(freed(), [0x30000]);
        // A copy made for the call is kept alive by the results in it.
        let copy = Allocation::zeroed(64).unwrap();
        let start = copy.ptr() as usize as i128;
        let args = [(0, (start, start + 64), Some(copy.clone()))];
        let a = copy.ptr() as usize;
        let found = resolve(&[result(0, a, a, 2, 2)], &args, &options()).unwrap();
        assert_eq!(found[0].0, Origin::Argument(0));
        assert!(found[0].1.as_ref() == Some(&copy));
        assert_eq!(copy.holders(), 3);
    }

    #[test]
    fn borrowed_results_and_null_pointers_are_not_freed() {
        let rs = [result(0, 0x1000, 0x1000, 0, 4), result(1, 0, 0, 0, 0)];
        let found = resolve(&rs, &argument(), &options().borrow_results(true)).unwrap();
        assert_eq!(origins(&found), [Origin::Kept, Origin::Kept]);
        drop(found);
        let found = resolve(&rs, &argument(), &options()).unwrap();
        assert_eq!(origins(&found), [Origin::Fresh, Origin::Fresh]);
        assert!(found[1].1.is_none());
        drop(found);
        assert_eq!(freed(), [0x1000]);
    }

    #[test]
    fn overlapping_results_with_two_allocated_pointers_are_refused() {
        // Bytes overlapping, or an allocated pointer in the other's bytes.
        for second in [
            result(1, 0x2000, 0x1010, 0, 8),
            result(1, 0x1010, 0x2000, 0, 8),
        ] {
            let rs = [result(0, 0x1000, 0x1000, 0, 8), second];
            let err = resolve(&rs, &argument(), &options()).unwrap_err();
            assert!(
                matches!(&err, Error::Result { index: 1, message } if message.contains("which one to free")),
                "{err}"
            );
        }
        let rs = [
            result(0, 0x1000, 0x1000, 0, 8),
            result(1, 0x2000, 0x1010, 0, 8),
        ];
        assert_eq!(freed(), [0usize; 0]);
        // Nothing is freed when borrowed, so nothing is ambiguous.
        assert!(resolve(&rs, &argument(), &options().borrow_results(true)).is_ok());
    }

    const GLOBAL: usize = crate::owned::GLOBAL_ALLOCATED;
}
