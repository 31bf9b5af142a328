//! The address spaces of spec 003 ("Представление"), and what a type holds of them.

use locus_llvm::ir::Type;

pub use crate::contract::{CALLEE_ROOTED, DERIVED, LOADED, TRACKED, UNTRACKED};

/// True for the four GC address spaces.
pub fn is_gc(space: u32) -> bool {
    (TRACKED..=LOADED).contains(&space)
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
