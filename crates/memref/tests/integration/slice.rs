//! numpy slice strings (`A.npy[::2, 1:].T`): `Slicing::parse` and `Slicing::apply`
//! against numpy itself on thousands of generated slicings, and parsing any text
//! without a panic, errors pointing inside it.

// Test helpers may panic.
#![allow(clippy::unwrap_used)]

use crate::tools;

use locus_memref::signature::row_major;
use locus_memref::slice::{split_argument, Slicing};
use locus_memref::Error;
use tools::{numpy_python, pipe};

/// xorshift64*: the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A bound or step: mostly small, sometimes at the ends of i64.
    fn int(&mut self) -> i64 {
        match self.below(12) {
            0 => [i64::MIN, i64::MAX, i64::MIN + 1, 1 << 62, -(1 << 62)][self.below(5) as usize],
            _ => self.below(17) as i64 - 8,
        }
    }
}

/// A slicing as numpy writes it, e.g. `[1:, ::-2, 0].T`.
fn slicing_text(rng: &mut Rng, rank: usize) -> String {
    let mut text = String::new();
    // Up to one more index than dimensions: numpy's IndexError.
    let n = rng.below(rank as u64 + 2) as usize;
    if n > 0 {
        let parts: Vec<String> = (0..n)
            .map(|_| match rng.below(3) {
                0 => rng.int().to_string(),
                _ => {
                    let mut part = String::new();
                    let bound = |rng: &mut Rng| {
                        if rng.below(2) == 0 {
                            rng.int().to_string()
                        } else {
                            String::new()
                        }
                    };
                    part.push_str(&bound(rng));
                    part.push(':');
                    part.push_str(&bound(rng));
                    if rng.below(2) == 0 {
                        part.push(':');
                        // A step of 0 now and then: numpy's ValueError.
                        let step = if rng.below(20) == 0 { 0 } else { rng.int() };
                        part.push_str(&step.to_string());
                    }
                    part
                }
            })
            .collect();
        text = format!("[{}]", parts.join(", "));
    }
    if rng.below(3) == 0 {
        text.push_str(".T");
    }
    text
}

/// The linear indices a descriptor reaches, row-major.
fn reached(offset: i64, sizes: &[i64], strides: &[i64]) -> Vec<i64> {
    let mut out = vec![offset];
    for (&n, &s) in sizes.iter().zip(strides) {
        out = out
            .iter()
            .flat_map(|&b| (0..n).map(move |i| b + i * s))
            .collect();
    }
    out
}

/// 3000 generated slicings of arrays of rank 0 to 3 (sizes 0 to 5): Locus's descriptor
/// reaches exactly the elements numpy's `np.arange(n).reshape(shape)[...]` holds, in the
/// same order and shape, and Locus refuses exactly what numpy raises on (an index out of
/// range, too many indices, a step of 0).
#[test]
fn slicing_agrees_with_numpy() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut cases = Vec::new();
    for _ in 0..3000 {
        let rank = rng.below(4) as usize;
        let shape: Vec<i64> = (0..rank).map(|_| rng.below(6) as i64).collect();
        let text = slicing_text(&mut rng, rank);
        cases.push((shape, text));
    }
    let mut script = String::from(
        "import sys, numpy as np\n\
         for line in sys.stdin:\n\
         \x20   shape, text = line.rstrip('\\n').split(';')\n\
         \x20   shape = tuple(int(s) for s in shape.split(',') if s)\n\
         \x20   a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)\n\
         \x20   try:\n\
         \x20       v = eval('a' + text)\n\
         \x20       print(','.join(map(str, v.shape)) + ';' + ','.join(map(str, np.ravel(v))))\n\
         \x20   except (IndexError, ValueError):\n\
         \x20       print('error')\n",
    );
    script.push('\n');
    let mut input = String::new();
    for (shape, text) in &cases {
        let shape: Vec<String> = shape.iter().map(i64::to_string).collect();
        input.push_str(&format!("{};{text}\n", shape.join(",")));
    }
    let answers = pipe(numpy_python(), &["-c", &script], &input);
    let answers: Vec<&str> = answers.lines().collect();
    assert_eq!(answers.len(), cases.len());
    let (mut taken, mut refused) = (0, 0);
    for ((shape, text), want) in cases.iter().zip(answers) {
        let strides = row_major(shape);
        let got = Slicing::parse(text).and_then(|s| s.apply(0, shape, &strides));
        match (got, want) {
            (Err(Error::Parse { .. }), "error") => refused += 1,
            (Ok((offset, sizes, strides)), want) if want != "error" => {
                let (want_shape, want_values) = want.split_once(';').unwrap();
                let sizes_text: Vec<String> = sizes.iter().map(i64::to_string).collect();
                assert_eq!(sizes_text.join(","), want_shape, "{shape:?}{text}");
                let values: Vec<String> = reached(offset, &sizes, &strides)
                    .iter()
                    .map(i64::to_string)
                    .collect();
                assert_eq!(values.join(","), want_values, "{shape:?}{text}");
                taken += 1;
            }
            (got, want) => panic!("{shape:?}{text}: Locus {got:?}, numpy {want}"),
        }
    }
    eprintln!(
        "{taken} slicings taken as numpy takes them, {refused} refused as numpy refuses them"
    );
    // Both kinds are well represented.
    assert!(
        taken > 1500 && refused > 300,
        "{taken} taken, {refused} refused"
    );
}

proptest::proptest! {
    /// Any text: `split_argument` splits it into a prefix and the rest, and
    /// `Slicing::parse` gives a slicing or a parse error at an offset inside the text
    /// on a character boundary; never a panic.
    #[test]
    fn parse_never_panics(text in "\\PC{0,24}|[\\[\\]0-9:, .T-]{0,24}") {
        let (path, slicing) = split_argument(&text);
        proptest::prop_assert!(text.starts_with(path));
        if let Some(s) = slicing {
            proptest::prop_assert_eq!(format!("{path}{s}"), text.clone());
        }
        match Slicing::parse(&text) {
            Ok(_) => {}
            Err(Error::Parse { at, .. }) => {
                proptest::prop_assert!(at <= text.len() && text.is_char_boundary(at));
            }
            Err(e) => proptest::prop_assert!(false, "not a parse error: {e}"),
        }
    }

    /// Whatever the slicing, what `apply` gives stays inside the array it slices.
    #[test]
    fn applied_views_stay_inside(
        sizes in proptest::collection::vec(0i64..7, 0..4),
        text in "(\\[(-?[0-9]{1,2}|(-?[0-9]{1,2})?:(-?[0-9]{1,2})?(:-?[1-9][0-9]?)?)(, (-?[0-9]{1,2}|(-?[0-9]{1,2})?:(-?[0-9]{1,2})?(:-?[1-9][0-9]?)?)){0,3}\\])?(\\.T)?",
    ) {
        let strides = row_major(&sizes);
        let total: i64 = sizes.iter().product();
        if let Ok((offset, new_sizes, new_strides)) =
            Slicing::parse(&text).and_then(|s| s.apply(0, &sizes, &strides))
        {
            for lin in reached(offset, &new_sizes, &new_strides) {
                proptest::prop_assert!((0..total).contains(&lin), "{text} on {sizes:?}: {lin}");
            }
        }
    }
}
