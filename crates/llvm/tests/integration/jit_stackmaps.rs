//! The JIT that keeps its stack maps: records for every function compiled, at the
//! addresses the JIT gave the functions, whatever their code section is called; live
//! values of every location kind read from real frames at the stack map and patch point
//! (a trampoline saves the registers and hands Rust the return address, which the index
//! must know); failures returned as errors.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::error::Error as StdError;

use locus_llvm::jit_stackmaps::{SectionKind, StackMapJit, STACK_MAP_SECTIONS};
use locus_llvm::Error;
use locus_stackmap::{Frame, Location, LocationKind};

type TestResult = Result<(), Box<dyn StdError>>;

/// Two functions: `@first` has a stack map after a call with an alloca (Direct), twelve
/// values live across the call (Register and, beyond the callee-saved registers,
/// Indirect) and two constants (Constant, ConstantIndex); `@second`, in `.text.hot`, has a
/// patch point that calls the trampoline with two values and two constants.
const IR: &str = r#"
declare void @llvm.experimental.stackmap(i64, i32, ...)
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare i64 @capture()

define i64 @first(i64 %a, i64 %b) {
entry:
  %slot = alloca i64, align 8
  store i64 %b, ptr %slot
  %m0 = mul i64 %a, 3
  %v0 = add i64 %m0, 0
  %m1 = mul i64 %a, 4
  %v1 = add i64 %m1, 1
  %m2 = mul i64 %a, 5
  %v2 = add i64 %m2, 2
  %m3 = mul i64 %a, 6
  %v3 = add i64 %m3, 3
  %m4 = mul i64 %a, 7
  %v4 = add i64 %m4, 4
  %m5 = mul i64 %a, 8
  %v5 = add i64 %m5, 5
  %m6 = mul i64 %a, 9
  %v6 = add i64 %m6, 6
  %m7 = mul i64 %a, 10
  %v7 = add i64 %m7, 7
  %m8 = mul i64 %a, 11
  %v8 = add i64 %m8, 8
  %m9 = mul i64 %a, 12
  %v9 = add i64 %m9, 9
  %m10 = mul i64 %a, 13
  %v10 = add i64 %m10, 10
  %m11 = mul i64 %a, 14
  %v11 = add i64 %m11, 11
  %r = call i64 @capture()
  call void (i64, i32, ...) @llvm.experimental.stackmap(i64 1, i32 0, ptr %slot, i64 %v0, i64 %v1, i64 %v2, i64 %v3, i64 %v4, i64 %v5, i64 %v6, i64 %v7, i64 %v8, i64 %v9, i64 %v10, i64 %v11, i64 17, i64 1099511627776)
  %l = load i64, ptr %slot
  %s0 = add i64 %v0, %l
  %s1 = add i64 %s0, %v11
  ret i64 %s1
}

define i64 @second(i64 %a) section ".text.hot" {
entry:
  %w0 = xor i64 %a, 85
  %w1 = mul i64 %a, 7
  %r = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 2, i32 16, ptr @capture, i32 0, i64 %w0, i64 %w1, i64 -5, i64 81985529216486895)
  %t = add i64 %r, %w1
  ret i64 %t
}
"#;

/// What `@first`'s stack map must hold for arguments `a` and `b`: the alloca's contents,
/// then `a * (i + 3) + i` for i in 0..12, then the two constants.
fn first_values(a: u64, b: u64) -> Vec<u64> {
    let mut values = vec![b];
    values.extend((0..12u64).map(|i| a.wrapping_mul(i + 3).wrapping_add(i)));
    values.extend([17, 1 << 40]);
    values
}

/// What the trampoline returns to the compiled code.
const CAPTURE_RESULT: u64 = 1000;

/// The bytes `@second`'s patch point reserves.
const PATCH_BYTES: u64 = 16;

// The trampoline `@capture` resolves to: saves the 16 general registers in DWARF order,
// the stack pointer as it was before the call pushed the return address (DWARF 7) and the
// return address, and passes them to `on_capture`. The compiled caller's frame is intact
// meanwhile, so its spill slots and allocas can be read.
std::arch::global_asm!(
    ".pushsection .text",
    ".globl locus_test_capture",
    ".type locus_test_capture, @function",
    "locus_test_capture:",
    "sub rsp, 136",
    "mov [rsp + 0], rax",
    "mov [rsp + 8], rdx",
    "mov [rsp + 16], rcx",
    "mov [rsp + 24], rbx",
    "mov [rsp + 32], rsi",
    "mov [rsp + 40], rdi",
    "mov [rsp + 48], rbp",
    "lea rax, [rsp + 144]",
    "mov [rsp + 56], rax",
    "mov [rsp + 64], r8",
    "mov [rsp + 72], r9",
    "mov [rsp + 80], r10",
    "mov [rsp + 88], r11",
    "mov [rsp + 96], r12",
    "mov [rsp + 104], r13",
    "mov [rsp + 112], r14",
    "mov [rsp + 120], r15",
    "mov rax, [rsp + 136]",
    "mov [rsp + 128], rax",
    "mov rdi, rsp",
    "call {handler}",
    "add rsp, 136",
    "ret",
    ".size locus_test_capture, . - locus_test_capture",
    ".popsection",
    handler = sym on_capture,
);

extern "C" {
    fn locus_test_capture() -> u64;
}

/// What the trampoline saw at one call.
#[derive(Debug, Clone)]
struct Seen {
    return_address: u64,
    record_address: u64,
    id: u64,
    kinds: Vec<LocationKind>,
    /// Each location's value; for Direct, the 8 bytes at the address.
    values: Vec<u64>,
}

thread_local! {
    /// The JIT whose code is running on this thread.
    static CURRENT: Cell<*const StackMapJit> = const { Cell::new(std::ptr::null()) };
    /// What each trampoline call saw, or why it could not.
    static SEEN: RefCell<Vec<Result<Seen, String>>> = const { RefCell::new(Vec::new()) };
}

/// Registers 0..=15 and the return address, as the trampoline saved them.
struct Saved([u64; 17]);

impl Frame for Saved {
    fn register(&self, dwarf_reg: u16) -> Option<u64> {
        (dwarf_reg < 16).then(|| self.0[usize::from(dwarf_reg)])
    }

    fn read_memory(&self, address: u64, buf: &mut [u8]) -> bool {
        // SAFETY: the addresses come from the record of the frame that is stopped in the
        // trampoline: its spill slots and allocas, live for this call.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, buf.len()) };
        buf.copy_from_slice(bytes);
        true
    }
}

/// The trampoline's Rust half. Never panics (a panic here would abort): failures are kept
/// as strings for the test to report.
extern "C" fn on_capture(saved: *const [u64; 17]) -> u64 {
    // SAFETY: the trampoline passes its save area, 17 words, live for this call.
    let saved = Saved(unsafe { *saved });
    let jit = CURRENT.with(Cell::get);
    // SAFETY: the test sets `CURRENT` to a JIT that outlives the call into its code.
    let seen = match unsafe { jit.as_ref() } {
        Some(jit) => decode(jit, &saved),
        None => Err("no current JIT".to_owned()),
    };
    SEEN.with(|s| s.borrow_mut().push(seen));
    CAPTURE_RESULT
}

fn decode(jit: &StackMapJit, saved: &Saved) -> Result<Seen, String> {
    let return_address = saved.0[16];
    let index = jit.stack_maps();
    // A stack map's record is at the return address; a patch point's at the start of its
    // reserved bytes, which hold the call.
    let found = index
        .lookup(return_address)
        .next()
        .or_else(|| index.nearest_before(return_address))
        .ok_or_else(|| format!("no record at or before {return_address:#x}"))?;
    let mut kinds = Vec::new();
    let mut values = Vec::new();
    for location in found.record.locations() {
        kinds.push(location.kind());
        let value = saved.value(&location).map_err(|e| e.to_string())?;
        let value = match location {
            Location::Direct { .. } => {
                let mut word = [0u8; 8];
                saved.read_memory(value, &mut word);
                u64::from_le_bytes(word)
            }
            _ => value,
        };
        values.push(value);
    }
    Ok(Seen {
        return_address,
        record_address: found.address,
        id: found.record.id(),
        kinds,
        values,
    })
}

/// Compiles [`IR`] with `@capture` bound to the trampoline.
fn compile() -> Result<StackMapJit, Error> {
    let capture = locus_test_capture as *const () as usize;
    StackMapJit::new("stackmaps.ll", IR, &[("capture", capture)])
}

/// Calls `run` with `jit` current, and returns what the trampoline saw meanwhile.
fn seen_during(jit: &StackMapJit, run: impl FnOnce()) -> Result<Vec<Seen>, String> {
    CURRENT.with(|c| c.set(jit));
    SEEN.with(|s| s.borrow_mut().clear());
    run();
    CURRENT.with(|c| c.set(std::ptr::null()));
    SEEN.with(|s| s.borrow_mut().drain(..).collect())
}

#[test]
fn records_are_found_for_every_function_at_the_jits_addresses() -> TestResult {
    let jit = compile()?;
    let first = jit.function_address("first").ok_or("no @first")?;
    let second = jit.function_address("second").ok_or("no @second")?;
    assert_ne!(first, second);
    let index = jit.stack_maps();
    assert_eq!(index.len(), 2);
    assert_eq!(jit.stack_map_sections().count(), 1);
    let table_functions: BTreeSet<u64> = index
        .tables()
        .iter()
        .flat_map(|t| t.functions().map(|f| f.address))
        .collect();
    assert_eq!(table_functions, BTreeSet::from([first, second]));
    for found in index.iter() {
        let function = jit
            .function_at(found.address)
            .ok_or_else(|| format!("record at {:#x} lies in no function", found.address))?;
        assert_eq!(function.address, found.function.address);
        assert_eq!(
            found.address,
            found.function.address + u64::from(found.record.instruction_offset())
        );
    }
    let one = index.by_id(1).next().ok_or("no record 1")?;
    assert_eq!(one.function.address, first);
    let two = index.by_id(2).next().ok_or("no record 2")?;
    assert_eq!(two.function.address, second);
    Ok(())
}

#[test]
fn the_section_is_found_when_code_is_not_in_text() -> TestResult {
    let jit = compile()?;
    let second = jit.function_address("second").ok_or("no @second")?;
    let first = jit.function_address("first").ok_or("no @first")?;
    let code_of = |address: u64| {
        jit.sections()
            .iter()
            .find(|s| s.contains(address))
            .map(|s| (s.name.clone(), s.kind))
    };
    assert_eq!(
        code_of(second),
        Some((".text.hot".to_owned(), SectionKind::Code))
    );
    // MCJIT compiles x86-64 code for the large code model, whose code section is `.ltext`:
    // no function of this module is in `.text`.
    assert_eq!(
        code_of(first),
        Some((".ltext".to_owned(), SectionKind::Code))
    );
    assert!(jit.sections().iter().all(|s| s.name != ".text"));
    let stack_maps: Vec<_> = jit
        .sections()
        .iter()
        .filter(|s| STACK_MAP_SECTIONS.contains(&s.name.as_str()))
        .collect();
    assert_eq!(stack_maps.len(), 1);
    assert_eq!(stack_maps[0].kind, SectionKind::ReadOnlyData);
    Ok(())
}

#[test]
fn values_of_every_location_kind_are_read_from_live_frames() -> TestResult {
    let jit = compile()?;
    // SAFETY: `@first` is `i64 (i64, i64)` and `@second` `i64 (i64)` with the C calling
    // convention; `jit` outlives the calls; the trampoline does not unwind.
    let first: extern "C" fn(u64, u64) -> u64 = unsafe { jit.lookup_fn("first")? };
    // SAFETY: as above.
    let second: extern "C" fn(u64) -> u64 = unsafe { jit.lookup_fn("second")? };
    let mut kinds = BTreeSet::new();
    for (a, b) in [(5u64, 9u64), (1 << 33, u64::MAX - 3), (0, 0)] {
        let mut result = 0;
        let seen = seen_during(&jit, || result = first(a, b))?;
        let expected = first_values(a, b);
        assert_eq!(
            result,
            expected[1].wrapping_add(b).wrapping_add(expected[12])
        );
        let [seen] = seen.as_slice() else {
            return Err(format!("one trampoline call expected, saw {seen:?}").into());
        };
        assert_eq!(seen.id, 1);
        // A stack map after a call: its record is at the call's return address.
        assert_eq!(seen.return_address, seen.record_address);
        assert_eq!(seen.values, expected, "a = {a}, b = {b}");
        kinds.extend(seen.kinds.iter().map(|k| *k as u8));
    }
    for a in [4u64, 77, 1 << 40] {
        let mut result = 0;
        let seen = seen_during(&jit, || result = second(a))?;
        let (w0, w1) = (a ^ 85, a.wrapping_mul(7));
        assert_eq!(result, CAPTURE_RESULT.wrapping_add(w1));
        let [seen] = seen.as_slice() else {
            return Err(format!("one trampoline call expected, saw {seen:?}").into());
        };
        assert_eq!(seen.id, 2);
        // A patch point's record is at its reserved bytes, which hold the call.
        assert!(seen.record_address < seen.return_address);
        assert!(seen.return_address <= seen.record_address + PATCH_BYTES);
        assert_eq!(seen.values, [w0, w1, -5i64 as u64, 0x0123_4567_89ab_cdef]);
        kinds.extend(seen.kinds.iter().map(|k| *k as u8));
    }
    // Register, Direct, Indirect, Constant, ConstantIndex.
    assert_eq!(kinds, BTreeSet::from([1, 2, 3, 4, 5]));
    Ok(())
}

#[test]
fn code_is_never_writable_and_executable() -> TestResult {
    let jit = compile()?;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    for section in jit.sections() {
        let line = maps
            .lines()
            .find(|line| {
                let Some((range, _)) = line.split_once(' ') else {
                    return false;
                };
                let Some((start, end)) = range.split_once('-') else {
                    return false;
                };
                let (Ok(start), Ok(end)) =
                    (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
                else {
                    return false;
                };
                (start..end).contains(&section.address)
            })
            .ok_or_else(|| format!("{} is not mapped", section.name))?;
        let perms = line.split_whitespace().nth(1).unwrap_or("");
        let expected = match section.kind {
            SectionKind::Code => "r-x",
            SectionKind::ReadOnlyData => "r--",
            SectionKind::Data => "rw-",
        };
        assert!(perms.starts_with(expected), "{}: {line}", section.name);
    }
    Ok(())
}

#[test]
fn a_module_without_stack_maps_has_an_empty_index() -> TestResult {
    let jit = StackMapJit::new(
        "plain.ll",
        "define i64 @one() {\n  ret i64 1\n}\n",
        &[("capture", 8)],
    )?;
    assert!(jit.stack_maps().is_empty());
    assert_eq!(jit.stack_map_sections().count(), 0);
    // SAFETY: `@one` is `i64 ()`; `jit` lives on.
    let one: extern "C" fn() -> i64 = unsafe { jit.lookup_fn("one")? };
    assert_eq!(one(), 1);
    Ok(())
}

#[test]
fn libc_resolves_from_the_process() -> TestResult {
    let ir = r#"
declare i64 @strlen(ptr)
@text = private constant [6 x i8] c"locus\00"
define i64 @len() {
  %n = call i64 @strlen(ptr @text)
  ret i64 %n
}
"#;
    let jit = StackMapJit::new("strlen.ll", ir, &[])?;
    // SAFETY: `@len` is `i64 ()`; `jit` lives on.
    let len: extern "C" fn() -> i64 = unsafe { jit.lookup_fn("len")? };
    assert_eq!(len(), 5);
    Ok(())
}

#[test]
fn failures_are_errors_that_name_the_cause() {
    let unresolved = "declare i64 @locus_nowhere_at_all()\ndefine i64 @f() {\n  %r = call i64 @locus_nowhere_at_all()\n  ret i64 %r\n}\n";
    match StackMapJit::new("unresolved.ll", unresolved, &[]) {
        Err(Error::Jit { message }) => {
            assert!(message.contains("locus_nowhere_at_all"), "{message}")
        }
        other => panic!("expected Error::Jit, got {other:?}"),
    }
    match StackMapJit::new("bad.ll", "define i64 @f( {", &[]) {
        Err(Error::Parse { message }) => assert!(message.contains("bad.ll"), "{message}"),
        other => panic!("expected Error::Parse, got {other:?}"),
    }
    let defined = "define i64 @f() {\n  ret i64 1\n}\n";
    match StackMapJit::new("defined.ll", defined, &[("f", 8)]) {
        Err(Error::Jit { message }) => assert!(message.contains("`f`"), "{message}"),
        other => panic!("expected Error::Jit, got {other:?}"),
    }
    let invalid = "define i64 @f() {\n  %a = add i64 %b, 1\n  %b = add i64 1, 1\n  ret i64 %a\n}\n";
    assert!(matches!(
        StackMapJit::new("invalid.ll", invalid, &[]),
        Err(Error::Verify { .. })
    ));
}

/// MCJIT's C API sets every function's `"frame-pointer"` from one engine option, so only
/// `from_module_with_frame_pointers` keeps the frame pointer a stack walk follows: its
/// code starts `push %rbp; mov %rsp, %rbp` (55 48 89 e5), the plain JIT's does not, even
/// for a function that asks for it.
#[test]
fn frame_pointers_are_kept_only_when_asked() -> TestResult {
    let ctx = locus_llvm::Context::new();
    let module = locus_llvm::Module::parse_ir(
        &ctx,
        "fp.ll",
        r#"
        declare void @g(i64)
        define i64 @f(i64 %a) "frame-pointer"="all" {
          call void @g(i64 %a)
          %b = add i64 %a, 1
          ret i64 %b
        }
        "#,
    )?;
    extern "C" fn g(_: i64) {}
    let symbols = [("g", g as extern "C" fn(i64) as usize)];
    let prologue = |jit: &StackMapJit| -> Result<[u8; 4], Box<dyn StdError>> {
        let f = jit.function_address("f").ok_or("no @f")?;
        // SAFETY: `f`'s code is mapped readable and executable while `jit` lives, and is
        // longer than four bytes.
        Ok(unsafe { std::ptr::read(f as *const [u8; 4]) })
    };
    let kept = StackMapJit::from_module_with_frame_pointers(&module, &symbols)?;
    assert_eq!(prologue(&kept)?, [0x55, 0x48, 0x89, 0xe5]);
    let plain = StackMapJit::from_module(&module, &symbols)?;
    assert_ne!(prologue(&plain)?[0], 0x55);
    Ok(())
}
