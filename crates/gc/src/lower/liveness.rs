//! Which tracked values are live at each safepoint.
//!
//! Backward dataflow over the model. A value is live at a point if some path from there
//! reaches a use without passing its definition. At a safepoint, the values that must be
//! rooted are those live after the call plus the call's own rooted operands (spec 003: the
//! goal is that "at every safepoint any live GC-tracked pointer ... is in some GC slot").
//! Phi operands are used at the end of the incoming block.

use super::bitset::BitSet;
use super::model::{FnModel, Step, ValueId};

/// The result of the analysis. Every set is sorted.
#[derive(Clone, Debug)]
pub struct Liveness {
    /// Values live on entry to each block.
    pub live_in: Vec<Vec<ValueId>>,
    /// Values live on exit from each block, phi operands of successors included.
    pub live_out: Vec<Vec<ValueId>>,
    /// The values that must be rooted at each safepoint.
    pub at_safepoint: Vec<Vec<ValueId>>,
}

struct SparseSet {
    pos: Vec<u32>,
    members: Vec<ValueId>,
}

impl SparseSet {
    fn new(n: usize) -> Self {
        SparseSet {
            pos: vec![u32::MAX; n],
            members: Vec::new(),
        }
    }
    fn insert(&mut self, v: ValueId) {
        if let Some(p) = self.pos.get_mut(v) {
            if *p == u32::MAX {
                *p = self.members.len() as u32;
                self.members.push(v);
            }
        }
    }
    fn remove(&mut self, v: ValueId) {
        let Some(&p) = self.pos.get(v) else { return };
        if p == u32::MAX {
            return;
        }
        self.members.swap_remove(p as usize);
        if let Some(&moved) = self.members.get(p as usize) {
            self.pos[moved] = p;
        }
        self.pos[v] = u32::MAX;
    }
    fn clear(&mut self) {
        for &v in &self.members {
            self.pos[v] = u32::MAX;
        }
        self.members.clear();
    }
    fn sorted(&self) -> Vec<ValueId> {
        let mut v = self.members.clone();
        v.sort_unstable();
        v
    }
}

/// Runs the analysis.
pub fn analyze(m: &FnModel) -> Liveness {
    let n = m.num_values;
    let nb = m.blocks.len();
    let mut live_in: Vec<Vec<ValueId>> = vec![Vec::new(); nb];
    let mut live_out: Vec<Vec<ValueId>> = vec![Vec::new(); nb];
    let mut at_safepoint: Vec<Vec<ValueId>> = vec![Vec::new(); m.num_safepoints];
    let mut order = m.reverse_post_order();
    order.reverse();
    let mut live = SparseSet::new(n);
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &order {
            let block = &m.blocks[b];
            live.clear();
            for &s in &block.succs {
                for &v in &live_in[s] {
                    live.insert(v);
                }
                for phi in &m.blocks[s].phis {
                    for (from, values) in &phi.incoming {
                        if *from == b {
                            for &v in values {
                                live.insert(v);
                            }
                        }
                    }
                }
            }
            live_out[b] = live.sorted();
            for step in block.steps.iter().rev() {
                match step {
                    Step::Def(v) => live.remove(*v),
                    Step::Use(vs) => {
                        for &v in vs {
                            live.insert(v);
                        }
                    }
                    Step::Safepoint(sp) => {
                        for &v in &sp.defs {
                            live.remove(v);
                        }
                        for &v in &sp.operands {
                            live.insert(v);
                        }
                        if let Some(slot) = at_safepoint.get_mut(sp.id) {
                            *slot = live.sorted();
                        }
                    }
                }
            }
            for phi in &block.phis {
                live.remove(phi.def);
            }
            let new = live.sorted();
            if new != live_in[b] {
                live_in[b] = new;
                changed = true;
            }
        }
    }
    Liveness {
        live_in,
        live_out,
        at_safepoint,
    }
}

/// Refinement (spec 003's goal is the fewest roots): a select, or a phi whose incoming
/// values are all defined above it, holds one of its operands, so where every operand is
/// rooted anyway it needs no root of its own. Such a value is dropped from every
/// safepoint's set if, at each safepoint where it is live, all its operands are too.
/// Operands that are themselves candidates are not relied on (dropping them could undo
/// the reason). Loop-carried phis are not refined: their incoming value may be a newer
/// instance than the one the phi holds. One pass over the safepoints' sets.
pub fn refine_choices(m: &FnModel, live: &mut Liveness) {
    let n = m.num_values;
    let mut operands_of: Vec<Option<&[ValueId]>> = vec![None; n];
    let mut candidates = BitSet::new(n);
    for (v, ops) in &m.choices {
        candidates.insert(*v);
        if let Some(o) = operands_of.get_mut(*v) {
            *o = Some(ops);
        }
    }
    let mut keep = BitSet::new(n);
    for (v, ops) in &m.choices {
        if ops.iter().any(|&o| candidates.contains(o)) {
            keep.insert(*v);
        }
    }
    for set in &live.at_safepoint {
        for &v in set {
            if let Some(Some(ops)) = operands_of.get(v) {
                if !ops.iter().all(|o| set.binary_search(o).is_ok()) {
                    keep.insert(v);
                }
            }
        }
    }
    for set in &mut live.at_safepoint {
        set.retain(|&v| !candidates.contains(v) || keep.contains(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::model::{sp, Block, Phi};

    fn members(s: &[usize]) -> Vec<usize> {
        s.to_vec()
    }

    #[test]
    fn straight_line() {
        // v0 = alloc (sp0); v1 = alloc (sp1); safepoint (sp2); use v0
        let m = FnModel {
            num_values: 2,
            num_safepoints: 3,
            choices: Vec::new(),
            blocks: vec![Block {
                succs: vec![],
                phis: vec![],
                steps: vec![
                    sp(0, vec![], vec![0]),
                    sp(1, vec![], vec![1]),
                    sp(2, vec![], vec![]),
                    Step::Use(vec![0]),
                ],
            }],
        };
        let l = analyze(&m);
        assert_eq!(members(&l.at_safepoint[0]), Vec::<usize>::new());
        assert_eq!(members(&l.at_safepoint[1]), vec![0]);
        assert_eq!(members(&l.at_safepoint[2]), vec![0]);
    }

    #[test]
    fn loop_with_phi() {
        // b0: v0 = alloc; br b1
        // b1: v1 = phi [v0, b0], [v2, b1]; v2 = alloc (uses v1 as operand? no) ; safepoint; use v1; br b1 or b2
        // b2: ret
        let m = FnModel {
            num_values: 3,
            num_safepoints: 3,
            choices: Vec::new(),
            blocks: vec![
                Block {
                    succs: vec![1],
                    phis: vec![],
                    steps: vec![sp(0, vec![], vec![0])],
                },
                Block {
                    succs: vec![1, 2],
                    phis: vec![Phi {
                        def: 1,
                        incoming: vec![(0, vec![0]), (1, vec![2])],
                    }],
                    steps: vec![
                        sp(1, vec![], vec![2]),
                        sp(2, vec![], vec![]),
                        Step::Use(vec![1, 2]),
                    ],
                },
                Block::default(),
            ],
        };
        let l = analyze(&m);
        assert_eq!(members(&l.at_safepoint[1]), vec![1]);
        assert_eq!(members(&l.at_safepoint[2]), vec![1, 2]);
        assert!(
            !l.live_in[1].contains(&1),
            "a phi's value is defined at the block start"
        );
        assert!(
            l.live_out[0].contains(&0),
            "a phi operand is live out of its incoming block"
        );
    }

    #[test]
    fn a_select_of_rooted_values_needs_no_root() {
        // v0, v1 = alloc; v2 = select v0, v1; sp2; use v0, v1, v2
        let m = FnModel {
            num_values: 3,
            num_safepoints: 3,
            blocks: vec![Block {
                succs: vec![],
                phis: vec![],
                steps: vec![
                    sp(0, vec![], vec![0]),
                    sp(1, vec![], vec![1]),
                    Step::Use(vec![0, 1]),
                    Step::Def(2),
                    sp(2, vec![], vec![]),
                    Step::Use(vec![0, 1, 2]),
                ],
            }],
            choices: vec![(2, vec![0, 1])],
        };
        let mut l = analyze(&m);
        assert_eq!(members(&l.at_safepoint[2]), vec![0, 1, 2]);
        refine_choices(&m, &mut l);
        assert_eq!(members(&l.at_safepoint[2]), vec![0, 1]);
        // If one operand dies before the safepoint, the select keeps its root.
        let mut m2 = m.clone();
        m2.blocks[0].steps[5] = Step::Use(vec![0, 2]);
        let mut l2 = analyze(&m2);
        refine_choices(&m2, &mut l2);
        assert_eq!(members(&l2.at_safepoint[2]), vec![0, 2]);
    }

    #[test]
    fn operands_are_rooted_during_the_call() {
        let m = FnModel {
            num_values: 1,
            num_safepoints: 2,
            choices: Vec::new(),
            blocks: vec![Block {
                succs: vec![],
                phis: vec![],
                steps: vec![sp(0, vec![], vec![0]), sp(1, vec![0], vec![])],
            }],
        };
        let l = analyze(&m);
        assert_eq!(members(&l.at_safepoint[1]), vec![0]);
    }
}
