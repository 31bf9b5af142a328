//! The address spaces of spec 003 ("Представление"), and what a type holds of them.

use locus_llvm::ir::Type;

pub use crate::contract::{CALLEE_ROOTED, DERIVED, LOADED, TRACKED, UNTRACKED};

/// True for the four GC address spaces.
pub fn is_gc(space: u32) -> bool {
    (TRACKED..=LOADED).contains(&space)
}

/// The most GC pointers a struct, array or vector type may hold in a function the
/// lowering takes part in: it lists them one by one (frame slots, the fields RS4GC
/// relocates), and LLVM's code generator crashes on aggregates of GC pointers far larger.
/// Larger is refused ([`crate::lower::refuse_huge_gc_aggregates`]).
pub const MAX_GC_POINTERS_PER_TYPE: u64 = 4096;

/// How many GC pointers (in any of the four GC address spaces) a value of type `ty` holds,
/// saturating: one for such a pointer, one per lane of a vector of them, the sum over a
/// struct's fields, an array's length times its element's.
pub fn gc_pointer_count(ty: Type<'_>) -> u64 {
    if ty.is_pointer() {
        return u64::from(ty.address_space().is_some_and(is_gc));
    }
    if ty.is_vector() {
        let elem = ty.scalar();
        let gc = elem.is_pointer() && elem.address_space().is_some_and(is_gc);
        return if gc {
            u64::from(ty.vector_len().unwrap_or(0))
        } else {
            0
        };
    }
    if let Some(fields) = ty.struct_fields() {
        return fields
            .into_iter()
            .fold(0u64, |n, f| n.saturating_add(gc_pointer_count(f)));
    }
    match (ty.element_type(), ty.array_len()) {
        (Some(elem), Some(n)) => n.saturating_mul(gc_pointer_count(elem)),
        _ => 0,
    }
}

/// Where one tracked pointer sits inside a value of vector or aggregate type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeafPath {
    /// The value is the pointer.
    Whole,
    /// Element `i` of a vector.
    Element(u32),
    /// The field at these `extractvalue` indices of a struct or array.
    Field(Vec<u32>),
    /// Element `i` of the vector at these `extractvalue` indices.
    FieldElement(Vec<u32>, u32),
}

/// The tracked pointers (address space 10) inside a value of type `ty`, in order: one for a
/// pointer, one per element for a vector, one per tracked field (recursively) for structs
/// and arrays.
pub fn tracked_leaves(ty: Type<'_>) -> Vec<LeafPath> {
    let mut out = Vec::new();
    if ty.is_pointer() {
        if ty.address_space() == Some(TRACKED) {
            out.push(LeafPath::Whole);
        }
    } else if ty.is_vector() {
        let elem = ty.scalar();
        if elem.is_pointer() && elem.address_space() == Some(TRACKED) {
            for i in 0..ty.vector_len().unwrap_or(0) {
                out.push(LeafPath::Element(i));
            }
        }
    } else if ty.is_aggregate() {
        let fields: Vec<Type<'_>> = match (ty.struct_fields(), ty.element_type(), ty.array_len()) {
            (Some(fields), _, _) => fields,
            (None, Some(elem), Some(n)) => (0..n.min(1 << 16)).map(|_| elem).collect(),
            _ => Vec::new(),
        };
        for (i, f) in fields.into_iter().enumerate() {
            for leaf in tracked_leaves(f) {
                let mut path = vec![i as u32];
                out.push(match leaf {
                    LeafPath::Whole => LeafPath::Field(path),
                    LeafPath::Field(rest) => {
                        path.extend(rest);
                        LeafPath::Field(path)
                    }
                    LeafPath::Element(e) => LeafPath::FieldElement(path, e),
                    LeafPath::FieldElement(rest, e) => {
                        path.extend(rest);
                        LeafPath::FieldElement(path, e)
                    }
                });
            }
        }
    }
    out
}

/// True if a value of type `ty` holds a Loaded (13) pointer: such a value lives off the
/// object it was loaded from.
pub fn holds_loaded(ty: Type<'_>) -> bool {
    ty.holds_pointer_in(|a| a == LOADED)
}

/// True if a value of type `ty` holds a pointer in any of the GC address spaces.
pub fn holds_gc_pointer(ty: Type<'_>) -> bool {
    ty.holds_pointer_in(is_gc)
}
