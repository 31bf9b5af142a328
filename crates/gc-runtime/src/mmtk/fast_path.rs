//! What compiled code needs to allocate on MMTk without calling the runtime: the thread's
//! bump pointer and the valid-object bits (filled in by the inline-allocation work).
