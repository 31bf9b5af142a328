//! The runtime that lowered code calls: frames, heap, collector.

pub mod collector;
pub mod frames;
pub mod heap;
