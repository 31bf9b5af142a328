//! Frame slots: values never live together at a safepoint share a slot.
//!
//! Two values interfere when some safepoint needs both rooted. Slots are the colours of a
//! greedy colouring of that graph, visiting values in the order the dominance-ordered
//! blocks define them, which for SSA live ranges usually reaches the lower bound: the
//! largest number of values rooted at one safepoint. Values live across a `returns_twice`
//! call get slots no other value uses, since code after the second return may find any
//! slot as the first return left it.

use super::bitset::BitSet;
use super::liveness::Liveness;
use super::model::{FnModel, Step, ValueId};

/// The slot assignment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coloring {
    /// The slot of each value, `None` for values never rooted.
    pub slot_of: Vec<Option<usize>>,
    /// How many slots the frame needs.
    pub num_slots: usize,
    /// The lower bound: the most values rooted at one safepoint.
    pub max_live: usize,
    /// Per slot: held by a value live across a `returns_twice` call. Such a slot is never
    /// nulled: a `longjmp` may come back to code that uses its value.
    pub permanent: Vec<bool>,
}

/// Values in the order their definitions appear in reverse post-order.
fn definition_order(m: &FnModel) -> Vec<ValueId> {
    let mut order = Vec::with_capacity(m.num_values);
    let mut seen = BitSet::new(m.num_values);
    for b in m.reverse_post_order() {
        let block = &m.blocks[b];
        for phi in &block.phis {
            if seen.insert(phi.def) {
                order.push(phi.def);
            }
        }
        for step in &block.steps {
            let defs: &[ValueId] = match step {
                Step::Def(v) => core::slice::from_ref(v),
                Step::Safepoint(sp) => &sp.defs,
                Step::Use(_) => &[],
            };
            for &v in defs {
                if seen.insert(v) {
                    order.push(v);
                }
            }
        }
    }
    // Values the scan modelled but no block defines (defensive): last.
    for v in 0..m.num_values {
        if seen.insert(v) {
            order.push(v);
        }
    }
    order
}

/// Colours the values rooted at some safepoint.
pub fn color(m: &FnModel, live: &Liveness) -> Coloring {
    let n = m.num_values;
    let members = &live.at_safepoint;
    let mut at: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut rooted = BitSet::new(n);
    let mut max_live = 0;
    for (sp, set) in members.iter().enumerate() {
        max_live = max_live.max(set.len());
        for &a in set {
            rooted.insert(a);
            at[a].push(sp);
        }
    }
    let mut exclusive = BitSet::new(n);
    for block in &m.blocks {
        for step in &block.steps {
            if let Step::Safepoint(sp) = step {
                if sp.returns_twice {
                    if let Some(set) = live.at_safepoint.get(sp.id) {
                        for &v in set {
                            exclusive.insert(v);
                        }
                    }
                }
            }
        }
    }
    let mut slot_of: Vec<Option<usize>> = vec![None; n];
    let mut num_slots = 0;
    // Slots handed to exclusive values, which nobody else may take.
    let mut reserved: Vec<bool> = Vec::new();
    // Per safepoint, the slots of the values coloured so far that are rooted there (bit s
    // of word s / 64): a value's taken slots are the union over its safepoints, which costs
    // a few words per safepoint rather than a pass over every value live there (cubic in
    // the values live at once, seconds for a thousand).
    let mut used: Vec<Vec<u64>> = vec![Vec::new(); members.len()];
    for v in definition_order(m) {
        if !rooted.contains(v) {
            continue;
        }
        let slot = if exclusive.contains(v) {
            None
        } else {
            let mut taken: Vec<u64> = Vec::new();
            for &sp in &at[v] {
                let words = &used[sp];
                if taken.len() < words.len() {
                    taken.resize(words.len(), 0);
                }
                for (t, w) in taken.iter_mut().zip(words) {
                    *t |= w;
                }
            }
            let is_taken = |s: usize| {
                taken
                    .get(s / 64)
                    .is_some_and(|w| w & (1u64 << (s % 64)) != 0)
            };
            (0..num_slots).find(|&s| !is_taken(s) && !reserved[s])
        };
        let slot = slot.unwrap_or_else(|| {
            num_slots += 1;
            reserved.push(exclusive.contains(v));
            num_slots - 1
        });
        slot_of[v] = Some(slot);
        for &sp in &at[v] {
            let words = &mut used[sp];
            if words.len() <= slot / 64 {
                words.resize(slot / 64 + 1, 0);
            }
            words[slot / 64] |= 1u64 << (slot % 64);
        }
    }
    Coloring {
        slot_of,
        num_slots,
        max_live,
        permanent: reserved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::liveness::analyze;
    use crate::lower::model::{sp, Block, Safepoint};

    #[test]
    fn values_never_live_together_share_a_slot() {
        // v0 live at sp1 only; v1 live at sp2 only: one slot.
        let m = FnModel {
            num_values: 2,
            num_safepoints: 3,
            refinements: Vec::new(),
            blocks: vec![Block {
                succs: vec![],
                phis: vec![],
                steps: vec![
                    sp(0, vec![], vec![0]),
                    sp(1, vec![0], vec![1]),
                    sp(2, vec![], vec![]),
                    Step::Use(vec![1]),
                ],
            }],
        };
        let c = color(&m, &analyze(&m));
        assert_eq!((c.num_slots, c.max_live), (1, 1));
        assert_eq!(c.slot_of, vec![Some(0), Some(0)]);
    }

    #[test]
    fn returns_twice_gets_its_own_slot() {
        let mut steps = vec![sp(0, vec![], vec![0])];
        steps.push(Step::Safepoint(Safepoint {
            id: 1,
            operands: vec![],
            defs: vec![],
            returns_twice: true,
            callee_rooted: vec![],
        }));
        steps.push(Step::Use(vec![0]));
        steps.push(sp(2, vec![], vec![1]));
        steps.push(sp(3, vec![], vec![]));
        steps.push(Step::Use(vec![1]));
        let m = FnModel {
            num_values: 2,
            num_safepoints: 4,
            refinements: Vec::new(),
            blocks: vec![Block {
                succs: vec![],
                phis: vec![],
                steps,
            }],
        };
        let c = color(&m, &analyze(&m));
        assert_eq!(c.num_slots, 2, "{c:?}");
        assert_ne!(c.slot_of[0], c.slot_of[1]);
        assert_eq!(c.slot_of[0].map(|s| c.permanent[s]), Some(true));
        assert_eq!(c.slot_of[1].map(|s| c.permanent[s]), Some(false));
    }
}
