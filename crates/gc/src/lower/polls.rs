//! Safepoint polls at loop back edges (`--safepoint-polls`), so that a thread looping
//! without calls cannot hold a collection up.
//!
//! A collection stops every mutator thread at its next safepoint (see the runtime's
//! "Threads"). A loop that makes no call that may collect never reaches one: a thread
//! running it holds every other thread's collection up for as long as it loops. This pass
//! puts a call of the runtime's `locus_gc_poll` (`void ()`) before the terminator of every
//! block with a retreating edge, an edge to a block at or before it in reverse post-order:
//! every cycle of the control-flow graph has one, irreducible ones too. The poll stops the
//! thread while another collects and never starts a collection itself (so stress mode does
//! not collect at every iteration); the check is an atomic load in the runtime. As Julia's
//! `julia.safepoint`, it runs before the frame is placed: the lowering sees an ordinary
//! call that may collect, and roots across it what is live around the loop.
//!
//! Only functions that take part in GC lowering (they call `julia.get_pgcstack` or have a
//! `"gcstack"` parameter) get polls: a function that does not may promise the optimizer
//! not to collect (`memory(none)`), which a poll would break. Statepoint roots would need
//! `locus_gc_poll` among the runtime calls the rewrite wraps (`locus_gc_sp_poll`, which the
//! runtime has); until then polls are for frames only.

use locus_llvm::builder::Builder;
use locus_llvm::cfg::Cfg;
use locus_llvm::ir::Function;

use crate::contract::RUNTIME_POLL;
use crate::Result;

/// Inserts the polls in `f` (if it takes part) and returns how many.
///
/// # Errors
/// LLVM's, building the call.
pub fn insert_polls<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<usize> {
    if f.is_declaration() || super::scan::pgcstack(f).is_none() {
        return Ok(0);
    }
    let cfg = Cfg::new(f);
    let mut position = vec![usize::MAX; cfg.len()];
    for (at, &block) in cfg.reverse_post_order().iter().enumerate() {
        position[block] = at;
    }
    let latches: Vec<usize> = cfg
        .reverse_post_order()
        .iter()
        .copied()
        .filter(|&from| {
            cfg.successors(from)
                .iter()
                .any(|&to| position[to] <= position[from])
        })
        .collect();
    if latches.is_empty() {
        return Ok(0);
    }
    let ty = b.function_type(b.void_type(), &[], false)?;
    let poll = b.declare_function(RUNTIME_POLL, ty)?;
    let mut inserted = 0;
    for latch in latches {
        let Some(term) = cfg.block(latch).and_then(|blk| blk.terminator()) else {
            continue;
        };
        b.position_before(term)?;
        b.call(ty, poll, &[], &[], "")?;
        inserted += 1;
    }
    Ok(inserted)
}

/// [`insert_polls`] in every function of `module`; returns how many polls in all.
///
/// # Errors
/// As [`insert_polls`].
pub fn insert_module_polls(module: &locus_llvm::Module<'_>) -> Result<usize> {
    let b = Builder::new(module);
    let mut total = 0;
    for f in module.function_list() {
        total += insert_polls(&b, f)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_llvm::{Context, Module};

    const IR: &str = r#"
declare ptr @julia.get_pgcstack()
@flag = global i32 0

define void @loops() {
entry:
  %p = call ptr @julia.get_pgcstack()
  br label %outer
outer:
  %i = phi i32 [ 0, %entry ], [ %i.next, %outer.latch ]
  br label %inner
inner:
  %f = load volatile i32, ptr @flag
  %again = icmp ne i32 %f, 0
  br i1 %again, label %inner, label %outer.latch
outer.latch:
  %i.next = add i32 %i, 1
  %done = icmp eq i32 %i.next, 10
  br i1 %done, label %exit, label %outer
exit:
  ret void
}

define void @irreducible(i1 %c) {
entry:
  %p = call ptr @julia.get_pgcstack()
  br i1 %c, label %a, label %b
a:
  %fa = load volatile i32, ptr @flag
  %ta = icmp ne i32 %fa, 0
  br i1 %ta, label %b, label %exit
b:
  %fb = load volatile i32, ptr @flag
  %tb = icmp ne i32 %fb, 0
  br i1 %tb, label %a, label %exit
exit:
  ret void
}

define void @no_part() {
entry:
  br label %loop
loop:
  %f = load volatile i32, ptr @flag
  %again = icmp ne i32 %f, 0
  br i1 %again, label %loop, label %exit
exit:
  ret void
}

define void @straight() {
entry:
  %p = call ptr @julia.get_pgcstack()
  ret void
}
"#;

    fn polls_in(module: &Module<'_>, name: &str) -> Vec<String> {
        let f = module.function(name).expect("function");
        f.blocks()
            .into_iter()
            .filter(|b| {
                b.instructions().into_iter().any(|i| {
                    i.as_call()
                        .and_then(|c| c.callee_name())
                        .is_some_and(|n| n == RUNTIME_POLL)
                })
            })
            .map(|b| b.name())
            .collect()
    }

    /// Each block with a back edge polls once, before its terminator: both latches of a
    /// nest, one block of an irreducible cycle; a function that takes no part and one
    /// without loops get none. The result verifies.
    #[test]
    fn every_cycle_polls_once_per_latch() {
        let ctx = Context::new();
        let module = Module::parse_ir(&ctx, "polls", IR).expect("parse");
        let n = insert_module_polls(&module).expect("polls");
        module.verify().expect("verify");
        assert_eq!(polls_in(&module, "loops"), ["inner", "outer.latch"]);
        assert_eq!(polls_in(&module, "irreducible").len(), 1);
        assert!(polls_in(&module, "no_part").is_empty());
        assert!(polls_in(&module, "straight").is_empty());
        assert_eq!(n, 3);
        let f = module.function("loops").expect("loops");
        for b in f.blocks() {
            if let Some(term) = b.terminator() {
                let before = b.instructions().into_iter().rev().nth(1);
                if polls_in(&module, "loops").contains(&b.name()) {
                    assert!(before
                        .and_then(|i| i.as_call())
                        .and_then(|c| c.callee_name())
                        .is_some_and(|n| n == RUNTIME_POLL));
                }
                let _ = term;
            }
        }
    }
}
