//! Statepoint roots: the same Julia-style input rewritten for LLVM's
//! `rewrite-statepoints-for-gc` (RS4GC) instead of given a GC frame.
//!
//! RS4GC treats pointers in address space 1 as GC pointers in functions whose `gc` strategy
//! is `statepoint-example`, wraps every call that is not a GC leaf in a `gc.statepoint`,
//! lists every GC pointer live across it (with the base object of each derived pointer) in
//! the statepoint's stack map record, and makes the code use the relocated values
//! (`gc.relocate`) after the call: so the collector may move what those slots point to.
//! [`rewrite_for_statepoints`] gets the input there:
//!
//! 1. the contract's pins become runtime calls, before the constructs that carry them are
//!    cleaned up: each object a `llvm.julia.gc_preserve_begin` names is pinned until the
//!    matching `gc_preserve_end`, and each object in a call's `jl_roots` bundle for the
//!    call, with scoped pins ([`PIN_SCOPED`], [`UNPIN_SCOPED`]: the runtime keeps them on
//!    the thread's stack of root regions, see "Unwinding" below), and an object passed to
//!    `julia.pointer_from_objref` for the rest of its life ([`PIN_FOREVER`]): its address
//!    escaped as a plain pointer;
//! 2. Julia's helpers are lowered as for frames (`julia.call`, the allocations,
//!    `julia.typeof`, write barriers, `julia.get_pgcstack`), and `sroa,mem2reg` promotes the
//!    function's `alloca`s of GC pointers to SSA values, which RS4GC can relocate;
//! 3. every struct or array value holding GC pointers is scalarized: its pointer fields are
//!    extracted right after it is made and it is rebuilt from them before each use, because
//!    LLVM 19's RS4GC relocates scalars and vectors of GC pointers, never aggregates;
//! 4. the text is retyped: address spaces 10, 11, 12 and 13 all become 1 (a cast between
//!    two of them becomes a `bitcast`), and the runtime's functions that may collect become
//!    small internal wrappers defined in the module (so the output links against the
//!    runtime library as it is), which pass their frame address
//!    (`llvm.frameaddress`) to the runtime's `locus_gc_sp_*` entry: the walk of the
//!    frame-pointer chain starts there ([`crate::runtime::statepoints`]);
//! 5. every other defined function gets `gc "statepoint-example"` and
//!    `"frame-pointer"="all"`, the runtime functions that never collect `"gc-leaf-function"`,
//!    its `addrspacecast`s of plain pointers into the GC space (static objects) a base
//!    RS4GC can take (a constant expression, or `ptrtoint` and `inttoptr`: LLVM 19's RS4GC
//!    makes an invalid module of the cast itself, llvm-project issue 61917),
//!    and RS4GC runs in process (`LLVMRunPasses`). A function of variable size (a dynamic
//!    `alloca`) is also made `"no-realign-stack"`, its `alloca`s aligned beyond the stack's
//!    16 bytes given their alignment by hand (a larger `alloca`, its address rounded up by
//!    `llvm.ptrmask`): realigned (for such an `alloca`, or the 32-byte spill of a vector of
//!    GC pointers), LLVM would address its statepoint slots off a base pointer (`rbx`,
//!    `x19`), a callee-saved register the walk cannot recover; not realigned, they are off
//!    the frame pointer. One that asks for realignment itself (`"stackrealign"`,
//!    `alignstack`, an over-aligned `byval` argument) keeps it, and the runtime refuses its
//!    records by name.
//!
//! # `invoke`
//!
//! RS4GC makes an `invoke` an invoked `gc.statepoint`: it gives the invoke a normal
//! destination of its own (a critical edge split, a destination with several predecessors
//! or `phi`s given a new block) where the relocations take the statepoint's token, and a
//! landing pad of its own (a pad shared by several invokes split per edge, its `phi`s moved
//! after) where they take the landing pad: `gc.relocate(token %pad, ...)`. LLVM's verifier
//! wants that pad to be `landingpad token` (`gc.relocate`'s first parameter is a `token`
//! and every landing pad of a function has one type), and a token pad carries no exception.
//! So, for the functions that take part:
//!
//! - a `landingpad token` is LLVM's form and is kept: values live into it are relocated
//!   there;
//! - when every landing pad of a function is of another type (`{ ptr, i32 }`) and nothing
//!   uses their value, they become `landingpad token` (as the OpenJDK port Jeandle does in
//!   its RS4GC), and the same holds;
//! - when a landing pad's value (the exception: `__cxa_begin_catch`, `resume`) is used, it
//!   keeps its type, and each object live into it is pinned right before the invoke and
//!   unpinned first thing in both destinations: it cannot move during the call, so the
//!   value from before the call is right on the unwind path and replaces RS4GC's
//!   relocation there (relocations nothing uses are dropped). The copying MMTk plans that
//!   cannot pin report such a pin as a fault, as they do for `gc_preserve`.
//!
//! The objects of a `jl_roots` bundle on an invoke are pinned before it and unpinned first
//! thing in both destinations (through a `phi` where a destination has other
//! predecessors). Root regions are dropped before a `resume` as before a `ret`, and a
//! landing pad drops those of the frames unwound to reach it (down to the depth after its
//! function's latest push). A `gc_preserve` region an exception leaves through one of the
//! function's landing pads unpins what it pinned on the way out (see
//! `unpin_preserves_left_by_unwinding`): in a pad that cannot come back to the region's
//! end, before a `ret` or `resume` after a pad that could, and before the region is
//! entered again. Refused, naming the function
//! and instruction: an invoke of one of Julia's helpers but `julia.get_pgcstack`
//! (`julia.gc_alloc_obj`, `julia.call`, ...: they are expanded as calls), and what LLVM's
//! RS4GC crashes on: an invoke that unwinds to a funclet pad (`cleanuppad`, `catchswitch`:
//! no `landingpad` to tie relocations to), and `callbr`.
//!
//! # Unwinding
//!
//! A frame with no landing pad runs no code while an exception unwinds through it: the
//! pins of its open `gc_preserve` regions, of a `jl_roots` bundle on a `call` (not an
//! `invoke`) that unwinds, and its root regions stay. They are entries of one stack per
//! thread in the runtime (`locus_gc_runtime::runtime::scopes`), and the landing pad that
//! catches resets that stack (`locus_gc_region_reset`) to the depth after its own
//! function's latest entry, read from a slot that each push, scoped pin and scoped unpin
//! of the function updates (the scoped pin calls return the depth): what the unwound
//! frames left goes, the catching function's own pins stay. A function that may return
//! with a `gc_preserve` region open (an end on some paths only) resets the stack to its
//! depth on entry before its returns, as a function with root regions does. The pins of
//! an object live into a `{ ptr, i32 }` landing pad ([`PIN`], [`UNPIN`]) are undone in
//! both destinations of their `invoke`, in the frame that made them, and are not on the
//! stack.
//!
//! # Limits
//!
//!
//! A function with more than [`MAX_RELOCATIONS_PER_FUNCTION`] `gc.relocate` calls after
//! RS4GC is refused, naming it: LLVM's code generator takes minutes on such a function
//! (measured there), where frame roots keep one slot per object.

use std::collections::{HashMap, HashSet};

use locus_llvm::builder::Builder;
use locus_llvm::cfg::{Cfg, Dominators};
use locus_llvm::ir::ValueKind;
use locus_llvm::ir::{Function, Instruction, Opcode, Type, TypeKind, Value};
use locus_llvm::passes::{
    add_call_string_attribute, add_function_enum_attribute, add_function_string_attribute,
    run_passes, set_gc,
};
use locus_llvm::{Context, Module};

use super::scan::returns_twice_calls;
use super::WriteBarriers;
use crate::addrspace::is_gc;
use crate::contract::{
    ALLOC_ZEROINIT_INDIRECT, GC_LOADED, GET_PGCSTACK, GET_PGCSTACK_OR_NEW, JL_ROOTS,
    POINTER_FROM_OBJREF, PRESERVE_BEGIN, PRESERVE_END, RUNTIME_ALLOC, RUNTIME_ALLOC_BYTES,
    RUNTIME_ALLOC_GENERICMEMORY, RUNTIME_CALLEE_ROOTED_READ, RUNTIME_FOREIGN_READ,
    RUNTIME_GET_PGCSTACK, RUNTIME_PUSH_REGION, RUNTIME_REGION_DEPTH, RUNTIME_REGION_RESET,
    RUNTIME_SAFEPOINT, RUNTIME_WRITE_BARRIER, UNTRACKED,
};
use crate::{Error, Result};

/// The GC strategy RS4GC rewrites.
pub const GC_STRATEGY: &str = "statepoint-example";
/// The address space of GC pointers for RS4GC.
pub const GC_ADDRESS_SPACE: u32 = 1;
pub use crate::contract::{
    RUNTIME_PIN as PIN, RUNTIME_PIN_FOREVER as PIN_FOREVER, RUNTIME_PIN_SCOPED as PIN_SCOPED,
    RUNTIME_UNPIN as UNPIN, RUNTIME_UNPIN_SCOPED as UNPIN_SCOPED,
};
/// The prefix of the runtime entries the wrappers call, with the frame address last.
pub const SP_PREFIX: &str = "locus_gc_sp_";

/// The runtime functions that may collect: each becomes a wrapper calling
/// `locus_gc_sp_<suffix>`.
pub const COLLECTING: [(&str, &str); 6] = [
    (RUNTIME_ALLOC, "alloc"),
    (RUNTIME_ALLOC_BYTES, "alloc_bytes"),
    (RUNTIME_ALLOC_GENERICMEMORY, "alloc_genericmemory"),
    (RUNTIME_SAFEPOINT, "safepoint"),
    (RUNTIME_FOREIGN_READ, "foreign_read"),
    (RUNTIME_CALLEE_ROOTED_READ, "callee_rooted_read"),
];

/// The runtime functions that never collect: no statepoint for calls to them.
const LEAVES: [&str; 11] = [
    RUNTIME_GET_PGCSTACK,
    RUNTIME_WRITE_BARRIER,
    crate::contract::RUNTIME_WRITE_BARRIER_INTERIOR,
    PIN,
    UNPIN,
    PIN_FOREVER,
    PIN_SCOPED,
    UNPIN_SCOPED,
    RUNTIME_REGION_DEPTH,
    RUNTIME_PUSH_REGION,
    RUNTIME_REGION_RESET,
];

/// What the rewrite did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatepointReport {
    /// Functions given the `statepoint-example` strategy.
    pub functions: usize,
    /// Aggregate values scalarized.
    pub aggregates: usize,
    /// Pin calls inserted (gc_preserve, jl_roots, pointer_from_objref).
    pub pins: usize,
    /// Runtime wrappers defined.
    pub wrappers: usize,
    /// `alloca`s of GC pointers left in memory, registered as conservative root regions.
    pub regions: usize,
    /// Landing pads made `landingpad token` (their value, the exception, was unused).
    pub token_landing_pads: usize,
    /// Objects pinned across an `invoke` because they are live into a landing pad whose
    /// value is used (see the [module documentation](self)).
    pub landing_pad_pins: usize,
    /// `gc.relocate` calls in the rewritten module.
    pub relocations: usize,
    /// The most GC pointers one statepoint keeps (its `gc-live` list).
    pub widest_statepoint: usize,
    /// Functions of variable size kept from realigning their stack (`"no-realign-stack"`,
    /// see the [module documentation](self)), so that their slots are off the frame
    /// pointer, not a base pointer.
    pub unrealigned: usize,
    /// `addrspacecast`s of plain pointers into the GC space given a base RS4GC can take
    /// (see `rebase_untracked_casts`).
    pub static_casts: usize,
}

/// The prefix of LLVM's statepoint intrinsics (`llvm.experimental.gc.statepoint.p0`),
/// which RS4GC's output calls at every safepoint.
pub const STATEPOINT_INTRINSIC: &str = "llvm.experimental.gc.statepoint";

/// Whether `module` calls a statepoint intrinsic: code generation writes a
/// `.llvm_stackmaps` section for it exactly when it does.
pub fn calls_statepoints(module: &Module<'_>) -> bool {
    module
        .functions()
        .iter()
        .filter(|name| name.starts_with(STATEPOINT_INTRINSIC))
        .filter_map(|name| module.function(name))
        .any(|f| !f.as_value().uses().is_empty())
}

/// The most `gc.relocate` calls one function may have after RS4GC; more is refused
/// ([`Error::Lower`] naming the function). A statepoint relocates every GC pointer live
/// across it, so a function that keeps `n` objects live while allocating them has about
/// `n * n / 2`; LLVM's code generator is slower than linear in them. Measured (x86-64,
/// LLVM 19, `n` objects allocated and then summed): `n` = 400, 79,801 relocations,
/// `llc-19 -O2` 5.7 s; `n` = 440, `locus gc run` 8.1 s; `n` = 1000, 499,501 relocations, the
/// lowering 11.3 s and 620 MB, `llc-19 -O2` 71 s and 717 MB, `locus gc run` 107 s (1.5 s
/// with frame roots, which keep one slot per object).
pub const MAX_RELOCATIONS_PER_FUNCTION: usize = 100_000;

/// Rewrites `module` (Julia-style, already checked against the GC invariants) for
/// statepoint roots, as the [module documentation](self) describes, and returns the
/// rewritten module, parsed in `ctx` and verified. `module` is changed on the way (its
/// helpers lowered).
///
/// # Errors
/// [`Error::Lower`] naming the function and instruction the rewrite cannot handle, and
/// LLVM's errors (the retyped text or RS4GC's output failing to verify).
pub fn rewrite_for_statepoints<'c>(
    ctx: &'c Context,
    module: &Module<'_>,
) -> Result<(Module<'c>, StatepointReport)> {
    rewrite_for_statepoints_with(ctx, module, WriteBarriers::default())
}

/// [`rewrite_for_statepoints`], with the write barriers `barriers` asks for (see
/// [`WriteBarriers`]).
///
/// # Errors
/// As [`rewrite_for_statepoints`].
pub fn rewrite_for_statepoints_with<'c>(
    ctx: &'c Context,
    module: &Module<'_>,
    barriers: WriteBarriers,
) -> Result<(Module<'c>, StatepointReport)> {
    let (out, mut report) = prepare(ctx, module, barriers)?;
    // `out` is verified, so a verifier error here is about RS4GC's output: its relocations
    // tied to a landing pad that is not a `token` fail until fixed up below, and the
    // verification after the fix-up reports anything else.
    match run_passes(&out, "rewrite-statepoints-for-gc") {
        Ok(()) | Err(locus_llvm::Error::Verify { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    {
        let b = Builder::new(&out);
        for f in out.function_list() {
            if !f.is_declaration() && f.gc().as_deref() == Some(GC_STRATEGY) {
                report.landing_pad_pins += pin_into_typed_landing_pads(&b, f)?;
            }
        }
    }
    out.verify()?;
    for f in out.function_list() {
        let (relocations, widest) = count_relocations(f);
        report.relocations += relocations;
        report.widest_statepoint = report.widest_statepoint.max(widest);
        if relocations > MAX_RELOCATIONS_PER_FUNCTION {
            return Err(Error::Lower {
                function: f.name(),
                instruction: None,
                message: format!(
                    "{relocations} gc.relocate calls after RS4GC (its widest statepoint keeps \
                     {widest} GC pointers), more than the limit of \
                     {MAX_RELOCATIONS_PER_FUNCTION}: LLVM's code generator slows down faster than \
                     they grow (79,801 took llc-19 -O2 5.7 s, 499,501 took 71 s); split the \
                     function, keep fewer objects live across calls, or use frame roots"
                ),
            });
        }
    }
    Ok((out, report))
}

/// Steps 1 to 5 of [`rewrite_for_statepoints`] but RS4GC itself: the module as it is handed
/// to `rewrite-statepoints-for-gc` (so that LLVM's own pass, `opt-19
/// -passes=rewrite-statepoints-for-gc`, can be run on the same input), parsed in `ctx` and
/// verified.
///
/// # Errors
/// As [`rewrite_for_statepoints`].
pub fn prepare_for_rs4gc<'c>(
    ctx: &'c Context,
    module: &Module<'_>,
) -> Result<(Module<'c>, StatepointReport)> {
    prepare(ctx, module, WriteBarriers::default())
}

/// [`prepare_for_rs4gc`] with the write barriers `barriers` asks for.
fn prepare<'c>(
    ctx: &'c Context,
    module: &Module<'_>,
    barriers: WriteBarriers,
) -> Result<(Module<'c>, StatepointReport)> {
    let mut report = StatepointReport::default();
    // Functions with a `gc_preserve` region that may return without its end.
    let mut reset_at_return = HashSet::new();
    {
        let b = Builder::new(module);
        for f in module.function_list() {
            if f.is_declaration() {
                continue;
            }
            refuse_unsupported_calls(f)?;
            super::refuse_huge_gc_aggregates(f)?;
            let (pins, open_at_return) = pin_contract(&b, f)?;
            report.pins += pins;
            if open_at_return {
                reset_at_return.insert(f.name());
            }
            super::emit::rewrite_helpers_with(&b, f, barriers)?;
            super::final_lower::final_lower(&b, f)?;
        }
        module.verify()?;
    }
    // Promote what lives in allocas to SSA values, which RS4GC relocates (memory it does
    // not). Later passes see the same IR a frontend would hand to RS4GC.
    run_passes(module, "function(sroa,mem2reg)")?;
    {
        let b = Builder::new(module);
        for f in module.function_list() {
            if !f.is_declaration() {
                report.regions += register_regions(&b, f, reset_at_return.contains(&f.name()))?;
                report.aggregates += scalarize_aggregates(&b, f)?;
            }
        }
        module.verify()?;
    }
    let mut wrappers = Vec::new();
    for (runtime, suffix) in COLLECTING {
        if let Some(f) = module.function(runtime).filter(|f| f.is_declaration()) {
            wrappers.push((runtime, suffix, f.function_type()));
        }
    }
    let token_functions = token_landing_pad_functions(module);
    let mut text = retype(&module.print());
    if !token_functions.is_empty() {
        let (retyped, n) = token_landing_pads(&text, &token_functions);
        text = retyped;
        report.token_landing_pads = n;
    }
    let mut defs = String::new();
    for (runtime, suffix, ty) in &wrappers {
        text = drop_declaration(&text, runtime);
        defs.push_str(&wrapper(runtime, suffix, *ty)?);
    }
    if !defs.is_empty() {
        text.push_str("\ndeclare ptr @llvm.frameaddress.p0(i32 immarg)\n");
        text.push_str(&defs);
    }
    report.wrappers = wrappers.len();
    let name = module.name();
    let out = Module::parse_ir(ctx, &name, text)?;
    out.verify()?;
    let wrapper_names: Vec<&str> = wrappers.iter().map(|w| w.0).collect();
    {
        let b = Builder::new(&out);
        for f in out.function_list() {
            let fname = f.name();
            if f.is_declaration() {
                if LEAVES.contains(&fname.as_str()) {
                    add_function_string_attribute(f, "gc-leaf-function", "");
                }
                continue;
            }
            add_function_string_attribute(f, "frame-pointer", "all");
            // Call frame information at every instruction (`uwtable(async)`): the AArch64
            // walk reads each frame's CFA rule from `.eh_frame`, which LLVM writes for a
            // `nounwind` function only when asked.
            add_function_enum_attribute(f, "uwtable", UWTABLE_ASYNC);
            if wrapper_names.contains(&fname.as_str()) {
                continue;
            }
            set_gc(f, Some(GC_STRATEGY));
            report.functions += 1;
            report.static_casts += rebase_untracked_casts(&b, f)?;
            // Inline assembly never collects; RS4GC would make it a statepoint, which
            // cannot take its address (an invalid module).
            for call in f.instructions() {
                if call
                    .as_call()
                    .is_some_and(|c| c.called_value().kind() == ValueKind::InlineAsm)
                {
                    add_call_string_attribute(call, "gc-leaf-function", "");
                }
            }
            if super::realign::keep_from_realigning(&b, f)? {
                report.unrealigned += 1;
            }
        }
    }
    out.verify()?;
    Ok((out, report))
}

/// Rewrites each `addrspacecast` of a plain pointer into the GC space, which LLVM 19's
/// RS4GC cannot give a base (llvm-project issue 61917: it takes the plain pointer for the
/// base, and a `phi` of it and a GC pointer makes an invalid `bitcast ptr null to ptr
/// addrspace(1)`), into what it can: the cast of a constant (a static object: Julia's
/// `nothing`, a module's global) becomes a constant expression, a base RS4GC never
/// relocates; of anything else, `ptrtoint` and `inttoptr`, a base of its own that the
/// collector finds in the slot (a static object it skips, or a pinned object it keeps).
/// Returns how many casts it rewrote.
fn rebase_untracked_casts<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<usize> {
    let casts: Vec<Instruction<'m>> = f
        .instructions()
        .into_iter()
        .filter(|i| i.opcode() == Opcode::AddrSpaceCast)
        .filter(|i| i.ty().scalar().address_space() == Some(GC_ADDRESS_SPACE))
        .filter(|i| {
            i.operand(0)
                .is_some_and(|v| v.ty().scalar().address_space() != Some(GC_ADDRESS_SPACE))
        })
        .collect();
    for &cast in &casts {
        let Some(plain) = cast.operand(0) else {
            continue;
        };
        b.position_before(cast)?;
        let rebased = if plain.is_constant() {
            // LLVM's builder folds the cast of a constant into a constant expression.
            b.addrspacecast(plain, cast.ty(), "")?
        } else {
            let word = b.int_type(64)?;
            let words = match cast.ty().vector_len() {
                Some(n) => b.vector_type(word, n)?,
                None => word,
            };
            // Named: the rewritten text stays readable, and editable by name.
            let int = b.ptrtoint(plain, words, "untracked.int")?;
            b.inttoptr(int, cast.ty(), "untracked")?
        };
        b.replace_all_uses_with(cast, rebased)?;
        b.erase(cast)?;
    }
    Ok(casts.len())
}

/// `uwtable`'s value for asynchronous unwind tables (LLVM's `UWTableKind::Async`).
const UWTABLE_ASYNC: u64 = 2;

/// The GC pointer leaves of a value of type `ty` at the granularity RS4GC relocates: a
/// pointer or a vector of pointers (in any GC address space), by `extractvalue` path.
fn gc_fields(ty: Type<'_>) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let fields: Vec<Type<'_>> = match (ty.struct_fields(), ty.element_type(), ty.array_len()) {
        (Some(fields), _, _) => fields,
        (None, Some(elem), Some(n)) if ty.is_aggregate() => {
            (0..n.min(1 << 12)).map(|_| elem).collect()
        }
        _ => return out,
    };
    for (i, f) in fields.into_iter().enumerate() {
        let here = u32::try_from(i).unwrap_or(u32::MAX);
        if f.is_aggregate() {
            for mut rest in gc_fields(f) {
                rest.insert(0, here);
                out.push(rest);
            }
        } else if f.holds_pointer_in(is_gc) {
            out.push(vec![here]);
        }
    }
    out
}

/// Every GC pointer inside `v` (a pointer, a vector lane, an aggregate field), extracted
/// at the builder's position.
fn pointer_leaves<'m>(b: &Builder<'m>, v: Value<'m>) -> Result<Vec<Value<'m>>> {
    let ty = v.ty();
    if ty.is_pointer() {
        return Ok(if ty.address_space().is_some_and(is_gc) {
            vec![v]
        } else {
            Vec::new()
        });
    }
    if ty.is_vector() {
        let mut out = Vec::new();
        if ty.scalar().address_space().is_some_and(is_gc) {
            for i in 0..ty.vector_len().unwrap_or(0) {
                let index = b.const_int(b.int_type(32)?, i64::from(i))?;
                out.push(b.extract_element(v, index, "")?);
            }
        }
        return Ok(out);
    }
    let mut out = Vec::new();
    for path in gc_fields(ty) {
        let mut x = v;
        for &i in &path {
            x = b.extract_value(x, i, "")?;
        }
        out.extend(pointer_leaves(b, x)?);
    }
    Ok(out)
}

/// The untracked address of each GC pointer of `v`, for the pin calls.
fn raw_leaves<'m>(b: &Builder<'m>, v: Value<'m>) -> Result<Vec<Value<'m>>> {
    let raw = b.ptr_type(UNTRACKED)?;
    pointer_leaves(b, v)?
        .into_iter()
        .filter(|l| !l.is_null() && !l.is_undef())
        .map(|l| Ok(b.addrspacecast(l, raw, "")?))
        .collect()
}

/// Calls `name(raw)` (declaring `void @name(ptr)`, or `i64 @name(ptr)` for the scoped
/// pins, which return the scope depth, if needed) at the builder's position.
fn call_pin<'m>(b: &Builder<'m>, name: &str, raw: Value<'m>) -> Result<Instruction<'m>> {
    let ret = if is_scoped_pin(name) {
        b.int_type(64)?
    } else {
        b.void_type()
    };
    let ty = b.function_type(ret, &[b.ptr_type(UNTRACKED)?], false)?;
    let f = b.declare_function(name, ty)?;
    Ok(b.call(ty, f, &[raw], &[], "")?)
}

/// Whether `name` is one of the runtime's scoped pin calls, which return the scope depth
/// after them.
pub(super) fn is_scoped_pin(name: &str) -> bool {
    name == PIN_SCOPED || name == UNPIN_SCOPED
}

/// A `gc_preserve_begin` as [`pin_contract`] lowered it: the call, the untracked addresses
/// it pinned, the last pin call (where the pins are done), and its `gc_preserve_end`s.
struct Preserve<'m> {
    begin: Instruction<'m>,
    raws: Vec<Value<'m>>,
    pinned_at: Option<Instruction<'m>>,
    ends: Vec<Instruction<'m>>,
}

/// Inserts the pin calls for `f`'s gc_preserve regions, `jl_roots` bundles and
/// `pointer_from_objref` calls. Returns how many, and whether a `gc_preserve` region may
/// reach a `ret` without its end (then the function's returns drop what it left on the
/// scope stack: [`register_regions`]).
fn pin_contract<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<(usize, bool)> {
    let mut pins = 0;
    let mut preserved: HashMap<Value<'m>, Preserve<'m>> = HashMap::new();
    let mut begins = Vec::new();
    let mut ends = Vec::new();
    for inst in f.instructions() {
        let Some(call) = inst.as_call() else { continue };
        let name = call.callee_name().unwrap_or_default();
        if name == PRESERVE_BEGIN {
            b.position_after(inst)?;
            let mut raws = Vec::new();
            for arg in call.arguments() {
                raws.extend(raw_leaves(b, arg)?);
            }
            let mut pinned_at = None;
            for &raw in &raws {
                pinned_at = Some(call_pin(b, PIN_SCOPED, raw)?);
                pins += 1;
            }
            begins.push(inst.as_value());
            preserved.insert(
                inst.as_value(),
                Preserve {
                    begin: inst,
                    raws,
                    pinned_at,
                    ends: Vec::new(),
                },
            );
        } else if name == PRESERVE_END {
            ends.push(inst);
        } else if name == GC_LOADED {
            // `julia.gc_loaded(obj, ptr)`: `ptr` points into memory `obj` keeps alive. RS4GC
            // cannot tie a plain pointer to a base, so the memory stays where it is (the
            // object holding it is pinned for good) and the result is a base of its own
            // (`inttoptr`), which the collector keeps without moving.
            let (Some(&ptr), true) = (call.arguments().get(1), call.num_arguments() == 2) else {
                return Err(refuse(f, inst, "julia.gc_loaded needs two arguments"));
            };
            b.position_before(inst)?;
            call_pin(b, PIN_FOREVER, ptr)?;
            pins += 1;
            let int = b.ptrtoint(ptr, b.int_type(64)?, "")?;
            let loaded = b.inttoptr(int, inst.ty(), "")?;
            let name = inst.name();
            b.replace_all_uses_with(inst, loaded)?;
            b.erase(inst)?;
            b.set_name(loaded, &name)?;
        } else if name == POINTER_FROM_OBJREF {
            if let Some(&arg) = call.arguments().first() {
                b.position_before(inst)?;
                for raw in raw_leaves(b, arg)? {
                    call_pin(b, PIN_FOREVER, raw)?;
                    pins += 1;
                }
            }
        } else if let Some(bundle) = call.operand_bundle(JL_ROOTS) {
            b.position_before(inst)?;
            let mut raws = Vec::new();
            for v in bundle.args {
                raws.extend(raw_leaves(b, v)?);
            }
            for &raw in &raws {
                call_pin(b, PIN_SCOPED, raw)?;
                pins += 1;
            }
            if call.is_invoke() {
                let from = inst
                    .block()
                    .ok_or_else(|| refuse(f, inst, "an invoke in no block"))?;
                for dest in [call.normal_dest(), call.unwind_dest()]
                    .into_iter()
                    .flatten()
                {
                    unpin_after_edge(b, f, from, dest, &raws)?;
                }
            } else {
                b.position_after(inst)?;
                for &raw in &raws {
                    call_pin(b, UNPIN_SCOPED, raw)?;
                }
            }
        }
    }
    for end in ends {
        let token = end.as_call().and_then(|c| c.arguments().first().copied());
        let Some(region) = token.and_then(|t| preserved.get_mut(&t)) else {
            continue;
        };
        b.position_before(end)?;
        for &raw in &region.raws {
            call_pin(b, UNPIN_SCOPED, raw)?;
        }
        region.ends.push(end);
    }
    let regions: Vec<Preserve<'m>> = begins.iter().filter_map(|t| preserved.remove(t)).collect();
    let open_at_return = may_return_inside(f, &regions);
    unpin_preserves_left_by_unwinding(b, f, &regions)?;
    Ok((pins, open_at_return))
}

/// Whether a path from one of `regions`' `gc_preserve_begin`s reaches a `ret` without
/// passing one of its ends (spec 003 lets a region have an end on some paths only): its
/// pins would outlive the function.
fn may_return_inside<'m>(f: Function<'m>, regions: &[Preserve<'m>]) -> bool {
    let cfg = Cfg::new(f);
    regions.iter().any(|region| {
        let Some(home) = region.begin.block().and_then(|bb| cfg.index_of(bb)) else {
            return false;
        };
        let ends: Vec<usize> = region
            .ends
            .iter()
            .filter_map(|e| e.block().and_then(|bb| cfg.index_of(bb)))
            .collect();
        // An end after the begin in its own block closes every path from it.
        let closed_at_home = region
            .ends
            .iter()
            .any(|&e| cfg.comes_before(region.begin, e) == Some(true));
        if closed_at_home {
            return false;
        }
        let mut seen = vec![false; cfg.len()];
        let mut work = vec![home];
        while let Some(x) = work.pop() {
            if std::mem::replace(&mut seen[x], true) {
                continue;
            }
            if x != home && ends.contains(&x) {
                continue;
            }
            let returns = cfg
                .block(x)
                .and_then(|bb| bb.terminator())
                .is_some_and(|t| t.opcode() == Opcode::Ret);
            if returns {
                return true;
            }
            work.extend_from_slice(cfg.successors(x));
        }
        false
    })
}

/// The blocks reachable from block `from` of `cfg` (itself included).
fn reachable_from(cfg: &Cfg<'_>, from: usize) -> Vec<bool> {
    let mut seen = vec![false; cfg.len()];
    let mut work = vec![from];
    while let Some(x) = work.pop() {
        if !std::mem::replace(&mut seen[x], true) {
            work.extend_from_slice(cfg.successors(x));
        }
    }
    seen
}

/// An exception that reaches one of `f`'s landing pads from inside a `gc_preserve` region
/// skips the region's `gc_preserve_end`, and with it the unpins: the objects would stay
/// pinned (and, pinned, alive) for ever. For each region a landing pad can be reached
/// from, each pinned address is kept in a slot (`gc.preserved`, null outside the region:
/// set after the pins, cleared at each end), and what the slots still hold is unpinned
///
/// - first thing in each landing pad from which no end of the region is reachable (the
///   pad leaves the region: it resumes unwinding, or catches and goes on elsewhere);
/// - before each `ret` and `resume` reachable from a landing pad from which an end is
///   reachable too (a path through a pad that could have come back to an end but did
///   not);
/// - right before the region is entered again from a landing pad (its old pins: the end of
///   that entry was skipped), when the pad reaches the `gc_preserve_begin`.
///
/// Unpinning null does nothing, so a path that never pinned, or whose end ran, unpins
/// nothing. `sroa,mem2reg` then turns the slots into SSA values. A function with no landing
/// pad runs no code while an exception unwinds through it: its pins stay (see the module
/// documentation).
fn unpin_preserves_left_by_unwinding<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    regions: &[Preserve<'m>],
) -> Result<()> {
    let cfg = Cfg::new(f);
    let pads: Vec<usize> = (0..cfg.len())
        .filter(|&i| {
            cfg.block(i)
                .and_then(|bb| bb.first_non_phi())
                .is_some_and(|i| i.opcode() == Opcode::LandingPad)
        })
        .collect();
    if pads.is_empty() {
        return Ok(());
    }
    let raw = b.ptr_type(UNTRACKED)?;
    let null = b.const_null(raw)?;
    let from_pad: HashMap<usize, Vec<bool>> =
        pads.iter().map(|&p| (p, reachable_from(&cfg, p))).collect();
    for region in regions {
        let (Some(pinned_at), Some(home)) = (
            region.pinned_at,
            region.begin.block().and_then(|bb| cfg.index_of(bb)),
        ) else {
            continue;
        };
        let from_begin = reachable_from(&cfg, home);
        let pads_in: Vec<usize> = pads.iter().copied().filter(|&p| from_begin[p]).collect();
        if pads_in.is_empty() {
            continue;
        }
        let end_blocks: Vec<usize> = region
            .ends
            .iter()
            .filter_map(|e| e.block().and_then(|bb| cfg.index_of(bb)))
            .collect();
        b.position_after_allocas(f)?;
        let mut slots = Vec::with_capacity(region.raws.len());
        for _ in &region.raws {
            let slot = b.alloca(raw, None, "gc.preserved")?.as_value();
            b.store(null, slot)?;
            slots.push(slot);
        }
        let unpin_slots = |clear: bool| -> Result<()> {
            for &slot in &slots {
                let held = b.load(raw, slot, "gc.preserved.held")?;
                call_pin(b, UNPIN_SCOPED, held.as_value())?;
                if clear {
                    b.store(null, slot)?;
                }
            }
            Ok(())
        };
        if pads_in.iter().any(|p| from_pad[p][home]) {
            b.position_before(region.begin)?;
            unpin_slots(true)?;
        }
        b.position_after(pinned_at)?;
        for (&raw, &slot) in region.raws.iter().zip(&slots) {
            b.store(raw, slot)?;
        }
        for &end in &region.ends {
            b.position_after(end)?;
            for &slot in &slots {
                b.store(null, slot)?;
            }
        }
        // Blocks after a pad that may come back to an end, but need not.
        let mut after_staying = vec![false; cfg.len()];
        for &p in &pads_in {
            let reach = &from_pad[&p];
            if end_blocks.iter().any(|&e| reach[e]) {
                for (x, &r) in reach.iter().enumerate() {
                    after_staying[x] |= r;
                }
            } else if let Some(pad) = cfg.block(p) {
                b.position_at_first_insertion_point(pad)?;
                unpin_slots(true)?;
            }
        }
        for (x, _) in after_staying.iter().enumerate().filter(|(_, &l)| l) {
            let Some(term) = cfg.block(x).and_then(|bb| bb.terminator()) else {
                continue;
            };
            if matches!(term.opcode(), Opcode::Ret | Opcode::Resume) {
                b.position_before(term)?;
                unpin_slots(false)?;
            }
        }
    }
    Ok(())
}

/// Unpins `raws` (pinned at the end of block `from`) first thing in `dest`, a successor of
/// `from`. When `dest` has other predecessors, what it unpins is a `phi` of each raw
/// pointer from `from` and null from the others (an unpin of null is ignored), so a path
/// that never pinned unpins nothing.
fn unpin_after_edge<'m>(
    b: &Builder<'m>,
    f: Function<'m>,
    from: locus_llvm::ir::BasicBlock<'m>,
    dest: locus_llvm::ir::BasicBlock<'m>,
    raws: &[Value<'m>],
) -> Result<()> {
    // Each predecessor once per edge (a switch may reach `dest` twice).
    let edges: Vec<_> = f
        .blocks()
        .into_iter()
        .flat_map(|bb| {
            let n = bb.successors().iter().filter(|&&s| s == dest).count();
            std::iter::repeat_n(bb, n)
        })
        .collect();
    let mut unpin = raws.to_vec();
    if edges.iter().any(|&bb| bb != from) {
        b.position_at_start(dest)?;
        for v in &mut unpin {
            let phi = b.phi(v.ty(), "gc.pinned")?;
            let null = b.const_null(v.ty())?;
            for &bb in &edges {
                b.add_incoming(phi, if bb == from { *v } else { null }, bb)?;
            }
            *v = phi.as_value();
        }
    }
    b.position_at_first_insertion_point(dest)?;
    for &raw in &unpin {
        call_pin(b, UNPIN_SCOPED, raw)?;
    }
    Ok(())
}

/// Registers each `alloca` of `f` that may hold GC pointers (what `sroa,mem2reg` could not
/// promote: a `julia.call` argument array, an `sret` buffer, a dynamic `alloca`, a buffer
/// of any type that GC pointers are stored into or loaded from:
/// [`super::memory::allocas_holding_gc`]) as a root region ([`super::regions::register`]):
/// RS4GC relocates SSA values only, so a pointer kept in memory across a safepoint must
/// stay where it is, and the collector scans the region conservatively and pins what it
/// names. With `reset_at_return` (a `gc_preserve` region may reach a `ret` without its end)
/// the function resets the scope stack before each return even without regions, so that
/// the region's pins end with its frame. Returns how many regions.
fn register_regions<'m>(b: &Builder<'m>, f: Function<'m>, reset_at_return: bool) -> Result<usize> {
    keep_across_returns_twice(b, f)?;
    let allocas = super::memory::allocas_holding_gc(f);
    let count = super::regions::register(b, f, &allocas, reset_at_return)?;
    if count > 0 {
        super::regions::drop_tail_markers(b, f)?;
    }
    Ok(count)
}

/// A `longjmp` comes back to a `returns_twice` call (`setjmp`) from a path where RS4GC saw
/// what is live after the call as dead, so nothing keeps it there. Each GC pointer live
/// across such a call is stored, right before the call, into a slot of a root region of the
/// function's own: kept, and pinned, until the function returns. The call itself is a
/// GC leaf (it never collects), so no statepoint relocates anything there: RS4GC's
/// relocation at the call was reloaded after the second return from a spill slot LLVM
/// had given another value on the path to the `longjmp` (a program returned another
/// object's 7 for its own 42). What is live across the call stays in its own register or
/// spill slot, as in C: LLVM spills around a `returns_twice` call and does not share stack
/// slots in such a function.
///
/// Live across the call: [`super::scan::gc_pointers_live_across`] (keeping a value that is
/// not is safe: a pin).
fn keep_across_returns_twice<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<()> {
    let calls = returns_twice_calls(f);
    if calls.is_empty() {
        return Ok(());
    }
    // Every call's values are found before any store is inserted (the CFG keeps positions).
    let cfg = Cfg::new(f);
    let dom = Dominators::new(&cfg);
    let mut kept: Vec<(Instruction<'m>, Vec<Value<'m>>)> = Vec::new();
    for &call in &calls {
        let live = super::scan::gc_pointers_live_across(f, &cfg, &dom, call);
        if !live.is_empty() {
            kept.push((call, live));
        }
    }
    for &call in &calls {
        add_call_string_attribute(call, "gc-leaf-function", "");
    }
    for (call, live) in kept {
        b.position_after_allocas(f)?;
        let ty = b.array_type(b.ptr_type(crate::contract::TRACKED)?, live.len() as u64)?;
        let slots = b.alloca(ty, None, "gc.setjmp.roots")?;
        b.position_before(call)?;
        let i32t = b.int_type(32)?;
        for (k, v) in live.iter().enumerate() {
            let zero = b.const_int(i32t, 0)?;
            let index = b.const_int(i32t, k as i64)?;
            let slot = b.gep(ty, slots.as_value(), &[zero, index], true, "")?;
            let tracked = if v.ty().address_space() == Some(crate::contract::TRACKED) {
                *v
            } else {
                b.addrspacecast(*v, b.ptr_type(crate::contract::TRACKED)?, "")?
            };
            b.store(tracked, slot)?;
        }
    }
    Ok(())
}

/// The defined functions of `module` that have landing pads, each of a type other than
/// `token` and with a value (the exception) nothing uses: their landing pads can become
/// `landingpad token`, which LLVM ties the unwind path's `gc.relocate`s to (its verifier
/// wants the token of a relocation there to be the landing pad, and `gc.relocate` takes a
/// `token`; every landing pad of a function has one type).
fn token_landing_pad_functions(module: &Module<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for f in module.function_list() {
        let pads: Vec<Instruction<'_>> = f
            .instructions()
            .into_iter()
            .filter(|i| i.opcode() == Opcode::LandingPad)
            .collect();
        if !pads.is_empty()
            && pads
                .iter()
                .all(|p| p.ty().kind() != TypeKind::Token && !p.as_value().has_uses())
        {
            out.push(f.name());
        }
    }
    out
}

/// `text` (a printed module) with the type of every `landingpad` in the definitions of
/// `functions` made `token`, and how many. A landing pad's clauses are printed on lines of
/// their own, so its first line ends with its type.
fn token_landing_pads(text: &str, functions: &[String]) -> (String, usize) {
    const PAD: &str = " = landingpad ";
    let names: std::collections::HashSet<&str> = functions.iter().map(String::as_str).collect();
    let mut inside = false;
    let mut count = 0;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.starts_with("define ") {
            // The first `@` of a definition's line starts the function's name, quoted
            // (`@"a b"(`) or not (`@name(`).
            inside = line.find('@').is_some_and(|at| {
                let rest = &line[at + 1..];
                let name = match rest.strip_prefix('"') {
                    Some(quoted) => quoted.split('"').next(),
                    None => rest.split('(').next(),
                };
                name.is_some_and(|n| names.contains(n))
            });
        } else if line.starts_with('}') {
            inside = false;
        }
        match line.find(PAD).filter(|_| inside) {
            Some(at) => {
                out.push_str(&line[..at + PAD.len()]);
                out.push_str("token");
                count += 1;
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    (out, count)
}

/// Refuses the calls LLVM 19's RS4GC cannot rewrite, which crash it (a null landing pad,
/// an unexpected call kind) rather than fail: a `callbr`, and an `invoke` whose unwind
/// destination is a funclet pad (`cleanuppad`, `catchswitch`), since RS4GC ties the unwind
/// path's relocations to a `landingpad`; and an `invoke` of one of Julia's helpers, which
/// the lowering replaces as if it were a call. Also a `va_arg` of a GC pointer, which
/// LLVM 19's RS4GC takes for a derived pointer whose base it cannot find (it crashes).
fn refuse_unsupported_calls(f: Function<'_>) -> Result<()> {
    super::refuse_must_tail(f)?;
    for inst in f.instructions() {
        match inst.opcode() {
            Opcode::VAArg if inst.ty().holds_pointer_in(is_gc) => {
                return Err(refuse(
                    f,
                    inst,
                    "va_arg of a GC pointer (RS4GC cannot find its base; frame roots read it)",
                ))
            }
            Opcode::CallBr => {
                return Err(refuse(
                    f,
                    inst,
                    "callbr (RS4GC rewrites calls and invokes only)",
                ))
            }
            Opcode::Invoke => {
                let callee = inst
                    .as_call()
                    .and_then(|c| c.callee_name())
                    .unwrap_or_default();
                let zeroinit = inst
                    .as_call()
                    .is_some_and(|c| c.has_operand_bundle(ALLOC_ZEROINIT_INDIRECT));
                // `julia.get_pgcstack` is only renamed, so its invoke (which inlining makes
                // of the call in a callee inlined at an invoke) stays one.
                let renamed = callee == GET_PGCSTACK || callee == GET_PGCSTACK_OR_NEW;
                let helper = callee.starts_with("julia.") || callee.starts_with("llvm.julia.");
                if (helper && !renamed) || zeroinit {
                    // Julia's helpers are lowered in place of a call (emit.rs): an invoke
                    // would lose its terminator.
                    return Err(refuse(
                        f,
                        inst,
                        &format!("an invoke of Julia's helper @{callee} (the helpers are lowered as calls)"),
                    ));
                }
                let pad = inst
                    .as_call()
                    .and_then(|c| c.unwind_dest())
                    .and_then(|d| d.first_non_phi());
                if !pad.is_some_and(|p| p.opcode() == Opcode::LandingPad) {
                    return Err(refuse(
                        f,
                        inst,
                        "an invoke that unwinds to a funclet pad (cleanuppad, catchswitch), \
                         not a landingpad, which RS4GC ties the unwind path's relocations to",
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The `gc.relocate` calls of `f` and the longest `gc-live` list of its statepoints.
fn count_relocations(f: Function<'_>) -> (usize, usize) {
    let (mut relocations, mut widest) = (0, 0);
    for inst in f.instructions() {
        let Some(call) = inst.as_call() else { continue };
        let name = call.callee_name().unwrap_or_default();
        if name.starts_with("llvm.experimental.gc.relocate") {
            relocations += 1;
        } else if name.starts_with(STATEPOINT_INTRINSIC) {
            let live = call.operand_bundle("gc-live").map_or(0, |b| b.args.len());
            widest = widest.max(live);
        }
    }
    (relocations, widest)
}

/// Whether `inst` calls `llvm.experimental.gc.relocate.*`.
fn is_relocate(inst: Instruction<'_>) -> bool {
    inst.as_call()
        .and_then(|c| c.callee_name())
        .is_some_and(|n| n.starts_with("llvm.experimental.gc.relocate"))
}

/// After RS4GC: the `gc.relocate`s it tied to a landing pad that is not a `token` (the
/// exception is used, so the pad keeps its `{ ptr, i32 }`) fail LLVM's verifier. Unused
/// ones go. For each used one, the object it relocates is pinned across the `invoke`
/// (pinned right before it, unpinned first thing in both destinations): it cannot move
/// during the call, so on the unwind path the value from before the call is still right
/// and replaces the relocation. Returns how many pins.
fn pin_into_typed_landing_pads<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<usize> {
    let mut pins = 0;
    for invoke in f.instructions() {
        let Some(call) = invoke.as_call().filter(|c| c.is_invoke()) else {
            continue;
        };
        let (Some(normal), Some(unwind)) = (call.normal_dest(), call.unwind_dest()) else {
            continue;
        };
        let Some(pad) = unwind
            .first_non_phi()
            .filter(|p| p.opcode() == Opcode::LandingPad && p.ty().kind() != TypeKind::Token)
        else {
            continue;
        };
        let relocates: Vec<Instruction<'m>> = pad
            .as_value()
            .users()
            .into_iter()
            .filter_map(|u| u.as_instruction())
            .filter(|&i| is_relocate(i))
            .collect();
        if relocates.is_empty() {
            continue;
        }
        let live = call
            .operand_bundle("gc-live")
            .map(|bundle| bundle.args)
            .unwrap_or_default();
        let mut bases: Vec<Value<'m>> = Vec::new();
        for r in relocates {
            let args = r.as_call().map(|c| c.arguments()).unwrap_or_default();
            let live_at = |k: usize| {
                args.get(k)
                    .and_then(|v| v.const_uint())
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| live.get(i).copied())
            };
            let (Some(base), Some(derived)) = (live_at(1), live_at(2)) else {
                return Err(refuse(
                    f,
                    r,
                    "a gc.relocate whose indices name no gc-live value of its invoke",
                ));
            };
            if r.as_value().has_uses() {
                if !bases.contains(&base) {
                    bases.push(base);
                }
                b.replace_all_uses_with(r, derived)?;
            }
            b.erase(r)?;
        }
        if bases.is_empty() {
            continue;
        }
        // RS4GC gave each rewritten invoke destinations of their own; an unpin in a
        // destination with other predecessors would undo a pin never made.
        for dest in [normal, unwind] {
            let entries = f
                .blocks()
                .into_iter()
                .filter(|bb| bb.successors().contains(&dest))
                .count();
            if entries != 1 {
                return Err(refuse(
                    f,
                    invoke,
                    "an invoke destination with several predecessors after RS4GC",
                ));
            }
        }
        let raw = b.ptr_type(UNTRACKED)?;
        b.position_before(invoke)?;
        // A vector of objects is pinned lane by lane (a null lane is in no object: ignored).
        let mut raws = Vec::new();
        for &v in &bases {
            if v.ty().is_vector() {
                let i32t = b.int_type(32)?;
                for lane in 0..v.ty().vector_len().unwrap_or(0) {
                    let index = b.const_int(i32t, i64::from(lane))?;
                    let x = b.extract_element(v, index, "")?;
                    raws.push(b.addrspacecast(x, raw, "")?);
                }
            } else {
                raws.push(b.addrspacecast(v, raw, "")?);
            }
        }
        for &r in &raws {
            call_pin(b, PIN, r)?;
            pins += 1;
        }
        for dest in [normal, unwind] {
            b.position_at_first_insertion_point(dest)?;
            for &r in &raws {
                call_pin(b, UNPIN, r)?;
            }
        }
    }
    Ok(pins)
}

fn refuse(f: Function<'_>, inst: Instruction<'_>, message: &str) -> Error {
    Error::Lower {
        function: f.name(),
        instruction: Some(inst.print().trim().to_string()),
        message: format!("{message}: statepoint roots cannot handle it"),
    }
}

/// Scalarizes every struct or array value of `f` that holds GC pointers (see the
/// [module documentation](self), step 3). Returns how many.
fn scalarize_aggregates<'m>(b: &Builder<'m>, f: Function<'m>) -> Result<usize> {
    let mut values: Vec<Value<'m>> = f
        .params()
        .into_iter()
        .filter(|p| p.ty().is_aggregate())
        .collect();
    for inst in f.instructions() {
        if inst.ty().is_aggregate() && !inst.is_terminator() {
            values.push(inst.as_value());
        }
    }
    let mut done = 0;
    for v in values {
        let paths = gc_fields(v.ty());
        if paths.is_empty() || !v.has_uses() {
            continue;
        }
        let uses = v.uses();
        // Right after the definition: after the phis for a phi, at the entry for an argument.
        match v.as_instruction() {
            Some(inst) if inst.opcode() == Opcode::Phi => {
                let block = inst
                    .block()
                    .ok_or_else(|| refuse(f, inst, "a phi in no block"))?;
                b.position_at_first_insertion_point(block)?;
            }
            Some(inst) => b.position_after(inst)?,
            None => {
                let entry = f.entry_block().ok_or_else(|| Error::Lower {
                    function: f.name(),
                    instruction: None,
                    message: "a function with no entry block".into(),
                })?;
                b.position_at_first_insertion_point(entry)?;
            }
        }
        let mut leaves = Vec::new();
        for path in &paths {
            let mut x = v;
            for &i in path {
                x = b.extract_value(x, i, "")?;
            }
            leaves.push((path.clone(), x));
        }
        let ours: Vec<Value<'m>> = leaves.iter().map(|(_, l)| *l).collect();
        for u in uses {
            let Some(user) = u.user.as_instruction() else {
                continue;
            };
            if ours.contains(&u.user) {
                continue;
            }
            // An extractvalue of one leaf is the leaf.
            if user.opcode() == Opcode::ExtractValue {
                let indices = user.aggregate_indices().unwrap_or_default();
                if let Some((_, l)) = leaves.iter().find(|(p, _)| *p == indices) {
                    b.replace_all_uses_with(user, *l)?;
                    b.erase(user)?;
                    continue;
                }
            }
            if user.opcode() == Opcode::Phi {
                let incoming = user.phi_incoming();
                let Some((_, block)) = incoming.get(u.operand as usize) else {
                    continue;
                };
                let term = block
                    .terminator()
                    .ok_or_else(|| refuse(f, user, "a phi's incoming block has no terminator"))?;
                b.position_before(term)?;
            } else {
                b.position_before(user)?;
            }
            let mut r = v;
            for (path, l) in &leaves {
                r = insert_path(b, r, *l, path)?;
            }
            b.set_operand(user, u.operand, r)?;
        }
        done += 1;
    }
    Ok(done)
}

/// `insertvalue` of `leaf` at `path` (nested aggregates rebuilt level by level).
fn insert_path<'m>(
    b: &Builder<'m>,
    agg: Value<'m>,
    leaf: Value<'m>,
    path: &[u32],
) -> Result<Value<'m>> {
    match path {
        [] => Ok(leaf),
        [i] => Ok(b.insert_value(agg, leaf, *i, "")?),
        [i, rest @ ..] => {
            let inner = b.extract_value(agg, *i, "")?;
            let inner = insert_path(b, inner, leaf, rest)?;
            Ok(b.insert_value(agg, inner, *i, "")?)
        }
    }
}

/// Replaces `addrspace(10)` to `addrspace(13)` by `addrspace(1)` outside strings and
/// comments, then turns each `addrspacecast` whose two types became equal into a `bitcast`.
pub fn retype(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let Some(c) = rest.chars().next() else { break };
        match c {
            '"' => {
                let end = rest[1..].find('"').map_or(rest.len(), |e| e + 2);
                out.push_str(&rest[..end]);
                rest = &rest[end..];
            }
            ';' => {
                let end = rest.find('\n').unwrap_or(rest.len());
                out.push_str(&rest[..end]);
                rest = &rest[end..];
            }
            _ => {
                let gc = [
                    "addrspace(10)",
                    "addrspace(11)",
                    "addrspace(12)",
                    "addrspace(13)",
                ]
                .into_iter()
                .find(|p| rest.starts_with(p));
                if let Some(p) = gc {
                    out.push_str("addrspace(1)");
                    rest = &rest[p.len()..];
                } else {
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                }
            }
        }
    }
    out.lines().map(fix_casts).collect::<Vec<_>>().join("\n") + "\n"
}

/// The type at the start of `s` as LLVM prints it (`ptr`, `ptr addrspace(N)`, `<N x T>`).
fn leading_type(s: &str) -> &str {
    if s.starts_with('<') {
        return s.find('>').map_or(s, |e| &s[..=e]);
    }
    if let Some(after) = s.strip_prefix("ptr addrspace(") {
        return after
            .find(')')
            .map_or(s, |e| &s[..e + "ptr addrspace(".len() + 1]);
    }
    s.split([' ', ',', ')']).next().unwrap_or(s)
}

/// One line with its same-space `addrspacecast`s made `bitcast`s.
fn fix_casts(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("addrspacecast ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "addrspacecast ".len()..];
        let operand = after.strip_prefix('(').unwrap_or(after);
        let src = leading_type(operand);
        let same = operand.find(" to ").is_some_and(|t| {
            let dst = leading_type(&operand[t + 4..]);
            dst == src
        });
        out.push_str(if same { "bitcast " } else { "addrspacecast " });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `text` without the `declare` line of `@name`.
fn drop_declaration(text: &str, name: &str) -> String {
    let needle = format!("@{name}(");
    text.lines()
        .filter(|l| !(l.starts_with("declare ") && l.contains(&needle)))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The text of the wrapper defining `@runtime` (of type `ty`, before retyping) as a call of
/// `@locus_gc_sp_<suffix>` with the frame address as a last argument.
fn wrapper(runtime: &str, suffix: &str, ty: Type<'_>) -> Result<String> {
    let bad = || Error::Lower {
        function: runtime.to_owned(),
        instruction: None,
        message: "its declaration is not a function type".into(),
    };
    let ret = ty.return_type().ok_or_else(bad)?;
    let params = ty.param_types().ok_or_else(bad)?;
    let ret = retype(&ret.print()).trim().to_owned();
    let params: Vec<String> = params
        .iter()
        .map(|p| retype(&p.print()).trim().to_owned())
        .collect();
    let formals: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{t} %a{i}"))
        .collect();
    let mut actuals = formals.clone();
    actuals.push("ptr %fp".into());
    let mut sp_params = params.clone();
    sp_params.push("ptr".into());
    let (result, ret_stmt) = if ret == "void" {
        (String::new(), "ret void".to_owned())
    } else {
        ("%r = ".to_owned(), format!("ret {ret} %r"))
    };
    Ok(format!(
        "\ndeclare {ret} @{SP_PREFIX}{suffix}({})\n\
         define internal {ret} @{runtime}({}) noinline {{\n  \
         %fp = call ptr @llvm.frameaddress.p0(i32 0)\n  \
         {result}notail call {ret} @{SP_PREFIX}{suffix}({})\n  {ret_stmt}\n}}\n",
        sp_params.join(", "),
        formals.join(", "),
        actuals.join(", "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_landing_pads_only_in_the_functions_named() {
        let text = "define void @f() personality ptr @p {\n  %l = landingpad { ptr, i32 }\n          cleanup\n}\n\
                    define void @\"g h\"() personality ptr @p {\n  %0 = landingpad { ptr, i32 }\n          cleanup\n}\n\
                    define void @k() personality ptr @p {\n  %l = landingpad { ptr, i32 }\n          cleanup\n}\n";
        let (out, n) = token_landing_pads(text, &["f".into(), "g h".into()]);
        assert_eq!(n, 2);
        assert!(out.contains("  %l = landingpad token\n          cleanup\n}\ndefine void @\"g h\""));
        assert!(out.contains("  %0 = landingpad token\n"));
        assert!(out.contains("@k() personality ptr @p {\n  %l = landingpad { ptr, i32 }\n"));
    }

    #[test]
    fn retype_leaves_strings_and_fixes_casts() {
        let text = "; addrspace(10) in a comment\n\
                    @s = constant [14 x i8] c\"addrspace(10)\\00\"\n\
                    %b = addrspacecast ptr addrspace(10) %a to ptr addrspace(11)\n\
                    %c = addrspacecast ptr %r to ptr addrspace(10)\n\
                    %v = addrspacecast <2 x ptr addrspace(10)> %w to <2 x ptr addrspace(11)>\n";
        let out = retype(text);
        assert!(out.contains("; addrspace(10) in a comment"));
        assert!(out.contains("c\"addrspace(10)\\00\""));
        assert!(out.contains("%b = bitcast ptr addrspace(1) %a to ptr addrspace(1)"));
        assert!(out.contains("%c = addrspacecast ptr %r to ptr addrspace(1)"));
        assert!(out.contains("%v = bitcast <2 x ptr addrspace(1)> %w to <2 x ptr addrspace(1)>"));
    }
}
