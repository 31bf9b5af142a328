//! A module the caller owns (made with llvm-sys in the caller's own context, as inkwell and
//! C++ frontends make theirs), borrowed in place: Locus reads and changes it, and leaves the
//! module and the context to the caller, who uses and disposes them afterwards.

use std::ffi::CStr;
use std::ptr;

use llvm_sys::core::{
    LLVMContextCreate, LLVMContextDispose, LLVMCreateMemoryBufferWithMemoryRangeCopy,
    LLVMDisposeMessage, LLVMDisposeModule, LLVMGetFirstFunction, LLVMModuleCreateWithNameInContext,
    LLVMPrintModuleToString,
};
use llvm_sys::ir_reader::LLVMParseIRInContext;
use llvm_sys::prelude::{LLVMContextRef, LLVMModuleRef};
use locus_llvm::builder::Builder;
use locus_llvm::ir::Opcode;
use locus_llvm::{BorrowedModule, Context, Error};

const IR: &str = r#"
define i64 @f(i64 %a) {
  %dead = add i64 %a, 1
  %b = mul i64 %a, 3
  ret i64 %b
}
"#;

/// Parses `IR` into a module of the caller's raw context, as a frontend would own it.
fn caller_module(ctx: LLVMContextRef, text: &str) -> LLVMModuleRef {
    // SAFETY: the text is valid for its length and copied; the name is NUL-terminated.
    let buffer = unsafe {
        LLVMCreateMemoryBufferWithMemoryRangeCopy(text.as_ptr().cast(), text.len(), c"m".as_ptr())
    };
    let (mut module, mut message) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: a live context and buffer (consumed); valid out-pointers.
    let failed = unsafe { LLVMParseIRInContext(ctx, buffer, &mut module, &mut message) };
    assert_eq!(failed, 0, "the test's IR parses");
    module
}

/// The caller's own view of its module, printed with llvm-sys.
fn caller_print(module: LLVMModuleRef) -> String {
    // SAFETY: a live module; the string is released below.
    let text = unsafe { LLVMPrintModuleToString(module) };
    // SAFETY: a NUL-terminated string LLVM allocated.
    let s = unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: allocated by LLVM for us, released once.
    unsafe { LLVMDisposeMessage(text) };
    s
}

#[test]
fn borrowed_module_is_changed_in_place_and_left_to_its_owner() {
    // SAFETY: no preconditions; disposed at the end of the test.
    let raw_ctx = unsafe { LLVMContextCreate() };
    let raw = caller_module(raw_ctx, IR);
    {
        // SAFETY: the context is live for the whole block and used by nothing else.
        let ctx = unsafe { Context::borrow_raw(raw_ctx) }.expect("a non-null context");
        // SAFETY: the module is live, in that context, and untouched by the caller here.
        let module = unsafe { BorrowedModule::new(&ctx, raw) }.expect("a module of ctx");
        assert_eq!(module.as_raw(), raw);
        module.verify().expect("valid");
        assert_eq!(module.functions(), ["f"]);
        // Erase the dead instruction through Locus's builder: a change in place.
        let f = module.function("f").expect("@f");
        let dead = f
            .instructions()
            .into_iter()
            .find(|i| i.opcode() == Opcode::Add)
            .expect("the add");
        let b = Builder::new(&module);
        b.erase(dead).expect("no uses");
        // A clone is Locus's own module (disposed on drop), the original stays borrowed.
        let copy = module.clone();
        assert!(!copy.print().contains("%dead"));
        // Code generation works on a private copy in the caller's context.
        let object = locus_llvm::emit_object(&module, "x86_64-linux-gnu", "", "")
            .expect("the borrowed module compiles");
        assert_eq!(&object[..4], b"\x7fELF");
    }
    // Dropping the borrow disposed neither the module nor the context: the caller sees the
    // change and still owns both.
    let after = caller_print(raw);
    assert!(after.contains("%b = mul i64 %a, 3"), "{after}");
    assert!(!after.contains("%dead"), "{after}");
    // SAFETY: the caller's own module and context, disposed once, module first.
    unsafe { LLVMDisposeModule(raw) };
    // SAFETY: as above.
    unsafe { LLVMContextDispose(raw_ctx) };
}

#[test]
fn borrowing_refuses_null_and_foreign_modules() {
    // SAFETY: a null context is refused before any use.
    let err = unsafe { Context::borrow_raw(ptr::null_mut()) }.unwrap_err();
    assert!(matches!(err, Error::Borrow { .. }), "{err}");

    let ours = Context::new();
    // SAFETY: a null module is refused before any use.
    let err = unsafe { BorrowedModule::new(&ours, ptr::null_mut()) }.unwrap_err();
    assert!(err.to_string().contains("null"), "{err}");

    // A module of another context than the one given.
    // SAFETY: no preconditions; disposed below.
    let raw_ctx = unsafe { LLVMContextCreate() };
    // SAFETY: a live context; the name is NUL-terminated and copied.
    let raw = unsafe { LLVMModuleCreateWithNameInContext(c"other".as_ptr(), raw_ctx) };
    // SAFETY: `raw` is live; the context check refuses it before any other use.
    let err = unsafe { BorrowedModule::new(&ours, raw) }.unwrap_err();
    assert!(err.to_string().contains("not in"), "{err}");
    // SAFETY: an empty module has no function; the caller's module, still live.
    assert!(unsafe { LLVMGetFirstFunction(raw) }.is_null());
    // SAFETY: the caller's own module and context, disposed once, module first.
    unsafe { LLVMDisposeModule(raw) };
    // SAFETY: as above.
    unsafe { LLVMContextDispose(raw_ctx) };
}

#[test]
fn borrowed_invalid_module_is_reported_not_disposed() {
    // SAFETY: no preconditions; disposed at the end.
    let raw_ctx = unsafe { LLVMContextCreate() };
    // Parses, but LLVM's verifier refuses it (an "align" assumption needs a pointer and an
    // alignment), as `opt-19 -passes=verify` does.
    let raw = caller_module(
        raw_ctx,
        "declare void @llvm.assume(i1)\ndefine void @g(i1 %c) {\n  call void @llvm.assume(i1 %c) [\"align\"(i1 %c)]\n  ret void\n}\n",
    );
    {
        // SAFETY: live context and module, used by nothing else in this block.
        let ctx = unsafe { Context::borrow_raw(raw_ctx) }.expect("context");
        // SAFETY: as above.
        let module = unsafe { BorrowedModule::new(&ctx, raw) }.expect("module");
        let err = module.verify().unwrap_err();
        assert!(matches!(err, Error::Verify { .. }), "{err}");
    }
    assert!(caller_print(raw).contains("@g"));
    // SAFETY: the caller's own module and context, disposed once, module first.
    unsafe { LLVMDisposeModule(raw) };
    // SAFETY: as above.
    unsafe { LLVMContextDispose(raw_ctx) };
}
