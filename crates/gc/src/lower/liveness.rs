//! Which tracked values are live at each safepoint.
//!
//! Backward dataflow over the model. A value is live at a point if some path from there
//! reaches a use without passing its definition. At a safepoint, the values that must be
//! rooted are those live after the call plus the call's own rooted operands (spec 003: the
//! goal is that "at every safepoint any live GC-tracked pointer ... is in some GC slot").
//! Phi operands are used at the end of the incoming block.

use super::model::{FnModel, Step, ValueId};

/// The result of the analysis. Every set is sorted. The per-block sets are the analysis's
/// own result, which its tests check; the lowering uses the sets at safepoints.
#[derive(Clone, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
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

/// The most (safepoint, value rooted there) pairs a function may have: the lowering keeps
/// each safepoint's set, and every later phase walks them. A function with N allocations
/// all live to its end has about N²/2 (N = 2000: 2 million pairs, 240 MB and 0.7 s in
/// all; N = 8000 took 2.7 GB and 40 s before this limit).
pub const MAX_LIVE_PAIRS: usize = 1 << 22;

/// Runs the analysis with no limit (the tests').
#[cfg(test)]
pub fn analyze(m: &FnModel) -> Liveness {
    analyze_bounded(m, usize::MAX).unwrap_or_else(|pairs| panic!("{pairs} pairs, no limit"))
}

/// Runs the analysis, stopping with the count once the safepoints' sets hold more than
/// `limit` pairs in all.
pub fn analyze_bounded(m: &FnModel, limit: usize) -> Result<Liveness, usize> {
    let n = m.num_values;
    let nb = m.blocks.len();
    let mut live_in: Vec<Vec<ValueId>> = vec![Vec::new(); nb];
    let mut live_out: Vec<Vec<ValueId>> = vec![Vec::new(); nb];
    let mut at_safepoint: Vec<Vec<ValueId>> = vec![Vec::new(); m.num_safepoints];
    let mut order = m.reverse_post_order();
    order.reverse();
    let mut live = SparseSet::new(n);
    let mut pairs = 0usize;
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
                            pairs = pairs - slot.len() + live.members.len();
                            if pairs > limit {
                                return Err(pairs);
                            }
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
    Ok(Liveness {
        live_in,
        live_out,
        at_safepoint,
    })
}

/// Refinement (spec 003's goal is the fewest roots; Julia's `RefineLiveSet`): at each
/// safepoint, a value needs no root of its own when every value it is refined to
/// ([`FnModel::refinements`]) is rooted there, directly or, recursively, through its own
/// refinements. The call's callee-rooted arguments count as rooted, and need no slot at
/// that call either.
pub fn refine(m: &FnModel, live: &mut Liveness) {
    let n = m.num_values;
    let mut refined_to: Vec<Option<&[ValueId]>> = vec![None; n];
    for (v, to) in &m.refinements {
        if let Some(r) = refined_to.get_mut(*v) {
            *r = Some(to);
        }
    }
    let mut callee_rooted: Vec<&[ValueId]> = vec![&[]; live.at_safepoint.len()];
    for block in &m.blocks {
        for step in &block.steps {
            if let Step::Safepoint(sp) = step {
                if let Some(c) = callee_rooted.get_mut(sp.id) {
                    *c = &sp.callee_rooted;
                }
            }
        }
    }
    if m.refinements.is_empty() && callee_rooted.iter().all(|c| c.is_empty()) {
        return;
    }
    // Per-safepoint marks, told apart by a generation number so nothing is cleared.
    let mut marks = Marks {
        generation: 0,
        in_set: vec![0; n],
        rooted: vec![0; n],
        visited: vec![0; n],
    };
    for (set, callee) in live.at_safepoint.iter_mut().zip(callee_rooted) {
        marks.generation += 1;
        let g = marks.generation;
        for &v in set.iter() {
            marks.in_set[v] = g;
        }
        for &c in callee {
            if let Some(r) = marks.rooted.get_mut(c) {
                *r = g;
            }
        }
        set.retain(|&v| !marks.indirectly_rooted(&refined_to, v, 0));
    }
}

struct Marks {
    generation: u32,
    in_set: Vec<u32>,
    rooted: Vec<u32>,
    visited: Vec<u32>,
}

impl Marks {
    /// Whether `v` is kept alive by what is rooted at this safepoint without a root of its
    /// own. Cycles and very long chains answer no (a root is kept).
    fn indirectly_rooted(
        &mut self,
        refined_to: &[Option<&[ValueId]>],
        v: ValueId,
        depth: usize,
    ) -> bool {
        let g = self.generation;
        if self.rooted.get(v) == Some(&g) {
            return true;
        }
        if self.visited.get(v).is_none_or(|&x| x == g) || depth > 1_000 {
            return false;
        }
        self.visited[v] = g;
        let Some(Some(to)) = refined_to.get(v).copied() else {
            return false;
        };
        let ok = to.iter().all(|&u| {
            self.indirectly_rooted(refined_to, u, depth + 1) || self.in_set.get(u) == Some(&g)
        });
        if ok {
            self.rooted[v] = g;
        }
        ok
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
            refinements: Vec::new(),
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
            refinements: Vec::new(),
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
            refinements: vec![(2, vec![0, 1])],
        };
        let mut l = analyze(&m);
        assert_eq!(members(&l.at_safepoint[2]), vec![0, 1, 2]);
        refine(&m, &mut l);
        assert_eq!(members(&l.at_safepoint[2]), vec![0, 1]);
        // If one operand dies before the safepoint, the select keeps its root.
        let mut m2 = m.clone();
        m2.blocks[0].steps[5] = Step::Use(vec![0, 2]);
        let mut l2 = analyze(&m2);
        refine(&m2, &mut l2);
        assert_eq!(members(&l2.at_safepoint[2]), vec![0, 2]);
    }

    #[test]
    fn operands_are_rooted_during_the_call() {
        let m = FnModel {
            num_values: 1,
            num_safepoints: 2,
            refinements: Vec::new(),
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
