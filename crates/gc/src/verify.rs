//! The GC invariants of spec 003 ("Инварианты"), checked on LLVM IR.
