//! Dropping a `StackMapJit` releases its code, sections and index: many JITs made and
//! dropped in a loop leave the JIT memory counter where it was and the resident set size
//! flat. Alone in its test binary, so that no other test's JITs are counted.

#![cfg(target_os = "linux")]

use std::error::Error as StdError;

use locus_llvm::jit_stackmaps::{jit_memory_in_use, StackMapJit};

const IR: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)

define i64 @twice(i64 %a) {
  %d = add i64 %a, %a
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 7, i32 8, i64 %d, i64 %a)
  ret i64 %d
}
"#;

/// Resident pages of the process (`/proc/self/statm`'s second field) in bytes.
fn resident_bytes() -> Result<u64, Box<dyn StdError>> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("short statm")?
        .parse()?;
    Ok(pages * 4096)
}

fn one_jit(a: i64) -> Result<(), Box<dyn StdError>> {
    let jit = StackMapJit::new("twice.ll", IR, &[])?;
    assert!(jit_memory_in_use() > 0);
    assert_eq!(jit.stack_maps().len(), 1);
    // SAFETY: `@twice` is `i64 (i64)` with the C calling convention; `jit` lives on.
    let twice: extern "C" fn(i64) -> i64 = unsafe { jit.lookup_fn("twice")? };
    assert_eq!(twice(a), 2 * a);
    Ok(())
}

#[test]
fn dropping_jits_releases_their_memory() -> Result<(), Box<dyn StdError>> {
    assert_eq!(jit_memory_in_use(), 0);
    // Warm up LLVM's process-wide state (target registry, pass registrations).
    for a in 0..20 {
        one_jit(a)?;
    }
    assert_eq!(jit_memory_in_use(), 0);
    let before = resident_bytes()?;
    for a in 0..300 {
        one_jit(a)?;
        assert_eq!(jit_memory_in_use(), 0);
    }
    let after = resident_bytes()?;
    let growth = after.saturating_sub(before);
    // 300 leaked JITs would hold at least 300 x 4 pages of sections plus the engines.
    assert!(
        growth < 4 << 20,
        "resident set grew by {growth} bytes over 300 JITs"
    );
    Ok(())
}
