//! The patch points and stack maps of a program, read from its IR: what each reserves,
//! which the stack map section does not record.

use std::collections::HashMap;

use locus_llvm::Result;
use locus_llvm::{Context, Module};

use super::deopt::{self, Continuation};
use super::jit_error;

/// What made a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteKind {
    /// `llvm.experimental.patchpoint.*`: the record is at the start of the reserved bytes.
    PatchPoint,
    /// `llvm.experimental.stackmap`: the record is where the shadow begins.
    StackMap,
}

/// One patch point or stack map of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Its ID (the intrinsic's first argument).
    pub id: u64,
    /// Patch point or stack map.
    pub kind: SiteKind,
    /// `numBytes` of a patch point, `numShadowBytes` of a stack map.
    pub reserved: usize,
    /// The function that holds it.
    pub function: String,
}

/// Every site of `ir` by ID, and for every stack map how to finish its function.
pub(super) type Scanned = (
    HashMap<u64, Site>,
    HashMap<u64, std::result::Result<Continuation, String>>,
);

/// Reads the sites of `ir` and translates the code after each stack map.
pub(super) fn scan(name: &str, ir: &str) -> Result<Scanned> {
    let context = Context::new();
    let module = Module::parse_ir(&context, name, ir)?;
    let mut sites: HashMap<u64, Site> = HashMap::new();
    let mut continuations = HashMap::new();
    for function in module.function_list() {
        if function.is_declaration() {
            continue;
        }
        for instruction in function.instructions() {
            let Some(call) = instruction.as_call() else {
                continue;
            };
            let Some(callee) = call.callee_name() else {
                continue;
            };
            let kind = if callee.starts_with("llvm.experimental.patchpoint.") {
                SiteKind::PatchPoint
            } else if callee == "llvm.experimental.stackmap" {
                SiteKind::StackMap
            } else {
                continue;
            };
            let arguments = call.arguments();
            let (Some(id), Some(reserved)) = (
                arguments.first().and_then(|v| v.const_uint()),
                arguments.get(1).and_then(|v| v.const_uint()),
            ) else {
                continue;
            };
            let reserved = usize::try_from(reserved).unwrap_or(usize::MAX);
            if kind == SiteKind::PatchPoint && reserved < locus_stackmap::patch::x86_64::CALL_LEN {
                return Err(jit_error(&format!(
                    "{name}: patch point {id} in @{} reserves {reserved} bytes; the runtime \
                     patches 13-byte calls",
                    function.name()
                )));
            }
            let site = Site {
                id,
                kind,
                reserved,
                function: function.name(),
            };
            if let Some(old) = sites.get(&id) {
                if old.kind != site.kind || old.reserved != site.reserved {
                    return Err(jit_error(&format!(
                        "{name}: ID {id} names sites of different kinds or sizes (@{} and @{})",
                        old.function, site.function
                    )));
                }
            }
            if kind == SiteKind::StackMap {
                continuations.insert(id, deopt::translate(function, instruction));
            }
            sites.insert(id, site);
        }
    }
    Ok((sites, continuations))
}
