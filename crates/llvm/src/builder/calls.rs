//! Calls: building `call`s, rebuilding a call without an operand bundle or with another
//! callee (keeping what the old call carried), and call-site attributes.

use std::ffi::{c_uint, CString};

use llvm_sys::core::{
    LLVMAddCallSiteAttribute, LLVMBuildCallWithOperandBundles, LLVMBuildInvokeWithOperandBundles,
    LLVMCanValueUseFastMathFlags, LLVMCreateEnumAttribute, LLVMCreateOperandBundle,
    LLVMDisposeValueMetadataEntries, LLVMGetCallSiteAttributeCount, LLVMGetCallSiteAttributes,
    LLVMGetEnumAttributeKindForName, LLVMGetFastMathFlags, LLVMGetMDKindIDInContext,
    LLVMGetMetadata, LLVMGetTailCallKind, LLVMInstructionGetAllMetadataOtherThanDebugLoc,
    LLVMMetadataAsValue, LLVMReplaceAllUsesWith, LLVMSetFastMathFlags, LLVMSetInstructionCallConv,
    LLVMSetMetadata, LLVMSetTailCallKind, LLVMSetValueName2, LLVMValueMetadataEntriesGetKind,
    LLVMValueMetadataEntriesGetMetadata,
};
use llvm_sys::prelude::{
    LLVMAttributeRef, LLVMBasicBlockRef, LLVMOperandBundleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::LLVMTailCallKind;

use super::check::{is_value_type, refuse};
use super::position::Position;
use super::Builder;
use crate::error::Result;
use crate::ffi::flag;
use crate::ir::{
    AttributeIndex, Call, Instruction, Opcode, OperandBundle, OwnedBundle, Type, Value,
};

/// The enum and integer attributes [`Builder::add_call_attribute`] adds.
const ENUM_OR_INT_ATTRIBUTES: &[&str] = &[
    "noalias",
    "nonnull",
    "noundef",
    "nocapture",
    "readonly",
    "readnone",
    "writeonly",
    "returned",
    "align",
    "dereferenceable",
    "dereferenceable_or_null",
];

impl<'m> Builder<'m> {
    /// Checks a call's callee and arguments against `fn_type`; returns them raw.
    fn call_operands(
        &self,
        fn_type: Type<'m>,
        callee: Value<'m>,
        args: &[Value<'m>],
    ) -> Result<(LLVMTypeRef, LLVMValueRef, Vec<LLVMValueRef>)> {
        let (Some(params), Some(_)) = (fn_type.param_types(), fn_type.return_type()) else {
            return refuse(format!("`{fn_type}` is not a function type"));
        };
        if !callee.ty().is_pointer() {
            return refuse(format!("the callee `{callee}` is not a pointer"));
        }
        let count_ok = if fn_type.is_vararg() {
            args.len() >= params.len()
        } else {
            args.len() == params.len()
        };
        if !count_ok {
            return refuse(format!(
                "`{fn_type}` takes {} arguments, not {}",
                params.len(),
                args.len()
            ));
        }
        for (i, arg) in args.iter().enumerate() {
            match params.get(i) {
                Some(&p) if p != arg.ty() => {
                    return refuse(format!("argument {i} `{arg}` is not of type `{p}`"));
                }
                None if !is_value_type(arg.ty()) => {
                    return refuse(format!("variadic argument `{arg}` has no value type"));
                }
                _ => {}
            }
        }
        let ty = self.ty(fn_type)?;
        let callee = self.val(callee)?;
        let args = args
            .iter()
            .map(|&a| self.val(a))
            .collect::<Result<Vec<_>>>()?;
        Ok((ty, callee, args))
    }

    /// Makes LLVM operand bundles from ours.
    fn make_bundles(&self, bundles: &[OperandBundle<'m>]) -> Result<Vec<OwnedBundle>> {
        let mut out = Vec::with_capacity(bundles.len());
        for b in bundles {
            let mut args = b
                .args
                .iter()
                .map(|&a| self.val(a))
                .collect::<Result<Vec<_>>>()?;
            let n = c_uint::try_from(args.len()).or_else(|_| refuse("too many bundle values"))?;
            // SAFETY: the tag is valid for its length, `args` holds `n` live values; the
            // bundle copies both and is disposed by `OwnedBundle`.
            let raw = unsafe {
                LLVMCreateOperandBundle(b.tag.as_ptr().cast(), b.tag.len(), args.as_mut_ptr(), n)
            };
            // SAFETY: a fresh bundle, ours to dispose, holding checked values of our module.
            out.push(unsafe { OwnedBundle::from_raw(raw) });
        }
        Ok(out)
    }

    /// `call fn_type callee(args...) [bundles...]`, named `name` (unless it returns
    /// `void`).
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `fn_type` is not a function type, `callee` is not a pointer, or
    /// the arguments do not match the parameters.
    pub fn call(
        &self,
        fn_type: Type<'m>,
        callee: impl Into<Value<'m>>,
        args: &[Value<'m>],
        bundles: &[OperandBundle<'m>],
        name: &str,
    ) -> Result<Instruction<'m>> {
        let (ty, callee, args) = self.call_operands(fn_type, callee.into(), args)?;
        let bundles = self.make_bundles(bundles)?;
        let ret = fn_type.return_type().unwrap_or(fn_type);
        let c_name = self.name_for(ret, name)?;
        self.ready()?;
        // SAFETY: the builder is positioned; `call_operands` checked the type, callee and
        // arguments against each other, and the bundles hold checked values of our module.
        let raw = unsafe { self.build_call(ty, callee, args, &bundles, None, &c_name) };
        // SAFETY: an instruction LLVM just inserted in a block of our module.
        Ok(unsafe { Instruction::from_raw(raw) })
    }

    /// Builds a call (or, with `dests`, an invoke) at the current position.
    ///
    /// # Safety
    ///
    /// The builder is positioned (`ready` succeeded); `ty` is a function type of our
    /// context, `callee` a pointer and `args` values of our module (or its context) that
    /// fit `ty`; `bundles` hold values of our module; `dests`, if given, are blocks of the
    /// function the builder inserts into.
    unsafe fn build_call(
        &self,
        ty: LLVMTypeRef,
        callee: LLVMValueRef,
        mut args: Vec<LLVMValueRef>,
        bundles: &[OwnedBundle],
        dests: Option<(LLVMBasicBlockRef, LLVMBasicBlockRef)>,
        name: &CString,
    ) -> LLVMValueRef {
        let mut raw_bundles: Vec<LLVMOperandBundleRef> =
            bundles.iter().map(OwnedBundle::as_raw).collect();
        // Counts were checked to fit `c_uint` by the callers (they come from LLVM or were
        // converted already).
        let nargs = c_uint::try_from(args.len()).unwrap_or(c_uint::MAX);
        let nbundles = c_uint::try_from(raw_bundles.len()).unwrap_or(c_uint::MAX);
        match dests {
            // SAFETY: the operands fit each other (this function's contract); the arrays
            // hold the counts given.
            None => unsafe {
                LLVMBuildCallWithOperandBundles(
                    self.raw,
                    ty,
                    callee,
                    args.as_mut_ptr(),
                    nargs,
                    raw_bundles.as_mut_ptr(),
                    nbundles,
                    name.as_ptr(),
                )
            },
            // SAFETY: as above, and the destinations are blocks of the same function.
            Some((normal, unwind)) => unsafe {
                LLVMBuildInvokeWithOperandBundles(
                    self.raw,
                    ty,
                    callee,
                    args.as_mut_ptr(),
                    nargs,
                    normal,
                    unwind,
                    raw_bundles.as_mut_ptr(),
                    nbundles,
                    name.as_ptr(),
                )
            },
        }
    }

    /// Drops a `tail` marker from `call` (a `call` without one, or `musttail` or
    /// `notail`, is left as it is). `tail` promises that the callee reads no `alloca` of
    /// the caller, which stops being true once the caller's stack holds what the callee
    /// may read through another path (a GC frame or root region the collector scans): the
    /// optimizer would move or drop the stores into them.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `call` is not a `call` or `invoke`, is
    /// erased, or belongs to another module.
    pub fn drop_tail_marker(&self, call: Instruction<'m>) -> Result<()> {
        let site = self.call_site(call)?;
        if site.instruction().opcode() != Opcode::Call {
            return Ok(());
        }
        let raw = call.as_raw();
        // SAFETY: `raw` is a live `call` of our module.
        if unsafe { LLVMGetTailCallKind(raw) } == LLVMTailCallKind::LLVMTailCallKindTail {
            // SAFETY: as above.
            unsafe { LLVMSetTailCallKind(raw, LLVMTailCallKind::LLVMTailCallKindNone) };
        }
        Ok(())
    }

    /// Rebuilds `call` without its operand bundles tagged `tag` (the last step of GC root
    /// placement drops `"jl_roots"`), returning the new call; `call` itself is returned
    /// unchanged when it has no such bundle. The new call has the same callee, function
    /// type, arguments, other bundles, calling convention, tail-call kind, attributes,
    /// fast-math flags, metadata and debug location, and takes the old call's name and
    /// uses; the old call is erased. A builder positioned before the old call is moved
    /// before the new one.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `call` is not a `call` or `invoke`, is erased, or belongs to
    /// another module.
    pub fn recreate_call_without_bundle(
        &self,
        call: Instruction<'m>,
        tag: &str,
    ) -> Result<Instruction<'m>> {
        let site = self.call_site(call)?;
        let bundles = site.owned_bundles();
        if !bundles.iter().any(|b| b.tag() == tag) {
            return Ok(call);
        }
        let kept: Vec<OwnedBundle> = bundles.into_iter().filter(|b| b.tag() != tag).collect();
        let args: Vec<LLVMValueRef> = site.arguments().into_iter().map(Value::as_raw).collect();
        // SAFETY: the old call's own arguments and bundles, of our module, fit its type.
        let new =
            unsafe { self.rebuild(site, site.function_type(), site.called_value(), args, &kept) }?;
        self.copy_call_properties(site, new, true, true)?;
        self.finish_replacement(call, new.instruction())?;
        Ok(new.instruction())
    }

    /// Replaces `call` by a call of `new_callee` with type `new_fn_type` and arguments
    /// `new_args`, built just before it, and returns the new call (an `invoke` stays an
    /// `invoke` with the same destinations). Kept from the old call: operand bundles,
    /// function attributes, return attributes (when the return type is unchanged),
    /// tail-call kind (`musttail` only when the function type is unchanged), fast-math
    /// flags, metadata, debug location, name and uses. Parameter attributes are copied only
    /// when the function type is unchanged. The calling convention is the new callee's
    /// when it is a function, else the old call's.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `call` is not a `call` or `invoke`, the new callee or arguments
    /// do not fit `new_fn_type`, or the old call's result is used and the new return type
    /// differs from it.
    pub fn replace_callee(
        &self,
        call: Instruction<'m>,
        new_fn_type: Type<'m>,
        new_callee: impl Into<Value<'m>>,
        new_args: &[Value<'m>],
    ) -> Result<Instruction<'m>> {
        let new_callee = new_callee.into();
        let site = self.call_site(call)?;
        let (_, _, args) = self.call_operands(new_fn_type, new_callee, new_args)?;
        let new_ret = new_fn_type.return_type().unwrap_or(new_fn_type);
        if new_ret != call.ty() && call.as_value().has_uses() {
            return refuse(format!(
                "{} is used, and the new call would return `{new_ret}` instead of `{}`",
                call.describe(),
                call.ty()
            ));
        }
        let bundles = site.owned_bundles();
        // SAFETY: `call_operands` checked the arguments against `new_fn_type`; the bundles
        // are the old call's, of our module.
        let new = unsafe { self.rebuild(site, new_fn_type, new_callee, args, &bundles) }?;
        let same_type = new_fn_type == site.function_type();
        self.copy_call_properties(site, new, new_ret == call.ty(), same_type)?;
        if let Some(f) = new_callee.as_function() {
            let convention = f.calling_convention();
            // SAFETY: `new` is a live call site.
            unsafe { LLVMSetInstructionCallConv(new.instruction().as_raw(), convention) };
        }
        self.finish_replacement(call, new.instruction())?;
        Ok(new.instruction())
    }

    /// Adds the enum attribute `name` (`noalias`, `nonnull`, `align`, `dereferenceable`),
    /// with `value` for those that take one, at `index` of the call site `call`.
    ///
    /// # Errors
    ///
    /// [`Error::Edit`](crate::Error::Edit) if `call` is not a call or `invoke`, or LLVM knows no enum attribute
    /// by that name.
    pub fn add_call_attribute(
        &self,
        call: Instruction<'m>,
        index: AttributeIndex,
        name: &str,
        value: u64,
    ) -> Result<()> {
        let raw = self.call_site(call)?;
        // LLVMCreateEnumAttribute makes only enum and integer attributes: a type or
        // constant-range kind (`byval`, `range`, ...) would be read later as what it is not.
        if !ENUM_OR_INT_ATTRIBUTES.contains(&name) {
            return refuse(format!(
                "`{name}` is not an enum or integer attribute this builder adds"
            ));
        }
        if name == "align" && !value.is_power_of_two() {
            return refuse(format!("alignment {value} is not a power of two"));
        }
        // SAFETY: the name is valid for its length.
        let kind = unsafe { LLVMGetEnumAttributeKindForName(name.as_ptr().cast(), name.len()) };
        if kind == 0 {
            return refuse(format!("no enum attribute named `{name}`"));
        }
        let Some(idx) = index.raw() else {
            return refuse(format!("attribute index {index:?} is out of range"));
        };
        // SAFETY: `self.ctx` is live and `kind` an enum or integer attribute kind (checked
        // against the list above).
        let attr = unsafe { LLVMCreateEnumAttribute(self.ctx, kind, value) };
        // SAFETY: `raw` is a live call site of this module; the attribute belongs to its
        // context.
        unsafe { LLVMAddCallSiteAttribute(raw.instruction().as_raw(), idx, attr) };
        Ok(())
    }

    fn call_site(&self, call: Instruction<'m>) -> Result<Call<'m>> {
        self.inst(call)?;
        match call.as_call() {
            Some(site) if site.instruction().opcode() != Opcode::CallBr => Ok(site),
            _ => refuse(format!("{} is not a call or invoke", call.describe())),
        }
    }

    /// Builds the replacement of `site` just before it (unnamed; the name moves later).
    ///
    /// # Safety
    ///
    /// `args` are values of our module (or its context) that fit `fn_type`, and `bundles`
    /// hold values of our module.
    unsafe fn rebuild(
        &self,
        site: Call<'m>,
        fn_type: Type<'m>,
        callee: Value<'m>,
        args: Vec<LLVMValueRef>,
        bundles: &[OwnedBundle],
    ) -> Result<Call<'m>> {
        let ty = self.ty(fn_type)?;
        let callee = self.val(callee)?;
        let dests = match (site.normal_dest(), site.unwind_dest()) {
            (Some(n), Some(u)) => Some((n.as_raw(), u.as_raw())),
            _ => None,
        };
        let saved = self.position.get();
        self.position.set(Position::Before(site.instruction()));
        let ready = self.ready();
        self.position.set(saved);
        ready?;
        // SAFETY: positioned before `site`; `ty` and `callee` were checked just above, the
        // arguments and bundles fit them (this function's contract), and the destinations
        // are those of `site`, in the same function.
        let raw = unsafe { self.build_call(ty, callee, args, bundles, dests, &CString::default()) };
        // SAFETY: an instruction LLVM just inserted in a block of our module.
        let new = unsafe { Instruction::from_raw(raw) };
        match new.as_call() {
            Some(call) => Ok(call),
            None => refuse(format!("LLVM built {} instead of a call", new.describe())),
        }
    }

    /// Copies what a rebuilt call keeps from the old one.
    fn copy_call_properties(
        &self,
        old: Call<'m>,
        new: Call<'m>,
        keep_return_attrs: bool,
        same_type: bool,
    ) -> Result<()> {
        // Both are live call sites of our module (`Call` handles).
        let (o, n) = (old.instruction().as_raw(), new.instruction().as_raw());
        // SAFETY: `n` is a live call site.
        unsafe { LLVMSetInstructionCallConv(n, old.calling_convention()) };
        let both_calls = old.instruction().opcode() == Opcode::Call
            && new.instruction().opcode() == Opcode::Call;
        if both_calls {
            // SAFETY: `o` is a live `call`.
            let kind = unsafe { LLVMGetTailCallKind(o) };
            if kind != LLVMTailCallKind::LLVMTailCallKindMustTail || same_type {
                // SAFETY: `n` is a live `call`.
                unsafe { LLVMSetTailCallKind(n, kind) };
            }
        }
        let mut indices = vec![AttributeIndex::Function];
        if keep_return_attrs {
            indices.push(AttributeIndex::Return);
        }
        if same_type {
            indices.extend((0..old.num_arguments()).map(AttributeIndex::Param));
        }
        for index in indices.into_iter().filter_map(AttributeIndex::raw) {
            // SAFETY: `o` is a live call site.
            let count = unsafe { LLVMGetCallSiteAttributeCount(o, index) };
            let mut attrs: Vec<LLVMAttributeRef> = vec![std::ptr::null_mut(); count as usize];
            if count > 0 {
                // SAFETY: `o` is a live call site; `attrs` has room for its `count`
                // attributes at `index`.
                unsafe { LLVMGetCallSiteAttributes(o, index, attrs.as_mut_ptr()) };
            }
            for a in attrs.into_iter().filter(|a| !a.is_null()) {
                // SAFETY: `n` is a live call site; attributes are uniqued in the context
                // the two calls share, and may be shared.
                unsafe { LLVMAddCallSiteAttribute(n, index, a) };
            }
        }
        // SAFETY: `o` is a live instruction.
        let old_fast_math = flag(unsafe { LLVMCanValueUseFastMathFlags(o) });
        // SAFETY: `n` is a live instruction.
        let new_fast_math = flag(unsafe { LLVMCanValueUseFastMathFlags(n) });
        if old_fast_math && new_fast_math {
            // SAFETY: `o` is a live instruction that can have fast-math flags.
            let flags = unsafe { LLVMGetFastMathFlags(o) };
            // SAFETY: `n` is a live instruction that can have fast-math flags.
            unsafe { LLVMSetFastMathFlags(n, flags) };
        }
        let mut count = 0;
        // SAFETY: `o` is a live instruction; the entries are ours, disposed below.
        let entries = unsafe { LLVMInstructionGetAllMetadataOtherThanDebugLoc(o, &mut count) };
        if !entries.is_null() {
            for i in 0..c_uint::try_from(count).unwrap_or(0) {
                // SAFETY: `entries` is live and holds `count` entries.
                let kind = unsafe { LLVMValueMetadataEntriesGetKind(entries, i) };
                // SAFETY: as above.
                let md = unsafe { LLVMValueMetadataEntriesGetMetadata(entries, i) };
                // SAFETY: `self.ctx` is live; `md` is metadata of that context.
                let md = unsafe { LLVMMetadataAsValue(self.ctx, md) };
                // SAFETY: `n` is a live instruction; `md` is metadata of its context.
                unsafe { LLVMSetMetadata(n, kind, md) };
            }
            // SAFETY: the entries came from LLVM above and are disposed exactly once.
            unsafe { LLVMDisposeValueMetadataEntries(entries) };
        }
        // SAFETY: `self.ctx` is live; the name is valid for its 3 bytes.
        let dbg = unsafe { LLVMGetMDKindIDInContext(self.ctx, c"dbg".as_ptr(), 3) };
        // SAFETY: `o` is a live instruction.
        let loc = unsafe { LLVMGetMetadata(o, dbg) };
        if !loc.is_null() {
            // SAFETY: `n` is a live instruction; `loc` is a location of its context.
            unsafe { LLVMSetMetadata(n, dbg, loc) };
        }
        Ok(())
    }

    /// Moves the uses and the name of `old` to `new`, erases `old`, and moves a position
    /// before `old` to `new`.
    fn finish_replacement(&self, old: Instruction<'m>, new: Instruction<'m>) -> Result<()> {
        let name = old.name();
        if old.as_value().has_uses() {
            if old.ty() != new.ty() {
                return refuse(format!(
                    "cannot replace the uses of {} by `{new}`: the types differ",
                    old.describe()
                ));
            }
            // SAFETY: both live instructions of our module, of one type.
            unsafe { LLVMReplaceAllUsesWith(old.as_raw(), new.as_raw()) };
        }
        self.erase(old)?;
        if !name.is_empty() && !new.ty().is_void() {
            // SAFETY: `new` is live and not void; the name is valid for its length.
            unsafe { LLVMSetValueName2(new.as_raw(), name.as_ptr().cast(), name.len()) };
        }
        if self.position.get() == Position::Before(old) {
            self.position.set(Position::Before(new));
        }
        Ok(())
    }
}
