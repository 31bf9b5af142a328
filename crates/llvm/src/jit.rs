//! Running IR in process: LLVM's ORC LLJIT.
