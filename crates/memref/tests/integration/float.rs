//! The narrow floats (`f16`, `bf16`, the `f8` family) against LLVM's `APFloat`: each value
//! is written in a dense constant of a `.mlir` file exactly (every decimal digit of the
//! `f64`), `mlir-opt-19` converts it to the type as its parser does (round to nearest,
//! ties to even) and prints the constant's bytes in hex; Locus's conversion must give the
//! same bits for every value. The values: pseudo-random ones across the formats' ranges,
//! and the midpoints between neighbouring values of each format (the ties).

use std::process::Command;

use locus_memref::float::{SmallFloat, NARROW_FLOATS};
use locus_memref::ElemType;

/// Finite values of `elem` worth converting: random magnitudes and signs, and the midpoint
/// of each pair of neighbouring finite values (sampled for the 16-bit types).
fn values(elem: ElemType) -> Vec<f64> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::new();
    for _ in 0..400 {
        let r = next();
        let mantissa = (r >> 11) as f64 / (1u64 << 53) as f64 + 1.0;
        let exponent = (r % 50) as i32 - 30;
        let sign = if r & (1 << 10) != 0 { -1.0 } else { 1.0 };
        out.push(sign * mantissa * 2f64.powi(exponent));
    }
    let width = 8 * elem.size() as u32;
    let step = if width == 16 { 97 } else { 1 };
    let decode = |b: u32| SmallFloat::from_bits(elem, b as u16).map(SmallFloat::to_f64);
    for b in (0..(1u32 << width) - 1).step_by(step) {
        if let (Some(lo), Some(hi)) = (decode(b), decode(b + 1)) {
            // Neighbours of one sign only (the pattern after the largest positive is
            // negative zero or NaN).
            if lo.is_finite() && hi.is_finite() && lo.is_sign_negative() == hi.is_sign_negative() {
                out.push((lo + hi) / 2.0);
            }
        }
    }
    out
}

#[test]
fn narrow_floats_round_as_apfloat_does() {
    let scratch = locus_memref::compile::private_dir().unwrap();
    let dir = scratch.path();
    let mut checked = 0;
    for elem in NARROW_FLOATS {
        let vals = values(elem);
        // Every f64 has a finite decimal expansion; 800 digits print all of it.
        let literals: Vec<String> = vals.iter().map(|v| format!("{v:.800e}")).collect();
        let ty = format!("tensor<{}x{elem}>", vals.len());
        let src = format!(
            "func.func @c() -> {ty} {{\n  %c = arith.constant dense<[{}]> : {ty}\n  return %c : {ty}\n}}\n",
            literals.join(", ")
        );
        let path = dir.join(format!("{elem}.mlir"));
        std::fs::write(&path, src).unwrap();
        let out = Command::new("mlir-opt-19")
            .arg("--mlir-print-elementsattrs-with-hex-if-larger=1")
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("mlir-opt-19: {e} (run scripts/install-deps)"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let hex = text
            .split("dense<\"0x")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("{elem}: no hex constant in {text}"));
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        assert_eq!(bytes.len(), vals.len() * elem.size(), "{elem}");
        for (i, v) in vals.iter().enumerate() {
            let want = match elem.size() {
                1 => u16::from(bytes[i]),
                _ => u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]),
            };
            let got = SmallFloat::from_f64(elem, *v).map(SmallFloat::bits);
            assert_eq!(got, Some(want), "{elem}: {v:e} is {want:#x} for APFloat");
            checked += 1;
        }
    }
    println!("narrow floats: {checked} conversions agree with APFloat");
}

/// The narrow floats are derived from their formats, not listed again: exactly MLIR 19's
/// eight, by name, each as wide as its name says (`f16`, `bf16`: 16 bits; `f8...`: 8), and
/// no scalar type is left without a size.
#[test]
fn the_narrow_floats_are_mlirs_and_sized_by_their_names() {
    let names: Vec<&str> = NARROW_FLOATS.iter().map(|e| e.name()).collect();
    assert_eq!(
        names,
        [
            "f16",
            "bf16",
            "f8E5M2",
            "f8E4M3",
            "f8E4M3FN",
            "f8E5M2FNUZ",
            "f8E4M3FNUZ",
            "f8E4M3B11FNUZ"
        ]
    );
    for elem in NARROW_FLOATS {
        let bits = if elem.name().starts_with("f8") { 8 } else { 16 };
        assert_eq!(8 * elem.size(), bits, "{elem}");
    }
    for elem in ElemType::SCALARS {
        assert!(elem.size() > 0, "{elem}");
    }
}
