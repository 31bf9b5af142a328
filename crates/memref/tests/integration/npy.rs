//! `.npy` reading and writing. Inputs are byte-exact files in the format of
//! NumPy's NEP 1 (as `numpy.save` writes them: 64-byte aligned header, '\n').

#![allow(clippy::unwrap_used)]

use locus_memref::npy::{Dtype, NpyArray};

/// A file as numpy 1.x writes `np.arange(6, dtype='<f4').reshape(2, 3)`.
fn numpy_file(descr: &str, fortran: bool, shape: &str, data: &[u8], version: u8) -> Vec<u8> {
    let order = if fortran { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    let prefix = if version == 1 { 10 } else { 12 };
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut f = b"\x93NUMPY".to_vec();
    f.push(version);
    f.push(0);
    if version == 1 {
        f.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        f.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(data);
    f
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn reads_c_and_fortran_order_in_every_version() {
    let c: Vec<f32> = (0..6).map(|i| i as f32).collect();
    // Fortran order of the same 2x3 matrix: columns first.
    let f: Vec<f32> = [0, 3, 1, 4, 2, 5].iter().map(|&i| i as f32).collect();
    for version in [1, 2, 3] {
        let a =
            NpyArray::parse(&numpy_file("<f4", false, "(2, 3)", &f32_bytes(&c), version)).unwrap();
        assert_eq!(
            (a.dtype(), a.shape().to_vec(), a.fortran_order),
            (Dtype::F32, vec![2, 3], false)
        );
        assert_eq!(a.bytes(), f32_bytes(&c).as_slice());
        let b =
            NpyArray::parse(&numpy_file("<f4", true, "(2, 3)", &f32_bytes(&f), version)).unwrap();
        assert!(b.fortran_order);
        assert_eq!(
            b.bytes(),
            f32_bytes(&c).as_slice(),
            "Fortran data is reordered to C order"
        );
    }
}

#[test]
fn every_dtype_round_trips() {
    let cases: [(&str, Dtype, usize); 12] = [
        ("<f2", Dtype::F16, 2),
        ("<f4", Dtype::F32, 4),
        ("<f8", Dtype::F64, 8),
        ("|i1", Dtype::I8, 1),
        ("<i2", Dtype::I16, 2),
        ("<i4", Dtype::I32, 4),
        ("<i8", Dtype::I64, 8),
        ("|u1", Dtype::U8, 1),
        ("<u2", Dtype::U16, 2),
        ("<u4", Dtype::U32, 4),
        ("<u8", Dtype::U64, 8),
        ("|b1", Dtype::Bool, 1),
    ];
    for (descr, dtype, size) in cases {
        let data: Vec<u8> = (0..3 * 4 * size).map(|i| (i % 2) as u8).collect();
        let file = numpy_file(descr, false, "(3, 4)", &data, 1);
        let a = NpyArray::parse(&file).unwrap();
        assert_eq!(a.dtype(), dtype, "{descr}");
        assert_eq!(a.bytes(), data.as_slice());
        // Writing gives exactly numpy's bytes back.
        assert_eq!(a.to_npy(), file, "{descr}");
        assert_eq!(a.bytes().as_ptr() as usize % 8, 0, "data is 8-byte aligned");
    }
}

/// A bool array whose bytes are not all 0 or 1 (a numpy view of other bytes as bool) is
/// refused naming the byte: a kernel's `i1` loads would not read numpy's "nonzero is
/// true" from it (a helper's count of 391 true values for numpy's 6).
#[test]
fn bools_other_than_zero_and_one_are_refused() {
    let file = numpy_file("|b1", false, "(4,)", &[1, 0, 2, 1], 1);
    let e = NpyArray::parse(&file).unwrap_err().to_string();
    assert!(
        e.contains("byte 2 of the data is 2: a bool holds 0 or 1"),
        "{e}"
    );
    let e = NpyArray::from_bytes(Dtype::Bool, vec![2], &[0, 255])
        .unwrap_err()
        .to_string();
    assert!(e.contains("byte 1 of the data is 255"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.npy");
    std::fs::write(&path, &file).unwrap();
    // SAFETY: nothing else touches the test's own file while it is mapped.
    let e = unsafe { locus_memref::mapped::MappedNpy::open(&path, false, 1) }
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("(byte 130 of the file) is 2"), "{e}");
    assert!(NpyArray::parse(&numpy_file("|b1", false, "(2,)", &[1, 0], 1)).is_ok());
}

#[test]
fn shapes_zero_d_and_one_d_and_fortran_writing() {
    let one = numpy_file("<f8", false, "(3,)", &[0u8; 24], 1);
    assert_eq!(NpyArray::parse(&one).unwrap().shape(), [3]);
    assert_eq!(NpyArray::parse(&one).unwrap().to_npy(), one);
    let zero = numpy_file("<i4", false, "()", &7i32.to_le_bytes(), 1);
    let a = NpyArray::parse(&zero).unwrap();
    assert!(a.shape().is_empty());
    assert_eq!(a.to_npy(), zero);
    let f: Vec<f32> = [0, 3, 1, 4, 2, 5].iter().map(|&i| i as f32).collect();
    let file = numpy_file("<f4", true, "(2, 3)", &f32_bytes(&f), 1);
    assert_eq!(
        NpyArray::parse(&file).unwrap().to_npy(),
        file,
        "Fortran order is written back as read"
    );
}

#[test]
fn malformed_files_are_errors() {
    let good = numpy_file("<f4", false, "(2,)", &[0u8; 8], 1);
    let mut cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not numpy".to_vec(), "magic"),
        (
            numpy_file("<V2", false, "(2,)", &[0u8; 4], 1),
            "--ml-dtype bfloat16",
        ),
        (
            numpy_file("<U4", false, "(2,)", &[0u8; 32], 1),
            "unsupported dtype",
        ),
        (
            numpy_file("<bfloat16", false, "(2,)", &[0u8; 4], 1),
            "unsupported dtype",
        ),
        (
            numpy_file("!f4", false, "(2,)", &[0u8; 8], 1),
            "unsupported dtype",
        ),
        (
            numpy_file("\u{e9}4", false, "(2,)", &[0u8; 8], 3),
            "unsupported dtype",
        ),
        (numpy_file("<f4", false, "(3,)", &[0u8; 8], 1), "needs 12"),
        (numpy_file("<f4", false, "(a,)", &[0u8; 8], 1), "bad shape"),
    ];
    let mut v9 = good.clone();
    v9[6] = 9;
    cases.push((v9, "version 9"));
    cases.push((good[..20].to_vec(), "truncated"));
    for (file, text) in cases {
        let e = NpyArray::parse(&file).unwrap_err().to_string();
        assert!(e.contains(text), "{e} (wanted {text})");
    }
}

proptest::proptest! {
    /// Any shape, either order, any dtype: writing then reading gives the
    /// same C-order data, and the file's bytes are in the order it says.
    #[test]
    fn write_read_round_trip(
        shape in proptest::collection::vec(0usize..5, 0..4),
        fortran in proptest::bool::ANY,
        dtype in proptest::sample::select(vec![Dtype::F32, Dtype::F64, Dtype::I8, Dtype::I16, Dtype::U8, Dtype::Bool, Dtype::I64, Dtype::F16, Dtype::BF16, Dtype::F8E4M3FN, Dtype::F8E5M2FNUZ, Dtype::C64, Dtype::C128]),
    ) {
        let count: usize = shape.iter().product();
        // A bool byte is 0 or 1.
        let modulus = if dtype == Dtype::Bool { 2 } else { 251 };
        let data: Vec<u8> = (0..count * dtype.size()).map(|i| (i * 7 % modulus) as u8).collect();
        let mut a = NpyArray::from_bytes(dtype, shape.clone(), &data).unwrap();
        a.fortran_order = fortran;
        let file = a.to_npy();
        // Data starts at a multiple of 64, as numpy aligns it.
        let header_len = u16::from_le_bytes([file[8], file[9]]) as usize;
        proptest::prop_assert_eq!((10 + header_len) % 64, 0);
        let b = NpyArray::parse(&file).unwrap();
        proptest::prop_assert_eq!(b.bytes(), &data[..]);
        proptest::prop_assert_eq!(b.shape(), &shape[..]);
        proptest::prop_assert_eq!(b.fortran_order, fortran);
        if fortran && shape.len() == 2 && count > 0 {
            // Element (1, 0) comes right after (0, 0) in a Fortran file when there are 2+ rows.
            let esz = dtype.size();
            let body = &file[10 + header_len..];
            if shape[0] > 1 {
                let c_index = shape[1]; // (1, 0) in C order
                proptest::prop_assert_eq!(&body[esz..2 * esz], &data[c_index * esz..(c_index + 1) * esz]);
            }
        }
    }
}

/// Big-endian files (numpy's `>` descrs) are read into native order: each element
/// swapped, each part of a complex number on its own; `=` is native order. Written back,
/// they are little-endian.
#[test]
fn big_endian_files_are_read() {
    let be: Vec<u8> = [1.0f32, -2.5]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let a = NpyArray::parse(&numpy_file(">f4", false, "(2,)", &be, 1)).unwrap();
    assert_eq!(a.dtype(), Dtype::F32);
    assert_eq!(a.bytes(), f32_bytes(&[1.0, -2.5]));
    assert!(String::from_utf8_lossy(&a.to_npy()).contains("'descr': '<f4'"));
    let be: Vec<u8> = [1.5f64, -2.0]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let a = NpyArray::parse(&numpy_file(">c16", false, "(1,)", &be, 1)).unwrap();
    assert_eq!(a.dtype(), Dtype::C128);
    let le: Vec<u8> = [1.5f64, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(a.bytes(), le);
    let a = NpyArray::parse(&numpy_file(
        ">i2",
        false,
        "(2,)",
        &[0x01, 0x02, 0xff, 0xfe],
        1,
    ))
    .unwrap();
    assert_eq!(a.bytes(), [0x02, 0x01, 0xfe, 0xff]);
    let a = NpyArray::parse(&numpy_file("=i2", false, "(1,)", &[0x01, 0x02], 1)).unwrap();
    assert_eq!(a.bytes(), [0x01, 0x02]);
}

/// The narrow floats go by ml_dtypes' names, read and written as they are.
#[test]
fn ml_dtypes_names_are_read_and_written() {
    for (descr, dtype) in [
        ("bfloat16", Dtype::BF16),
        ("float8_e5m2", Dtype::F8E5M2),
        ("float8_e4m3", Dtype::F8E4M3),
        ("float8_e4m3fn", Dtype::F8E4M3FN),
        ("float8_e5m2fnuz", Dtype::F8E5M2FNUZ),
        ("float8_e4m3fnuz", Dtype::F8E4M3FNUZ),
        ("float8_e4m3b11fnuz", Dtype::F8E4M3B11FNUZ),
    ] {
        let data = vec![0x3c; 2 * dtype.size()];
        let file = numpy_file(descr, false, "(2,)", &data, 1);
        let a = NpyArray::parse(&file).unwrap();
        assert_eq!(a.dtype(), dtype, "{descr}");
        assert_eq!(a.bytes(), &data[..]);
        assert_eq!(a.to_npy(), file, "{descr} written back byte for byte");
    }
}

#[test]
fn errors_name_the_byte_offset() {
    let short = numpy_file("<f4", false, "(3,)", &[0u8; 8], 1);
    let e = NpyArray::parse(&short).unwrap_err().to_string();
    assert!(e.contains("data at byte 128 has 8 bytes"), "{e}");
    let mut v9 = short.clone();
    v9[6] = 9;
    let e = NpyArray::parse(&v9).unwrap_err().to_string();
    assert!(e.contains("version 9 at byte 6"), "{e}");
    let e = NpyArray::parse(&short[..40]).unwrap_err().to_string();
    assert!(e.contains("from byte 10, the file has 40"), "{e}");
}

/// A size above `i64::MAX` next to a zero makes an empty array the file
/// length does not bound; as a memref size it would turn negative.
#[test]
fn sizes_beyond_i64_are_refused() {
    let huge = format!("(0, {})", u64::MAX);
    let e = NpyArray::parse(&numpy_file("<f4", false, &huge, &[], 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not fit a memref index"), "{e}");
    let e = NpyArray::from_bytes(Dtype::F32, vec![1 << 63, 0], &[]).unwrap_err();
    assert!(e.to_string().contains("does not fit"), "{e}");
    // The largest allowed size still parses (empty, nothing allocated).
    let max = format!("({}, 0)", i64::MAX);
    let a = NpyArray::parse(&numpy_file("<f4", true, &max, &[], 1)).unwrap();
    assert_eq!(a.sizes(), [i64::MAX, 0]);
    assert!(a.bytes().is_empty());
}

/// The input the `npy` fuzz target found (a version-3 file with a malformed
/// descr, Fortran order and a size above `i64::MAX` after a zero): it used to
/// read as an empty array with a negative memref size.
#[test]
fn fuzz_crash_negative_size_after_zero() {
    let file = b"\x93NUMPY\x03\x00T\x00\x00\x00{'descr':f2', 'fortran_order': True, \
                 'shape': (1, 1,3, 2, 0,17339476560217360155 ),e";
    let e = NpyArray::parse(file).unwrap_err().to_string();
    assert!(e.contains("size 17339476560217360155 does not fit"), "{e}");
}

/// A shape whose element count fits but whose byte count is far beyond the
/// file is refused before any allocation.
#[test]
fn huge_shapes_are_refused_before_allocating() {
    for shape in [
        "(4611686018427387904,)",
        "(1000000000, 1000000000)",
        "(65536, 65536, 65536, 65536, 2)",
    ] {
        let e = NpyArray::parse(&numpy_file("<f8", true, shape, &[0u8; 16], 1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("too large") || e.contains("needs"),
            "{shape}: {e}"
        );
    }
}

proptest::proptest! {
    /// Truncated or corrupted files are errors, never panics.
    #[test]
    fn parse_never_panics(cut in 0usize..200, pos in 0usize..200, byte in proptest::num::u8::ANY) {
        let mut file = numpy_file("<f4", true, "(2, 3)", &[0u8; 24], 1);
        let p = pos.min(file.len() - 1);
        file[p] = byte;
        file.truncate(cut.min(file.len()));
        let _ = NpyArray::parse(&file);
    }
}

/// Files are replaced through a new file made with `O_EXCL` under a random name beside
/// them (issue 24: no predictable temporary names): the old file's permissions are kept,
/// a new file gets numpy's (0666 less the umask, here compared with a file `File::create`
/// makes), a symbolic link is written through, nothing is left beside the file, and a
/// run's intermediate files go to a directory of its own, mode 0700.
#[test]
fn files_are_replaced_through_private_temporary_files() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = locus_memref::compile::private_dir().unwrap();
    let dir = scratch.path();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir), 0o700);
    let a = NpyArray::from_bytes(Dtype::F32, vec![2], &[0u8; 8]).unwrap();
    let new = dir.join("new.npy");
    a.write(&new).unwrap();
    let plain = dir.join("plain");
    std::fs::File::create(&plain).unwrap();
    assert_eq!(mode(&new), mode(&plain));
    let old = dir.join("old.npy");
    a.write(&old).unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o640)).unwrap();
    a.write(&old).unwrap();
    assert_eq!(mode(&old), 0o640);
    // Through a symbolic link (as numpy writes): the file it names is replaced.
    let link = dir.join("link.npy");
    std::os::unix::fs::symlink(&old, &link).unwrap();
    let b = NpyArray::from_bytes(Dtype::F32, vec![1], &[0, 0, 128, 63]).unwrap();
    b.write(&link).unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(NpyArray::read(&old).unwrap(), b);
    std::fs::remove_file(&link).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["new.npy", "old.npy", "plain"]);
}

/// numpy saves `ml_dtypes` arrays with dtypes that name only a size ('<V2' for bfloat16,
/// '<V1' or '|V1' and '<f1' for float8 types): refused with the way to name the type,
/// read as the type named, and written back with the file's own dtype.
#[test]
fn untyped_ml_dtypes_files() {
    let bf = numpy_file("<V2", false, "(2,)", &[0x80, 0x3f, 0x00, 0x40], 1);
    let Err(e) = NpyArray::parse(&bf) else {
        panic!("'<V2' parsed without a type")
    };
    let e = e.to_string();
    assert!(
        e.contains("numpy saves ml_dtypes' bfloat16 as '<V2'"),
        "{e}"
    );
    assert!(e.contains("--ml-dtype bfloat16"), "{e}");
    let a = NpyArray::parse_as(&bf, Some(Dtype::BF16)).unwrap();
    assert_eq!((a.dtype(), a.shape()), (Dtype::BF16, &[2usize][..]));
    assert_eq!(a.bytes(), [0x80, 0x3f, 0x00, 0x40]);
    assert_eq!(a.to_npy(), bf);
    for descr in ["<V1", "|V1", "<f1"] {
        let f8 = numpy_file(descr, false, "(3,)", &[1, 2, 3], 1);
        let Err(e) = NpyArray::parse(&f8) else {
            panic!("{descr} parsed without a type")
        };
        assert!(e.to_string().contains("--ml-dtype float8_e4m3fn"), "{e}");
        let a = NpyArray::parse_as(&f8, Some(Dtype::F8E5M2)).unwrap();
        assert_eq!((a.dtype(), a.bytes()), (Dtype::F8E5M2, &[1u8, 2, 3][..]));
        assert_eq!(a.to_npy(), f8);
        let Err(e) = NpyArray::parse_as(&f8, Some(Dtype::BF16)) else {
            panic!("{descr} read as bfloat16")
        };
        assert!(e
            .to_string()
            .contains("1-byte elements, not those of bfloat16"));
    }
    // A named dtype is read as it says, whatever type is offered for untyped ones.
    let f4 = numpy_file("<f4", false, "(1,)", &1.0f32.to_le_bytes(), 1);
    let a = NpyArray::parse_as(&f4, Some(Dtype::BF16)).unwrap();
    assert_eq!(a.dtype(), Dtype::F32);
    assert_eq!(
        Dtype::from_ml_name("float8_e4m3b11fnuz"),
        Some(Dtype::F8E4M3B11FNUZ)
    );
    assert_eq!(Dtype::from_ml_name("<f4"), None);
}

/// A mapped file is trusted no more than a read one: a header claiming a shape far
/// beyond the file is refused (issue 24) before any of it is touched, in either order.
#[test]
fn mapped_files_claiming_huge_shapes_are_refused() {
    let scratch = locus_memref::compile::private_dir().unwrap();
    for (shape, fortran) in [
        ("(1099511627776, 1099511627776)", false),
        ("(4611686018427387904,)", false),
        ("(1000000000, 1000000000)", true),
        ("(0, 18446744073709551615)", false),
    ] {
        let path = scratch.path().join("huge.npy");
        std::fs::write(&path, numpy_file("<f8", fortran, shape, &[0u8; 64], 1)).unwrap();
        for shared in [false, true] {
            // SAFETY: a file of this test's own, written above.
            let opened = unsafe { locus_memref::mapped::MappedNpy::open(&path, shared, 8) };
            match opened {
                // Fortran order is read instead of mapped: then the reader refuses it.
                Ok(None) => {
                    let e = NpyArray::read(&path).unwrap_err().to_string();
                    assert!(
                        e.contains("needs") || e.contains("too large"),
                        "{shape}: {e}"
                    );
                }
                Ok(Some(_)) => panic!("{shape}: mapped"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        e.contains("needs") || e.contains("too large") || e.contains("i64"),
                        "{shape}: {e}"
                    );
                }
            }
        }
    }
}

/// A signless integer result is unsigned when every input of its element type is, signed
/// when they mix or there is none; `index`, floats and `i1` keep their one dtype.
#[test]
fn results_take_the_signedness_of_their_inputs() {
    use locus_memref::signature::ElemType;
    let cases: [(ElemType, &[Dtype], Dtype); 9] = [
        (ElemType::I8, &[Dtype::U8], Dtype::U8),
        (ElemType::I8, &[Dtype::U8, Dtype::F32, Dtype::U8], Dtype::U8),
        (ElemType::I8, &[Dtype::U8, Dtype::I8], Dtype::I8),
        (ElemType::I8, &[Dtype::U16], Dtype::I8),
        (ElemType::I8, &[], Dtype::I8),
        (ElemType::I16, &[Dtype::U16], Dtype::U16),
        (ElemType::I64, &[Dtype::U64], Dtype::U64),
        (ElemType::Index, &[Dtype::U64], Dtype::I64),
        (ElemType::F32, &[Dtype::F32], Dtype::F32),
    ];
    for (elem, inputs, want) in cases {
        assert_eq!(Dtype::for_result(elem, inputs), want, "{elem:?} {inputs:?}");
    }
}

/// Writing to what is not a regular file writes into it, as numpy does: a FIFO stays a
/// FIFO and its reader gets the whole file. (A file renamed over the path took its place:
/// `--out /dev/full` replaced the device with a regular file and exited 0.)
#[test]
fn a_fifo_is_written_into_not_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.npy");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // The reader opens first without blocking (so a write that never opens the FIFO
    // fails the test rather than hangs it); the file is smaller than the pipe's buffer.
    let mut reader = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap()
    };
    let data: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    locus_memref::npy::write_npy(&fifo, Dtype::F32, &[2], &data).unwrap();
    let mut read = Vec::new();
    std::io::Read::read_to_end(&mut reader, &mut read).unwrap();
    let back = NpyArray::parse(&read).unwrap();
    assert_eq!((back.shape(), back.bytes()), (&[2usize][..], &data[..]));
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "{kind:?}");
}
