//! Late GC root placement: from IR with tracked pointers to IR with a GC frame.
//!
//! The pipeline: [`scan`] reduces a function to a [`model::FnModel`]; [`liveness`] finds the
//! values to root at each safepoint; [`color`] assigns frame slots; [`place`] decides where
//! the stores and nulls go; `emit` writes them into the IR with Julia's `julia.*_gc_frame*`
//! intrinsics and `final_lower` turns those into a real frame.

mod bitset;
pub mod color;
pub mod liveness;
pub mod model;
pub mod place;

pub use bitset::BitSet;
