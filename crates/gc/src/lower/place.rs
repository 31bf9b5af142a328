//! Where the stores into frame slots go.
//!
//! A value is stored into its slot just before the first safepoint where it must be rooted,
//! and not again while it stays stored: a forward must-analysis tracks which values are in
//! their slots on every path (a value's definition, executed again in a loop, takes it out).
//! A slot that may hold a value no longer rooted (its value died, or a value of another
//! branch is in it) is nulled before the next safepoint that does not store into it, so the
//! collector never keeps dead objects alive through the frame.

use super::bitset::BitSet;
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

/// The state at a program point: which values are in their slots on every path, and what
/// each slot may hold (bit `num_values` stands for null).
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    stored: BitSet,
    slots: Vec<BitSet>,
}

impl State {
    fn meet(&mut self, other: &State) {
        self.stored.intersect_with(&other.stored);
        for (a, b) in self.slots.iter_mut().zip(&other.slots) {
            a.union_with(b);
        }
    }
}

/// Decides the stores and nulls for every safepoint.
pub fn place(m: &FnModel, live: &Liveness, coloring: &Coloring) -> Vec<SafepointPlan> {
    let n = m.num_values;
    let null = n;
    let nb = m.blocks.len();
    let empty_slot = || {
        let mut s = BitSet::new(n + 1);
        s.insert(null);
        s
    };
    let entry = State {
        stored: BitSet::new(n),
        slots: vec![empty_slot(); coloring.num_slots],
    };
    let mut top_stored = BitSet::new(n);
    top_stored.fill(n);
    let top = State {
        stored: top_stored,
        slots: vec![BitSet::new(n + 1); coloring.num_slots],
    };
    let preds = m.preds();
    let order = m.reverse_post_order();
    let mut out: Vec<State> = vec![top.clone(); nb];
    let mut plans = vec![SafepointPlan::default(); m.num_safepoints];
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &order {
            let mut state = if b == 0 { entry.clone() } else { top.clone() };
            for &p in &preds[b] {
                state.meet(&out[p]);
            }
            for phi in &m.blocks[b].phis {
                state.stored.remove(phi.def);
            }
            for step in &m.blocks[b].steps {
                match step {
                    Step::Def(v) => state.stored.remove(*v),
                    Step::Use(_) => {}
                    Step::Safepoint(sp) => {
                        plans[sp.id] = decide(sp.id, &mut state, live, coloring, null);
                        for &v in &sp.defs {
                            state.stored.remove(v);
                        }
                    }
                }
            }
            if state != out[b] {
                out[b] = state;
                changed = true;
            }
        }
    }
    plans
}

/// The stores and nulls before safepoint `id`, given the state before it; updates the
/// state to after it.
fn decide(
    id: SafepointId,
    state: &mut State,
    live: &Liveness,
    coloring: &Coloring,
    null: usize,
) -> SafepointPlan {
    let Some(rooted) = live.at_safepoint.get(id) else {
        return SafepointPlan::default();
    };
    let mut plan = SafepointPlan {
        live: rooted.iter().collect(),
        ..SafepointPlan::default()
    };
    let mut wanted: Vec<Option<ValueId>> = vec![None; coloring.num_slots];
    for v in rooted.iter() {
        if let Some(s) = coloring.slot_of.get(v).copied().flatten() {
            if let Some(w) = wanted.get_mut(s) {
                *w = Some(v);
            }
        }
    }
    for (slot, want) in wanted.iter().enumerate() {
        let Some(contents) = state.slots.get_mut(slot) else {
            continue;
        };
        match *want {
            Some(v) => {
                if !state.stored.contains(v) {
                    plan.stores.push((v, slot));
                    state.stored.insert(v);
                }
                *contents = BitSet::new(null + 1);
                contents.insert(v);
            }
            None => {
                let only_null = contents.iter().all(|x| x == null);
                if !only_null {
                    plan.nulls.push(slot);
                    *contents = BitSet::new(null + 1);
                    contents.insert(null);
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
            selects: Vec::new(),
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
            selects: Vec::new(),
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
            selects: Vec::new(),
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
    fn phi_of_values() {
        // b0: v0 = alloc (sp0); br b1
        // b1: v1 = phi [v0, b0]; sp1; use v1
        let m = FnModel {
            num_values: 2,
            num_safepoints: 2,
            selects: Vec::new(),
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
