//! Where the stores into frame slots go.
//!
//! A value is stored into its slot just before the first safepoint where it must be rooted,
//! and not again while it stays stored: a forward must-analysis tracks which values are in
//! their slots on every path (a value's definition, executed again in a loop, takes it out).
//! A slot that may hold a value no longer rooted (its value died, or a value of another
//! branch is in it) is nulled before the next safepoint that does not store into it, so the
//! collector never keeps dead objects alive through the frame. Slots of values live across a
//! `returns_twice` call are the exception: they are never nulled, since a `longjmp` can bring
//! control back to a use of their value from anywhere after the call.

use super::color::Coloring;
use super::liveness::Liveness;
use super::model::{FnModel, SafepointId, Step, ValueId};

/// What to do just before one safepoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SafepointPlan {
    /// The values rooted at the safepoint.
    pub live: Vec<ValueId>,
    /// (value, slot) stores to insert before the call.
    pub stores: Vec<(ValueId, usize)>,
    /// Slots to null before the call.
    pub nulls: Vec<usize>,
}

/// What one slot holds at a program point, on every path that reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Not reached yet (the meet's identity).
    Top,
    /// Null on every path.
    Null,
    /// The current instance of this value on every path (stored, not redefined since).
    Fresh(ValueId),
    /// Anything else: maybe non-null, not known to be a fresh value.
    Dirty,
}

impl Slot {
    fn meet(self, other: Slot) -> Slot {
        match (self, other) {
            (Slot::Top, x) | (x, Slot::Top) => x,
            (a, b) if a == b => a,
            _ => Slot::Dirty,
        }
    }
}

/// Decides the stores and nulls for every safepoint.
pub fn place(m: &FnModel, live: &Liveness, coloring: &Coloring) -> Vec<SafepointPlan> {
    let nb = m.blocks.len();
    let ns = coloring.num_slots;
    let preds = m.preds();
    let order = m.reverse_post_order();
    let mut out: Vec<Vec<Slot>> = vec![vec![Slot::Top; ns]; nb];
    let mut plans = vec![SafepointPlan::default(); m.num_safepoints];
    let mut state = vec![Slot::Top; ns];
    let kill = |state: &mut [Slot], v: ValueId| {
        if let Some(s) = coloring.slot_of.get(v).copied().flatten() {
            if state[s] == Slot::Fresh(v) {
                state[s] = Slot::Dirty;
            }
        }
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &order {
            state.fill(if b == 0 { Slot::Null } else { Slot::Top });
            for &p in &preds[b] {
                for (a, &o) in state.iter_mut().zip(&out[p]) {
                    *a = a.meet(o);
                }
            }
            for phi in &m.blocks[b].phis {
                kill(&mut state, phi.def);
            }
            for step in &m.blocks[b].steps {
                match step {
                    Step::Def(v) => kill(&mut state, *v),
                    Step::Use(_) => {}
                    Step::Safepoint(sp) => {
                        plans[sp.id] = decide(sp.id, &mut state, live, coloring);
                        for &v in &sp.defs {
                            kill(&mut state, v);
                        }
                    }
                }
            }
            if state != out[b] {
                out[b].copy_from_slice(&state);
                changed = true;
            }
        }
    }
    plans
}

fn decide(
    id: SafepointId,
    state: &mut [Slot],
    live: &Liveness,
    coloring: &Coloring,
) -> SafepointPlan {
    let Some(rooted) = live.at_safepoint.get(id) else {
        return SafepointPlan::default();
    };
    let mut plan = SafepointPlan {
        live: rooted.to_vec(),
        ..SafepointPlan::default()
    };
    let mut wanted: Vec<Option<ValueId>> = vec![None; coloring.num_slots];
    for &v in &plan.live {
        if let Some(s) = coloring.slot_of.get(v).copied().flatten() {
            if let Some(w) = wanted.get_mut(s) {
                *w = Some(v);
            }
        }
    }
    for (slot, want) in wanted.iter().enumerate() {
        let Some(contents) = state.get_mut(slot) else {
            continue;
        };
        match *want {
            Some(v) => {
                if *contents != Slot::Fresh(v) {
                    plan.stores.push((v, slot));
                }
                *contents = Slot::Fresh(v);
            }
            None if coloring.permanent.get(slot).copied().unwrap_or(false) => {}
            None => {
                if *contents != Slot::Null {
                    plan.nulls.push(slot);
                    *contents = Slot::Null;
                }
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::color::color;
    use crate::lower::liveness::analyze;
    use crate::lower::model::{sp, Block, Phi};

    fn plan(m: &FnModel) -> Vec<SafepointPlan> {
        let l = analyze(m);
        let c = color(m, &l);
        place(m, &l, &c)
    }

    #[test]
    fn store_once_then_null_when_dead() {
        // v0 = alloc (sp0); sp1; sp2; use v0; sp3
        let m = FnModel {
            num_values: 1,
            num_safepoints: 4,
            refinements: Vec::new(),
            blocks: vec![Block {
                succs: vec![],
                phis: vec![],
                steps: vec![
                    sp(0, vec![], vec![0]),
                    sp(1, vec![], vec![]),
                    sp(2, vec![], vec![]),
                    Step::Use(vec![0]),
                    sp(3, vec![], vec![]),
                ],
            }],
        };
        let p = plan(&m);
        assert_eq!(p[0], SafepointPlan::default());
        assert_eq!(p[1].stores, vec![(0, 0)]);
        assert!(p[2].stores.is_empty(), "already stored: {:?}", p[2]);
        assert_eq!(p[3].nulls, vec![0], "v0 died before sp3");
    }

    #[test]
    fn loop_redefinition_is_stored_again() {
        // b0: br b1
        // b1: v0 = alloc (sp0); sp1; use v0; br b1, b2
        let m = FnModel {
            num_values: 1,
            num_safepoints: 2,
            refinements: Vec::new(),
            blocks: vec![
                Block {
                    succs: vec![1],
                    ..Block::default()
                },
                Block {
                    succs: vec![1, 2],
                    phis: vec![],
                    steps: vec![
                        sp(0, vec![], vec![0]),
                        sp(1, vec![], vec![]),
                        Step::Use(vec![0]),
                    ],
                },
                Block::default(),
            ],
        };
        let p = plan(&m);
        assert_eq!(p[1].stores, vec![(0, 0)]);
        assert!(p[0].nulls.is_empty() || p[0].nulls == vec![0], "{:?}", p[0]);
    }

    #[test]
    fn branches_store_on_each_path() {
        // b0: v0 = alloc (sp0); br b1, b2
        // b1: sp1; br b3      b2: br b3
        // b3: sp2; use v0
        let m = FnModel {
            num_values: 1,
            num_safepoints: 3,
            refinements: Vec::new(),
            blocks: vec![
                Block {
                    succs: vec![1, 2],
                    phis: vec![],
                    steps: vec![sp(0, vec![], vec![0])],
                },
                Block {
                    succs: vec![3],
                    phis: vec![],
                    steps: vec![sp(1, vec![], vec![])],
                },
                Block {
                    succs: vec![3],
                    ..Block::default()
                },
                Block {
                    succs: vec![],
                    phis: vec![],
                    steps: vec![sp(2, vec![], vec![]), Step::Use(vec![0])],
                },
            ],
        };
        let p = plan(&m);
        assert_eq!(p[1].stores, vec![(0, 0)]);
        assert_eq!(
            p[2].stores,
            vec![(0, 0)],
            "not stored on the path through b2"
        );
    }

    #[test]
    fn a_returns_twice_slot_is_never_nulled() {
        // v0 = alloc (sp0); setjmp (sp1, returns twice); sp2 (v0 dead here, as on the path
        // to a longjmp); use v0 only after the second return: its slot must not be nulled.
        let m = FnModel {
            num_values: 1,
            num_safepoints: 3,
            refinements: Vec::new(),
            blocks: vec![
                Block {
                    succs: vec![1, 2],
                    phis: vec![],
                    steps: vec![
                        sp(0, vec![], vec![0]),
                        Step::Safepoint(crate::lower::model::Safepoint {
                            id: 1,
                            operands: vec![],
                            defs: vec![],
                            returns_twice: true,
                            callee_rooted: vec![],
                        }),
                    ],
                },
                Block {
                    succs: vec![],
                    phis: vec![],
                    steps: vec![sp(2, vec![], vec![])],
                },
                Block {
                    succs: vec![],
                    phis: vec![],
                    steps: vec![Step::Use(vec![0])],
                },
            ],
        };
        let p = plan(&m);
        assert_eq!(p[1].stores, vec![(0, 0)]);
        assert!(p[2].nulls.is_empty(), "{:?}", p[2]);
    }

    #[test]
    fn phi_of_values() {
        // b0: v0 = alloc (sp0); br b1
        // b1: v1 = phi [v0, b0]; sp1; use v1
        let m = FnModel {
            num_values: 2,
            num_safepoints: 2,
            refinements: Vec::new(),
            blocks: vec![
                Block {
                    succs: vec![1],
                    phis: vec![],
                    steps: vec![sp(0, vec![], vec![0])],
                },
                Block {
                    succs: vec![],
                    phis: vec![Phi {
                        def: 1,
                        incoming: vec![(0, vec![0])],
                    }],
                    steps: vec![sp(1, vec![], vec![]), Step::Use(vec![1])],
                },
            ],
        };
        let p = plan(&m);
        assert_eq!(p[1].live, vec![1]);
        assert_eq!(p[1].stores.len(), 1);
    }
}
