//! Why results are taken only through `_mlir_ciface_` wrappers: the expanded
//! form returns a descriptor as an LLVM struct *value*, and llc-19 returns
//! such structs in registers where clang-19 returns the C struct of the same
//! layout through memory (`sret`). Checked on the real tools' output for
//! x86-64 (rank 0) and AArch64 (ranks 1 and 2), as the crate docs state.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::tools;

use tools::pipe;

const KERNELS: &str = "
func.func @r0(%a: memref<f32>) -> memref<f32> { return %a : memref<f32> }
func.func @r1(%a: memref<?xf32>) -> memref<?xf32> { return %a : memref<?xf32> }
func.func @r2(%a: memref<?x?xf32>) -> memref<?x?xf32> { return %a : memref<?x?xf32> }
";

/// The same descriptors as C structs, returned by value.
const C_SOURCE: &str = "
struct D0 { float *allocated, *aligned; long offset; };
struct D1 { float *allocated, *aligned; long offset, sizes[1], strides[1]; };
struct D2 { float *allocated, *aligned; long offset, sizes[2], strides[2]; };
struct D0 c0(struct D0 *d) { return *d; }
struct D1 c1(struct D1 *d) { return *d; }
struct D2 c2(struct D2 *d) { return *d; }
";

/// The instructions of `name` in llc's assembly output.
fn body<'a>(asm: &'a str, name: &str) -> Vec<&'a str> {
    let start = asm
        .lines()
        .position(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in\n{asm}"));
    asm.lines()
        .skip(start + 1)
        .map(str::trim)
        .take_while(|l| !l.starts_with(".Lfunc_end"))
        .filter(|l| {
            !l.is_empty() && !l.starts_with('.') && !l.starts_with("//") && !l.starts_with('#')
        })
        .collect()
}

/// The `define` line of `name` in clang's IR for `triple`.
fn c_define(triple: &str, name: &str) -> String {
    let ir = pipe(
        "clang-19",
        &[
            "-target",
            triple,
            "-O2",
            "-ffreestanding",
            "-S",
            "-emit-llvm",
            "-x",
            "c",
            "-",
            "-o",
            "-",
        ],
        C_SOURCE,
    );
    ir.lines()
        .find(|l| l.starts_with("define") && l.contains(&format!("@{name}(")))
        .unwrap_or_else(|| panic!("no @{name} in\n{ir}"))
        .to_string()
}

fn expanded_asm(triple: &str) -> String {
    let ir = locus_memref::compile::mlir_to_llvm_ir(KERNELS).unwrap();
    pipe(
        "llc-19",
        &["-O2", &format!("-mtriple={triple}"), "-o", "-", "-"],
        &ir,
    )
}

#[test]
fn x86_64_rank0_result_comes_back_in_registers_but_c_uses_memory() {
    let triple = "x86_64-unknown-linux-gnu";
    let asm = expanded_asm(triple);
    let r0 = body(&asm, "r0");
    // allocated, aligned, offset in rax, rdx, rcx: no memory operand at all.
    assert!(
        r0.iter().all(|l| !l.contains("(%")),
        "r0 touches memory: {r0:?}"
    );
    assert!(
        r0.iter().any(|l| l.contains("%rcx")),
        "third field not in rcx: {r0:?}"
    );
    assert!(
        c_define(triple, "c0").contains("sret"),
        "C returns D0 through memory"
    );
}

#[test]
fn aarch64_rank1_and_rank2_results_come_back_in_registers_but_c_uses_memory() {
    let triple = "aarch64-unknown-linux-gnu";
    let asm = expanded_asm(triple);
    for (f, c) in [("r1", "c1"), ("r2", "c2")] {
        let b = body(&asm, f);
        // The fields stay in x0..x6: no store, no indirect-result register x8.
        assert!(
            b.iter()
                .all(|l| !l.contains("str") && !l.contains("stp") && !l.contains("x8")),
            "{f} returns through memory: {b:?}"
        );
        assert!(
            c_define(triple, c).contains("sret"),
            "C returns {c}'s struct through memory"
        );
    }
}
