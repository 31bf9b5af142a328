//! The ORC JIT: IR compiled in this process and called from Rust, host functions called
//! from IR, libc through the process's symbols, and failures (unresolved externals, bad
//! IR, duplicate definitions) returned as errors instead of ending the process.

use std::error::Error as StdError;

use locus_llvm::jit::Jit;
use locus_llvm::{Context, Error, Module};

type TestResult = Result<(), Box<dyn StdError>>;

const ADD: &str = r#"
define i64 @add(i64 %a, i64 %b) {
  %sum = add i64 %a, %b
  ret i64 %sum
}
"#;

/// The message of an [`Error::Jit`]; any other result fails the test.
fn jit_message<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Jit { message }) => message,
        other => panic!("expected Error::Jit, got {other:?}"),
    }
}

#[test]
fn jits_and_calls_a_function() -> TestResult {
    let mut jit = Jit::new()?;
    assert!(!jit.triple().is_empty());
    jit.add_ir("add.ll", ADD)?;
    assert_ne!(jit.lookup("add")?, 0);
    // SAFETY: `@add` is `i64 (i64, i64)` with the C calling convention; `jit` lives on.
    let add: extern "C" fn(i64, i64) -> i64 = unsafe { jit.lookup_fn("add")? };
    assert_eq!(add(2, 40), 42);
    assert_eq!(add(-5, 3), -2);
    assert_eq!(add(i64::MAX, 1), i64::MIN);
    Ok(())
}

#[test]
fn add_module_copies_the_callers_module() -> TestResult {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "add.ll", ADD)?;
    let before = module.print();
    let mut jit = Jit::new()?;
    jit.add_module(&module)?;
    // SAFETY: as in `jits_and_calls_a_function`.
    let add: extern "C" fn(i64, i64) -> i64 = unsafe { jit.lookup_fn("add")? };
    assert_eq!(add(20, 22), 42);
    // The caller's module is untouched, usable, and may outlive the JIT.
    drop(jit);
    assert_eq!(module.print(), before);
    assert_eq!(module.functions(), ["add"]);
    module.verify()?;
    Ok(())
}

#[test]
fn global_data_can_be_looked_up() -> TestResult {
    let mut jit = Jit::new()?;
    jit.add_ir(
        "data.ll",
        r#"
@counter = global i64 5
define i64 @bump() {
  %v = load i64, ptr @counter
  %n = add i64 %v, 1
  store i64 %n, ptr @counter
  ret i64 %n
}
"#,
    )?;
    // SAFETY: `@counter` is an `i64` global; `jit` lives on.
    let counter = unsafe { jit.lookup_fn::<*mut i64>("counter")? };
    // SAFETY: `@bump` is `i64 ()`; `jit` lives on.
    let bump = unsafe { jit.lookup_fn::<extern "C" fn() -> i64>("bump")? };
    assert_eq!(bump(), 6);
    // SAFETY: the global lives as long as the JIT, and nothing else touches it now.
    assert_eq!(unsafe { *counter }, 6);
    // SAFETY: as above.
    unsafe { *counter = 100 };
    assert_eq!(bump(), 101);
    Ok(())
}

/// What [`host_record`] saw.
#[repr(C)]
#[derive(Default)]
struct Seen {
    calls: i64,
    a: i64,
    b: i64,
}

/// A host function the IR calls: records its arguments, returns a value made of them.
extern "C" fn host_record(seen: *mut Seen, a: i64, b: i64) -> i64 {
    // SAFETY: the test passes a pointer to a live `Seen` that nothing else uses meanwhile.
    let seen = unsafe { &mut *seen };
    seen.calls += 1;
    seen.a = a;
    seen.b = b;
    a * 1000 + b
}

#[test]
fn ir_calls_a_host_function() -> TestResult {
    let mut jit = Jit::new()?;
    jit.define_symbol("locus_host_record", host_record as *const () as usize)?;
    jit.add_ir(
        "host.ll",
        r#"
declare i64 @locus_host_record(ptr, i64, i64)

define i64 @call_host(ptr %seen, i64 %x) {
  %y = mul i64 %x, 2
  %r = call i64 @locus_host_record(ptr %seen, i64 %x, i64 %y)
  %s = add i64 %r, 1
  ret i64 %s
}
"#,
    )?;
    // SAFETY: `@call_host` is `i64 (ptr, i64)`; the pointer is valid for the call.
    let call_host: extern "C" fn(*mut Seen, i64) -> i64 = unsafe { jit.lookup_fn("call_host")? };
    let mut seen = Seen::default();
    assert_eq!(call_host(&mut seen, 21), 21 * 1000 + 42 + 1);
    assert_eq!((seen.calls, seen.a, seen.b), (1, 21, 42));
    assert_eq!(call_host(&mut seen, -3), -3 * 1000 - 6 + 1);
    assert_eq!((seen.calls, seen.a, seen.b), (2, -3, -6));
    // The host symbol itself can be looked up and is the address defined.
    assert_eq!(
        jit.lookup("locus_host_record")?,
        host_record as *const () as usize as u64
    );
    Ok(())
}

#[test]
fn define_symbol_rejects_duplicates_null_and_nul() -> TestResult {
    let mut jit = Jit::new()?;
    jit.define_symbol("locus_host_record", host_record as *const () as usize)?;
    let message =
        jit_message(jit.define_symbol("locus_host_record", host_record as *const () as usize));
    assert!(message.contains("locus_host_record"), "{message}");
    let message = jit_message(jit.define_symbol("locus_null", 0));
    assert!(message.contains("locus_null"), "{message}");
    jit_message(jit.define_symbol("bad\0name", host_record as *const () as usize));
    // A module defining a name already defined is refused when added.
    let message = jit_message(jit.add_ir(
        "dup.ll",
        "define void @locus_host_record() {\n  ret void\n}\n",
    ));
    assert!(message.contains("locus_host_record"), "{message}");
    Ok(())
}

#[test]
fn ir_calls_libc_through_the_process_symbols() -> TestResult {
    let mut jit = Jit::new()?;
    jit.add_ir(
        "strlen.ll",
        r#"
@.str = private unnamed_addr constant [27 x i8] c"hello from the locus JIT!\0A\00"
declare i64 @strlen(ptr)

define i64 @length() {
  %n = call i64 @strlen(ptr @.str)
  ret i64 %n
}
"#,
    )?;
    // SAFETY: `@length` is `i64 ()`.
    let length: extern "C" fn() -> i64 = unsafe { jit.lookup_fn("length")? };
    assert_eq!(length(), 26);
    Ok(())
}

extern "C" fn fake_getpid() -> i32 {
    -7
}

#[test]
fn explicit_definitions_win_over_process_symbols() -> TestResult {
    let pid_ir = |name: &str| {
        format!(
            "declare i32 @getpid()\n\
             define i32 @{name}() {{\n  %p = call i32 @getpid()\n  ret i32 %p\n}}\n"
        )
    };
    let mut jit = Jit::new()?;
    // First the process's `getpid`...
    jit.add_ir("real.ll", pid_ir("real_pid"))?;
    // SAFETY: `@real_pid` is `i32 ()`.
    let real_pid: extern "C" fn() -> i32 = unsafe { jit.lookup_fn("real_pid")? };
    assert_eq!(u32::try_from(real_pid())?, std::process::id());
    // ...then a definition of the same name, which is no conflict and binds later modules.
    jit.define_symbol("getpid", fake_getpid as *const () as usize)?;
    jit.add_ir("fake.ll", pid_ir("fake_pid"))?;
    // SAFETY: `@fake_pid` is `i32 ()`.
    let fake_pid: extern "C" fn() -> i32 = unsafe { jit.lookup_fn("fake_pid")? };
    assert_eq!(fake_pid(), -7);
    assert_eq!(u32::try_from(real_pid())?, std::process::id());
    Ok(())
}

#[test]
fn an_unresolved_external_is_an_error_naming_it() -> TestResult {
    let mut jit = Jit::new()?;
    // Added lazily: the missing symbol is not noticed yet.
    jit.add_ir(
        "missing.ll",
        r#"
declare i64 @locus_no_such_function(i64)

define i64 @calls_missing(i64 %x) {
  %r = call i64 @locus_no_such_function(i64 %x)
  ret i64 %r
}
"#,
    )?;
    let message = jit_message(jit.lookup("calls_missing"));
    assert!(message.contains("locus_no_such_function"), "{message}");
    assert!(message.contains("calls_missing"), "{message}");
    // Still an error the second time (naming only the symbol asked for), not a crash.
    let message = jit_message(jit.lookup("calls_missing"));
    assert!(message.contains("calls_missing"), "{message}");

    // The JIT stays usable for other modules.
    jit.add_ir("add.ll", ADD)?;
    // SAFETY: as in `jits_and_calls_a_function`.
    let add: extern "C" fn(i64, i64) -> i64 = unsafe { jit.lookup_fn("add")? };
    assert_eq!(add(1, 2), 3);
    Ok(())
}

#[test]
fn an_unknown_symbol_is_an_error_naming_it() -> TestResult {
    let jit = Jit::new()?;
    let message = jit_message(jit.lookup("locus_never_defined"));
    assert!(message.contains("locus_never_defined"), "{message}");
    // SAFETY: never called: the lookup fails.
    let result = unsafe { jit.lookup_fn::<extern "C" fn()>("locus_never_defined") };
    assert!(matches!(result, Err(Error::Jit { .. })));
    jit_message(jit.lookup("nul\0inside"));
    Ok(())
}

#[test]
fn bad_ir_is_an_error() -> TestResult {
    let mut jit = Jit::new()?;
    match jit.add_ir("bad.ll", "define i64 @f( {\n") {
        Err(Error::Parse { message }) => assert!(message.contains("bad.ll:"), "{message}"),
        other => panic!("expected Error::Parse, got {other:?}"),
    }
    // Parses, but the verifier rejects it (the return type does not match).
    let invalid = "define i64 @f() {\n  ret i32 0\n}\n";
    assert!(matches!(
        jit.add_ir("invalid.ll", invalid),
        Err(Error::Parse { .. } | Error::Verify { .. })
    ));
    let not_dominated =
        "define i64 @g(i64 %a) {\n  %x = add i64 %y, 1\n  %y = add i64 %a, 1\n  ret i64 %x\n}\n";
    assert!(matches!(
        jit.add_ir("invalid.ll", not_dominated),
        Err(Error::Verify { .. })
    ));
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "invalid.ll", not_dominated)?;
    assert!(matches!(jit.add_module(&module), Err(Error::Verify { .. })));
    // Nothing of it was added.
    jit_message(jit.lookup("g"));
    Ok(())
}

#[test]
fn two_jits_in_one_process() -> TestResult {
    let answer = |value: i64| format!("define i64 @answer() {{\n  ret i64 {value}\n}}\n");
    let mut first = Jit::new()?;
    let mut second = Jit::new()?;
    first.add_ir("one.ll", answer(1))?;
    second.add_ir("two.ll", answer(2))?;
    // SAFETY: `@answer` is `i64 ()`; `first` outlives its use.
    let one: extern "C" fn() -> i64 = unsafe { first.lookup_fn("answer")? };
    // SAFETY: as above, in `second`.
    let two: extern "C" fn() -> i64 = unsafe { second.lookup_fn("answer")? };
    assert_eq!((one(), two()), (1, 2));
    drop(first);
    assert_eq!(two(), 2);

    // One per thread, at the same time.
    let threads: Vec<_> = (0..4_i64)
        .map(|i| {
            let ir = answer(100 + i);
            std::thread::spawn(move || -> Result<i64, Error> {
                let mut jit = Jit::new()?;
                jit.add_ir("thread.ll", &ir)?;
                // SAFETY: `@answer` is `i64 ()`; `jit` outlives the call.
                let f: extern "C" fn() -> i64 = unsafe { jit.lookup_fn("answer")? };
                Ok(f())
            })
        })
        .collect();
    for (i, thread) in (0..4_i64).zip(threads) {
        let value = thread.join().map_err(|_| "a JIT thread panicked")??;
        assert_eq!(value, 100 + i);
    }
    Ok(())
}

/// Called at the safepoint: counts calls.
extern "C" fn locus_poll(counter: *mut i64) {
    // SAFETY: the test passes a pointer to a live counter.
    unsafe { *counter += 1 };
}

/// A function with the statepoint GC strategy and an explicit statepoint: the GC pointer
/// (`addrspace(1)`, as "statepoint-example" expects) is live across the call and read
/// through its relocation afterwards.
const STATEPOINT: &str = r#"
declare void @locus_poll(ptr)
declare token @llvm.experimental.gc.statepoint.p0(i64, i32, ptr, i32, i32, ...)
declare ptr addrspace(1) @llvm.experimental.gc.relocate.p1(token, i32, i32)

define i64 @read_after_safepoint(ptr addrspace(1) %obj, ptr %counter) gc "statepoint-example" {
entry:
  %tok = call token (i64, i32, ptr, i32, i32, ...) @llvm.experimental.gc.statepoint.p0(i64 42, i32 0, ptr elementtype(void (ptr)) @locus_poll, i32 1, i32 0, ptr %counter, i32 0, i32 0) [ "gc-live"(ptr addrspace(1) %obj) ]
  %obj.relocated = call ptr addrspace(1) @llvm.experimental.gc.relocate.p1(token %tok, i32 0, i32 0)
  %field = getelementptr i64, ptr addrspace(1) %obj.relocated, i64 1
  %v = load i64, ptr addrspace(1) %field
  ret i64 %v
}
"#;

#[test]
fn a_statepoint_module_compiles_and_runs() -> TestResult {
    let mut jit = Jit::new()?;
    jit.define_symbol("locus_poll", locus_poll as *const () as usize)?;
    jit.add_ir("statepoint.ll", STATEPOINT)?;
    // SAFETY: `@read_after_safepoint` is `i64 (ptr addrspace(1), ptr)`; address spaces
    // are the same 64-bit pointers in the C ABI.
    let read: extern "C" fn(*const i64, *mut i64) -> i64 =
        unsafe { jit.lookup_fn("read_after_safepoint")? };
    let object = [7_i64, 42];
    let mut counter = 0_i64;
    assert_eq!(read(object.as_ptr(), &mut counter), 42);
    assert_eq!(counter, 1);
    assert_eq!(read(object.as_ptr(), &mut counter), 42);
    assert_eq!(counter, 2);
    Ok(())
}

extern "C" fn locus_read10(p: *const i64) -> i64 {
    // SAFETY: the IR passes on the pointer the test gave it, to a live `[i64; 2]`, so the
    // second element is in bounds.
    let second = unsafe { p.add(1) };
    // SAFETY: as above.
    unsafe { *second }
}

/// `addrspace(10)` pointers (as in code before GC lowering) passed in, loaded through,
/// offset, cast, returned, handed to a host function, and live across a statepoint (as a
/// plain value: "statepoint-example" relocates only `addrspace(1)`).
const ADDRSPACE10: &str = r#"
declare i64 @locus_read10(ptr addrspace(10))
declare void @locus_poll(ptr)
declare token @llvm.experimental.gc.statepoint.p0(i64, i32, ptr, i32, i32, ...)
declare ptr addrspace(1) @llvm.experimental.gc.relocate.p1(token, i32, i32)

define i64 @pass10(ptr addrspace(10) %p) {
  %a = load i64, ptr addrspace(10) %p
  %b = call i64 @locus_read10(ptr addrspace(10) %p)
  %q = addrspacecast ptr addrspace(10) %p to ptr
  %g = getelementptr i64, ptr %q, i64 1
  %c = load i64, ptr %g
  %ab = add i64 %a, %b
  %abc = add i64 %ab, %c
  ret i64 %abc
}

define ptr addrspace(10) @identity10(ptr addrspace(10) %p) {
  ret ptr addrspace(10) %p
}

define i64 @safepoint10(ptr addrspace(10) %p, ptr addrspace(1) %obj, ptr %counter) gc "statepoint-example" {
entry:
  %tok = call token (i64, i32, ptr, i32, i32, ...) @llvm.experimental.gc.statepoint.p0(i64 7, i32 0, ptr elementtype(void (ptr)) @locus_poll, i32 1, i32 0, ptr %counter, i32 0, i32 0) [ "gc-live"(ptr addrspace(1) %obj) ]
  %obj.relocated = call ptr addrspace(1) @llvm.experimental.gc.relocate.p1(token %tok, i32 0, i32 0)
  %a = load i64, ptr addrspace(1) %obj.relocated
  %b = load i64, ptr addrspace(10) %p
  %ab = add i64 %a, %b
  ret i64 %ab
}
"#;

#[test]
fn addrspace_10_pointers_pass_through() -> TestResult {
    let mut jit = Jit::new()?;
    jit.define_symbol("locus_read10", locus_read10 as *const () as usize)?;
    jit.define_symbol("locus_poll", locus_poll as *const () as usize)?;
    jit.add_ir("addrspace10.ll", ADDRSPACE10)?;
    // SAFETY: the signatures below match the IR (`ptr addrspace(10)` is a plain pointer
    // in the C ABI); the pointers are valid for the calls.
    let pass10 = unsafe { jit.lookup_fn::<extern "C" fn(*const i64) -> i64>("pass10")? };
    // SAFETY: as above.
    let identity10 =
        unsafe { jit.lookup_fn::<extern "C" fn(*const i64) -> *const i64>("identity10")? };
    // SAFETY: as above.
    let safepoint10 = unsafe {
        jit.lookup_fn::<extern "C" fn(*const i64, *const i64, *mut i64) -> i64>("safepoint10")?
    };
    let object = [5_i64, 100];
    assert_eq!(pass10(object.as_ptr()), 5 + 100 + 100);
    assert_eq!(identity10(object.as_ptr()), object.as_ptr());
    let mut counter = 0_i64;
    let other = [1000_i64];
    assert_eq!(
        safepoint10(object.as_ptr(), other.as_ptr(), &mut counter),
        5 + 1000
    );
    assert_eq!(counter, 1);
    Ok(())
}

#[test]
fn statepoint_example_relocates_only_addrspace_1() -> TestResult {
    // The built-in strategy treats `addrspace(1)` as GC pointers, nothing else: the
    // verifier rejects a relocation of an `addrspace(10)` value (before any code is made).
    let ir = STATEPOINT
        .replace("addrspace(1)", "addrspace(10)")
        .replace("relocate.p1", "relocate.p10");
    let mut jit = Jit::new()?;
    match jit.add_ir("relocate10.ll", ir) {
        Err(Error::Verify { message }) => {
            assert!(
                message.contains("gc.relocate: must return gc pointer"),
                "{message}"
            );
        }
        other => panic!("expected Error::Verify, got {other:?}"),
    }
    Ok(())
}

#[test]
fn codegen_errors_are_reported_not_fatal() -> TestResult {
    let mut jit = Jit::new()?;
    jit.add_ir(
        "asm.ll",
        r#"
define void @bad_asm() {
  call void asm sideeffect "locus_not_an_instruction", ""()
  ret void
}
"#,
    )?;
    let message = jit_message(jit.lookup("bad_asm"));
    assert!(message.contains("locus_not_an_instruction"), "{message}");
    assert!(message.contains("bad_asm"), "{message}");
    // The module failed to materialize: its code is never handed out.
    let message = jit_message(jit.lookup("bad_asm"));
    assert!(message.contains("bad_asm"), "{message}");
    // And the JIT goes on.
    jit.add_ir("add.ll", ADD)?;
    assert_ne!(jit.lookup("add")?, 0);
    Ok(())
}
