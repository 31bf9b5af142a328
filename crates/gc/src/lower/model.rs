//! What root placement needs to know about a function, and nothing else.
//!
//! The scan ([`super::scan`]) reduces a function's IR to this model: the control-flow
//! graph, and per block the definitions and uses of *base* tracked values (every derived
//! pointer already replaced by the base it was derived from) and the safepoints. The
//! analyses ([`super::liveness`], [`super::color`], [`super::place`]) work on the model
//! alone, so they are tested without LLVM.

/// A tracked base value that may need a root, numbered from 0.
pub type ValueId = usize;

/// A safepoint (a call that may collect), numbered from 0 in block order.
pub type SafepointId = usize;

/// One function, reduced.
#[derive(Clone, Debug, Default)]
pub struct FnModel {
    /// How many values there are.
    pub num_values: usize,
    /// How many safepoints there are.
    pub num_safepoints: usize,
    /// The blocks; block 0 is the entry.
    pub blocks: Vec<Block>,
    /// Julia's refinements: values that need no root of their own at a safepoint where the
    /// values listed for them are rooted, because those keep them alive (a select or phi
    /// holds one of its operands; a load from immutable memory lives as long as the object
    /// it was loaded from). An empty list means something outside the frame keeps the value
    /// alive (it came from arguments, constants, constant globals or type tags).
    pub refinements: Vec<(ValueId, Vec<ValueId>)>,
}

/// One basic block.
#[derive(Clone, Debug, Default)]
pub struct Block {
    /// Successor blocks.
    pub succs: Vec<usize>,
    /// Phis of tracked values, at the block's start.
    pub phis: Vec<Phi>,
    /// The block's steps in order.
    pub steps: Vec<Step>,
}

/// A phi that defines a tracked base value.
#[derive(Clone, Debug)]
pub struct Phi {
    /// The value it defines.
    pub def: ValueId,
    /// For each predecessor block, the base values it brings (none for a constant or an
    /// argument).
    pub incoming: Vec<(usize, Vec<ValueId>)>,
}

/// What happens at one point of a block.
#[derive(Clone, Debug)]
pub enum Step {
    /// A tracked base value is defined.
    Def(ValueId),
    /// Base values are used (directly or through pointers derived from them).
    Use(Vec<ValueId>),
    /// A call that may collect.
    Safepoint(Safepoint),
}

/// A call that may collect.
#[derive(Clone, Debug, Default)]
pub struct Safepoint {
    /// Its number.
    pub id: SafepointId,
    /// Values that must stay rooted during the call: tracked arguments (the callee assumes
    /// its caller roots them), `jl_roots` operands, `julia.call` arguments. CalleeRooted
    /// arguments are not here.
    pub operands: Vec<ValueId>,
    /// Values the call defines (its result), which exist only after it.
    pub defs: Vec<ValueId>,
    /// A `returns_twice` call: what is live across it gets slots of its own.
    pub returns_twice: bool,
    /// Values passed as CalleeRooted (12) casts of themselves: the callee keeps them alive
    /// during the call, so they need no root here, and values refined to them need none
    /// either.
    pub callee_rooted: Vec<ValueId>,
}

impl FnModel {
    /// Predecessor lists, derived from the successors.
    pub fn preds(&self) -> Vec<Vec<usize>> {
        let mut preds = vec![Vec::new(); self.blocks.len()];
        for (b, block) in self.blocks.iter().enumerate() {
            for &s in &block.succs {
                if let Some(p) = preds.get_mut(s) {
                    if !p.contains(&b) {
                        p.push(b);
                    }
                }
            }
        }
        preds
    }

    /// Blocks in reverse post-order from the entry (unreachable blocks left out).
    pub fn reverse_post_order(&self) -> Vec<usize> {
        let n = self.blocks.len();
        let mut seen = vec![false; n];
        let mut order = Vec::with_capacity(n);
        // Iterative DFS: (block, next successor to visit).
        let mut stack: Vec<(usize, usize)> = Vec::new();
        if n > 0 {
            seen[0] = true;
            stack.push((0, 0));
        }
        while let Some(&mut (b, ref mut next)) = stack.last_mut() {
            let succs = self.blocks.get(b).map_or(&[][..], |bl| &bl.succs[..]);
            if let Some(&s) = succs.get(*next) {
                *next += 1;
                if s < n && !seen[s] {
                    seen[s] = true;
                    stack.push((s, 0));
                }
            } else {
                order.push(b);
                stack.pop();
            }
        }
        order.reverse();
        order
    }
}

/// A safepoint step, for the analyses' tests.
#[cfg(test)]
pub(crate) fn sp(id: SafepointId, operands: Vec<ValueId>, defs: Vec<ValueId>) -> Step {
    Step::Safepoint(Safepoint {
        id,
        operands,
        defs,
        returns_twice: false,
        callee_rooted: Vec::new(),
    })
}
