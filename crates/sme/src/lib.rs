//! AArch64 SME: the streaming-mode and ZA rules of spec 004 as a model (work in progress).
