//! Control-flow graphs in Rust: predecessors, post-order, dominators.
//!
//! LLVM's C API offers successors only. A [`Cfg`] is a snapshot of one function's blocks
//! with dense indices (`0` is the entry block, then layout order), successor and
//! predecessor lists, and the reverse post-order of the blocks reachable from the entry.
//! [`Dominators`] computes the dominator tree on it with the iterative algorithm of
//! Cooper, Harvey and Kennedy ("A Simple, Fast Dominance Algorithm", 2001), which handles
//! irreducible control flow, and answers block, instruction and use dominance with LLVM's
//! conventions (`DominatorTree::dominates`). Nothing recurses, so deep CFGs cannot
//! overflow the stack. Each pass of the algorithm costs, for every edge, a walk up the
//! dominator tree to the nearest common dominator: near-linear for the CFGs compilers
//! produce, quadratic in the worst case (thousands of long back edges, or of branches
//! from one long chain into one block). Queries afterwards take constant time.
//!
//! A snapshot does not follow later changes to the control flow (this crate's builder
//! never adds blocks or edges); instructions added later are still ordered correctly.
//!
//! ```
//! use locus_llvm::cfg::{Cfg, Dominators};
//! use locus_llvm::{Context, Module};
//!
//! let ctx = Context::new();
//! let module = Module::parse_ir(&ctx, "ex.ll", r#"
//!     define void @f(i1 %c) {
//!     entry:
//!       br i1 %c, label %a, label %b
//!     a:
//!       br label %join
//!     b:
//!       br label %join
//!     join:
//!       ret void
//!     }
//! "#)?;
//! let f = module.function("f").expect("defined above");
//! let cfg = Cfg::new(f);
//! let join = cfg.index_of(f.blocks()[3]).expect("a block of f");
//! assert_eq!(cfg.predecessors(join), &[1, 2]);
//! let dom = Dominators::new(&cfg);
//! assert_eq!(dom.immediate_dominator(join), Some(0));
//! assert!(!dom.dominates(1, join));
//! assert_eq!(dom.frontier(1), &[join]);
//! # Ok::<(), locus_llvm::Error>(())
//! ```

use std::collections::HashMap;

use crate::ir::{BasicBlock, Function, Instruction, Opcode, Use, Value};

/// The control-flow graph of one function, with blocks numbered densely.
#[derive(Debug, Clone)]
pub struct Cfg<'m> {
    function: Function<'m>,
    blocks: Vec<BasicBlock<'m>>,
    index: HashMap<BasicBlock<'m>, usize>,
    /// Distinct successors, in terminator order.
    succs: Vec<Vec<usize>>,
    /// Every successor edge, repeats included (for edge dominance).
    edges: Vec<Vec<usize>>,
    /// Distinct predecessors, in increasing index order.
    preds: Vec<Vec<usize>>,
    /// Reachable blocks in reverse post-order (entry first).
    rpo: Vec<usize>,
    /// Position of each block in `rpo`; `None` if unreachable.
    rpo_number: Vec<Option<usize>>,
    /// Position of each instruction in its block, taken on first use (most users never
    /// ask, and it is the one part of the snapshot proportional to the instruction count).
    order: std::cell::OnceCell<HashMap<Instruction<'m>, usize>>,
}

impl<'m> Cfg<'m> {
    /// The CFG of `function` (empty for a declaration).
    #[must_use]
    pub fn new(function: Function<'m>) -> Self {
        let blocks = function.blocks();
        let index: HashMap<_, _> = blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let mut edges = Vec::with_capacity(blocks.len());
        let mut succs = Vec::with_capacity(blocks.len());
        let mut preds = vec![Vec::new(); blocks.len()];
        for (i, &block) in blocks.iter().enumerate() {
            let all: Vec<usize> = block
                .successors()
                .into_iter()
                .filter_map(|s| index.get(&s).copied())
                .collect();
            let mut distinct = Vec::with_capacity(all.len());
            for &s in &all {
                if !distinct.contains(&s) {
                    distinct.push(s);
                    preds[s].push(i);
                }
            }
            edges.push(all);
            succs.push(distinct);
        }
        let (rpo, rpo_number) = reverse_post_order(&succs);
        Cfg {
            function,
            blocks,
            index,
            succs,
            edges,
            preds,
            rpo,
            rpo_number,
            order: std::cell::OnceCell::new(),
        }
    }

    /// The function.
    #[must_use]
    pub fn function(&self) -> Function<'m> {
        self.function
    }

    /// The number of blocks.
    #[must_use]
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether there are no blocks (a declaration).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The blocks, indexed as everywhere in this module (entry first, then layout order).
    #[must_use]
    pub fn blocks(&self) -> &[BasicBlock<'m>] {
        &self.blocks
    }

    /// Block `index`.
    #[must_use]
    pub fn block(&self, index: usize) -> Option<BasicBlock<'m>> {
        self.blocks.get(index).copied()
    }

    /// The index of `block`, if it is a block of this function.
    #[must_use]
    pub fn index_of(&self, block: BasicBlock<'m>) -> Option<usize> {
        self.index.get(&block).copied()
    }

    /// The distinct successors of block `index`, in terminator order.
    #[must_use]
    pub fn successors(&self, index: usize) -> &[usize] {
        self.succs.get(index).map_or(&[], Vec::as_slice)
    }

    /// The distinct predecessors of block `index`, in increasing order, unreachable ones
    /// included.
    #[must_use]
    pub fn predecessors(&self, index: usize) -> &[usize] {
        self.preds.get(index).map_or(&[], Vec::as_slice)
    }

    /// How many edges go from `from` to `to` (a `switch` may have several).
    #[must_use]
    pub fn edge_count(&self, from: usize, to: usize) -> usize {
        self.edges
            .get(from)
            .map_or(0, |e| e.iter().filter(|&&s| s == to).count())
    }

    /// The blocks reachable from the entry, in reverse post-order (entry first; every
    /// block before its successors except along back edges).
    #[must_use]
    pub fn reverse_post_order(&self) -> &[usize] {
        &self.rpo
    }

    /// The blocks reachable from the entry, in post-order (successors before their
    /// predecessors except along back edges): the order for backward data-flow such as
    /// liveness.
    #[must_use]
    pub fn post_order(&self) -> Vec<usize> {
        self.rpo.iter().rev().copied().collect()
    }

    /// Whether block `index` is reachable from the entry.
    #[must_use]
    pub fn is_reachable(&self, index: usize) -> bool {
        self.rpo_number.get(index).is_some_and(Option::is_some)
    }

    /// The blocks not reachable from the entry, in increasing order.
    #[must_use]
    pub fn unreachable_blocks(&self) -> Vec<usize> {
        (0..self.len()).filter(|&b| !self.is_reachable(b)).collect()
    }

    /// Whether `a` comes strictly before `b` in the same block; `None` when they are in
    /// different blocks or either is erased. Uses positions taken the first time it is
    /// asked, when both instructions were there; else asks LLVM.
    #[must_use]
    pub fn comes_before(&self, a: Instruction<'m>, b: Instruction<'m>) -> Option<bool> {
        if a.block()? != b.block()? {
            return None;
        }
        let order = self.order.get_or_init(|| {
            self.blocks
                .iter()
                .flat_map(|b| {
                    b.instructions()
                        .into_iter()
                        .enumerate()
                        .map(|(pos, i)| (i, pos))
                })
                .collect()
        });
        match (order.get(&a), order.get(&b)) {
            (Some(x), Some(y)) => Some(x < y),
            _ => a.comes_before(b),
        }
    }
}

/// Iterative depth-first search from block 0: the reverse post-order of reachable blocks
/// and each block's position in it.
fn reverse_post_order(succs: &[Vec<usize>]) -> (Vec<usize>, Vec<Option<usize>>) {
    let n = succs.len();
    let mut post = Vec::with_capacity(n);
    let mut visited = vec![false; n];
    if n > 0 {
        // Each frame: a block and the index of its next successor to visit.
        let mut stack = vec![(0usize, 0usize)];
        visited[0] = true;
        while let Some(frame) = stack.last_mut() {
            let (block, next) = *frame;
            match succs[block].get(next) {
                Some(&s) => {
                    frame.1 += 1;
                    if !visited[s] {
                        visited[s] = true;
                        stack.push((s, 0));
                    }
                }
                None => {
                    post.push(block);
                    stack.pop();
                }
            }
        }
    }
    post.reverse();
    let mut number = vec![None; n];
    for (i, &b) in post.iter().enumerate() {
        number[b] = Some(i);
    }
    (post, number)
}

/// The dominator tree of a [`Cfg`], with dominance frontiers.
///
/// Conventions are LLVM's: a block dominates itself; every block dominates an unreachable
/// block, and an unreachable block dominates nothing else. The entry block and unreachable
/// blocks have no immediate dominator.
#[derive(Debug, Clone)]
pub struct Dominators<'c, 'm> {
    cfg: &'c Cfg<'m>,
    idom: Vec<Option<usize>>,
    children: Vec<Vec<usize>>,
    /// Pre- and post-order numbers in the dominator tree, for O(1) queries.
    pre: Vec<usize>,
    post: Vec<usize>,
    frontier: Vec<Vec<usize>>,
}

impl<'c, 'm> Dominators<'c, 'm> {
    /// Computes the dominator tree and dominance frontiers of `cfg`.
    #[must_use]
    pub fn new(cfg: &'c Cfg<'m>) -> Self {
        let n = cfg.len();
        let idom = immediate_dominators(cfg);
        let mut children = vec![Vec::new(); n];
        for (b, d) in idom.iter().enumerate() {
            if let Some(d) = *d {
                children[d].push(b);
            }
        }
        let (pre, post) = tree_numbers(&children, n);
        let frontier = frontiers(cfg, &idom);
        Dominators {
            cfg,
            idom,
            children,
            pre,
            post,
            frontier,
        }
    }

    /// The CFG this was computed on.
    #[must_use]
    pub fn cfg(&self) -> &'c Cfg<'m> {
        self.cfg
    }

    /// The immediate dominator of block `b`; `None` for the entry and unreachable blocks.
    #[must_use]
    pub fn immediate_dominator(&self, b: usize) -> Option<usize> {
        self.idom.get(b).copied().flatten()
    }

    /// The blocks `b` immediately dominates, in increasing order.
    #[must_use]
    pub fn children(&self, b: usize) -> &[usize] {
        self.children.get(b).map_or(&[], Vec::as_slice)
    }

    /// Whether block `a` dominates block `b` (see the conventions above).
    #[must_use]
    pub fn dominates(&self, a: usize, b: usize) -> bool {
        if a == b {
            return true;
        }
        if !self.cfg.is_reachable(b) {
            return true;
        }
        if !self.cfg.is_reachable(a) {
            return false;
        }
        self.pre[a] <= self.pre[b] && self.post[b] <= self.post[a]
    }

    /// Whether `a` dominates `b` and differs from it.
    #[must_use]
    pub fn strictly_dominates(&self, a: usize, b: usize) -> bool {
        a != b && self.dominates(a, b)
    }

    /// [`Dominators::dominates`] on block handles; false for blocks of other functions.
    #[must_use]
    pub fn block_dominates(&self, a: BasicBlock<'m>, b: BasicBlock<'m>) -> bool {
        match (self.cfg.index_of(a), self.cfg.index_of(b)) {
            (Some(a), Some(b)) => self.dominates(a, b),
            _ => false,
        }
    }

    /// The nearest block dominating both `a` and `b`; `None` if either is unreachable.
    #[must_use]
    pub fn nearest_common_dominator(&self, a: usize, b: usize) -> Option<usize> {
        if !self.cfg.is_reachable(a) || !self.cfg.is_reachable(b) {
            return None;
        }
        let mut x = a;
        while !self.dominates(x, b) {
            x = self.immediate_dominator(x)?;
        }
        Some(x)
    }

    /// The dominance frontier of block `b`: the blocks where `b`'s dominance ends (where
    /// a value defined in `b` would need a `phi`), in increasing order.
    #[must_use]
    pub fn frontier(&self, b: usize) -> &[usize] {
        self.frontier.get(b).map_or(&[], Vec::as_slice)
    }

    /// Whether the edge `from → to` dominates block `use_block` (LLVM's
    /// `dominates(BasicBlockEdge, BasicBlock)`): every path to `use_block` goes through
    /// that edge. Several edges between the same two blocks dominate nothing.
    #[must_use]
    pub fn edge_dominates(&self, from: usize, to: usize, use_block: usize) -> bool {
        if !self.dominates(to, use_block) {
            return false;
        }
        let preds = self.cfg.predecessors(to);
        if preds.len() == 1 && self.cfg.edge_count(from, to) == 1 {
            return true;
        }
        if self.cfg.edge_count(from, to) != 1 {
            return false;
        }
        preds.iter().all(|&p| p == from || self.dominates(to, p))
    }

    /// Whether the value `def` dominates the instruction `user` (LLVM's
    /// `DominatorTree::dominates(const Value *, const Instruction *)`): arguments and
    /// constants dominate everything; an instruction does not dominate itself; a use in
    /// an unreachable block is dominated by anything; the result of an `invoke` is
    /// available only past the edge to its normal destination; a `phi` user counts as
    /// using the value at the top of its block. Erased instructions dominate nothing
    /// and are dominated by nothing.
    #[must_use]
    pub fn dominates_instruction(&self, def: Value<'m>, user: Instruction<'m>) -> bool {
        let Some(def) = def.as_instruction() else {
            return true;
        };
        let (Some(def_block), Some(use_block)) = (self.index_in(def), self.index_in(user)) else {
            return false;
        };
        if !self.cfg.is_reachable(use_block) {
            return true;
        }
        if !self.cfg.is_reachable(def_block) {
            return false;
        }
        if def == user {
            return false;
        }
        if matches!(def.opcode(), Opcode::Invoke | Opcode::CallBr) || user.opcode() == Opcode::Phi {
            return self.dominates_block_start(def, def_block, use_block);
        }
        if def_block != use_block {
            return self.dominates(def_block, use_block);
        }
        self.cfg.comes_before(def, user).unwrap_or(false)
    }

    /// Whether the value `def` dominates the use `u` (LLVM's
    /// `DominatorTree::dominates(const Value *, const Use &)`): like
    /// [`Dominators::dominates_instruction`], except that a `phi` uses its incoming value
    /// at the end of the incoming block. Uses by constants count as dominated.
    #[must_use]
    pub fn dominates_use(&self, def: Value<'m>, u: Use<'m>) -> bool {
        let Some(def) = def.as_instruction() else {
            return true;
        };
        let Some(user) = u.user.as_instruction() else {
            return true;
        };
        let Some(def_block) = self.index_in(def) else {
            return false;
        };
        let use_block = if user.opcode() == Opcode::Phi {
            let incoming = user.phi_incoming();
            let block = usize::try_from(u.operand)
                .ok()
                .and_then(|i| incoming.get(i))
                .and_then(|(_, b)| self.cfg.index_of(*b));
            match block {
                Some(b) => b,
                None => return false,
            }
        } else {
            match self.index_in(user) {
                Some(b) => b,
                None => return false,
            }
        };
        if !self.cfg.is_reachable(use_block) {
            return true;
        }
        if !self.cfg.is_reachable(def_block) {
            return false;
        }
        if let Some(dest) = self.normal_dest(def) {
            // A phi in the normal destination using the value along this very edge.
            if user.opcode() == Opcode::Phi
                && self.index_in(user) == Some(dest)
                && use_block == def_block
            {
                return true;
            }
            return self.edge_dominates(def_block, dest, use_block);
        }
        if def_block != use_block {
            return self.dominates(def_block, use_block);
        }
        if user.opcode() == Opcode::Phi {
            return true;
        }
        self.cfg.comes_before(def, user).unwrap_or(false)
    }

    /// Whether `def` (in block `def_block`) dominates the start of block `block` (LLVM's
    /// `dominates(const Instruction *, const BasicBlock *)`).
    fn dominates_block_start(&self, def: Instruction<'m>, def_block: usize, block: usize) -> bool {
        if !self.cfg.is_reachable(block) {
            return true;
        }
        if !self.cfg.is_reachable(def_block) || def_block == block {
            return false;
        }
        match self.normal_dest(def) {
            Some(dest) => self.edge_dominates(def_block, dest, block),
            None => self.dominates(def_block, block),
        }
    }

    /// For an `invoke` or `callbr`: the index of the block its result is defined on the
    /// way to (normal or default destination).
    fn normal_dest(&self, def: Instruction<'m>) -> Option<usize> {
        match def.opcode() {
            // The first successor is the normal (invoke) or default (callbr) destination.
            Opcode::Invoke | Opcode::CallBr => {
                let dest = def.successors().into_iter().next()?;
                self.cfg.index_of(dest)
            }
            _ => None,
        }
    }

    fn index_in(&self, inst: Instruction<'m>) -> Option<usize> {
        self.cfg.index_of(inst.block()?)
    }
}

/// Cooper–Harvey–Kennedy: iterate `idom(b) = intersect(processed preds of b)` over the
/// reverse post-order until nothing changes.
fn immediate_dominators(cfg: &Cfg<'_>) -> Vec<Option<usize>> {
    let n = cfg.len();
    let rpo = cfg.reverse_post_order();
    let number = |b: usize| cfg.rpo_number[b].unwrap_or(usize::MAX);
    // Internally the entry is its own dominator; `None` means "not yet known".
    let mut idom: Vec<Option<usize>> = vec![None; n];
    let Some(&entry) = rpo.first() else {
        return idom;
    };
    idom[entry] = Some(entry);
    let intersect = |idom: &[Option<usize>], mut a: usize, mut b: usize| -> usize {
        while a != b {
            while number(a) > number(b) {
                a = idom[a].unwrap_or(entry);
            }
            while number(b) > number(a) {
                b = idom[b].unwrap_or(entry);
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new_idom = None;
            for &p in cfg.predecessors(b) {
                if idom[p].is_none() {
                    continue; // Unreachable, or not processed yet.
                }
                new_idom = Some(match new_idom {
                    None => p,
                    Some(current) => intersect(&idom, p, current),
                });
            }
            if new_idom.is_some() && idom[b] != new_idom {
                idom[b] = new_idom;
                changed = true;
            }
        }
    }
    idom[entry] = None;
    idom
}

/// Pre- and post-order numbers of the dominator tree (iterative DFS from every root).
fn tree_numbers(children: &[Vec<usize>], n: usize) -> (Vec<usize>, Vec<usize>) {
    let mut pre = vec![0; n];
    let mut post = vec![0; n];
    let mut has_parent = vec![false; n];
    for c in children.iter().flatten() {
        has_parent[*c] = true;
    }
    let (mut pre_n, mut post_n) = (0, 0);
    for root in (0..n).filter(|&b| !has_parent[b]) {
        let mut stack = vec![(root, 0usize)];
        pre[root] = pre_n;
        pre_n += 1;
        while let Some(frame) = stack.last_mut() {
            let (b, next) = *frame;
            match children[b].get(next) {
                Some(&c) => {
                    frame.1 += 1;
                    pre[c] = pre_n;
                    pre_n += 1;
                    stack.push((c, 0));
                }
                None => {
                    post[b] = post_n;
                    post_n += 1;
                    stack.pop();
                }
            }
        }
    }
    (pre, post)
}

/// Dominance frontiers (Cooper–Harvey–Kennedy, figure 5): for each join point, walk up
/// from each reachable predecessor to the join's immediate dominator.
fn frontiers(cfg: &Cfg<'_>, idom: &[Option<usize>]) -> Vec<Vec<usize>> {
    let n = cfg.len();
    let mut df = vec![Vec::new(); n];
    for b in 0..n {
        if !cfg.is_reachable(b) {
            continue;
        }
        let preds: Vec<usize> = cfg
            .predecessors(b)
            .iter()
            .copied()
            .filter(|&p| cfg.is_reachable(p))
            .collect();
        if preds.len() < 2 {
            continue;
        }
        for p in preds {
            let mut runner = Some(p);
            while let Some(r) = runner {
                if Some(r) == idom[b] {
                    break;
                }
                if !df[r].contains(&b) {
                    df[r].push(b);
                }
                runner = idom[r];
            }
        }
    }
    for list in &mut df {
        list.sort_unstable();
    }
    df
}
