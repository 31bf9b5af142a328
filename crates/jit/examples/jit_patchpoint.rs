//! A JIT reading live values from a frame through its stack maps, then patching the site.
//!
//! `StackMapJit` compiles IR with LLVM 19's MCJIT and keeps the code's stack maps, indexed
//! by absolute address. `@compute` has a patch point: 16 reserved bytes that LLVM fills
//! with a call to `@capture`, and a stack map record saying where `%x` and `%y` live at that
//! moment (a register or a stack slot: LLVM decides). The runtime side:
//! 1. `@capture` is a trampoline made with `locus_jit::capture_trampoline!`: it saves every
//!    general register and hands them, with the return address, to Rust; Rust finds the
//!    record from the return address and reads `%x` and `%y` from the stopped frame
//!    (`SavedRegisters::frame`, a `locus_stackmap::Frame`);
//! 2. once it has seen the site, the runtime patches it (`patch::patch_call`, W^X: the page
//!    is never writable and executable at once) to call a specialized Rust function
//!    directly, and the next call never enters the trampoline.
//!
//! x86-64 Linux only (the trampoline is x86-64 assembly); elsewhere it says so and exits 0.
//! Run: `cargo run -p locus-jit --example jit_patchpoint`. Exits 1 on any error or wrong
//! value.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod x86_64 {
    use std::cell::{Cell, RefCell};

    use locus_jit::SavedRegisters;
    use locus_llvm::jit_stackmaps::StackMapJit;
    use locus_stackmap::patch::patch_call;
    use locus_stackmap::{Arch, Frame};

    /// The patch point: ID 7, 16 bytes reserved, calling `@capture` with no arguments, with
    /// `%x`, `%y` and a constant recorded as live values.
    const IR: &str = r#"
declare i64 @llvm.experimental.patchpoint.i64(i64, i32, ptr, i32, ...)
declare i64 @capture()

define i64 @compute(i64 %a, i64 %b) {
  %x = mul i64 %a, 3
  %y = add i64 %b, 100
  %r = call i64 (i64, i32, ptr, i32, ...) @llvm.experimental.patchpoint.i64(i64 7, i32 16, ptr @capture, i32 0, i64 %x, i64 %y, i64 5)
  %t = add i64 %r, %x
  ret i64 %t
}
"#;

    /// The bytes the patch point reserves (its second operand: the stack map does not
    /// record it, so the runtime remembers what it asked for).
    const RESERVED: usize = 16;

    // The trampoline: saves the 16 general registers, rsp as it was at the call site and
    // the return address, and passes them to `on_capture`; what `on_capture` returns is
    // the patch point's result. The compiled frame stays intact meanwhile, so its stack
    // slots can be read.
    locus_jit::capture_trampoline!(fn locus_example_capture => on_capture);

    /// What the runtime found at one trampoline call: the record's ID and address and the
    /// value of each of its locations.
    #[derive(Debug)]
    struct Seen {
        id: u64,
        site: u64,
        values: Vec<u64>,
    }

    thread_local! {
        /// The JIT whose code runs on this thread (the trampoline has no other way to it).
        static CURRENT: Cell<*const StackMapJit> = const { Cell::new(std::ptr::null()) };
        /// What each trampoline call found, or why it could not.
        static SEEN: RefCell<Vec<Result<Seen, String>>> = const { RefCell::new(Vec::new()) };
    }

    /// The trampoline's Rust half. Must not panic (it would unwind into JIT code), so
    /// failures are kept as strings.
    extern "C" fn on_capture(saved: &SavedRegisters) -> u64 {
        let jit = CURRENT.with(Cell::get);
        // SAFETY: `CURRENT` is set to a JIT that outlives every call into its code.
        let found = match unsafe { jit.as_ref() } {
            Some(jit) => read_values(jit, saved),
            None => Err("no current JIT".to_string()),
        };
        let sum = found.as_ref().map_or(0, |seen| seen.values.iter().sum());
        SEEN.with(|s| s.borrow_mut().push(found));
        sum
    }

    /// Finds the record of the site that called the trampoline and reads its values.
    fn read_values(jit: &StackMapJit, saved: &SavedRegisters) -> Result<Seen, String> {
        let return_address = saved.return_address();
        // A patch point's record is at the start of its reserved bytes, which hold the
        // call: the nearest record before the return address.
        let found = jit
            .stack_maps()
            .nearest_before(return_address)
            .ok_or_else(|| format!("no stack map record before {return_address:#x}"))?;
        // SAFETY: the locations are the record's of the frame stopped in the trampoline:
        // its registers and stack slots, live during this call.
        let frame = unsafe { saved.frame() };
        let values = found
            .record
            .locations()
            .map(|location| frame.value(&location).map_err(|e| e.to_string()))
            .collect::<Result<Vec<u64>, String>>()?;
        Ok(Seen {
            id: found.record.id(),
            site: found.address,
            values,
        })
    }

    /// What the patched site calls instead of the trampoline.
    extern "C" fn specialized() -> u64 {
        1000
    }

    pub fn main() -> Result<(), String> {
        let capture = locus_example_capture as *const () as usize;
        let jit = StackMapJit::new("compute.ll", IR, &[("capture", capture)])
            .map_err(|e| e.to_string())?;
        println!(
            "compiled: {} function(s), {} stack map record(s)",
            jit.functions().len(),
            jit.stack_maps().len()
        );
        // SAFETY: `@compute` is `i64 (i64, i64)` with the C calling convention, `jit`
        // outlives every call, and the trampoline does not unwind.
        let compute: extern "C" fn(u64, u64) -> u64 =
            unsafe { jit.lookup_fn("compute") }.map_err(|e| e.to_string())?;

        // 1. Through the trampoline: the runtime reads x = 3a and y = b + 100 live.
        CURRENT.with(|c| c.set(&jit));
        let result = compute(5, 9);
        let seen: Vec<_> = SEEN.with(|s| s.borrow_mut().drain(..).collect());
        let [Ok(Seen { id, site, values })] = seen.as_slice() else {
            return Err(format!("one record expected, saw {seen:?}"));
        };
        println!(
            "compute(5, 9) = {result}: patch point {id} at {site:#x} saw live values {values:?}"
        );
        if values.as_slice() != [15, 109, 5] || result != 15 + 109 + 5 + 15 {
            return Err("expected x = 15, y = 109, 5 and a result of 144".into());
        }

        // 2. Patch the site to call `specialized` directly.
        // SAFETY: `site` starts the patch point's 16 reserved bytes in code this JIT owns;
        // no thread runs that code meanwhile; `specialized` has the patch point's calling
        // convention (C, no arguments, i64 result).
        unsafe {
            patch_call(
                Arch::X86_64,
                *site as *mut u8,
                RESERVED,
                specialized as *const () as u64,
            )
        }
        .map_err(|e| e.to_string())?;
        let result = compute(5, 9);
        let entered = SEEN.with(|s| s.borrow().len());
        CURRENT.with(|c| c.set(std::ptr::null()));
        println!("patched: compute(5, 9) = {result}, trampoline entered {entered} time(s)");
        if result != 1015 || entered != 0 {
            return Err("expected 1000 + 15 without entering the trampoline".into());
        }
        Ok(())
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn main() -> std::process::ExitCode {
    match x86_64::main() {
        Ok(()) => {
            println!("ok");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jit_patchpoint: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn main() {
    println!("jit_patchpoint: x86-64 Linux only (the trampoline is x86-64 assembly); skipped");
}
