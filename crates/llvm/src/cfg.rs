//! Control-flow graphs in Rust: predecessors, post-order, dominators.
