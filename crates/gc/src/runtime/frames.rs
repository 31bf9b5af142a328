//! The per-thread chain of GC frames that lowered code links and unlinks.
