//! A frontend that builds its module with inkwell (LLVM 19) hands it to Locus in place: Locus
//! checks the GC invariants and places the roots in the frontend's own `LLVMModuleRef`, with
//! no printing and re-parsing, and the frontend's module is then JIT-compiled and run under
//! the stress collector (a collection at every allocation, freed objects made
//! inaccessible).
//!
//! The program is the one `stress_roots` runs from text, written with inkwell's builder:
//! twenty nodes `[next][value]` of a linked list, each allocated while the list so far must
//! stay alive, then summed with an allocation between every two loads (1 + ... + 20 = 210).
//! A value the lowering failed to root would be freed by a collection and the next load
//! reported as a dangling reference.
//!
//! Run: `cargo run -p locus-gc --example inkwell_roots` (prints the lowered function and the
//! result; exits 1 if the run does not end as it should). `cargo test -p locus-gc --example
//! inkwell_roots` runs the same as a test.

use std::process::ExitCode;

use inkwell::builder::Builder;
use inkwell::context::Context as InkContext;
use inkwell::module::Module as InkModule;
use inkwell::values::BasicValueEnum;
use inkwell::{AddressSpace, IntPredicate};
use locus_gc::lower::{lower_module, LowerOptions};
use locus_gc::runtime::{Config, OnFault, Runtime};
use locus_gc::signals;
use locus_gc::verify::{verify_module, VerifyOptions};
use locus_llvm::jit::Jit;
use locus_llvm::{BorrowedModule, Context};

/// How many nodes the list has; the program returns their sum.
const NODES: u64 = 20;

/// What one run measured.
#[derive(Debug)]
struct Outcome {
    /// `@main`'s result.
    value: i64,
    /// Collections the stress collector made.
    collections: u64,
    /// Dangling references and other faults the runtime recorded (none expected).
    faults: usize,
    /// Frame slots the lowering gave `@main`.
    slots: usize,
    /// The frontend's own module after the borrow, printed by inkwell.
    lowered: String,
}

/// Builds `@main` with inkwell: the frontend's side, which knows nothing of roots. GC
/// pointers are in address space 10, derived pointers in 11 (spec 003's contract).
fn build_program<'c>(ctx: &'c InkContext) -> Result<InkModule<'c>, String> {
    let module = ctx.create_module("inkwell_roots");
    let b = ctx.create_builder();
    let i64t = ctx.i64_type();
    let tracked = ctx.ptr_type(AddressSpace::from(10u16));
    let derived = ctx.ptr_type(AddressSpace::from(11u16));
    let plain = ctx.ptr_type(AddressSpace::default());
    let pgcstack = module.add_function("julia.get_pgcstack", plain.fn_type(&[], false), None);
    // @locus_gc_alloc(pointer fields, bytes after them): a safepoint.
    let alloc = module.add_function(
        "locus_gc_alloc",
        tracked.fn_type(&[i64t.into(), i64t.into()], false),
        None,
    );
    let main = module.add_function("main", i64t.fn_type(&[], false), None);
    let entry = ctx.append_basic_block(main, "entry");
    let build = ctx.append_basic_block(main, "build");
    let sum = ctx.append_basic_block(main, "sum");
    let body = ctx.append_basic_block(main, "sum.body");
    let exit = ctx.append_basic_block(main, "exit");
    let e = |what: &str, err: inkwell::builder::BuilderError| format!("building {what}: {err}");
    let call = |b: &Builder<'c>, fields: u64, bytes: u64, name: &str| {
        let site = b
            .build_call(
                alloc,
                &[
                    i64t.const_int(fields, false).into(),
                    i64t.const_int(bytes, false).into(),
                ],
                name,
            )
            .map_err(|err| e("an allocation", err))?;
        match site.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(BasicValueEnum::PointerValue(p)) => Ok(p),
            _ => Err("@locus_gc_alloc returned no pointer".to_string()),
        }
    };

    b.position_at_end(entry);
    b.build_call(pgcstack, &[], "pgcstack")
        .map_err(|err| e("the pgcstack call", err))?;
    b.build_unconditional_branch(build)
        .map_err(|err| e("a branch", err))?;

    b.position_at_end(build);
    let i = b.build_phi(i64t, "i").map_err(|err| e("a phi", err))?;
    let head = b
        .build_phi(tracked, "head")
        .map_err(|err| e("a phi", err))?;
    let node = call(&b, 1, 8, "node")?;
    let node_d = b
        .build_address_space_cast(node, derived, "node.d")
        .map_err(|err| e("a cast", err))?;
    b.build_store(node_d, head.as_basic_value())
        .map_err(|err| e("a store", err))?;
    // SAFETY: inkwell asks that a GEP stay in bounds: offset 8 of the 16-byte object.
    let val_p = unsafe { b.build_gep(ctx.i8_type(), node_d, &[i64t.const_int(8, false)], "val.p") }
        .map_err(|err| e("a GEP", err))?;
    b.build_store(val_p, i.as_basic_value())
        .map_err(|err| e("a store", err))?;
    let i_val = i.as_basic_value().into_int_value();
    let i_next = b
        .build_int_add(i_val, i64t.const_int(1, false), "i.next")
        .map_err(|err| e("an add", err))?;
    let done = b
        .build_int_compare(
            IntPredicate::EQ,
            i_val,
            i64t.const_int(NODES, false),
            "done",
        )
        .map_err(|err| e("a compare", err))?;
    b.build_conditional_branch(done, sum, build)
        .map_err(|err| e("a branch", err))?;
    i.add_incoming(&[(&i64t.const_int(1, false), entry), (&i_next, build)]);
    head.add_incoming(&[(&tracked.const_null(), entry), (&node, build)]);

    b.position_at_end(sum);
    let cur = b.build_phi(tracked, "cur").map_err(|err| e("a phi", err))?;
    let acc = b.build_phi(i64t, "acc").map_err(|err| e("a phi", err))?;
    let cur_p = cur.as_basic_value().into_pointer_value();
    let end = b
        .build_is_null(cur_p, "end")
        .map_err(|err| e("a null test", err))?;
    b.build_conditional_branch(end, exit, body)
        .map_err(|err| e("a branch", err))?;

    b.position_at_end(body);
    let cur_d = b
        .build_address_space_cast(cur_p, derived, "cur.d")
        .map_err(|err| e("a cast", err))?;
    // SAFETY: as above, offset 8 of a 16-byte node.
    let v_p = unsafe { b.build_gep(ctx.i8_type(), cur_d, &[i64t.const_int(8, false)], "v.p") }
        .map_err(|err| e("a GEP", err))?;
    let v = b
        .build_load(i64t, v_p, "v")
        .map_err(|err| e("a load", err))?
        .into_int_value();
    let acc_next = b
        .build_int_add(acc.as_basic_value().into_int_value(), v, "acc.next")
        .map_err(|err| e("an add", err))?;
    let next = b
        .build_load(tracked, cur_d, "next")
        .map_err(|err| e("a load", err))?;
    call(&b, 0, 16, "junk")?;
    b.build_unconditional_branch(sum)
        .map_err(|err| e("a branch", err))?;
    cur.add_incoming(&[(&node, build), (&next, body)]);
    acc.add_incoming(&[(&i64t.const_zero(), build), (&acc_next, body)]);

    b.position_at_end(exit);
    b.build_return(Some(&acc.as_basic_value()))
        .map_err(|err| e("a return", err))?;
    module
        .verify()
        .map_err(|m| format!("inkwell's module is invalid: {m}"))?;
    Ok(module)
}

/// Checks and lowers the frontend's module in place, then JIT-runs it under the stress
/// collector.
fn run() -> Result<Outcome, String> {
    let ink = InkContext::create();
    let module = build_program(&ink)?;

    // Locus borrows the frontend's context and module; nothing is printed or re-parsed.
    // SAFETY: `ink` is a live context of the libLLVM-19.so locus-llvm links (cargo unified
    // inkwell's llvm-sys with ours), outliving `ctx`, and nothing uses it elsewhere.
    let ctx = unsafe { Context::borrow_raw(ink.raw()) }.map_err(|e| e.to_string())?;
    let (slots, jit) = {
        // SAFETY: `module` lives in `ink`, inkwell does not touch it while `borrowed` lives
        // (dropped at the end of this block), and inkwell disposes it, not Locus.
        let borrowed =
            unsafe { BorrowedModule::new(&ctx, module.as_mut_ptr()) }.map_err(|e| e.to_string())?;
        let errors: Vec<String> = verify_module(&borrowed, VerifyOptions::default())
            .into_iter()
            .filter(|v| v.is_error())
            .map(|v| v.to_string())
            .collect();
        if !errors.is_empty() {
            return Err(errors.join("\n"));
        }
        let reports =
            lower_module(&borrowed, LowerOptions::default()).map_err(|e| e.to_string())?;
        let slots = reports
            .iter()
            .find(|r| r.function == "main")
            .map_or(0, |r| r.slots);
        // The JIT takes its own copy of the lowered module.
        let mut jit = Jit::new().map_err(|e| e.to_string())?;
        for (symbol, address) in locus_gc::runtime::symbols()
            .into_iter()
            .chain(signals::thread_symbols())
        {
            jit.define_symbol(symbol, address)
                .map_err(|e| e.to_string())?;
        }
        jit.add_module(&borrowed).map_err(|e| e.to_string())?;
        (slots, jit)
    };
    // The borrow is over: the frontend's module holds the frame Locus placed.
    module
        .verify()
        .map_err(|m| format!("the lowered module is invalid: {m}"))?;
    let lowered = module.print_to_string().to_string();

    // SAFETY: `@main` is a defined `i64 ()` function with the C convention; `jit` outlives
    // the call; the code only touches objects the runtime gives it while they are live.
    let main: extern "C" fn() -> i64 =
        unsafe { jit.lookup_fn("main") }.map_err(|e| e.to_string())?;
    signals::install();
    let rt = Runtime::enter(Config::stress().on_fault(OnFault::Record));
    let value = {
        let _scope = signals::fault_scope(false);
        main()
    };
    let stats = rt.stats();
    let faults = rt.take_faults();
    drop(rt);
    drop(jit);
    Ok(Outcome {
        value,
        collections: stats.collections,
        faults: faults.len(),
        slots,
        lowered,
    })
}

fn main() -> ExitCode {
    match run() {
        Ok(outcome) => {
            let main_fn = outcome
                .lowered
                .split("define ")
                .find(|f| f.contains("@main("))
                .unwrap_or_default();
            println!("define {main_fn}");
            println!(
                "result {} (expected {}), {} collections, {} fault(s), {} frame slot(s)",
                outcome.value,
                NODES * (NODES + 1) / 2,
                outcome.collections,
                outcome.faults,
                outcome.slots
            );
            let ok =
                u64::try_from(outcome.value) == Ok(NODES * (NODES + 1) / 2) && outcome.faults == 0;
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("inkwell_roots: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frontend's module, lowered in place and run under stress: the list's sum, a
    /// collection at each of the 40 allocations, no dangling reference, and the frame
    /// (linked through the runtime's `locus_gc_get_pgcstack`) in inkwell's own module.
    #[test]
    fn inkwell_module_lowered_in_place_runs_under_stress() {
        let outcome = match run() {
            Ok(o) => o,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(outcome.value, 210);
        assert_eq!(outcome.faults, 0);
        assert!(outcome.collections >= 2 * NODES, "{outcome:?}");
        assert!(outcome.slots >= 1, "{outcome:?}");
        assert!(
            outcome.lowered.contains("@locus_gc_get_pgcstack"),
            "{}",
            outcome.lowered
        );
        assert!(!outcome.lowered.contains("call ptr @julia.get_pgcstack()"));
    }
}
