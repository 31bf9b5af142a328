//! Random programs from the benchmark's generator (`benches/gen`: allocation chains,
//! calls, diamonds with phis of tracked and derived pointers, loops, selects), each run
//! with and without the stress collector: the results must agree and the stress run must
//! find no dangling reference. A missed root frees an object that is still used, which the
//! stress collector (a collection at every safepoint, freed objects made inaccessible)
//! reports.

#[allow(dead_code)]
#[path = "../benches/gen/mod.rs"]
mod gen;

use locus_gc::run::{run, RunOptions, RunOutcome};
use locus_gc::runtime::OnFault;

fn go(name: &str, ir: &str, stress: bool) -> RunOutcome {
    let options = RunOptions {
        stress,
        on_fault: OnFault::Record,
        ..RunOptions::default()
    };
    // SAFETY: the generated programs only touch the objects the runtime gives them, while
    // they are live (the stress run checks that).
    match unsafe { run(name, ir, options) } {
        Ok(o) => o,
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn random_programs_keep_every_live_object() {
    let mut safepoints = 0;
    let seeds = 24;
    for seed in 0..seeds {
        let mut p = gen::Params::new(1_500);
        p.seed = 0x5EED_0000 + seed;
        // Vary the shape too: how many objects stay live, and for how long.
        p.window = 2 + (seed as usize % 7);
        p.env = 1 + (seed as usize % 3);
        p.mid = seed as usize % 4;
        let g = gen::generate(p, true);
        let name = format!("generated-{seed}.ll");
        let plain = go(&name, &g.locus, false);
        let stressed = go(&name, &g.locus, true);
        assert!(
            stressed.faults.is_empty(),
            "{name}: the stress collector found {:#?}",
            stressed.faults
        );
        assert_eq!(plain.value, stressed.value, "{name}: results differ");
        assert!(stressed.stats.collections > 0, "{name}: never collected");
        safepoints += g.safepoints;
    }
    println!("generated programs under --stress: {seeds} agree ({safepoints} safepoints)");
}
