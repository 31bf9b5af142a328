//! Julia's TBAA tags on the memory accesses the lowering adds: frame words and the task's
//! `ptls` field are `jtbaa_gcframe`, type tag words `jtbaa_tag`, built in Julia's tree (see
//! [`crate::contract::TBAA_ROOT`]). They tell LLVM's alias analysis that the frame and the
//! headers are not the program's data, as Julia's own passes do; a frontend with a TBAA tree
//! of its own has another root, so its accesses are never assumed apart from these.

use locus_llvm::builder::Builder;
use locus_llvm::ir::{Instruction, Metadata};

use crate::contract::{TBAA_DATA, TBAA_GCFRAME, TBAA_ROOT, TBAA_TAG};
use crate::Result;

/// Which of Julia's TBAA types an access has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tbaa {
    /// A GC frame's words, the chain head, the task's `ptls` field.
    GcFrame,
    /// An object's type tag word.
    Tag,
}

/// Sets `inst`'s `!tbaa` to the access tag of `which`.
pub fn decorate<'m>(b: &Builder<'m>, inst: Instruction<'m>, which: Tbaa) -> Result<()> {
    let zero = || -> Result<Metadata<'m>> { Ok(Metadata::Value(b.const_int(b.int_type(64)?, 0)?)) };
    let scalar = |name: &str, parent: Metadata<'m>| -> Result<Metadata<'m>> {
        Ok(Metadata::Node(vec![
            Metadata::String(name.into()),
            parent,
            zero()?,
        ]))
    };
    let root = Metadata::Node(vec![Metadata::String(TBAA_ROOT.into())]);
    let julia = scalar(TBAA_ROOT, root)?;
    let ty = match which {
        Tbaa::GcFrame => scalar(TBAA_GCFRAME, julia)?,
        Tbaa::Tag => scalar(TBAA_TAG, scalar(TBAA_DATA, julia)?)?,
    };
    let tag = Metadata::Node(vec![ty.clone(), ty, zero()?]);
    Ok(b.set_metadata(inst, "tbaa", &tag)?)
}
