//! Patches real LLVM patch points and stack map shadows in loaded code, and runs them.
//!
//! At test time `llc-19` compiles `tests/fixtures/patchpoint_live.ll` and `ld.lld-19`
//! links it into a shared object that the test `dlopen`s (a fresh copy per test, so that
//! the two tests never patch pages the other is running). The code pages of the loaded
//! object are read+execute; [`patch_call`] and [`patch_nops`] switch them to read+write
//! for the copy and back (W^X), which the tests check in `/proc/self/maps`.
//!
//! * `patch_point_call_is_retargeted`: `@dispatch(x)` calls `@old` (returns 1) through a
//!   16-byte `llvm.experimental.patchpoint.i64`. The record found by ID gives the start of
//!   the reserved region; before patching it holds exactly what [`encode_call`] encodes
//!   for `@old`'s run-time address (so the index's address is right, and the loader's
//!   text relocation of the `movabs` is visible). Patched to call a Rust function,
//!   `dispatch` returns that function's value and the function sees the argument; patched
//!   back to `@old`, the region is byte for byte the original and `dispatch` returns 1.
//! * `stack_map_shadow_is_patched`: `@shadowed(x)` = `@old(x) + x`, with a 13-byte stack
//!   map shadow right after the call whose bytes are only nops (the fixture forces the
//!   padding with a second stack map; the test checks it). The shadow is patched with a
//!   call to a register-preserving Rust hook, which runs with the return address just
//!   past the shadow and the caller's live values (`%rax` = `@old`'s result, `%rbx` =
//!   `x`) intact, and `shadowed` still returns `1 + x`; [`patch_nops`] then restores it.
//!
//! Missing LLVM 19 tools make the tests fail with a message saying so.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::ffi::c_void;
use std::fs;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use locus_stackmap::patch::{encode_call, encode_nops, patch_call, patch_nops};
use locus_stackmap::{Arch, IndexedRecord, RunTimeEndian};

type TestResult = Result<(), String>;

use crate::common;

use common::*;

// ---------------------------------------------------------------------------------------
// Looking at patch sites
// ---------------------------------------------------------------------------------------

/// The one record with ID `id`, found in both indexes at the same address.
fn record_by_id(
    maps: &StackMaps,
    id: u64,
) -> Result<IndexedRecord<'static, RunTimeEndian>, String> {
    let found: Vec<_> = maps.file.by_id(id).collect();
    let [found] = found[..] else {
        return Err(format!("{} records with ID {id} (file)", found.len()));
    };
    let in_memory: Vec<_> = maps.memory.by_id(id).map(|r| r.address).collect();
    if in_memory != [found.address] {
        return Err(format!(
            "ID {id}: file says {:#x}, memory {in_memory:x?}",
            found.address
        ));
    }
    Ok(found)
}

/// The `len` code bytes at `address`.
///
/// # Safety
///
/// The range is mapped and readable (loaded code), and nothing writes it meanwhile.
unsafe fn code_bytes(address: u64, len: usize) -> Vec<u8> {
    // SAFETY: forwarded from the caller.
    unsafe { std::slice::from_raw_parts(address as *const u8, len) }.to_vec()
}

/// The permissions (`r-xp` ...) of the mapping that holds `address`, from
/// `/proc/self/maps`.
fn protection_of(address: u64) -> Result<String, String> {
    let maps =
        fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps: {e}"))?;
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        else {
            continue;
        };
        if (start..end).contains(&address) {
            return Ok(perms.to_string());
        }
    }
    Err(format!("{address:#x} is in no mapping of /proc/self/maps"))
}

fn expect_read_execute(address: u64, when: &str) -> TestResult {
    let perms = protection_of(address)?;
    if perms.starts_with("r-x") {
        Ok(())
    } else {
        Err(format!(
            "code page at {address:#x} is {perms} {when}, expected r-x"
        ))
    }
}

type I64Fn = unsafe extern "C" fn(i64) -> i64;

fn function(loaded: &Loaded, name: &str) -> Result<(u64, I64Fn), String> {
    let p = loaded.symbol(name)?;
    // SAFETY: every function this test looks up is `i64 (i64)` in the fixture.
    Ok((p as u64, unsafe {
        std::mem::transmute::<*mut c_void, I64Fn>(p)
    }))
}

fn bytes_err(what: &str, got: &[u8], want: &[u8]) -> String {
    format!("{what}:\n  got  {got:02x?}\n  want {want:02x?}")
}

// ---------------------------------------------------------------------------------------
// Patch point
// ---------------------------------------------------------------------------------------

const PATCHPOINT_ID: u64 = 7;
/// The patch point's `numBytes` in the fixture.
const PATCHPOINT_BYTES: usize = 16;

static NEW_TARGET_CALLS: AtomicUsize = AtomicUsize::new(0);
static NEW_TARGET_ARG: AtomicI64 = AtomicI64::new(0);

/// What the patch point calls once patched.
extern "C" fn new_target(x: i64) -> i64 {
    NEW_TARGET_CALLS.fetch_add(1, Ordering::SeqCst);
    NEW_TARGET_ARG.store(x, Ordering::SeqCst);
    0x7e57_0000 + x
}

#[test]
fn patch_point_call_is_retargeted() -> TestResult {
    let dir = TempDir::new("patchpoint")?;
    let so = build_shared(&dir, "patchpoint_live")?;
    let loaded = Loaded::open(&so, "dispatch")?;
    let maps = stack_maps(&so, &loaded)?;
    let (old_address, _) = function(&loaded, "old")?;
    let (dispatch_address, dispatch) = function(&loaded, "dispatch")?;

    assert_eq!(
        // SAFETY: `dispatch` is unpatched: it calls `old`.
        unsafe { dispatch(5) },
        1,
        "before patching, dispatch reaches old"
    );

    let site = record_by_id(&maps, PATCHPOINT_ID)?;
    assert_eq!(
        site.function.address.wrapping_add(loaded.bias),
        dispatch_address
    );
    // A patch point records the registers live after it; the stack pointer always is.
    let live_outs: Vec<u16> = site.record.live_outs().map(|l| l.dwarf_reg).collect();
    assert!(live_outs.contains(&7), "live-outs {live_outs:?} lack %rsp");
    let address = site.address;
    // SAFETY: the region is in the loaded object's code, which only this test changes.
    let original = unsafe { code_bytes(address, PATCHPOINT_BYTES) };
    let want =
        encode_call(Arch::X86_64, old_address, PATCHPOINT_BYTES).map_err(|e| e.to_string())?;
    if original != want {
        return Err(bytes_err(
            "the patch point region is not LLVM's call to old",
            &original,
            &want,
        ));
    }
    expect_read_execute(address, "before patching")?;

    let new_address = new_target as *const () as u64;
    // SAFETY: `address` is the start of the patch point's 16-byte region in loaded code
    // that no other thread runs; `new_target` takes and returns i64 with the C calling
    // convention, as the patch point's call does.
    unsafe {
        patch_call(
            Arch::X86_64,
            address as *mut u8,
            PATCHPOINT_BYTES,
            new_address,
        )
    }
    .map_err(|e| format!("patching to new_target: {e}"))?;
    expect_read_execute(address, "after patching")?;
    // SAFETY: as for `original`.
    let patched = unsafe { code_bytes(address, PATCHPOINT_BYTES) };
    let want =
        encode_call(Arch::X86_64, new_address, PATCHPOINT_BYTES).map_err(|e| e.to_string())?;
    if patched != want {
        return Err(bytes_err("the patched region", &patched, &want));
    }

    assert_eq!(
        // SAFETY: `dispatch` now calls `new_target`, an `i64 (i64)` function.
        unsafe { dispatch(41) },
        0x7e57_0000 + 41,
        "after patching, dispatch reaches new_target"
    );
    assert_eq!(NEW_TARGET_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(
        NEW_TARGET_ARG.load(Ordering::SeqCst),
        41,
        "new_target received the argument"
    );

    // Back to old: the region is LLVM's original again.
    // SAFETY: as for the first patch; `old` is `i64 (i64)`.
    unsafe {
        patch_call(
            Arch::X86_64,
            address as *mut u8,
            PATCHPOINT_BYTES,
            old_address,
        )
    }
    .map_err(|e| format!("patching back to old: {e}"))?;
    expect_read_execute(address, "after patching back")?;
    // SAFETY: as for `original`.
    let restored = unsafe { code_bytes(address, PATCHPOINT_BYTES) };
    if restored != original {
        return Err(bytes_err(
            "the region patched back to old",
            &restored,
            &original,
        ));
    }
    assert_eq!(
        // SAFETY: `dispatch` calls `old` again.
        unsafe { dispatch(9) },
        1,
        "patched back, dispatch reaches old"
    );
    assert_eq!(
        NEW_TARGET_CALLS.load(Ordering::SeqCst),
        1,
        "new_target no longer called"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Stack map shadow
// ---------------------------------------------------------------------------------------

const SHADOW_ID: u64 = 9;
const AFTER_SHADOW_ID: u64 = 10;
/// The stack map's `numShadowBytes` in the fixture.
const SHADOW_BYTES: usize = 13;

static HOOK_CALLS: AtomicUsize = AtomicUsize::new(0);
static HOOK_RETURN: AtomicU64 = AtomicU64::new(0);
static HOOK_RAX: AtomicU64 = AtomicU64::new(0);
static HOOK_RBX: AtomicU64 = AtomicU64::new(0);

/// What the patched shadow calls. The shadow is not a call site: the code around it may
/// keep values in call-clobbered registers (here `%rax`, the result of the call just
/// before the shadow), so the hook saves all of them (`%r11` excepted, which the patch
/// sequence itself clobbers) and the flags, and reports the return address, `%rax` and
/// `%rbx` to `on_shadow`. On entry the stack is 8 mod 16 (the shadow starts right after
/// a call, at the caller's call-aligned stack pointer, and the patched call pushed the
/// return address); ten pushes (80 bytes) and 8 bytes of padding realign it to 16.
#[unsafe(naked)]
extern "C" fn shadow_hook() {
    core::arch::naked_asm!(
        "pushfq",
        "push rax",
        "push rcx",
        "push rdx",
        "push rsi",
        "push rdi",
        "push r8",
        "push r9",
        "push r10",
        "push r11",
        "mov rdi, [rsp + 80]",
        "mov rsi, rax",
        "mov rdx, rbx",
        "sub rsp, 8",
        "call {on_shadow}",
        "add rsp, 8",
        "pop r11",
        "pop r10",
        "pop r9",
        "pop r8",
        "pop rdi",
        "pop rsi",
        "pop rdx",
        "pop rcx",
        "pop rax",
        "popfq",
        "ret",
        on_shadow = sym on_shadow,
    );
}

extern "C" fn on_shadow(return_address: u64, rax: u64, rbx: u64) {
    HOOK_CALLS.fetch_add(1, Ordering::SeqCst);
    HOOK_RETURN.store(return_address, Ordering::SeqCst);
    HOOK_RAX.store(rax, Ordering::SeqCst);
    HOOK_RBX.store(rbx, Ordering::SeqCst);
}

#[test]
fn stack_map_shadow_is_patched() -> TestResult {
    let dir = TempDir::new("shadow")?;
    let so = build_shared(&dir, "patchpoint_live")?;
    let loaded = Loaded::open(&so, "shadowed")?;
    let maps = stack_maps(&so, &loaded)?;
    let (shadowed_address, shadowed) = function(&loaded, "shadowed")?;

    // SAFETY: unpatched `shadowed(x)` is `old(x) + x`.
    assert_eq!(unsafe { shadowed(5) }, 6);

    let site = record_by_id(&maps, SHADOW_ID)?;
    let next = record_by_id(&maps, AFTER_SHADOW_ID)?;
    assert_eq!(
        site.function.address.wrapping_add(loaded.bias),
        shadowed_address
    );
    let address = site.address;
    // The shadow ends where the next stack map begins, so LLVM padded it with nops and
    // no instruction of the function is in it: overwriting it is harmless here.
    if next.address != address + SHADOW_BYTES as u64 {
        return Err(format!(
            "stack map {AFTER_SHADOW_ID} is at {:#x}, not {SHADOW_BYTES} bytes after the shadow \
             at {address:#x}: the shadow holds code, the fixture no longer fits this test",
            next.address
        ));
    }
    // SAFETY: the shadow is in the loaded object's code, which only this test changes.
    let original = unsafe { code_bytes(address, SHADOW_BYTES) };
    let nops = encode_nops(Arch::X86_64, SHADOW_BYTES).map_err(|e| e.to_string())?;
    if original != nops {
        return Err(bytes_err(
            "the shadow is not LLVM's nop padding",
            &original,
            &nops,
        ));
    }

    let hook = shadow_hook as *const () as u64;
    // SAFETY: `address` starts the 13-byte shadow, only nops, in loaded code that no
    // other thread runs; `shadow_hook` preserves every register the code after the
    // shadow can use (`%r11` is dead right after a call) and returns to it.
    unsafe { patch_call(Arch::X86_64, address as *mut u8, SHADOW_BYTES, hook) }
        .map_err(|e| format!("patching the shadow: {e}"))?;
    expect_read_execute(address, "after patching the shadow")?;

    assert_eq!(
        // SAFETY: the patched `shadowed` calls the hook and goes on as before.
        unsafe { shadowed(5) },
        6,
        "the code after the shadow still ran, with %rax and %rbx intact"
    );
    assert_eq!(HOOK_CALLS.load(Ordering::SeqCst), 1, "the hook ran once");
    assert_eq!(
        HOOK_RETURN.load(Ordering::SeqCst),
        address + SHADOW_BYTES as u64,
        "the hook was called from the shadow's call sequence"
    );
    assert_eq!(HOOK_RAX.load(Ordering::SeqCst), 1, "%rax held old's result");
    assert_eq!(HOOK_RBX.load(Ordering::SeqCst), 5, "%rbx held x");

    // SAFETY: as for the patch; nops restore the original.
    unsafe { patch_nops(Arch::X86_64, address as *mut u8, SHADOW_BYTES) }
        .map_err(|e| format!("restoring the shadow: {e}"))?;
    expect_read_execute(address, "after restoring the shadow")?;
    // SAFETY: as for `original`.
    let restored = unsafe { code_bytes(address, SHADOW_BYTES) };
    if restored != original {
        return Err(bytes_err("the restored shadow", &restored, &original));
    }
    // SAFETY: unpatched again.
    assert_eq!(unsafe { shadowed(7) }, 8);
    assert_eq!(
        HOOK_CALLS.load(Ordering::SeqCst),
        1,
        "the hook no longer runs"
    );
    Ok(())
}
