//! The signature model: parsing MLIR function types and checking memrefs.
//! Each parsed signature is also cross-checked against `mlir-opt-19`, which
//! must accept a function of that type.

#![allow(clippy::unwrap_used)]

use locus_memref::signature::{Dim, ElemType, Layout, MemRefType, Mismatch, Type};
use locus_memref::{Error, Signature};

fn memref(t: &Type) -> &MemRefType {
    match t {
        Type::MemRef(m) => m,
        Type::Scalar(_) => panic!("not a memref: {t}"),
    }
}

#[test]
fn parses_the_issue_example() {
    let s = Signature::parse(
        "(memref<?x4xf32, strided<[?, 1], offset: ?>>, f32, index) -> (memref<?xf32>, f32)",
    )
    .unwrap();
    assert_eq!(s.inputs.len(), 3);
    let m = memref(&s.inputs[0]);
    assert_eq!(m.elem, ElemType::F32);
    assert_eq!(m.shape, Some(vec![Dim::Dynamic, Dim::Static(4)]));
    assert_eq!(
        m.layout,
        Layout::Strided {
            strides: vec![Dim::Dynamic, Dim::Static(1)],
            offset: Dim::Dynamic
        }
    );
    assert_eq!(s.inputs[1], Type::Scalar(ElemType::F32));
    assert_eq!(s.inputs[2], Type::Scalar(ElemType::Index));
    assert_eq!(s.results.len(), 2);
    assert_eq!(memref(&s.results[0]).shape, Some(vec![Dim::Dynamic]));
    assert_eq!(s.results[1], Type::Scalar(ElemType::F32));
}

#[test]
fn parses_every_kind() {
    let cases = [
        ("()", 0, 0),
        ("() -> ()", 0, 0),
        ("(f16, f64, i1, i8, i16, i32, i64, index) -> i1", 8, 1),
        ("(memref<*xf32>) -> memref<*xi8>", 1, 1),
        ("(memref<f64>) -> memref<f64>", 1, 1),
        ("(memref<2x3x4x5xi32>)", 1, 0),
        ("(memref<?x?xf32, strided<[1, ?]>>)", 1, 0),
        ("(memref<4x4xf32, affine_map<(d0, d1) -> (d0, d1)>>)", 1, 0),
    ];
    for (text, n_in, n_out) in cases {
        let s = Signature::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!((s.inputs.len(), s.results.len()), (n_in, n_out), "{text}");
        // Printing and parsing again gives the same signature.
        assert_eq!(Signature::parse(&s.to_string()).unwrap(), s, "{text}");
    }
    let u = Signature::parse("(memref<*xf32>)").unwrap();
    assert_eq!(memref(&u.inputs[0]).rank(), None);
    let r0 = Signature::parse("(memref<f64>)").unwrap();
    assert_eq!(memref(&r0.inputs[0]).rank(), Some(0));
    let strided = Signature::parse("(memref<?x?xf32, strided<[1, ?]>>)").unwrap();
    assert!(matches!(
        &memref(&strided.inputs[0]).layout,
        Layout::Strided {
            offset: Dim::Static(0),
            ..
        }
    ));
}

#[test]
fn malformed_signatures_are_errors_with_a_position() {
    for text in [
        "",
        "f32",
        "(f32",
        "(f31)",
        "(memref<?xf32)",
        "(memref<?x?xf32, strided<[1]>>)",
        "(memref<4x4xf32, affine_map<(d0, d1) -> (d1, d0)>>)",
        "(memref<4xf32, 1>)",
        "(tf32)",
        "(f32) -> ",
        "(f32) junk",
    ] {
        let e = Signature::parse(text).unwrap_err();
        assert!(e.to_string().starts_with("at byte "), "{text}: {e}");
    }
}

#[test]
fn signature_from_mlir_source() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/strided.mlir"
    ))
    .unwrap();
    let s = Signature::from_mlir(&src, "center").unwrap();
    assert_eq!(s.to_string(), "(memref<4x4xf32>, memref<2x2xf32>) -> (f32)");
    let s = Signature::from_mlir(&src, "row_sums").unwrap();
    assert_eq!(
        s.to_string(),
        "(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xf32>) -> ()"
    );
    let src = "func.func private @ext(memref<?xf32> {llvm.noalias}, f32) -> (i32 {a.b = 1})\n\
               func.func public @pub(%a: memref<*xf32> {x.y = {z}}) attributes {llvm.emit_c_interface} { return }";
    assert_eq!(
        Signature::from_mlir(src, "ext").unwrap().to_string(),
        "(memref<?xf32>, f32) -> (i32)"
    );
    assert_eq!(
        Signature::from_mlir(src, "pub").unwrap().to_string(),
        "(memref<*xf32>) -> ()"
    );
    assert!(Signature::from_mlir(src, "missing")
        .unwrap_err()
        .to_string()
        .contains("@missing"));
}

/// A function of dense tensors has the signature `memref compile` gives it: the one
/// mlir-opt-19 prints after `compile::BUFFERIZE` (identity-layout memrefs at function
/// boundaries, unranked stays unranked); a sparse tensor is refused, naming the function.
#[test]
fn tensor_functions_have_their_bufferized_signature() {
    let src = "func.func @add(%a: tensor<?x4xf32>, %b: tensor<*xf32>, %s: f32) -> (tensor<?x4xf32>, f32) {\n\
               \x20 return %a, %s : tensor<?x4xf32>, f32\n}\n\
               #sp = #sparse_tensor.encoding<{ map = (i) -> (i : compressed) }>\n\
               func.func @sparse(%a: tensor<8xf32, #sp>) -> tensor<8xf32, #sp> {\n\
               \x20 return %a : tensor<8xf32, #sp>\n}\n";
    assert_eq!(
        Signature::from_mlir(src, "add").unwrap().to_string(),
        "(memref<?x4xf32>, memref<*xf32>, f32) -> (memref<?x4xf32>, f32)"
    );
    let e = Signature::from_mlir(src, "sparse").unwrap_err().to_string();
    assert!(e.contains("@sparse") && e.contains("--sig"), "{e}");
}

#[test]
fn checks_element_rank_sizes_and_layout() {
    let t = |s: &str| match Type::parse(s).unwrap() {
        Type::MemRef(m) => m,
        Type::Scalar(_) => panic!(),
    };
    let f32_ = ElemType::F32;
    let id = t("memref<?x4xf32>");
    assert_eq!(id.check(f32_, 0, &[3, 4], &[4, 1]), Ok(()));
    assert!(matches!(
        id.check(ElemType::F64, 0, &[3, 4], &[4, 1]),
        Err(Mismatch::Elem { .. })
    ));
    assert!(matches!(
        id.check(f32_, 0, &[12], &[1]),
        Err(Mismatch::Rank {
            expected: 2,
            found: 1
        })
    ));
    assert!(matches!(
        id.check(f32_, 0, &[3, 5], &[5, 1]),
        Err(Mismatch::Size {
            dim: 1,
            expected: 4,
            found: 5
        })
    ));
    // Transposed or offset views are refused by an identity layout.
    assert!(matches!(
        id.check(f32_, 0, &[3, 4], &[1, 3]),
        Err(Mismatch::Layout(_))
    ));
    assert!(matches!(
        id.check(f32_, 4, &[3, 4], &[4, 1]),
        Err(Mismatch::Layout(_))
    ));
    // Size-1 dimensions do not care about their stride.
    assert_eq!(id.check(f32_, 0, &[1, 4], &[99, 1]), Ok(()));
    let st = t("memref<?x?xf32, strided<[?, 1], offset: ?>>");
    assert_eq!(st.check(f32_, 7, &[3, 4], &[10, 1]), Ok(()));
    assert!(matches!(
        st.check(f32_, 7, &[3, 4], &[1, 10]),
        Err(Mismatch::Layout(_))
    ));
    let st0 = t("memref<?xf32, strided<[?]>>");
    assert!(
        matches!(st0.check(f32_, 2, &[3], &[2]), Err(Mismatch::Layout(m)) if m.contains("offset 2"))
    );
    // Unranked: any rank, the identity layout only (a kernel may cast it to one).
    let un = t("memref<*xf32>");
    assert_eq!(un.check(f32_, 0, &[2, 2, 2], &[4, 2, 1]), Ok(()));
    assert_eq!(un.check(f32_, 0, &[], &[]), Ok(()));
    assert!(matches!(
        un.check(f32_, 3, &[2, 2, 2], &[4, 2, 1]),
        Err(Mismatch::Layout(m)) if m.contains("offset 3")
    ));
    assert!(matches!(
        un.check(f32_, 0, &[2, 2, 2], &[-1, 5, 0]),
        Err(Mismatch::Layout(m)) if m.contains("not row-major")
    ));
    assert!(un.accepts_row_major(&[2, 2, 2]));
    assert!(un.check(ElemType::I32, 0, &[], &[]).is_err());
}

/// mlir-opt-19 must accept a function with each signature we print.
#[test]
fn printed_signatures_are_valid_mlir() {
    let sigs = [
        "(memref<?x4xf32, strided<[?, 1], offset: ?>>, f32, index) -> (memref<?xf32>, f32)",
        "(memref<*xf32>, memref<f64>, i1) -> memref<*xi8>",
        "(memref<4x4xf32, affine_map<(d0, d1) -> (d0, d1)>>)",
    ];
    let mut src = String::new();
    for (k, text) in sigs.iter().enumerate() {
        let s = Signature::parse(text).unwrap();
        let ins: Vec<String> = s.inputs.iter().map(|t| t.to_string()).collect();
        let outs: Vec<String> = s.results.iter().map(|t| t.to_string()).collect();
        src.push_str(&format!(
            "func.func private @f{k}({}) -> ({})\n",
            ins.join(", "),
            outs.join(", ")
        ));
    }
    let out = locus_memref::compile::mlir_to_llvm_ir(&src);
    assert!(out.is_ok(), "{src}\n{out:?}");
    // And MLIR gives each back as it was printed.
    for (k, text) in sigs.iter().enumerate() {
        assert_eq!(
            Signature::from_mlir(&src, &format!("f{k}")).unwrap(),
            Signature::parse(text).unwrap()
        );
    }
}

proptest::proptest! {
    /// No input makes the parsers panic: arbitrary text, and mutations of valid text.
    #[test]
    fn parsers_never_panic(text in "\\PC{0,60}", cut in 0usize..90, junk in "[()<>,?x*:\\[\\] a-z0-9%@{}-]{0,8}") {
        let _ = Signature::parse(&text);
        let _ = Signature::from_generic_mlir(&text, "f");
        let valid = "(memref<?x4xf32, strided<[?, 1], offset: ?>>, f32, index) -> (memref<?xf32>, f32)";
        let mut at = cut.min(valid.len());
        while !valid.is_char_boundary(at) {
            at -= 1;
        }
        let mutated = format!("{}{}{}", &valid[..at], junk, &valid[at..]);
        let _ = Signature::parse(&mutated);
        let _ = Type::parse(&mutated);
        let _ = Signature::from_generic_mlir(
            &format!("  \"func.func\"() <{{function_type = {mutated}, sym_name = \"f\"}}> ({{\n  }}) : () -> ()"),
            "f",
        );
    }
}

/// A generated type: scalar, unranked, identity or strided memref.
fn any_type() -> impl proptest::strategy::Strategy<Value = Type> {
    use proptest::prelude::*;
    let elem = proptest::sample::select(vec![
        ElemType::F16,
        ElemType::F32,
        ElemType::F64,
        ElemType::I1,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::Index,
    ]);
    let dim = |lo: i64| prop_oneof![Just(Dim::Dynamic), (lo..=i64::MAX).prop_map(Dim::Static)];
    let shape = proptest::collection::vec(dim(0), 0..4);
    let strided = (
        elem.clone(),
        shape.clone(),
        proptest::collection::vec(dim(i64::MIN), 4),
        dim(i64::MIN),
    )
        .prop_map(|(elem, shape, strides, offset)| {
            let strides = strides[..shape.len()].to_vec();
            Type::MemRef(MemRefType {
                elem,
                shape: Some(shape),
                layout: Layout::Strided { strides, offset },
            })
        });
    prop_oneof![
        elem.clone().prop_map(Type::Scalar),
        elem.clone().prop_map(|elem| Type::MemRef(MemRefType {
            elem,
            shape: None,
            layout: Layout::Identity
        })),
        (elem, shape).prop_map(|(elem, shape)| Type::MemRef(MemRefType {
            elem,
            shape: Some(shape),
            layout: Layout::Identity
        })),
        strided,
    ]
}

proptest::proptest! {
    /// What is printed parses back to the same signature (the fuzz target
    /// `signature` checks the same on arbitrary text that parses).
    #[test]
    fn printed_signatures_parse_back(
        inputs in proptest::collection::vec(any_type(), 0..4),
        results in proptest::collection::vec(any_type(), 0..3),
    ) {
        let sig = Signature { inputs, results };
        let text = sig.to_string();
        proptest::prop_assert_eq!(Signature::parse(&text).unwrap(), sig.clone(), "{}", text);
        for t in sig.inputs.iter().chain(&sig.results) {
            proptest::prop_assert_eq!(&Type::parse(&t.to_string()).unwrap(), t);
        }
        let printed = format!(
            "\"builtin.module\"() ({{\n  \"func.func\"() <{{function_type = {text}, sym_name = \"k\", \
             sym_visibility = \"private\"}}> ({{\n  }}) : () -> ()\n}}) : () -> ()\n"
        );
        proptest::prop_assert_eq!(Signature::from_generic_mlir(&printed, "k").unwrap(), sig);
    }
}

/// A kernel whose text mentions `@scale` with a wrong type (a comment, a
/// string attribute, a nested module) and spells its real type through
/// aliases: the signature is the one MLIR parses (issue 14, section 4).
/// Scraping the text took the comment's `(f32) -> f32`.
#[test]
fn signature_comes_from_the_parsed_kernel_not_its_text() {
    let src = "!t = f64\n\
               #l = strided<[?], offset: ?>\n\
               // func.func @scale(%x: f32) -> f32   (an old type, in a comment)\n\
               func.func private @other() attributes {note = \"func.func @scale(%x: i8)\"}\n\
               func.func @scale(%x: !t {a.b = \"func.func @scale(i1) }\"}, %m: memref<?xf32, #l>) -> !t {\n\
               \x20 %c = arith.constant 2.0 : !t\n\
               \x20 %r = arith.mulf %x, %c : !t\n\
               \x20 return %r : !t\n\
               }\n\
               module @inner {\n\
               \x20 func.func @scale(%x: i8) { return }\n\
               }\n";
    assert_eq!(
        Signature::from_mlir(src, "scale").unwrap().to_string(),
        "(f64, memref<?xf32, strided<[?], offset: ?>>) -> (f64)"
    );
    assert_eq!(
        Signature::from_mlir(src, "other").unwrap().to_string(),
        "() -> ()"
    );
    // Only in a comment: not a function of the kernel.
    let e = Signature::from_mlir("// func.func @f(f32)\n", "f").unwrap_err();
    assert!(e.to_string().contains("@f"), "{e}");
}

/// A kernel MLIR cannot parse: the error carries the position of mlir-opt's
/// diagnostic in the source given (line 3, column 12), not `<stdin>`.
#[test]
fn unparsable_kernel_error_points_into_the_source() {
    let src = "// a comment\nfunc.func @f(%x: f32) -> f32 {\n  return %y\n}\n";
    match Signature::from_mlir(src, "f").unwrap_err() {
        Error::Parse { at, message } => {
            let line_start = src.match_indices('\n').nth(1).unwrap().0 + 1;
            assert_eq!(at, line_start + 11, "{message}");
            assert!(!message.contains("<stdin>"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    // A type Locus cannot pass: the error names the function and the type,
    // at the function's position.
    let src = "\n\nfunc.func private @g(memref<?xtf32>)\n";
    match Signature::from_mlir(src, "g").unwrap_err() {
        Error::Parse { at, message } => {
            assert_eq!(at, 2, "{message}");
            assert!(
                message.contains("@g") && message.contains("tf32"),
                "{message}"
            );
        }
        e => panic!("{e:?}"),
    }
    // The same for a function with a body (its location follows the region).
    let src = "\n\nfunc.func @h(%a: memref<?xtf32>) {\n  return\n}\n";
    match Signature::from_mlir(src, "h").unwrap_err() {
        Error::Parse { at, message } => {
            assert_eq!(at, 2, "{message}");
            assert!(
                message.contains("@h") && message.contains("tf32"),
                "{message}"
            );
        }
        e => panic!("{e:?}"),
    }
}

/// The element types of issue 14, section 3 parse and print back as MLIR spells them.
#[test]
fn narrow_float_and_complex_types_parse() {
    let text = "(memref<4xcomplex<f32>>, bf16, f8E4M3FN, memref<?x2xf8E5M2FNUZ>, f8E4M3B11FNUZ) -> (complex<f64>, f16)";
    let Ok(sig) = Signature::parse(text) else {
        panic!("{text} did not parse")
    };
    assert_eq!(sig.to_string(), text);
    let Err(e) = Signature::parse("(complex<i32>) -> ()") else {
        panic!("complex<i32> parsed")
    };
    assert!(e.to_string().contains("unsupported type `complex`"), "{e}");
    // Vector elements: up to four dimensions, the innermost unpadded.
    let text = "(memref<?xvector<4xf32>>, memref<2xvector<16xi8>>, memref<?x?xvector<4x4xf32>>, \
                memref<3xvector<3x2x4xi16>>) -> (memref<?xvector<2xf64>>)";
    let Ok(sig) = Signature::parse(text) else {
        panic!("{text} did not parse")
    };
    assert_eq!(sig.to_string(), text);
    let Type::MemRef(m) = &sig.inputs[2] else {
        panic!("not a memref")
    };
    // Nested arrays of vector<4xf32>: 64 bytes, aligned as the innermost vector.
    assert_eq!((m.elem.size(), m.elem.align()), (64, 16));
    assert_eq!(m.elem.lane_dims(), [4, 4]);
    let Type::MemRef(m) = &sig.inputs[3] else {
        panic!("not a memref")
    };
    assert_eq!((m.elem.size(), m.elem.align()), (48, 8));
    for bad in [
        "(memref<?xvector<3xf32>>)",
        "(memref<?xvector<4xi1>>)",
        "(memref<?xvector<4x3xf32>>)",
        "(memref<?xvector<0x4xf32>>)",
        "(memref<?xvector<2x2x2x2x2xf32>>)",
        "(memref<?xvector<1024x1024xf32>>)",
        "(memref<?xvector<x4xf32>>)",
        "(memref<?xvector<4xindex>>)",
    ] {
        let Err(e) = Signature::parse(bad) else {
            panic!("{bad} parsed")
        };
        assert!(e.to_string().contains("unsupported vector"), "{bad}: {e}");
    }
}
