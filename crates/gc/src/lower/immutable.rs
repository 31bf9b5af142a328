//! Which loads read memory that never changes, so that what they load lives as long as the
//! object (or global) it was loaded from, and needs no root of its own where that is rooted
//! (issue 12, section 4; Julia's `isLoadFromImmut` and `isLoadFromConstGV`).
//!
//! As Julia's LateLowerGCFrame decides it since its codegen states each access's memory
//! region explicitly (JuliaLang/julia#62802; test/llvmpasses/refinements.ll at
//! 0213ebc77a63af85fff00da4f819722a40d1df61): the refinement is keyed on the region
//! (`!alias.scope`), not on the layout description (`!tbaa`). A load reads immutable memory
//! when it carries `!invariant.load`, or when its `!alias.scope` list names only Julia's
//! immutable regions (`jnoalias_immutdata`, or `jnoalias_mutconstdata` for the `const`
//! fields of mutable objects) of the `jnoalias` domain: any other region in the list (the
//! stack, mutable data), or a scope of another domain, vetoes it, since the access may then
//! be to memory that changes. A `!tbaa` tag alone, `jtbaa_const` included, proves nothing
//! (older Julia trusted it): mutable memory tagged const keeps its loads rooted.

use locus_llvm::ir::{Instruction, Metadata, Opcode, Value, ValueKind};

use crate::contract::{GC_LOADED, GET_PGCSTACK, GET_PGCSTACK_OR_NEW, TYPEOF};

/// Julia's alias-scope domain, and its regions that are never written.
const JULIA_DOMAIN: &str = "jnoalias";
const IMMUTABLE_REGIONS: &[&str] = &["jnoalias_immutdata", "jnoalias_mutconstdata"];

/// The first string among a node's operands: the name of an alias scope or domain.
fn name_of<'a>(node: &'a Metadata<'_>) -> Option<&'a str> {
    node.operands().iter().find_map(Metadata::as_str)
}

fn scopes_say_immutable(scopes: &Metadata<'_>) -> bool {
    let list = scopes.operands();
    !list.is_empty()
        && list.iter().all(|scope| {
            let domain = scope.operands().get(1).and_then(name_of);
            domain == Some(JULIA_DOMAIN)
                && name_of(scope).is_some_and(|n| IMMUTABLE_REGIONS.contains(&n))
        })
}

/// True if `load` reads memory that never changes.
pub fn is_immutable_load(load: Instruction<'_>) -> bool {
    if load.opcode() != Opcode::Load {
        return false;
    }
    load.metadata("invariant.load").is_some()
        || load
            .metadata("alias.scope")
            .is_some_and(|s| scopes_say_immutable(&s))
}

/// `v` without in-bounds offsets and pointer casts.
fn strip(v: Value<'_>) -> Value<'_> {
    let mut v = v;
    for _ in 0..64 {
        match v.as_instruction() {
            Some(i)
                if matches!(i.opcode(), Opcode::BitCast | Opcode::AddrSpaceCast)
                    || (i.opcode() == Opcode::GetElementPtr && i.is_inbounds()) =>
            {
                match i.operand(0) {
                    Some(src) => v = src,
                    None => return v,
                }
            }
            _ => return v,
        }
    }
    v
}

/// True if `load` reads a constant global, or, through immutable loads, something as
/// permanent: what it loads is rooted for as long as the program runs (or, for what comes
/// from arguments and the thread's own state, for as long as this function does).
pub fn is_load_from_constant(load: Instruction<'_>) -> bool {
    let mut seen = Vec::new();
    load_from_constant(load, &mut seen, 0)
}

fn load_from_constant<'m>(load: Instruction<'m>, seen: &mut Vec<Value<'m>>, depth: u32) -> bool {
    let Some(ptr) = load.operand(0) else {
        return false;
    };
    let base = strip(ptr);
    if base.kind() == ValueKind::GlobalVariable {
        return is_immutable_load(load) || base.is_constant_global();
    }
    is_immutable_load(load) && constant_source(base, seen, depth + 1)
}

fn constant_source<'m>(v: Value<'m>, seen: &mut Vec<Value<'m>>, depth: u32) -> bool {
    if depth > 64 || seen.contains(&v) {
        // A cycle of phis over permanent values is permanent; very deep chains are not
        // worth proving.
        return depth <= 64;
    }
    seen.push(v);
    let v = strip(v);
    if v.kind() == ValueKind::GlobalVariable {
        return v.is_constant_global();
    }
    if v.as_argument().is_some() || (v.is_constant() && !v.is_global()) {
        return true;
    }
    let Some(inst) = v.as_instruction() else {
        return false;
    };
    match inst.opcode() {
        Opcode::Load => load_from_constant(inst, seen, depth + 1),
        Opcode::Select => [inst.operand(1), inst.operand(2)]
            .into_iter()
            .all(|o| o.is_some_and(|o| constant_source(o, seen, depth + 1))),
        Opcode::Phi => inst
            .phi_incoming()
            .into_iter()
            .all(|(o, _)| constant_source(o, seen, depth + 1)),
        Opcode::Call => {
            let Some(call) = inst.as_call() else {
                return false;
            };
            match call.callee_name().as_deref() {
                Some(TYPEOF | GET_PGCSTACK | GET_PGCSTACK_OR_NEW) => true,
                Some(GC_LOADED) => call
                    .arguments()
                    .into_iter()
                    .all(|a| constant_source(a, seen, depth + 1)),
                _ => false,
            }
        }
        _ => false,
    }
}
