//! `locus memref compile` and `locus memref call`: kernels from
//! crates/memref/fixtures compiled by the binary (mlir-opt-19, mlir-translate-19,
//! llc-19, clang-19), called on .npy files, results checked element by element.

// Test helpers may panic.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::common::*;
use crate::tools::numpy_python;
use locus_memref::npy::{Dtype, NpyArray};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../memref/fixtures")
        .join(name)
}

fn locus(args: &[&str]) -> Output {
    Command::new(LOCUS)
        .arg("memref")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {LOCUS}: {e}"))
}

/// The directory holding the compiled fixtures (built once per process).
fn libs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // A private directory (mkdtemp), kept for the process's life: the libraries
        // in it are loaded by every test.
        let dir = locus_memref::compile::private_dir().unwrap().keep();
        for k in ["elementwise", "strided", "results", "aliasing"] {
            let so = dir.join(format!("{k}.so"));
            let out = locus(&[
                "compile",
                path_str(&fixture(&format!("{k}.mlir"))),
                "-o",
                path_str(&so),
            ]);
            assert!(out.status.success(), "compile {k}: {}", text(&out.stderr));
            assert_eq!(text(&out.stdout).trim(), path_str(&so));
        }
        dir
    })
}

fn lib(name: &str) -> String {
    path_str(&libs().join(format!("{name}.so"))).to_string()
}

fn write_f32(dir: &Path, name: &str, shape: &[usize], v: &[f32], fortran: bool) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let mut a = NpyArray::from_bytes(Dtype::F32, shape.to_vec(), &bytes).unwrap();
    a.fortran_order = fortran;
    let p = dir.join(name);
    a.write(&p).unwrap();
    path_str(&p).to_string()
}

/// The elements of an .npy file of `dtype` whose elements are `N` bytes.
fn read_as<const N: usize, T>(
    path: &str,
    dtype: Dtype,
    from: impl Fn([u8; N]) -> T,
) -> (Vec<usize>, Vec<T>) {
    let a = NpyArray::read(Path::new(path)).unwrap();
    assert_eq!(a.dtype(), dtype, "{path}");
    let v = a
        .bytes()
        .chunks(N)
        .map(|c| from(c.try_into().unwrap()))
        .collect();
    (a.shape().to_vec(), v)
}

fn read_f32(path: &str) -> (Vec<usize>, Vec<f32>) {
    let a = NpyArray::read(Path::new(path)).unwrap();
    assert_eq!(a.dtype(), Dtype::F32);
    let v = a
        .bytes()
        .chunks(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (a.shape().to_vec(), v)
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout).to_string()
}

/// Exit status exactly 1 (no crash, no signal) and the message contains `want`.
fn fails_with(out: &Output, want: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains(want), "stderr {err:?} lacks {want:?}");
}

#[test]
fn elementwise_add_on_npy_files() {
    let t = TempDir::new("memref-add");
    let a: Vec<f32> = (0..10).map(|i| i as f32 * 1.5).collect();
    let b: Vec<f32> = (0..10).map(|i| 100.0 - i as f32).collect();
    let pa = write_f32(&t.0, "a.npy", &[10], &a, false);
    let pb = write_f32(&t.0, "b.npy", &[10], &b, false);
    let pc = write_f32(&t.0, "c.npy", &[10], &[0.0; 10], false);
    let o = locus(&[
        "call",
        &lib("elementwise"),
        "add",
        "--sig",
        "(memref<?xf32>, memref<?xf32>, memref<?xf32>)",
        "--arg",
        &pa,
        "--arg",
        &pb,
        "--arg",
        &pc,
        "--inout",
    ]);
    assert_eq!(ok(&o), "");
    let (shape, c) = read_f32(&pc);
    assert_eq!(shape, vec![10]);
    for i in 0..10 {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
    // Without --inout nothing is written back.
    let pd = write_f32(&t.0, "d.npy", &[10], &[0.0; 10], false);
    let o = locus(&[
        "call",
        &lib("elementwise"),
        "add",
        "--sig-from",
        path_str(&fixture("elementwise.mlir")),
        "--arg",
        &pa,
        "--arg",
        &pb,
        "--arg",
        &pd,
    ]);
    ok(&o);
    assert_eq!(read_f32(&pd).1, vec![0.0; 10]);
}

#[test]
fn scalars_in_and_out_and_inout_f64() {
    let o = locus(&[
        "call",
        &lib("elementwise"),
        "affine",
        "--sig",
        "(f32, i32) -> f32",
        "--arg",
        "2.25",
        "--arg",
        "-3",
    ]);
    assert_eq!(ok(&o), "1.5\n");
    let t = TempDir::new("memref-axpi");
    let p = t.0.join("a.npy");
    let v: Vec<f64> = (0..6).map(|i| i as f64).collect();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    NpyArray::from_bytes(Dtype::F64, vec![6], &bytes)
        .unwrap()
        .write(&p)
        .unwrap();
    ok(&locus(&[
        "call",
        &lib("elementwise"),
        "axpi",
        "--sig",
        "(memref<?xf64>, f64)",
        "--arg",
        path_str(&p),
        "--arg",
        "0.5",
        "--inout",
    ]));
    let a = NpyArray::read(&p).unwrap();
    let got: Vec<f64> = a
        .bytes()
        .chunks(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    for i in 0..6 {
        assert_eq!(got[i], v[i] * 0.5 + i as f64);
    }
}

#[test]
fn fortran_order_matrix_through_strided_and_identity_kernels() {
    let t = TempDir::new("memref-fortran");
    // The 3x4 matrix m[i][j] = 10 i + j, stored in Fortran order.
    let row_major: Vec<f32> = (0..12).map(|k| (10 * (k / 4) + k % 4) as f32).collect();
    let pm = write_f32(&t.0, "m.npy", &[3, 4], &row_major, true);
    // The file's data really is column-major: m[1][0] = 10 comes second.
    let raw = std::fs::read(&pm).unwrap();
    let data = &raw[raw.len() - 48..];
    assert_eq!(f32::from_le_bytes(data[4..8].try_into().unwrap()), 10.0);
    let want: Vec<f32> = (0..3)
        .map(|i| (0..4).map(|j| (10 * i + j) as f32).sum())
        .collect();
    for (func, sig) in [
        (
            "row_sums",
            "(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xf32>)",
        ),
        ("row_sums_dense", "(memref<?x?xf32>, memref<?xf32>)"),
    ] {
        let po = write_f32(&t.0, "o.npy", &[3], &[0.0; 3], false);
        ok(&locus(&[
            "call",
            &lib("strided"),
            func,
            "--sig",
            sig,
            "--arg",
            &pm,
            "--arg",
            &po,
            "--inout",
        ]));
        assert_eq!(read_f32(&po).1, want, "{func}");
        // The Fortran file is written back in Fortran order, unchanged.
        let raw = NpyArray::read(Path::new(&pm)).unwrap();
        assert!(raw.fortran_order);
    }
}

#[test]
fn memref_results_to_out_files() {
    let t = TempDir::new("memref-results");
    let a: Vec<f32> = vec![1.0, 2.0, 3.0, 4.5];
    let pa = write_f32(&t.0, "a.npy", &[4], &a, false);
    let pp = path_str(&t.0.join("p.npy")).to_string();
    let o = locus(&[
        "call",
        &lib("results"),
        "prefix",
        "--sig",
        "(memref<?xf32>) -> (memref<?xf32>, f32)",
        "--arg",
        &pa,
        "--out",
        &pp,
    ]);
    assert_eq!(ok(&o), "10.5\n");
    assert_eq!(read_f32(&pp), (vec![4], vec![1.0, 3.0, 6.0, 10.5]));
    // Unranked result: a 2 x 3 i32 grid.
    let pg = t.0.join("g.npy");
    ok(&locus(&[
        "call",
        &lib("results"),
        "grid_unranked",
        "--sig",
        "(index) -> memref<*xi32>",
        "--arg",
        "3",
        "--out",
        path_str(&pg),
    ]));
    let g = NpyArray::read(&pg).unwrap();
    assert_eq!((g.dtype(), g.shape().to_vec()), (Dtype::I32, vec![2, 3]));
    let v: Vec<i32> = g
        .bytes()
        .chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(v, [0, 1, 2, 10, 11, 12]);
    // Rank 0 in and out, and 64-byte aligned allocation.
    let px = write_f32(&t.0, "x.npy", &[], &[2.0], false);
    let po = write_f32(&t.0, "o.npy", &[], &[0.0], false);
    let pr = path_str(&t.0.join("r.npy")).to_string();
    ok(&locus(&[
        "call",
        &lib("results"),
        "rank0",
        "--sig-from",
        path_str(&fixture("results.mlir")),
        "--arg",
        &px,
        "--arg",
        &po,
        "--out",
        &pr,
        "--inout",
    ]));
    assert_eq!(read_f32(&po), (vec![], vec![6.0]));
    assert_eq!(read_f32(&pr), (vec![], vec![3.0]));
    let pi = t.0.join("i.npy");
    ok(&locus(&[
        "call",
        &lib("results"),
        "iota_aligned",
        "--sig",
        "(index) -> memref<?xf64>",
        "--arg",
        "4",
        "--out",
        path_str(&pi),
    ]));
    let i = NpyArray::read(&pi).unwrap();
    let v: Vec<f64> = i
        .bytes()
        .chunks(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(v, [0.0, 1.0, 2.0, 3.0]);
    // A global (dummy allocated pointer 0xdeadbeef) is not freed either.
    let pt = path_str(&t.0.join("t.npy")).to_string();
    ok(&locus(&[
        "call",
        &lib("results"),
        "table",
        "--sig",
        "() -> memref<4xf32>",
        "--out",
        &pt,
    ]));
    assert_eq!(read_f32(&pt), (vec![4], vec![1.0, 2.0, 3.0, 4.5]));
    // A result aliasing its argument is not freed (this would crash otherwise).
    let ps = path_str(&t.0.join("s.npy")).to_string();
    ok(&locus(&[
        "call",
        &lib("results"),
        "same",
        "--sig",
        "(memref<?xf32>) -> memref<?xf32>",
        "--arg",
        &pa,
        "--out",
        &ps,
    ]));
    assert_eq!(read_f32(&ps).1, a);
}

#[test]
fn bad_input_exits_1_naming_the_argument() {
    let t = TempDir::new("memref-bad");
    let pa = write_f32(&t.0, "a.npy", &[4], &[0.0; 4], false);
    let p2 = write_f32(&t.0, "m.npy", &[2, 2], &[0.0; 4], false);
    let p5 = write_f32(&t.0, "m5.npy", &[5, 4], &[0.0; 20], false);
    let junk = t.0.join("junk.npy");
    std::fs::write(&junk, b"hello").unwrap();
    let unsupported = t.0.join("tf32.mlir");
    std::fs::write(
        &unsupported,
        "// A tf32 argument cannot be passed.\nfunc.func @add(%a: memref<?xtf32>) {\n  return\n}\n",
    )
    .unwrap();
    let el = lib("elementwise");
    let st = lib("strided");
    let sig3 = "(memref<?xf32>, memref<?xf32>, memref<?xf32>)";
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec![
                "call",
                &el,
                "add",
                "--sig",
                "(memref<?xf64>, memref<?xf32>, memref<?xf32>)",
                "--arg",
                &pa,
                "--arg",
                &pa,
                "--arg",
                &pa,
            ],
            format!("argument 0 (--arg {pa}): dtype <f4"),
        ),
        (
            vec![
                "call", &el, "add", "--sig", sig3, "--arg", &pa, "--arg", &p2, "--arg", &pa,
            ],
            format!("argument 1 (--arg {p2}): rank 2"),
        ),
        (
            vec![
                "call",
                &st,
                "center",
                "--sig",
                "(memref<4x4xf32>, memref<2x2xf32>) -> f32",
                "--arg",
                &p5,
                "--arg",
                &p2,
            ],
            "argument 0".to_string() + &format!(" (--arg {p5}): size 5 in dimension 0"),
        ),
        (
            vec!["call", &el, "add", "--sig", sig3, "--arg", &pa],
            "1 --arg given".into(),
        ),
        (
            vec!["call", &el, "add", "--sig", "(memref<?xf32", "--arg", &pa],
            "--sig: at byte".into(),
        ),
        (
            vec!["call", &el, "missing", "--sig", "()"],
            "_mlir_ciface_missing".into(),
        ),
        (
            vec![
                "call",
                &el,
                "affine",
                "--sig",
                "(f32, i32) -> f32",
                "--arg",
                "1.0",
                "--arg",
                "x",
            ],
            "argument 1 (--arg x): not a i32".into(),
        ),
        (
            vec![
                "call",
                &el,
                "add",
                "--sig",
                sig3,
                "--arg",
                "/nonexistent.npy",
                "--arg",
                &pa,
                "--arg",
                &pa,
            ],
            "argument 0 (--arg /nonexistent.npy)".into(),
        ),
        (
            vec![
                "call",
                &el,
                "add",
                "--sig",
                sig3,
                "--arg",
                path_str(&junk),
                "--arg",
                &pa,
                "--arg",
                &pa,
            ],
            format!(
                "argument 0 (--arg {}): .npy: not a .npy file (bad magic at byte 0)",
                path_str(&junk)
            ),
        ),
        (
            vec![
                "call",
                &el,
                "add",
                "--sig-from",
                path_str(&unsupported),
                "--arg",
                &pa,
            ],
            format!(
                "--sig-from {}:2:1: `@add` has type `(memref<?xtf32>) -> ()`: unsupported type `tf32`",
                path_str(&unsupported)
            ),
        ),
        (
            vec!["call", "/nonexistent.so", "add", "--sig", "()"],
            "/nonexistent.so".into(),
        ),
        (
            vec![
                "call",
                &el,
                "affine",
                "--sig",
                "(f32, i32) -> f32",
                "--arg",
                "1",
                "--arg",
                "2",
                "--out",
                &pa,
            ],
            "1 --out given".into(),
        ),
    ];
    for (args, want) in cases {
        fails_with(&locus(&args), &want);
    }
    // A kernel mlir-opt rejects: the message names the tool.
    let bad = t.0.join("bad.mlir");
    std::fs::write(
        &bad,
        "func.func @f(%a: memref<?xf32>) { return %a : memref<?xf32> }",
    )
    .unwrap();
    fails_with(
        &locus(&[
            "compile",
            path_str(&bad),
            "-o",
            path_str(&t.0.join("bad.so")),
        ]),
        "mlir-opt-19 failed",
    );
}

/// `locus memref call` on a kernel of fixtures/aliasing.mlir, its signature
/// taken from the source.
fn call_aliasing(func: &str, args: &[&str], outs: &[&str]) -> Output {
    let mut argv = vec![
        "call".to_string(),
        lib("aliasing"),
        func.to_string(),
        "--sig-from".into(),
        path_str(&fixture("aliasing.mlir")).into(),
    ];
    for a in args {
        argv.extend(["--arg".to_string(), a.to_string()]);
    }
    for o in outs {
        argv.extend(["--out".to_string(), o.to_string()]);
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    locus(&argv)
}

/// Results that point into one allocation (`return %m, %m`, a buffer and its
/// subview, a buffer returned ranked and unranked) are all written, intact,
/// and the allocation is freed once: today the second `--out` of `twice`
/// holds malloc's free-list pointers and `with_tail` aborts on a double free.
#[test]
fn results_sharing_an_allocation_are_all_written_and_freed_once() {
    let t = TempDir::new("memref-alias-results");
    let out = |name: &str| path_str(&t.0.join(name)).to_string();
    let (x, y, z) = (out("x.npy"), out("y.npy"), out("z.npy"));
    let iota: Vec<f32> = (0..6).map(|i| i as f32).collect();

    assert_eq!(ok(&call_aliasing("twice", &["6"], &[&x, &y])), "");
    assert_eq!(read_f32(&x), (vec![6], iota.clone()));
    assert_eq!(read_f32(&y), (vec![6], iota.clone()));

    let f64s = |b: [u8; 8]| f64::from_ne_bytes(b);
    assert_eq!(ok(&call_aliasing("with_tail", &["6"], &[&x, &y])), "5\n");
    assert_eq!(
        read_as(&x, Dtype::F64, f64s),
        (vec![6], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    );
    assert_eq!(
        read_as(&y, Dtype::F64, f64s),
        (vec![5], vec![1.0, 2.0, 3.0, 4.0, 5.0])
    );

    let i32s = |b: [u8; 4]| i32::from_ne_bytes(b);
    ok(&call_aliasing("grid_both", &["3"], &[&x, &y, &z]));
    let grid = (vec![2, 3], vec![0, 1, 2, 10, 11, 12]);
    assert_eq!(read_as(&x, Dtype::I32, i32s), grid);
    assert_eq!(read_as(&y, Dtype::I32, i32s), (vec![3], vec![0; 3]));
    assert_eq!(read_as(&z, Dtype::I32, i32s), grid);

    ok(&call_aliasing("unranked_twice", &["6"], &[&x, &y]));
    assert_eq!(read_f32(&x), (vec![6], iota.clone()));
    assert_eq!(read_f32(&y), (vec![6], iota.clone()));

    // Left to the kernel: written the same, nothing freed.
    let argv = vec![
        "call".to_string(),
        lib("aliasing"),
        "twice".into(),
        "--sig".into(),
        "(index) -> (memref<?xf32>, memref<?xf32>)".into(),
        "--arg".into(),
        "6".into(),
        "--out".into(),
        x.clone(),
        "--out".into(),
        y.clone(),
        "--borrow-results".into(),
    ];
    ok(&locus(&argv.iter().map(String::as_str).collect::<Vec<_>>()));
    assert_eq!(read_f32(&x), (vec![6], iota.clone()));
    assert_eq!(read_f32(&y), (vec![6], iota));
}

/// Results pointing into an argument's buffer (the argument itself, a
/// subview of it, the argument returned unranked) are written and never
/// freed; `--inout` still writes the argument back afterwards.
#[test]
fn results_aliasing_arguments_are_written_and_never_freed() {
    let t = TempDir::new("memref-alias-args");
    let a: Vec<f32> = vec![1.5, 2.5, 3.5, 4.5];
    let pa = write_f32(&t.0, "a.npy", &[4], &a, false);
    let (x, y) = (
        path_str(&t.0.join("x.npy")).to_string(),
        path_str(&t.0.join("y.npy")).to_string(),
    );
    ok(&call_aliasing("arg_and_tail", &[&pa], &[&x, &y]));
    assert_eq!(read_f32(&x), (vec![4], a.clone()));
    assert_eq!(read_f32(&y), (vec![3], a[1..].to_vec()));
    let m: Vec<f32> = (0..6).map(|i| i as f32 * 0.5).collect();
    let pm = write_f32(&t.0, "m.npy", &[2, 3], &m, false);
    let mut argv = vec![
        "call",
        "",
        "arg_unranked",
        "--sig",
        "(memref<?x?xf32>) -> memref<*xf32>",
        "--arg",
        &pm,
        "--out",
        &x,
        "--inout",
    ];
    let l = lib("aliasing");
    argv[1] = &l;
    ok(&locus(&argv));
    assert_eq!(read_f32(&x), (vec![2, 3], m.clone()));
    assert_eq!(read_f32(&pm), (vec![2, 3], m));
}

/// The CLI's ways of handing results back, under valgrind: no invalid read or
/// free, nothing definitely lost. Ranked and unranked results aliasing each
/// other, an argument written back (`--inout`) that a result aliases, and
/// `--borrow-results`. (Every aliasing kernel of fixtures/aliasing.mlir runs
/// under valgrind through the library in locus-memref's `aliasing_under_valgrind`;
/// here each case is a process that loads libLLVM under valgrind, 6-7 s.)
/// Before the fixes `arg_unranked` leaked its 56-byte heap descriptor (the
/// result aliases the argument, so nothing at all was freed) and `twice` read
/// freed memory and freed it twice.
#[test]
fn aliasing_results_under_valgrind() {
    let t = TempDir::new("memref-alias-valgrind");
    let pa = write_f32(&t.0, "a.npy", &[4], &[1.0, 2.0, 3.0, 4.0], false);
    let pm = write_f32(&t.0, "m.npy", &[2, 3], &[0.0; 6], false);
    let out = |name: &str| path_str(&t.0.join(name)).to_string();
    let (x, y, z) = (out("x.npy"), out("y.npy"), out("z.npy"));
    // Function, arguments, outputs, more flags.
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        ("twice", vec!["5"], vec![&x, &y], vec![]),
        ("grid_both", vec!["4"], vec![&x, &y, &z], vec![]),
        ("arg_and_tail", vec![&pa], vec![&x, &y], vec!["--inout"]),
        // Nothing of the kernel's is freed, but the heap descriptor is.
        (
            "arg_unranked",
            vec![&pm],
            vec![&x],
            vec!["--borrow-results"],
        ),
    ];
    let l = lib("aliasing");
    let sig_from = fixture("aliasing.mlir");
    let mut failures = Vec::new();
    for (func, args, outs, flags) in cases {
        let mut cmd = Command::new("valgrind");
        cmd.args([
            "--leak-check=full",
            "--errors-for-leak-kinds=definite",
            "--error-exitcode=99",
            // Most of each run is valgrind reading what it loads (libLLVM): without the
            // inline information (stack traces only lose inlined frames) about a quarter less.
            "--read-inline-info=no",
            // What this test is for is invalid reads and frees and leaks; not tracking
            // which bits are defined takes a sixth off each run (5.7 -> 4.7 s of
            // `locus --version`). locus-memref's own valgrind tests track them.
            "--undef-value-errors=no",
            "-q",
            LOCUS,
            "memref",
            "call",
            &l,
            func,
            "--sig-from",
            path_str(&sig_from),
        ]);
        for a in args {
            cmd.args(["--arg", a]);
        }
        for o in outs {
            cmd.args(["--out", o]);
        }
        cmd.args(&flags);
        let o = cmd.output().unwrap_or_else(|e| {
            panic!("cannot run valgrind ({e}); scripts/install-deps installs it")
        });
        if o.status.code() != Some(0) {
            failures.push(format!(
                "{func} {flags:?} under valgrind: {:?}\n{}",
                o.status,
                text(&o.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kernel that faults ends `locus memref call` with one `locus:` line naming the signal
/// and the function, and exit status 3 (issue 13, section 4); it died silently before.
#[test]
fn a_faulting_kernel_is_reported() {
    let t = TempDir::new("memref-fault");
    let kernel = t.path("boom.mlir");
    std::fs::write(
        &kernel,
        "func.func @boom(%m: memref<?xf32>) -> f32 {\n\
         \x20 %far = arith.constant 1099511627776 : index\n\
         \x20 %v = memref.load %m[%far] : memref<?xf32>\n\
         \x20 return %v : f32\n\
         }\n",
    )
    .unwrap();
    let so = t.path("boom.so");
    let out = locus(&["compile", path_str(&kernel), "-o", path_str(&so)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a = write_f32(&t.0, "a.npy", &[4], &[1.0; 4], false);
    let out = locus(&[
        "call",
        path_str(&so),
        "boom",
        "--sig-from",
        path_str(&kernel),
        "--arg",
        &a,
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.starts_with("locus: SIGSEGV") && err.contains("boom") && err.lines().count() == 1,
        "{err}"
    );
}

/// `--sig-from` takes the type MLIR parses: a comment mentioning the function with
/// `f32` and a type alias `!t = f64` used to make it pass 2.5 as an f32 to an f64
/// kernel (a wrong result, exit 0). A kernel that does not parse is one `locus:` line
/// naming the user's file and line (issue 14, section 4).
#[test]
fn sig_from_reads_the_parsed_kernel_not_comments() {
    let t = TempDir::new("memref-sig-from");
    let kernel = t.path("scale.mlir");
    std::fs::write(
        &kernel,
        "!t = f64\n\
         // func.func @scale(%x: f32) -> f32   (the old type, kept in a comment)\n\
         func.func @scale(%x: !t) -> !t {\n\
         \x20 %c = arith.constant 2.0 : !t\n\
         \x20 %r = arith.mulf %x, %c : !t\n\
         \x20 return %r : !t\n\
         }\n",
    )
    .unwrap();
    let so = t.path("scale.so");
    let out = locus(&["compile", path_str(&kernel), "-o", path_str(&so)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = locus(&[
        "call",
        path_str(&so),
        "scale",
        "--sig-from",
        path_str(&kernel),
        "--arg",
        "2.5",
    ]);
    assert_eq!(ok(&out).trim(), "5");

    let bad = t.path("bad.mlir");
    std::fs::write(
        &bad,
        "// line 1\nfunc.func @scale(%x: f64) -> f64 {\n  return %y : f64\n}\n",
    )
    .unwrap();
    let out = locus(&[
        "call",
        path_str(&so),
        "scale",
        "--sig-from",
        path_str(&bad),
        "--arg",
        "2.5",
    ]);
    fails_with(&out, &format!("--sig-from {}:3:10: ", path_str(&bad)));
    let err = text(&out.stderr);
    assert!(
        err.lines().count() == 1 && err.starts_with("locus: ") && !err.contains("<stdin>"),
        "{err}"
    );
}

/// A kernel calling a function no library defines: `locus memref call` fails with one
/// `locus:` line naming the symbol, exit 1, before any call (issue 14, section 2); the
/// dynamic loader used to end the process mid-call with exit 127.
#[test]
fn unresolved_symbol_is_one_line_naming_it() {
    let t = TempDir::new("memref-unresolved");
    let kernel = t.path("calls.mlir");
    std::fs::write(
        &kernel,
        "func.func private @no_such_function(f32) -> f32\n\
         func.func @calls(%x: f32) -> f32 {\n\
         \x20 %r = func.call @no_such_function(%x) : (f32) -> f32\n\
         \x20 return %r : f32\n\
         }\n",
    )
    .unwrap();
    let so = t.path("calls.so");
    let out = locus(&["compile", path_str(&kernel), "-o", path_str(&so)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = locus(&[
        "call",
        path_str(&so),
        "calls",
        "--sig-from",
        path_str(&kernel),
        "--arg",
        "1.5",
    ]);
    fails_with(&out, "no_such_function");
    let err = text(&out.stderr);
    assert!(
        err.lines().count() == 1 && err.starts_with("locus: ") && err.contains("undefined symbol"),
        "{err}"
    );
}

/// `--shared-lib LIB` (repeatable) loads a library before the kernel's, so the kernel's
/// external calls resolve to it, as mlir-cpu-runner's `-shared-libs` (issue 14, section
/// 2). A function the kernel only declares is called by its own name, the C symbol (C
/// wrappers are made for the functions it defines); one it marks `llvm.emit_c_interface`
/// through `_mlir_ciface_NAME`.
#[test]
fn shared_libs_resolve_the_kernels_external_calls() {
    let t = TempDir::new("memref-shared-lib");
    let c = t.path("ext.c");
    std::fs::write(&c, "float triple(float x) { return 3.0f * x; }\n").unwrap();
    let c2 = t.path("ext2.c");
    std::fs::write(
        &c2,
        "float _mlir_ciface_plus_one(float x) { return x + 1.0f; }\n",
    )
    .unwrap();
    let (ext, ext2) = (t.path("libext.so"), t.path("libext2.so"));
    for (src, so) in [(&c, &ext), (&c2, &ext2)] {
        run_ok(
            "clang-19",
            &["-shared", "-fPIC", "-o", path_str(so), path_str(src)],
        );
    }
    let kernel = t.path("k.mlir");
    std::fs::write(
        &kernel,
        "func.func private @triple(f32) -> f32\n\
         func.func private @plus_one(f32) -> f32 attributes {llvm.emit_c_interface}\n\
         func.func @k(%x: f32) -> f32 {\n\
         \x20 %a = func.call @triple(%x) : (f32) -> f32\n\
         \x20 %b = func.call @plus_one(%a) : (f32) -> f32\n\
         \x20 return %b : f32\n\
         }\n",
    )
    .unwrap();
    let so = t.path("k.so");
    let out = locus(&["compile", path_str(&kernel), "-o", path_str(&so)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let call = |libs: &[&Path]| {
        let mut args = vec!["call", path_str(&so), "k", "--sig", "(f32) -> f32"];
        for l in libs {
            args.extend(["--shared-lib", path_str(l)]);
        }
        args.extend(["--arg", "2.5"]);
        locus(&args)
    };
    assert_eq!(ok(&call(&[&ext, &ext2])).trim(), "8.5");
    // One missing: an error naming the symbol, before any call.
    fails_with(&call(&[&ext]), "undefined symbol: _mlir_ciface_plus_one");
    fails_with(&call(&[&ext2]), "undefined symbol: triple");
    fails_with(
        &call(&[&ext, Path::new("/nonexistent/libx.so")]),
        "--shared-lib /nonexistent/libx.so: ",
    );
}

/// A C library function the kernel declares (libm's `expf`, `powf`) is called by its own
/// name: the library links against libm and needs no wrapper of its own (issue 14,
/// section 2).
#[test]
fn declared_c_functions_are_called_by_their_own_name() {
    let t = TempDir::new("memref-libm");
    let kernel = t.path("libm.mlir");
    std::fs::write(
        &kernel,
        "func.func private @expf(f32) -> f32\n\
         func.func private @powf(f32, f32) -> f32\n\
         func.func @e(%x: f32) -> f32 {\n\
         \x20 %two = arith.constant 2.0 : f32\n\
         \x20 %a = func.call @expf(%x) : (f32) -> f32\n\
         \x20 %b = func.call @powf(%a, %two) : (f32, f32) -> f32\n\
         \x20 return %b : f32\n\
         }\n",
    )
    .unwrap();
    let so = t.path("libm.so");
    let out = locus(&["compile", path_str(&kernel), "-o", path_str(&so)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got = ok(&locus(&[
        "call",
        path_str(&so),
        "e",
        "--sig-from",
        path_str(&kernel),
        "--arg",
        "1.5",
    ]));
    let want = 1.5f32.exp().powf(2.0);
    let value: f32 = got.trim().parse().unwrap();
    assert!((value - want).abs() <= want * 1e-6, "{got} vs {want}");
}

#[test]
fn print_pipeline_pipeline_and_pass() {
    let k = fixture("elementwise.mlir");
    let o = locus(&["compile", path_str(&k), "--print-pipeline"]);
    let p = ok(&o);
    let mut lines = p.lines();
    assert_eq!(
        lines.next(),
        Some("# mlir-opt-19 --mlir-print-debuginfo, then llvm.emit_c_interface on each function the kernel defines"),
        "{p}"
    );
    let p = lines.next().unwrap_or_default();
    assert!(
        p.starts_with("mlir-opt-19 --convert-bufferization-to-memref "),
        "{p}"
    );
    assert!(
        p.contains("--convert-math-to-llvm") && !p.contains("one-shot"),
        "{p}"
    );
    let d = fixture("dialects.mlir");
    let p = ok(&locus(&[
        "compile",
        path_str(&d),
        "--print-pipeline",
        "--pass",
        "canonicalize",
    ]));
    assert!(
        p.lines().nth(1).is_some_and(|l| l.starts_with(
            "mlir-opt-19 --canonicalize --convert-elementwise-to-linalg --one-shot-bufferize="
        )),
        "{p}"
    );
    let p = ok(&locus(&[
        "compile",
        path_str(&k),
        "--print-pipeline",
        "--pipeline",
        "builtin.module(func.func(llvm-request-c-wrappers),convert-scf-to-cf)",
    ]));
    assert_eq!(
        p.lines().nth(1),
        Some("mlir-opt-19 --pass-pipeline='builtin.module(func.func(llvm-request-c-wrappers),convert-scf-to-cf)'")
    );
    // A pipeline that leaves scf in place fails, naming the kernel, not <stdin>.
    let t = TempDir::new("memref-pipeline");
    let so = t.0.join("k.so");
    let o = locus(&[
        "compile",
        path_str(&k),
        "-o",
        path_str(&so),
        "--pipeline",
        "convert-func-to-llvm",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(!err.contains("<stdin>"), "{err}");
    assert!(err.contains(&format!("{}:", path_str(&k))), "{err}");
}

#[test]
fn vector_print_matches_mlir_cpu_runner() {
    let k = fixture("vector_print.mlir");
    let t = TempDir::new("memref-vprint");
    let so = t.0.join("vp.so");
    ok(&locus(&["compile", path_str(&k), "-o", path_str(&so)]));
    let utils = "/usr/lib/llvm-19/lib/libmlir_c_runner_utils.so";
    let got = ok(&locus(&[
        "call",
        path_str(&so),
        "vector_print",
        "--sig",
        "() -> ()",
        "--shared-lib",
        utils,
    ]));
    assert_eq!(got, "( 1.5, 2, -3.25, 4 )\n42\n( ( 1, 2 ), ( 3, 4 ) )\n");
    // Without --shared-lib the runner utils are found (the kernel needs printF32...).
    let found = ok(&locus(&[
        "call",
        path_str(&so),
        "vector_print",
        "--sig",
        "() -> ()",
    ]));
    assert_eq!(found, got);
    assert_eq!(got, mlir_cpu_runner(&k, "vector_print", "void"));
}

/// What mlir-cpu-runner-19 prints for `kernel`'s `entry`, lowered by mlir-opt-19 with
/// Locus's pipeline, with the runner utils loaded.
fn mlir_cpu_runner(kernel: &Path, entry: &str, result: &str) -> String {
    mlir_cpu_runner_after(locus_memref::compile::PIPELINE, kernel, entry, result)
}

/// [`mlir_cpu_runner`] with the kernel lowered by mlir-opt-19 `passes`.
fn mlir_cpu_runner_after(passes: &[&str], kernel: &Path, entry: &str, result: &str) -> String {
    let lowered = Command::new("mlir-opt-19")
        .args(passes)
        .arg(path_str(kernel))
        .output()
        .unwrap();
    assert!(lowered.status.success(), "{}", text(&lowered.stderr));
    let Some(dir) = locus_memref::run::runner_utils_dir() else {
        panic!("LLVM 19's runner utils are missing: run scripts/install-deps")
    };
    let libs: Vec<String> = locus_memref::run::RUNNER_UTILS
        .iter()
        .map(|l| dir.join(l).display().to_string())
        .collect();
    let mut runner = Command::new("mlir-cpu-runner-19")
        .args(["-e", entry, &format!("-entry-point-result={result}")])
        .arg(format!("-shared-libs={}", libs.join(",")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    runner
        .stdin
        .take()
        .unwrap()
        .write_all(&lowered.stdout)
        .unwrap();
    let out = runner.wait_with_output().unwrap();
    assert!(out.status.success(), "mlir-cpu-runner-19: {:?}", out.status);
    text(&out.stdout).to_string()
}

/// `printMemrefF32` prints the buffer's address, which differs from run to run.
fn without_addresses(printed: &str) -> String {
    printed
        .lines()
        .map(|l| match l.split_once("base@ = ") {
            Some((head, rest)) => {
                let tail = rest.split_once(' ').map_or("", |(_, t)| t);
                format!("{head}base@ = ADDR {tail}")
            }
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `locus memref run` prints what mlir-cpu-runner-19 prints for the same kernel: the runner
/// utils' memref printing, vector.print, and a C function the kernel declares, with the
/// runner utils found without being named (issue 14, section 2).
#[test]
fn run_prints_what_mlir_cpu_runner_prints() {
    let k = fixture("run_print.mlir");
    let got = ok(&locus(&["run", path_str(&k)]));
    assert!(
        got.contains("[[0,   1,   2], \n [0,   1,   4]]\n42( 0, 1, 4 )\n"),
        "{got}"
    );
    let want = mlir_cpu_runner(&k, "main", "void");
    assert_eq!(without_addresses(&got), without_addresses(&want));
}

/// A kernel carrying a transform-dialect schedule has it applied, then removed, before the
/// lowering (issue 14, section 1); math.ipowi is lowered through convert-math-to-funcs.
/// Same output as mlir-cpu-runner-19 after the same passes.
#[test]
fn run_applies_transform_schedules() {
    let k = fixture("transform_schedule.mlir");
    let p = ok(&locus(&["compile", path_str(&k), "--print-pipeline"]));
    assert!(
        p.lines().nth(1).is_some_and(|l| l.starts_with(
            "mlir-opt-19 --transform-interpreter --test-transform-dialect-erase-schedule "
        )),
        "{p}"
    );
    let got = ok(&locus(&["run", path_str(&k)]));
    assert!(
        got.contains("[[6,   6,   6,   6], \n") && got.ends_with("]]\n81\n"),
        "{got}"
    );
    // mlir-cpu-runner-19 on the kernel lowered by the transform passes, then the pipeline.
    let scheduled = Command::new("mlir-opt-19")
        .args(locus_memref::compile::TRANSFORM)
        .arg(path_str(&k))
        .output()
        .unwrap();
    assert!(scheduled.status.success(), "{}", text(&scheduled.stderr));
    let t = TempDir::new("memref-transform");
    let plain = t.path("scheduled.mlir");
    std::fs::write(&plain, &scheduled.stdout).unwrap();
    let want = mlir_cpu_runner(&plain, "main", "void");
    assert_eq!(without_addresses(&got), without_addresses(&want));
}

/// Kernels of the shapes of MLIR 19.1.7's CPU tests that the default pipeline once could
/// not lower or run: math with no LLVM intrinsic on a vector argument (convert-math-to-libm's
/// vector.extract/insert were left for mlir-translate-19 to refuse), memref.realloc (was
/// left unlowered), LLVM's matrix intrinsics (llc-19 cannot select them: the optimizer
/// lowers them, or the lowering alone with --no-opt) and an entry named like libc's
/// `realloc` (its C wrapper called glibc's realloc instead of the kernel's: abort).
#[test]
fn run_lowers_vector_libm_realloc_and_matrix_intrinsics() {
    let k = fixture("run_lowering.mlir");
    for (entry, want) in [
        ("vector_libm", "( 0, 0.462117, -0.761594, 0.964028 )\n"),
        ("realloc", "( 1.5, 1.5, 4, 4, 4, 4 )\n"),
    ] {
        let got = ok(&locus(&["run", path_str(&k), "-e", entry]));
        assert_eq!(got, want, "@{entry}");
        assert_eq!(got, mlir_cpu_runner(&k, entry, "void"), "@{entry}");
    }
    // Column-major, as LLVM's matrix intrinsics are by default.
    let m = fixture("matrix.mlir");
    let matrix = "( 1, 3, 5, 2, 4, 6 )\n( 1, 2, 9, 12 )\n";
    assert_eq!(ok(&locus(&["run", path_str(&m), "-e", "matrix"])), matrix);
    assert_eq!(
        ok(&locus(&["run", path_str(&m), "-e", "matrix", "--no-opt"])),
        matrix
    );
}

/// A kernel with sparse tensors is lowered by MLIR's sparsifier pipeline (it was refused:
/// the default pipeline cannot lower sparse_tensor ops), with the sparse storage code
/// generated (a slice of a CSR matrix: the runtime-library path cannot lower slices);
/// same output as mlir-cpu-runner-19 after the same `mlir-opt-19 --sparsifier`.
#[test]
fn run_sparsifies_sparse_tensor_kernels() {
    let k = fixture("sparse.mlir");
    let p = ok(&locus(&["compile", path_str(&k), "--print-pipeline"]));
    assert_eq!(
        p.lines().nth(1),
        Some("mlir-opt-19 --sparsifier=enable-runtime-library=false"),
        "{p}"
    );
    let got = ok(&locus(&["run", path_str(&k)]));
    assert!(
        got.starts_with("3\n---- Sparse Tensor ----\nnse = 3\n")
            && got.contains("pos[1] : ( 0, 2, 3 )\ncrd[1] : ( 0, 2, 2 )\nvalues : ( 1, 2, 3.5 )\n")
            && got.ends_with("----\n( 3, 3.5 )\n( 3.5 )\n"),
        "{got}"
    );
    assert_eq!(
        got,
        mlir_cpu_runner_after(locus_memref::compile::SPARSIFY, &k, "main", "void")
    );
}

/// TOSA operations are lowered to linalg before bufferization (were left for one-shot
/// bufferization to refuse: "op was not bufferized"), as MLIR's TOSA CPU tests do.
#[test]
fn run_lowers_tosa() {
    let k = fixture("tosa.mlir");
    let p = ok(&locus(&["compile", path_str(&k), "--print-pipeline"]));
    assert!(
        p.lines().nth(1).is_some_and(|l| l.starts_with(
            "mlir-opt-19 --pass-pipeline='builtin.module(func.func(tosa-to-linalg-named,\
             tosa-to-linalg,tosa-to-arith,tosa-to-tensor),"
        )),
        "{p}"
    );
    let got = ok(&locus(&["run", path_str(&k)]));
    assert!(
        got.ends_with("sizes = [2, 2] strides = [2, 1] data = \n[[1.5,   2.5], \n [3.5,   4]]\n"),
        "{got}"
    );
}

/// Kernels of the shapes of MLIR 19.1.7's `test-conv-*-call` and `verify-memref` CPU tests,
/// once refused by bufferization: a convolution of memrefs with `tensor<...>`-typed
/// attributes is not bufferized (the deallocation pipeline refused its memref.dealloc),
/// and calls on tensors to a function the kernel only declares get `--func-bufferize`
/// first (one-shot bufferization refused the constant's cast: "cannot avoid RaW
/// conflict"). Same output as mlir-cpu-runner-19.
#[test]
fn run_bufferizes_only_tensor_values_and_declared_tensor_calls() {
    let k = fixture("conv_attributes.mlir");
    let p = ok(&locus(&["compile", path_str(&k), "--print-pipeline"]));
    assert!(!p.contains("bufferize"), "{p}");
    let got = ok(&locus(&["run", path_str(&k)]));
    assert!(
        got.ends_with("sizes = [1, 3, 1] strides = [3, 1, 1] data = \n[[[3], \n  [4], \n  [4]]]\n"),
        "{got}"
    );
    assert_eq!(
        without_addresses(&got),
        without_addresses(&mlir_cpu_runner(&k, "main", "void"))
    );

    let k = fixture("tensor_declarations.mlir");
    let p = ok(&locus(&["compile", path_str(&k), "--print-pipeline"]));
    assert!(
        p.lines().nth(1).is_some_and(|l| l.starts_with(
            "mlir-opt-19 --func-bufferize --convert-elementwise-to-linalg --one-shot-bufferize="
        )),
        "{p}"
    );
    let got = ok(&locus(&["run", path_str(&k)]));
    assert_eq!(got, "0\n1\n");
    let mut passes = vec!["--func-bufferize"];
    passes.extend(locus_memref::compile::BUFFERIZE);
    passes.extend(locus_memref::compile::PIPELINE);
    assert_eq!(got, mlir_cpu_runner_after(&passes, &k, "main", "void"));
}

/// `--llvm-option` reaches opt-19 and llc-19 as mlir-cpu-runner's LLVM options do: LLVM's
/// matrix intrinsics in row-major layout (MLIR 19.1.7's `*-row.mlir` Vector CPU tests).
#[test]
fn run_passes_llvm_options() {
    let m = fixture("matrix.mlir");
    // Row-major: A is 2x3 with rows (1,2,3) (4,5,6), B is 3x2 with rows (1,0) (0,1) (1,1).
    let row_major = "( 1, 4, 2, 5, 3, 6 )\n( 4, 5, 10, 11 )\n";
    let layout = "--llvm-option=-matrix-default-layout=row-major";
    assert_eq!(
        ok(&locus(&["run", path_str(&m), "-e", "matrix", layout])),
        row_major
    );
    assert_eq!(
        ok(&locus(&[
            "run",
            path_str(&m),
            "-e",
            "matrix",
            "--no-opt",
            "--llvm-option",
            "-matrix-default-layout=row-major"
        ])),
        row_major
    );
    fails_with(
        &locus(&[
            "run",
            path_str(&m),
            "-e",
            "matrix",
            "--llvm-option=-no-such-llvm-option",
        ]),
        "no-such-llvm-option",
    );
}

/// An entry's result is printed after what the kernel printed, as mlir-cpu-runner prints
/// it: integers (an index too) in decimal, floats as C's `%e` (f64 too, which
/// mlir-cpu-runner cannot return).
#[test]
fn run_prints_the_entry_result_as_mlir_cpu_runner() {
    let t = TempDir::new("memref-run-result");
    let k = t.path("results.mlir");
    std::fs::write(
        &k,
        "func.func @i() -> i32 {\n  %c = arith.constant -7 : i32\n  return %c : i32\n}\n\
         func.func @l() -> i64 {\n  %c = arith.constant 1234567890123 : i64\n  return %c : i64\n}\n\
         func.func @f() -> f32 {\n  %c = arith.constant -0.000125 : f32\n  return %c : f32\n}\n\
         func.func @d() -> f64 {\n  %c = arith.constant 6.02214076e23 : f64\n  return %c : f64\n}\n\
         func.func @inf() -> f32 {\n  %c = arith.constant 0x7F800000 : f32\n  return %c : f32\n}\n\
         func.func @ninf() -> f32 {\n  %c = arith.constant 0xFF800000 : f32\n  return %c : f32\n}\n\
         func.func @nnan() -> f32 {\n  %c = arith.constant 0xFFC00000 : f32\n  return %c : f32\n}\n\
         func.func @x() -> index {\n  %c = arith.constant -42 : index\n  return %c : index\n}\n",
    )
    .unwrap();
    // Infinities and NaNs as LLVM's write_double prints them (INF, -INF, nan); an index as
    // the i64 it is lowered to (-entry-point-result=i64).
    for (entry, result) in [
        ("i", "i32"),
        ("l", "i64"),
        ("x", "i64"),
        ("f", "f32"),
        ("inf", "f32"),
        ("ninf", "f32"),
        ("nnan", "f32"),
    ] {
        let got = ok(&locus(&["run", path_str(&k), "--entry", entry]));
        assert_eq!(got, mlir_cpu_runner(&k, entry, result), "@{entry}");
    }
    assert_eq!(
        ok(&locus(&["run", path_str(&k), "-e", "f"])),
        "-1.250000e-04\n"
    );
    assert_eq!(
        ok(&locus(&["run", path_str(&k), "-e", "d"])),
        "6.022141e+23\n"
    );
    // Entries written in the LLVM dialect run too, as mlir-cpu-runner runs them (here one
    // calling libm's logbf: the exponent of -420).
    let l = t.path("llvm.mlir");
    std::fs::write(
        &l,
        "llvm.func @logbf(f32) -> f32\n\
         llvm.func @main() -> f32 {\n\
         \x20 %0 = llvm.mlir.constant(-4.200000e+02 : f32) : f32\n\
         \x20 %1 = llvm.call @logbf(%0) : (f32) -> f32\n\
         \x20 llvm.return %1 : f32\n\
         }\n\
         llvm.func @seven() -> i64 {\n\
         \x20 %0 = llvm.mlir.constant(7 : i64) : i64\n\
         \x20 llvm.return %0 : i64\n\
         }\n",
    )
    .unwrap();
    let got = ok(&locus(&["run", path_str(&l)]));
    assert_eq!(got, "8.000000e+00\n");
    let runner = Command::new("mlir-cpu-runner-19")
        .args(["-e", "main", "-entry-point-result=f32", path_str(&l)])
        .output()
        .unwrap();
    assert_eq!(got, text(&runner.stdout));
    assert_eq!(ok(&locus(&["run", path_str(&l), "-e", "seven"])), "7\n");
}

/// What `run` cannot call is one `locus:` line naming the kernel and the function, exit 1.
#[test]
fn run_refuses_what_it_cannot_call() {
    let t = TempDir::new("memref-run-bad");
    let k = t.path("bad.mlir");
    std::fs::write(
        &k,
        "func.func @takes(%x: f32) -> f32 {\n  return %x : f32\n}\n\
         func.func @gives() -> memref<2xf32> {\n  %m = memref.alloc() : memref<2xf32>\n  return %m : memref<2xf32>\n}\n",
    )
    .unwrap();
    for (entry, want) in [
        ("main", "no `func.func @main` in the kernel"),
        (
            "takes",
            "@takes is (f32) -> (f32): an entry takes no arguments",
        ),
        ("gives", "@gives is () -> (memref<2xf32>)"),
    ] {
        let out = locus(&["run", path_str(&k), "--entry", entry]);
        fails_with(&out, want);
        let err = text(&out.stderr);
        assert!(
            err.lines().count() == 1 && err.starts_with(&format!("locus: {}:", path_str(&k))),
            "{err}"
        );
    }
    let err = text(&locus(&["run", path_str(&k), "--entry", "gives"]).stderr).to_string();
    assert!(
        err.starts_with(&format!("locus: {}:4:1: ", path_str(&k))),
        "{err}"
    );
}

/// f16 and bf16 scalars in and out, an f8 scalar given as bits, in a multi-result struct
/// beside an f16 (issue 14, section 3).
#[test]
fn narrow_float_scalars_pass_both_ways() {
    let k = fixture("elements.mlir");
    let t = TempDir::new("memref-elements-scalars");
    let so = t.path("el.so");
    ok(&locus(&["compile", path_str(&k), "-o", path_str(&so)]));
    let call = |f: &str, args: &[&str]| {
        let mut a = vec!["call", path_str(&so), f, "--sig-from", path_str(&k)];
        for x in args {
            a.extend(["--arg", x]);
        }
        ok(&locus(&a))
    };
    assert_eq!(call("half", &["1.5", "0.25"]), "3.25\n");
    // 65504 * 2 overflows f16: infinity.
    assert_eq!(call("half", &["65504", "0"]), "inf\n");
    assert_eq!(call("bhalf", &["2.5"]), "3.5\n");
    // 0x3c is 1.5 in f8E4M3FN; 0.1 is rounded to f8E4M3FN's 0.1015625.
    assert_eq!(call("f8_and_half", &["0x3c", "-3.5"]), "1.5\n-3.5\n");
    assert_eq!(call("f8_and_half", &["0.1", "0"]), "0.1015625\n0\n");
}

/// Memrefs of bf16, f8E4M3FN and complex<f32> through .npy files with ml_dtypes' names and
/// numpy's complex64, written back exactly; a big-endian input is read (issue 14,
/// section 3).
#[test]
fn narrow_float_and_complex_memrefs_through_npy() {
    let k = fixture("elements.mlir");
    let t = TempDir::new("memref-elements-arrays");
    let so = t.path("el.so");
    ok(&locus(&["compile", path_str(&k), "-o", path_str(&so)]));
    let call = |f: &str, extra: &[&str]| {
        let mut a = vec!["call", path_str(&so), f, "--sig-from", path_str(&k)];
        a.extend(extra);
        ok(&locus(&a))
    };
    // bf16 1.0, 2.5, -3.0, 0.1875 doubled in place.
    let bf16 = |v: &[u16]| v.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<u8>>();
    let input = t.path("b.npy");
    NpyArray::from_bytes(
        Dtype::BF16,
        vec![4],
        &bf16(&[0x3f80, 0x4020, 0xc040, 0x3e40]),
    )
    .unwrap()
    .write(&input)
    .unwrap();
    call("scale_bf16", &["--arg", path_str(&input), "--inout"]);
    let back = std::fs::read(&input).unwrap();
    assert!(
        text(&back).contains("'descr': 'bfloat16'"),
        "{}",
        text(&back)
    );
    let back = NpyArray::parse(&back).unwrap();
    assert_eq!(back.dtype(), Dtype::BF16);
    assert_eq!(back.bytes(), bf16(&[0x4000, 0x40a0, 0xc0c0, 0x3ec0]));
    // f8E4M3FN bits reversed into a new array.
    let input = t.path("f8.npy");
    let out = t.path("f8r.npy");
    NpyArray::from_bytes(Dtype::F8E4M3FN, vec![5], &[0x3c, 0x40, 0x01, 0xfe, 0x7f])
        .unwrap()
        .write(&input)
        .unwrap();
    call(
        "reverse_f8",
        &["--arg", path_str(&input), "--out", path_str(&out)],
    );
    let back = std::fs::read(&out).unwrap();
    assert!(
        text(&back).contains("'descr': 'float8_e4m3fn'"),
        "{}",
        text(&back)
    );
    assert_eq!(
        NpyArray::parse(&back).unwrap().bytes(),
        [0x7f, 0xfe, 0x01, 0x40, 0x3c]
    );
    // complex64, given big-endian: (1+2i, 3-4i) -> conj(z) * (1+i) = (3-i, -1+7i).
    let mut big = Vec::new();
    for x in [1.0f32, 2.0, 3.0, -4.0] {
        big.extend(x.to_be_bytes());
    }
    let mut file = NpyArray::from_bytes(Dtype::C64, vec![2], &big)
        .unwrap()
        .to_npy();
    let Some(at) = file.windows(5).position(|w| w == b"'<c8'") else {
        panic!("no '<c8' in the header")
    };
    file[at + 1] = b'>';
    let input = t.path("c.npy");
    std::fs::write(&input, file).unwrap();
    call("conj_rotate", &["--arg", path_str(&input), "--inout"]);
    let back = NpyArray::parse(&std::fs::read(&input).unwrap()).unwrap();
    assert_eq!(back.dtype(), Dtype::C64);
    let got: Vec<f32> = back
        .bytes()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [3.0, -1.0, -1.0, 7.0]);
    // vector<4xf32> elements: an (n, 4) f32 array, doubled in place, and a fresh
    // (n, 4) result of 2x + 1.
    let v: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let vin = write_f32(&t.0, "v.npy", &[3, 4], &v, false);
    let vout = t.path("vr.npy");
    call(
        "vec_scale",
        &["--arg", &vin, "--out", path_str(&vout), "--inout"],
    );
    let doubled: Vec<f32> = v.iter().map(|x| 2.0 * x).collect();
    assert_eq!(read_f32(&vin), (vec![3, 4], doubled.clone()));
    let plus_one: Vec<f32> = doubled.iter().map(|x| x + 1.0).collect();
    assert_eq!(read_f32(path_str(&vout)), (vec![3, 4], plus_one));
    let bad_lanes = write_f32(&t.0, "v3.npy", &[4, 3], &v, false);
    fails_with(
        &locus(&[
            "call",
            path_str(&so),
            "vec_scale",
            "--sig-from",
            path_str(&k),
            "--arg",
            &bad_lanes,
            "--out",
            path_str(&vout),
        ]),
        "shape [4, 3]: elements of vector<4xf32> need a last dimension of 4",
    );
    // The wrong dtype for the element type is refused, naming the argument.
    let wrong = t.path("w.npy");
    NpyArray::from_bytes(Dtype::F16, vec![1], &[0, 0])
        .unwrap()
        .write(&wrong)
        .unwrap();
    fails_with(
        &locus(&[
            "call",
            path_str(&so),
            "scale_bf16",
            "--sig-from",
            path_str(&k),
            "--arg",
            path_str(&wrong),
        ]),
        "dtype <f2 does not match the signature's memref<?xbf16>",
    );
}

/// `--sig-from` on a function of tensors takes the signature `memref compile` gave it
/// (bufferized: `tensor<?xf32>` is `memref<?xf32>`); it was refused ("unsupported type
/// `tensor`"). a + b * b into a fresh result.
#[test]
fn sig_from_a_tensor_kernel_reads_its_bufferized_signature() {
    let t = TempDir::new("memref-tensor-sig");
    let kernel = fixture("dialects.mlir");
    let so = t.path("dialects.so");
    ok(&locus(&["compile", path_str(&kernel), "-o", path_str(&so)]));
    let a = write_f32(&t.0, "a.npy", &[4], &[0.0, 1.0, 2.0, 3.0], false);
    let b = write_f32(&t.0, "b.npy", &[4], &[1.0, 2.0, 3.0, 4.0], false);
    let out = t.path("out.npy");
    ok(&locus(&[
        "call",
        path_str(&so),
        "tensor_add_sq",
        "--sig-from",
        path_str(&kernel),
        "--arg",
        &a,
        "--arg",
        &b,
        "--out",
        path_str(&out),
    ]));
    assert_eq!(
        read_f32(path_str(&out)),
        (vec![4], vec![1.0, 5.0, 11.0, 19.0])
    );
}

/// MLIR's integers are signless: an `i8` result is written as `uint8` when the input of
/// its element type is `uint8` (200 in, 55 out; before, the file said int8 and numpy read
/// 255 as -1), as `int8` when it is `int8`.
#[test]
fn integer_results_take_their_inputs_signedness() {
    let t = TempDir::new("memref-signless");
    for (dtype, descr) in [(Dtype::U8, "|u1"), (Dtype::I8, "|i1")] {
        let a = t.path(&format!("{descr}-a.npy").replace('|', ""));
        NpyArray::from_bytes(dtype, vec![3], &[0, 100, 200])
            .unwrap()
            .write(&a)
            .unwrap();
        let out = t.path(&format!("{descr}-out.npy").replace('|', ""));
        ok(&locus(&[
            "call",
            &lib("results"),
            "flip_bytes",
            "--sig-from",
            path_str(&fixture("results.mlir")),
            "--arg",
            path_str(&a),
            "--out",
            path_str(&out),
        ]));
        let written = NpyArray::parse(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(written.dtype().descr(), descr);
        assert_eq!(written.bytes(), [255, 155, 55], "{descr}");
    }
}

/// `--arg 'A.npy[::2, 1:]'`: numpy's basic slicing (steps, negative steps, indices, `.T`)
/// passes a view of the file: without a copy to a strided parameter, as a row-major copy to
/// an identity-layout one, written back into the sliced elements only with --inout (issue
/// 14, section 6).
#[test]
fn sliced_arguments_from_the_shell() {
    let t = TempDir::new("memref-slices");
    // A = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    let a_values: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let a = write_f32(&t.0, "a.npy", &[4, 3], &a_values, false);
    let sums = |func: &str, arg: &str, n: usize| {
        let out = write_f32(&t.0, "out.npy", &[n], &vec![0.0; n], false);
        ok(&locus(&[
            "call",
            &lib("strided"),
            func,
            "--sig-from",
            path_str(&fixture("strided.mlir")),
            "--arg",
            arg,
            "--arg",
            &out,
            "--inout",
        ]));
        read_f32(&out).1
    };
    for func in ["row_sums", "row_sums_dense"] {
        assert_eq!(
            sums(func, &format!("{a}[::2, 1:]"), 2),
            [3.0, 15.0],
            "{func}"
        );
        assert_eq!(
            sums(func, &format!("{a}.T"), 3),
            [18.0, 22.0, 26.0],
            "{func}"
        );
        assert_eq!(
            sums(func, &format!("{a}[::-1, ::-1]"), 4),
            [30.0, 21.0, 12.0, 3.0],
            "{func}"
        );
        assert_eq!(sums(func, &format!("{a}[-1:, :2]"), 1), [19.0], "{func}");
    }
    // The file itself is untouched by --inout (the kernels only read it).
    assert_eq!(read_f32(&a).1, a_values);
    // Written through a slice: only the sliced elements change (each becomes
    // x * 3 + i, i its index in the slice).
    let c64 = t.path("c64.npy");
    let bytes: Vec<u8> = [1.0f64; 6].iter().flat_map(|x| x.to_ne_bytes()).collect();
    NpyArray::from_bytes(Dtype::F64, vec![6], &bytes)
        .unwrap()
        .write(&c64)
        .unwrap();
    ok(&locus(&[
        "call",
        &lib("elementwise"),
        "axpi",
        "--sig",
        "(memref<?xf64>, f64) -> ()",
        "--arg",
        &format!("{}[1::2]", path_str(&c64)),
        "--arg",
        "3",
        "--inout",
    ]));
    let back = NpyArray::parse(&std::fs::read(&c64).unwrap()).unwrap();
    let got: Vec<f64> = back
        .bytes()
        .chunks(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [1.0, 3.0, 1.0, 4.0, 1.0, 5.0]);
    // An unranked parameter gets a row-major copy too: the kernel casts it to an identity
    // layout (`memref<?xf32>`), which would take the slice's offset and step for 0 and 1
    // and write the wrong elements.
    for (slice, want) in [
        ("[::2]", [-1.0, 1.0, -1.0, 3.0, -1.0, 5.0, -1.0, 7.0]),
        ("[3:]", [0.0, 1.0, 2.0, -1.0, -1.0, -1.0, -1.0, -1.0]),
    ] {
        let values: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let u = write_f32(&t.0, "u.npy", &[8], &values, false);
        ok(&locus(&[
            "call",
            &lib("results"),
            "fill_unranked",
            "--sig-from",
            path_str(&fixture("results.mlir")),
            "--arg",
            &format!("{u}{slice}"),
            "--arg",
            "-1",
            "--inout",
        ]));
        assert_eq!(read_f32(&u).1, want, "{slice}");
    }
    // Errors name the argument and what is wrong with the slicing.
    let bad = |arg: String, want: &str| {
        let out = locus(&[
            "call",
            &lib("strided"),
            "row_sums",
            "--sig-from",
            path_str(&fixture("strided.mlir")),
            "--arg",
            &arg,
            "--arg",
            &a,
        ]);
        fails_with(&out, want);
    };
    bad(format!("{a}[::0]"), "a step of 0");
    bad(format!("{a}[1, 2, 3]"), "3 slices for 2 dimensions");
    bad(
        format!("{a}[7]"),
        "index 7 is out of range for size 4 in dimension 0",
    );
    bad(format!("{a}[0]"), "rank 1 (shape [3]) does not match");
}

/// Mapped inputs are never truncated under the kernel: an --out naming the input itself
/// (a result that is the argument) is written to a new file renamed over the old one; the
/// same file given twice is one array; a file whose data is not aligned for its elements
/// is read instead of mapped.
#[test]
fn mapped_inputs_survive_outputs_naming_them() {
    let t = TempDir::new("memref-mapped");
    let a = write_f32(&t.0, "a.npy", &[4], &[1.0, 2.0, 3.0, 4.0], false);
    let tail = t.path("tail.npy");
    ok(&locus(&[
        "call",
        &lib("aliasing"),
        "arg_and_tail",
        "--sig-from",
        path_str(&fixture("aliasing.mlir")),
        "--arg",
        &a,
        "--out",
        &a,
        "--out",
        path_str(&tail),
    ]));
    assert_eq!(read_f32(&a), (vec![4], vec![1.0, 2.0, 3.0, 4.0]));
    assert_eq!(read_f32(path_str(&tail)).1, [2.0, 3.0, 4.0]);
    // The same file twice, through two spellings of its path: one array, and the call
    // works.
    let other_name = format!("{}/./a.npy", path_str(&t.0));
    let out = write_f32(&t.0, "c.npy", &[4], &[0.0; 4], false);
    ok(&locus(&[
        "call",
        &lib("elementwise"),
        "add",
        "--sig",
        "(memref<?xf32>, memref<?xf32>, memref<?xf32>) -> ()",
        "--arg",
        &a,
        "--arg",
        &other_name,
        "--arg",
        &out,
        "--inout",
    ]));
    assert_eq!(read_f32(&out).1, [2.0, 4.0, 6.0, 8.0]);
    // Data at byte 68 (a valid header, unaligned for f64): read, not refused.
    let mut header = b"\x93NUMPY\x01\x00".to_vec();
    let mut dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }".to_string();
    while 10 + dict.len() + 1 < 68 {
        dict.push(' ');
    }
    dict.push('\n');
    header.extend((dict.len() as u16).to_le_bytes());
    header.extend(dict.as_bytes());
    for x in [1.5f64, -2.0] {
        header.extend(x.to_le_bytes());
    }
    let odd = t.path("odd.npy");
    std::fs::write(&odd, &header).unwrap();
    ok(&locus(&[
        "call",
        &lib("elementwise"),
        "axpi",
        "--sig",
        "(memref<?xf64>, f64) -> ()",
        "--arg",
        path_str(&odd),
        "--arg",
        "2",
        "--inout",
    ]));
    let back = NpyArray::parse(&std::fs::read(&odd).unwrap()).unwrap();
    let got: Vec<f64> = back
        .bytes()
        .chunks(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [3.0, -3.0]);
}

/// Runs `script` in numpy (`import numpy as np` first) in `dir`; it prints what it found.
fn numpy(dir: &Path, script: &str) -> String {
    let out = Command::new(numpy_python())
        .current_dir(dir)
        .args(["-c", &format!("import numpy as np\n{script}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "numpy: {}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// numpy's check that the file `got` holds what `want` (an expression on the arrays the
/// script made) holds: exactly the same values.
fn numpy_agrees(dir: &Path, setup: &str, got: &str, want: &str) {
    let verdict = numpy(
        dir,
        &format!(
            "{setup}\ng = np.load({got:?}); w = {want}\n\
             print('same' if g.shape == w.shape and np.array_equal(g, w) else f'got {{g!r}}, numpy {{w!r}}')"
        ),
    );
    assert_eq!(verdict, "same", "{got}: {want}");
}

/// One `.npy` file given for two parameters is one array, as numpy passes it (issue 23,
/// section 2): the kernel's writes through one parameter are read through the other and
/// kept, whichever comes first, on every storage (a mapped file, a big-endian one read into
/// a buffer, Fortran order) and through a row-major copy for an identity-layout parameter
/// (written back only where the kernel changed it). Each result is checked against numpy
/// running the kernel's loops on one array. Every other way to lose a write back is
/// refused before the kernel runs: two --out naming one file, an --out naming an array
/// --inout writes back, an --out naming an input, compile's -o naming the kernel,
/// --inout on standard input; a write that cannot be kept is exit status 1.
#[test]
fn one_file_for_two_parameters_is_one_array_as_in_numpy() {
    let t = TempDir::new("memref-one-array");
    let dir = t.0.as_path();
    let k = fixture("one_array.mlir");
    let so = t.path("one_array.so");
    ok(&locus(&["compile", path_str(&k), "-o", path_str(&so)]));
    let call = |func: &str, args: &[&str], extra: &[&str]| {
        let mut a = vec!["call", path_str(&so), func, "--sig-from", path_str(&k)];
        for x in args {
            a.extend(["--arg", x]);
        }
        a.extend(extra);
        locus(&a)
    };
    let mut cases = 0;
    // 1-D, mapped and big-endian (read into a buffer): the written parameter first.
    for (descr, file) in [("<f4", "a.npy"), (">f4", "big.npy")] {
        let make = format!("a0 = np.array([1, -2, 3.5, 4, 0.25, 6], dtype='{descr}')");
        numpy(dir, &format!("{make}\nnp.save('{file}', a0)"));
        // Two spellings of the path: one file.
        let other = format!("{}/./{file}", path_str(dir));
        ok(&call(
            "scale_into",
            &[file_in(dir, file).as_str(), &other],
            &["--inout"],
        ));
        let loop_ = "a = a0.copy()\nfor i in range(len(a)): a[i] = 2 * a[i] + 1";
        numpy_agrees(dir, &format!("{make}\n{loop_}"), file, "a");
        cases += 1;
        numpy(dir, &format!("{make}\nnp.save('{file}', a0)"));
        ok(&call(
            "shift_into",
            &[&file_in(dir, file), &file_in(dir, file)],
            &["--inout"],
        ));
        let loop_ = "a = a0.copy()\nfor i in range(len(a) - 1): a[i] = a[i + 1] + a[i]";
        numpy_agrees(dir, &format!("{make}\n{loop_}"), file, "a");
        cases += 1;
        // Without --inout the file is left as it was (the kernel wrote a private copy).
        ok(&call(
            "shift_into",
            &[&file_in(dir, file), &file_in(dir, file)],
            &[],
        ));
        numpy_agrees(dir, &format!("{make}\n{loop_}"), file, "a");
        cases += 1;
    }
    // Row-major slices at offsets reach the identity-layout parameters without a copy:
    // one memory, each step reading what the one before wrote (they were copies once,
    // which read the array as it was).
    let make = "a0 = np.array([1, -2, 3.5, 4, 0.25, 6], dtype='<f4')";
    numpy(dir, &format!("{make}\nnp.save('a.npy', a0)"));
    let a = file_in(dir, "a.npy");
    ok(&call(
        "shift_into",
        &[&format!("{a}[:-1]"), &format!("{a}[1:]")],
        &["--inout"],
    ));
    let loop_ = "a = a0.copy(); d = a[:-1]; s = a[1:]\n\
                 for i in range(len(d) - 1): d[i] = s[i + 1] + s[i]";
    numpy_agrees(dir, &format!("{make}\n{loop_}"), "a.npy", "a");
    cases += 1;
    // 2-D: A and A.T. To an identity-layout parameter A.T is a row-major copy made before
    // the kernel runs, as numpy's `a += a.T` copies the overlapping operand; to a strided
    // one it is the buffer itself, as numpy's loop on two views of one array.
    let make = "a0 = np.arange(12, dtype='<f4').reshape(3, 4)[:, :3].copy() * 1.5 - 2";
    for fortran in [false, true] {
        let save = format!(
            "{make}\nnp.save('m.npy', np.asfortranarray(a0) if {} else a0)",
            if fortran { "True" } else { "False" }
        );
        let m = file_in(dir, "m.npy");
        let mt = format!("{m}.T");
        numpy(dir, &save);
        ok(&call("add_into", &[&m, &mt], &["--inout"]));
        numpy_agrees(
            dir,
            &format!("{make}\na = a0.copy(); a += a.T"),
            "m.npy",
            "a",
        );
        cases += 1;
        numpy(dir, &save);
        ok(&call("add_into_strided", &[&m, &mt], &["--inout"]));
        let loop_ = "a = a0.copy(); v = a.T\n\
                     for i in range(3):\n    for j in range(3): a[i, j] = a[i, j] + v[i, j]";
        numpy_agrees(dir, &format!("{make}\n{loop_}"), "m.npy", "a");
        cases += 1;
    }
    // One element written through the copy of A.T (5) and through A itself (7): no
    // array gives both; exit status 1 naming it.
    numpy(dir, &format!("{make}\nnp.save('m.npy', a0)"));
    let m = file_in(dir, "m.npy");
    fails_with(
        &call("write_both", &[&format!("{m}.T"), &m], &["--inout"]),
        "argument 0: the kernel wrote the element at byte 12",
    );
    // An --out naming the input, without --inout: the result replaces the file, as
    // `np.save('v.npy', f(np.load('v.npy')))`.
    let make = "v0 = np.array([0.5, 1, -1], dtype='<f4')";
    numpy(dir, &format!("{make}\nnp.save('v.npy', v0)"));
    let v = file_in(dir, "v.npy");
    ok(&call("plus_one", &[&v], &["--out", &v]));
    numpy_agrees(dir, make, "v.npy", "v0 + 1");
    cases += 1;
    // With --inout the file would get the argument or the result: refused, untouched.
    fails_with(
        &call(
            "plus_one",
            &[&v],
            &["--out", &format!("{}/./v.npy", path_str(dir)), "--inout"],
        ),
        "which --inout writes back",
    );
    numpy_agrees(dir, make, "v.npy", "v0 + 1");
    // An --out naming the library or the kernel.
    fails_with(
        &call("plus_one", &[&v], &["--out", path_str(&so)]),
        "the library, an input of this call",
    );
    fails_with(
        &call("plus_one", &[&v], &["--out", path_str(&k)]),
        "the --sig-from kernel, an input of this call",
    );
    // Two results to one file (a new one, named twice).
    let tail = t.path("tail.npy");
    let out = call_aliasing(
        "arg_and_tail",
        &[&v],
        &[path_str(&tail), &format!("{}/./tail.npy", path_str(dir))],
    );
    fails_with(&out, "also the file of result 0");
    assert!(!tail.exists());
    // Standard input cannot be written back.
    fails_with(
        &call("scale_into", &["-", &v], &["--inout"]),
        "--inout cannot write an array back to standard input",
    );
    // compile -o naming the kernel leaves the kernel as it was.
    let kernel = t.path("k.mlir");
    std::fs::copy(&k, &kernel).unwrap();
    fails_with(
        &locus(&["compile", path_str(&kernel), "-o", path_str(&kernel)]),
        "the kernel itself",
    );
    assert_eq!(std::fs::read(&kernel).unwrap(), std::fs::read(&k).unwrap());
    assert_eq!(cases, 12);
}

/// `dir/name` as a string.
fn file_in(dir: &Path, name: &str) -> String {
    path_str(&dir.join(name)).to_string()
}

/// Multi-dimensional vector elements (issue 23, section 2): `memref<?x?xvector<4x4xf32>>`
/// and `memref<?xvector<2x2x4xi16>>`, nested arrays of the innermost vector without
/// padding. `locus memref run` prints what mlir-cpu-runner-19 prints for the fixture's
/// @main (elements written, read back, returned fresh, printed lane by lane), and
/// `locus memref call` on .npy files of shape (rows, cols, 4, 4) and (n, 2, 2, 4) (in
/// place, and a fresh result) gives what numpy computes.
#[test]
fn multi_dimensional_vector_elements() {
    let k = fixture("vector_elements.mlir");
    let t = TempDir::new("memref-vector-elements");
    let dir = t.0.as_path();
    let got = ok(&locus(&["run", path_str(&k)]));
    assert_eq!(got, mlir_cpu_runner(&k, "main", "void"));
    assert_eq!(got.lines().count(), 13);
    let so = t.path("ve.so");
    ok(&locus(&["compile", path_str(&k), "-o", path_str(&so)]));
    let call = |func: &str, extra: &[&str]| {
        let mut a = vec!["call", path_str(&so), func, "--sig-from", path_str(&k)];
        a.extend(extra);
        locus(&a)
    };
    let make = "m0 = np.arange(2 * 3 * 16, dtype='<f4').reshape(2, 3, 4, 4) * 0.5 - 3\n\
                s0 = np.arange(3 * 16, dtype='<i2').reshape(3, 2, 2, 4) * 7 - 20";
    numpy(
        dir,
        &format!("{make}\nnp.save('m.npy', m0)\nnp.save('s.npy', s0)"),
    );
    let (m, s, o) = (
        file_in(dir, "m.npy"),
        file_in(dir, "s.npy"),
        file_in(dir, "o.npy"),
    );
    ok(&call("mat_step", &["--arg", &m, "--out", &o, "--inout"]));
    numpy_agrees(dir, make, "m.npy", "m0 * 2");
    let want = "np.swapaxes(m0 * 2, 2, 3) + \
                (10 * np.arange(2)[:, None] + np.arange(3))[:, :, None, None].astype('<f4')";
    numpy_agrees(dir, make, "o.npy", want);
    ok(&call("iota_add", &["--arg", &s, "--inout"]));
    let want = "s0 + np.arange(16, dtype='<i2').reshape(2, 2, 4) + \
                (100 * np.arange(3, dtype='<i2'))[:, None, None, None]";
    numpy_agrees(dir, make, "s.npy", want);
    // A row of the file (a slice over the memref's dimensions): only it changes.
    numpy(dir, &format!("{make}\nnp.save('m.npy', m0)"));
    ok(&call(
        "mat_step",
        &["--arg", &format!("{m}[1:]"), "--out", &o, "--inout"],
    ));
    numpy_agrees(dir, make, "m.npy", "np.concatenate([m0[:1], m0[1:] * 2])");
    // The last dimensions must be the vector's.
    numpy(dir, "np.save('bad.npy', np.zeros((2, 3, 16), dtype='<f4'))");
    fails_with(
        &call(
            "mat_step",
            &["--arg", &file_in(dir, "bad.npy"), "--out", &o],
        ),
        "shape [2, 3, 16]: elements of vector<4x4xf32> need last dimensions of [4, 4]",
    );
}

/// `ml_dtypes` arrays as numpy saves them (issue 23, section 2): bfloat16 as '<V2', the
/// float8 types as '<V1' or '<f1', dtypes that name only a size. Refused with a message
/// saying how to name the type; read as the type `--ml-dtype` names; written back with
/// their own dtype by --inout; results written with the type's name, which np.load
/// reads once ml_dtypes is imported. With ml_dtypes installed the files come from
/// np.save and the values are checked by ml_dtypes; without it the files are the bytes
/// numpy 1.24 with ml_dtypes 0.5.4 writes (made here) and the values are checked bit by bit.
#[test]
fn ml_dtypes_arrays_as_numpy_saves_them() {
    let t = TempDir::new("memref-ml-dtypes");
    let dir = t.0.as_path();
    let k = fixture("elements.mlir");
    let so = t.path("el.so");
    ok(&locus(&["compile", path_str(&k), "-o", path_str(&so)]));
    let with_ml = numpy(
        dir,
        "try:\n    import ml_dtypes; print('yes')\nexcept ImportError:\n    print('no')",
    ) == "yes";
    // bf16 1.0, 2.5, -3.0, 0.1875; f8E4M3FN 1.5, 2, 2^-9, -448, nan; f8E5M2 1, -2, 0.5.
    let bf16: Vec<u8> = [0x3f80u16, 0x4020, 0xc040, 0x3e40]
        .iter()
        .flat_map(|b| b.to_le_bytes())
        .collect();
    let f8: [u8; 5] = [0x3c, 0x40, 0x01, 0xfe, 0x7f];
    let e5m2: [u8; 3] = [0x3c, 0xc0, 0x38];
    let save = |name: &str, ml: &str, descr: &str, bytes: &[u8]| {
        if with_ml {
            let values = bytes.iter().map(|b| b.to_string()).collect::<Vec<_>>();
            numpy(
                dir,
                &format!(
                    "import ml_dtypes\n\
                     a = np.array([{}], dtype=np.uint8).view(ml_dtypes.{ml})\n\
                     assert a.dtype.str == '{descr}', a.dtype.str\nnp.save('{name}', a)",
                    values.join(", ")
                ),
            );
        } else {
            let mut file = b"\x93NUMPY\x01\x00".to_vec();
            let n = bytes.len() / if descr == "<V2" { 2 } else { 1 };
            let mut dict =
                format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n},), }}");
            while 10 + dict.len() + 1 < 128 {
                dict.push(' ');
            }
            dict.push('\n');
            file.extend((dict.len() as u16).to_le_bytes());
            file.extend(dict.as_bytes());
            file.extend(bytes);
            std::fs::write(dir.join(name), file).unwrap();
        }
        file_in(dir, name)
    };
    let call = |func: &str, sig: Option<&str>, extra: &[&str]| {
        let mut a = vec!["call", path_str(&so), func];
        match sig {
            Some(s) => a.extend(["--sig", s]),
            None => a.extend(["--sig-from", path_str(&k)]),
        }
        a.extend(extra);
        locus(&a)
    };
    // Without --ml-dtype: how to pass it.
    let b = save("b.npy", "bfloat16", "<V2", &bf16);
    fails_with(
        &call("scale_bf16", None, &["--arg", &b, "--inout"]),
        "dtype '<V2' names no element type, only 2-byte records: numpy saves ml_dtypes' \
         bfloat16 as '<V2'",
    );
    fails_with(
        &call("scale_bf16", None, &["--arg", &b]),
        "--ml-dtype bfloat16",
    );
    // bfloat16, doubled in place: written back as '<V2'.
    ok(&call(
        "scale_bf16",
        None,
        &["--arg", &b, "--inout", "--ml-dtype", "bfloat16"],
    ));
    let back = std::fs::read(&b).unwrap();
    assert!(text(&back).contains("'descr': '<V2'"), "{}", text(&back));
    let doubled: Vec<u8> = [0x4000u16, 0x40a0, 0xc0c0, 0x3ec0]
        .iter()
        .flat_map(|b| b.to_le_bytes())
        .collect();
    assert_eq!(back[back.len() - 8..], doubled[..]);
    // float8_e4m3fn ('<V1'), reversed into a new file named by its type.
    let f = save("f.npy", "float8_e4m3fn", "<V1", &f8);
    let r = file_in(dir, "r.npy");
    fails_with(
        &call("reverse_f8", None, &["--arg", &f, "--out", &r]),
        "float8_e4m3fn",
    );
    ok(&call(
        "reverse_f8",
        None,
        &["--arg", &f, "--out", &r, "--ml-dtype", "float8_e4m3fn"],
    ));
    let back = std::fs::read(&r).unwrap();
    assert!(text(&back).contains("'descr': 'float8_e4m3fn'"));
    assert_eq!(back[back.len() - 5..], [0x7f, 0xfe, 0x01, 0x40, 0x3c]);
    // float8_e5m2 ('<f1'), moved by the same kernel given its type.
    let e = save("e.npy", "float8_e5m2", "<f1", &e5m2);
    let re = file_in(dir, "re.npy");
    let sig = "(memref<?xf8E5M2>) -> memref<?xf8E5M2>";
    ok(&call(
        "reverse_f8",
        Some(sig),
        &["--arg", &e, "--out", &re, "--ml-dtype", "float8_e5m2"],
    ));
    // Values as ml_dtypes reads them, when it is there.
    if with_ml {
        let verdict = numpy(
            dir,
            "import ml_dtypes\n\
             b = np.load('b.npy').view(ml_dtypes.bfloat16).astype(np.float32)\n\
             r = np.load('r.npy').astype(np.float32)\n\
             re = np.load('re.npy')\n\
             ok = list(b) == [2.0, 5.0, -6.0, 0.375] and \\\n\
                  list(r[1:]) == [-448.0, 2.0 ** -9, 2.0, 1.5] and np.isnan(r[0]) and \\\n\
                  re.dtype == ml_dtypes.float8_e5m2 and list(re.astype(np.float32)) == [0.5, -2.0, 1.0]\n\
             print('same' if ok else f'{b} {r} {re}')",
        );
        assert_eq!(verdict, "same");
    }
    let back = std::fs::read(&re).unwrap();
    assert!(text(&back).contains("'descr': 'float8_e5m2'"));
    assert_eq!(back[back.len() - 3..], [0x38, 0xc0, 0x3c]);
    // The wrong size for the type named, and a name that is no type.
    fails_with(
        &call("scale_bf16", None, &["--arg", &f, "--ml-dtype", "bfloat16"]),
        "dtype '<V1' has 1-byte elements, not those of bfloat16 (2 bytes)",
    );
    let out = call("scale_bf16", None, &["--arg", &b, "--ml-dtype", "float4"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not an ml_dtypes type Locus reads: bfloat16, float8_e5m2"));
}
