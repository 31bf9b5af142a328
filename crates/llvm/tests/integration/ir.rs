//! Walking IR (`locus_llvm::ir`) and changing it (`locus_llvm::builder`). What is read is
//! checked against the fixture's text; every changed module must pass LLVM's verifier in
//! process and `opt-19 -passes=verify`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use locus_llvm::builder::Builder;
use locus_llvm::ir::{
    AttributeIndex, Function, Instruction, MemoryEffects, MemoryLocation, Metadata, ModRef, Opcode,
    OperandBundle, TypeKind, ValueKind,
};
use locus_llvm::{Context, Error, Module};

const IR_WALK: &str = include_str!("../../fixtures/ir_walk.ll");
const BUILDER: &str = include_str!("../../fixtures/builder.ll");

/// A fresh path in the temporary directory.
fn temp_path(tag: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("locus-llvm-ir-{tag}-{}-{n}.ll", std::process::id()))
}

/// `opt-19 -passes=verify` must accept the printed module.
fn opt_verify(module: &Module<'_>) {
    let text = module.print();
    let path = temp_path("verify");
    std::fs::write(&path, &text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    let out = Command::new("opt-19")
        .args(["-passes=verify", "-disable-output"])
        .arg(&path)
        .output();
    let _ = std::fs::remove_file(&path);
    let out = out.unwrap_or_else(|e| {
        panic!("cannot run opt-19 ({e}): install LLVM 19's tools (scripts/install-deps)")
    });
    assert!(
        out.status.success(),
        "opt-19 -passes=verify rejected the module:\n{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn by_name<'m>(f: Function<'m>) -> HashMap<String, Instruction<'m>> {
    f.instructions()
        .into_iter()
        .filter(|i| !i.name().is_empty())
        .map(|i| (i.name(), i))
        .collect()
}

fn is_edit(e: &Error) -> bool {
    matches!(e, Error::Edit { .. })
}

// ---------------------------------------------------------------------------------------
// Walking

#[test]
fn functions_blocks_and_opcodes() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "ir_walk.ll", IR_WALK).unwrap();
    let names: Vec<String> = module.function_list().iter().map(|f| f.name()).collect();
    assert_eq!(names, module.functions());
    assert!(module.function("nope").is_none());

    let f = module.function("shapes").unwrap();
    assert!(!f.is_declaration());
    assert_eq!(f.gc().as_deref(), Some("julia"));
    assert_eq!(f.params().len(), 6);
    assert_eq!(f.params()[0].name(), "obj");
    assert_eq!(f.params()[0].kind(), ValueKind::Argument);
    assert_eq!(f.params()[3].as_argument(), Some((f, 3)));
    let blocks: Vec<String> = f.blocks().iter().map(|b| b.name()).collect();
    assert_eq!(blocks, ["entry", "left", "right", "join"]);
    assert_eq!(f.entry_block(), Some(f.blocks()[0]));
    assert!(module
        .function("safepoint")
        .unwrap()
        .entry_block()
        .is_none());
    assert!(module.function("safepoint").unwrap().blocks().is_empty());

    let ops: Vec<Opcode> = f.blocks()[0]
        .instructions()
        .iter()
        .map(|i| i.opcode())
        .collect();
    use Opcode::*;
    assert_eq!(
        ops,
        [
            Alloca,
            AddrSpaceCast,
            GetElementPtr,
            Load,
            Store,
            ExtractElement,
            ExtractValue,
            Freeze,
            AddrSpaceCast,
            Call,
            Call,
            Call,
            Call,
            Call,
            Call,
            ICmp,
            PtrToInt,
            IntToPtr,
            BitCast,
            Call,
            Add,
            Br
        ]
    );
    let join: Vec<Opcode> = f.blocks()[3]
        .instructions()
        .iter()
        .map(|i| i.opcode())
        .collect();
    assert_eq!(
        join,
        [
            Phi,
            Select,
            InsertElement,
            ShuffleVector,
            Load,
            ICmp,
            Select,
            Ret
        ]
    );
    assert!(Add.is_arithmetic() && BitCast.is_cast() && Invoke.is_call());

    let entry = f.blocks()[0];
    let term = entry.terminator().unwrap();
    assert!(term.is_terminator());
    assert_eq!(term.opcode(), Br);
    assert_eq!(entry.successors(), vec![f.blocks()[1], f.blocks()[2]]);
    assert_eq!(entry.last_instruction(), Some(term));
    assert!(f.blocks()[3].successors().is_empty());
    assert_eq!(f.blocks()[3].phis().len(), 1);
    assert_eq!(f.blocks()[3].first_non_phi().unwrap().opcode(), Select);
    assert_eq!(f.instructions().len(), 22 + 2 + 3 + 8);
}

#[test]
fn operands_types_and_address_spaces() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "ir_walk.ll", IR_WALK).unwrap();
    let f = module.function("shapes").unwrap();
    let i = by_name(f);
    let [obj, vec, pair, arr, _, _] = f.params()[..] else {
        panic!()
    };

    // Address spaces.
    assert_eq!(obj.ty().address_space(), Some(10));
    assert_eq!(i["derived"].ty().address_space(), Some(11));
    assert_eq!(i["rooted"].ty().address_space(), Some(12));
    assert_eq!(i["slot"].ty().address_space(), Some(0));
    assert_eq!(i["derived"].operands(), vec![obj]);
    assert_eq!(i["derived"].operand(0), Some(obj));
    assert_eq!(i["derived"].operand(1), None);

    // GEP: base then indices; source type; inbounds.
    let gep = i["field"];
    assert_eq!(gep.operands()[0], i["derived"].as_value());
    assert_eq!(gep.operands()[1].const_int(), Some(8));
    assert_eq!(gep.gep_source_type().unwrap().int_width(), Some(8));
    assert!(gep.is_inbounds());
    let inner = i["inner"];
    assert_eq!(
        inner.gep_source_type().unwrap().struct_name().as_deref(),
        Some("pair")
    );
    assert_eq!(inner.num_operands(), 3);

    // Store: value, then pointer.
    let store = i["loaded"].next().unwrap();
    assert_eq!(store.opcode(), Opcode::Store);
    assert_eq!(
        store.operands(),
        vec![i["loaded"].as_value(), i["slot"].as_value()]
    );
    assert!(store.ty().is_void());
    assert_eq!(
        i["slot"].allocated_type().unwrap().address_space(),
        Some(10)
    );

    // Vectors, structs, arrays of tracked pointers.
    let vt = vec.ty();
    assert_eq!(vt.kind(), TypeKind::Vector);
    assert_eq!(vt.vector_len(), Some(2));
    assert_eq!(vt.element_type().unwrap().address_space(), Some(10));
    assert_eq!(vt.scalar().address_space(), Some(10));
    assert_eq!(vt.address_space(), None);
    assert_eq!(vt.pointer_address_spaces(), vec![10]);
    let pt = pair.ty();
    assert_eq!(pt.kind(), TypeKind::Struct);
    assert_eq!(pt.struct_name().as_deref(), Some("pair"));
    let fields = pt.struct_fields().unwrap();
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[0].address_space(), Some(10));
    assert_eq!(fields[1].int_width(), Some(64));
    assert!(pt.is_aggregate() && !pt.is_packed_struct() && !pt.is_opaque_struct());
    assert!(pt.holds_pointer_in(|a| (10..=13).contains(&a)));
    let at = arr.ty();
    assert_eq!((at.kind(), at.array_len()), (TypeKind::Array, Some(2)));
    assert_eq!(at.element_type().unwrap().address_space(), Some(10));
    assert_eq!(at.print(), "[2 x ptr addrspace(10)]");
    assert!(!i["int"].ty().holds_pointer_in(|_| true));
    assert_eq!(i["elem"].aggregate_indices(), None);
    assert_eq!(i["first"].aggregate_indices(), Some(vec![0]));
    assert_eq!(i["second"].aggregate_indices(), Some(vec![1]));
    assert_eq!(
        i["cmp"].icmp_predicate(),
        Some(locus_llvm::ir::IntPredicate::Ult)
    );
    let opaque = module.function("shapes").unwrap(); // %jl_value_t is never used by value
    assert!(opaque.function_type().param_types().unwrap().len() == 6);

    // Function types.
    let ft = f.function_type();
    assert_eq!(ft.kind(), TypeKind::Function);
    assert_eq!(ft.return_type().unwrap().address_space(), Some(10));
    assert_eq!(ft.param_types().unwrap()[1], vt);
    assert!(!ft.is_vararg());
    assert_eq!(f.return_type().address_space(), Some(10));

    // Value kinds: constants, globals, undef, poison, constant expressions.
    let sel = i["sel"];
    let null = sel.operand(2).unwrap();
    assert_eq!(null.kind(), ValueKind::ConstantPointerNull);
    assert!(null.is_null() && null.is_constant() && !null.is_global());
    let r = i["r"];
    let undef = r.operand(1).unwrap();
    assert!(undef.is_undef() && !undef.is_poison());
    assert_eq!(undef.kind(), ValueKind::Undef);
    let shuf = i["shuf"];
    assert!(shuf.operand(1).unwrap().is_poison());
    let global = i["g"].operand(0).unwrap();
    assert_eq!(global.kind(), ValueKind::GlobalVariable);
    assert!(global.is_global());
    let cexpr = i["cexpr"].operand(1).unwrap();
    assert_eq!(cexpr.kind(), ValueKind::ConstantExpr);
    assert_eq!(cexpr.constant_opcode(), Some(Opcode::AddrSpaceCast));
    assert_eq!(cexpr.operands()[0].kind(), ValueKind::ConstantPointerNull);
    assert_eq!(i["sum"].operand(1).unwrap().const_uint(), Some(1));
    assert_eq!(i["sum"].as_value().kind(), ValueKind::Instruction);
    // Branch operands include the target blocks, as values.
    let br = f.blocks()[0].terminator().unwrap();
    let targets: Vec<_> = br.operands().iter().filter_map(|v| v.as_block()).collect();
    assert_eq!(targets.len(), 2);
}

#[test]
fn phis_calls_and_bundles() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "ir_walk.ll", IR_WALK).unwrap();
    let f = module.function("shapes").unwrap();
    let i = by_name(f);

    let incoming = i["phi"].phi_incoming();
    assert_eq!(incoming.len(), 2);
    assert_eq!(incoming[0], (i["new"].as_value(), f.blocks()[1]));
    assert_eq!(incoming[1], (i["second"].as_value(), f.blocks()[2]));
    assert!(i["sel"].phi_incoming().is_empty());

    // jl_roots with two values.
    let len = i["len"].as_call().unwrap();
    assert_eq!(len.callee_name().as_deref(), Some("jl_length"));
    assert_eq!(len.arguments(), vec![f.params()[0]]);
    assert_eq!(len.num_arguments(), 1);
    let bundles = len.operand_bundles();
    assert_eq!(
        bundles,
        vec![OperandBundle {
            tag: "jl_roots".into(),
            args: vec![i["elem"].as_value(), i["frozen"].as_value()],
        }]
    );
    assert!(len.has_operand_bundle("jl_roots") && !len.has_operand_bundle("deopt"));
    // Operands: arguments, bundle values, callee last.
    assert_eq!(i["len"].num_operands(), 4);
    assert_eq!(
        i["len"].operands().last().copied(),
        Some(module.function("jl_length").unwrap().as_value())
    );
    assert_eq!(
        len.function_type().return_type().unwrap().int_width(),
        Some(64)
    );

    // deopt.
    let pure = i["pure"].as_call().unwrap();
    let deopt = pure.operand_bundle("deopt").unwrap();
    assert_eq!(deopt.args, vec![i["len"].as_value(), f.params()[0]]);

    // Intrinsics, by name (LLVM's own and Julia's).
    let tok = i["tok"].as_call().unwrap();
    assert!(tok.is_intrinsic());
    assert_eq!(tok.called_function().unwrap().intrinsic_id(), 0);
    assert!(tok.function_type().is_vararg());
    assert_eq!(i["tok"].ty().kind(), TypeKind::Token);
    let memset = f.blocks()[0].instructions()[19].as_call().unwrap();
    assert_eq!(memset.callee_name().as_deref(), Some("llvm.memset.p0.i64"));
    assert!(memset.is_intrinsic() && memset.called_function().unwrap().intrinsic_id() != 0);
    assert!(!len.is_intrinsic() && !len.is_invoke());
    assert!(i["sum"].as_call().is_none());
    assert_eq!(len.calling_convention(), 0);
    assert!(len.normal_dest().is_none());

    // Users and uses.
    let obj = f.params()[0];
    let users = obj.users();
    assert!(users.contains(&i["derived"].as_value()));
    assert!(users.contains(&i["len"].as_value()));
    assert!(users.contains(&i["tok"].as_value()));
    let in_pure: Vec<u32> = obj
        .uses()
        .iter()
        .filter(|u| u.user == i["pure"].as_value())
        .map(|u| u.operand)
        .collect();
    assert_eq!(in_pure, vec![2]);
    assert!(!i["cmp"].as_value().users().is_empty());
    // Constants shared by the context list no uses.
    assert!(i["sel"].operand(2).unwrap().uses().is_empty());
}

#[test]
fn attributes_and_memory_effects() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "ir_walk.ll", IR_WALK).unwrap();
    let func = |n: &str| module.function(n).unwrap();

    assert!(func("jl_setjmp").has_attribute(AttributeIndex::Function, "returns_twice"));
    assert!(!func("safepoint").has_attribute(AttributeIndex::Function, "returns_twice"));
    assert!(func("leaf").has_attribute(AttributeIndex::Function, "gc-leaf-function"));
    assert_eq!(
        func("leaf")
            .string_attribute(AttributeIndex::Function, "gc-leaf-function")
            .as_deref(),
        Some("")
    );
    assert_eq!(
        func("jl_setjmp").int_attribute(AttributeIndex::Function, "returns_twice"),
        Some(0)
    );

    // `memory` is an int attribute: two bits per location.
    let read = func("jl_length").memory_effects();
    assert_eq!(read, MemoryEffects::READ_ONLY);
    assert_eq!(read.bits(), 0b01_01_01);
    assert!(read.only_reads_memory() && !read.does_not_access_memory());
    assert_eq!(
        func("jl_length").int_attribute(AttributeIndex::Function, "memory"),
        Some(0b01_01_01)
    );
    let none = func("pure_math").memory_effects(); // written `readnone`
    assert_eq!(none, MemoryEffects::NONE);
    assert!(none.does_not_access_memory());
    let arg = func("store_arg").memory_effects();
    assert_eq!(arg.bits(), 0b11);
    assert!(arg.only_accesses_argument_memory() && !arg.only_reads_memory());
    assert_eq!(arg.get(MemoryLocation::Argument), ModRef::ModRef);
    let log = func("log_event").memory_effects();
    assert_eq!(log.get(MemoryLocation::Inaccessible), ModRef::Mod);
    assert!(log.only_writes_memory());
    assert_eq!(func("safepoint").memory_effects(), MemoryEffects::UNKNOWN);

    // Call sites: their own attributes, the callee's, and the bundles' effect.
    let c = module.function("calls_setjmp").unwrap();
    let calls: Vec<_> = c
        .instructions()
        .iter()
        .filter_map(|i| i.as_call())
        .collect();
    assert!(calls[0].has_fn_attribute("returns_twice"));
    assert!(!calls[0].has_attribute(AttributeIndex::Function, "returns_twice"));
    assert!(!calls[1].has_fn_attribute("returns_twice"));
    // Site `memory(argmem: read)` ∩ callee `memory(argmem: readwrite)`.
    assert_eq!(calls[1].memory_effects().bits(), 0b01);
    assert_eq!(
        calls[1].int_attribute(AttributeIndex::Function, "memory"),
        Some(0b01)
    );
    assert!(calls[2].memory_effects().only_writes_memory());

    let f = module.function("shapes").unwrap();
    let i = by_name(f);
    // `memory(read)` callee with a jl_roots bundle: LLVM lets any bundle other than
    // deopt, funclet, ptrauth and kcfi clobber memory.
    assert_eq!(
        i["len"].as_call().unwrap().memory_effects(),
        MemoryEffects::UNKNOWN
    );
    // `memory(none)` callee with a deopt bundle: reads (deopt does not clobber).
    assert_eq!(
        i["pure"].as_call().unwrap().memory_effects(),
        MemoryEffects::READ_ONLY
    );
    // `readonly` on the call site of an unknown callee.
    let safepoint = f
        .instructions()
        .into_iter()
        .filter_map(|i| i.as_call())
        .find(|c| c.callee_name().as_deref() == Some("safepoint"))
        .unwrap();
    assert!(safepoint.memory_effects().only_reads_memory());
    assert!(safepoint.has_attribute(AttributeIndex::Function, "memory"));

    // Parameter and return indices.
    assert!(!func("jl_alloc").has_attribute(AttributeIndex::Return, "noalias"));
    assert!(!func("jl_alloc").has_attribute(AttributeIndex::Param(u32::MAX), "nonnull"));
    assert_eq!(
        func("jl_alloc").type_attribute(AttributeIndex::Param(0), "byval"),
        None
    );
}

#[test]
fn printing_and_positions() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "ir_walk.ll", IR_WALK).unwrap();
    let f = module.function("shapes").unwrap();
    let i = by_name(f);
    let d = i["derived"];
    assert_eq!(
        d.print(),
        "%derived = addrspacecast ptr addrspace(10) %obj to ptr addrspace(11)"
    );
    assert_eq!(d.to_string(), d.print());
    assert_eq!(
        d.describe(),
        "function @shapes, block %entry, instruction `%derived = addrspacecast ptr addrspace(10) %obj to ptr addrspace(11)`"
    );
    assert_eq!(d.index_in_block(), Some(1));
    assert_eq!(i["phi"].index_in_block(), Some(0));
    assert_eq!(d.block(), Some(f.blocks()[0]));
    assert_eq!(d.function(), Some(f));
    assert_eq!(d.comes_before(i["field"]), Some(true));
    assert_eq!(i["field"].comes_before(d), Some(false));
    assert_eq!(d.comes_before(i["phi"]), None);
    assert_eq!(d.prev(), Some(i["slot"]));
    assert_eq!(i["slot"].prev(), None);
    assert_eq!(f.params()[0].print(), "ptr addrspace(10) %obj");
    assert_eq!(f.blocks()[3].label(), "%join");
    assert!(format!("{f:?}").contains("@shapes"));
    assert!(f.print().starts_with("define ptr addrspace(10) @shapes("));
}

// ---------------------------------------------------------------------------------------
// Building

#[test]
fn build_a_gc_frame_and_lower_calls() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "builder.ll", BUILDER).unwrap();
    let f = module.function("frame").unwrap();
    let i = by_name(f);
    let [a, b_arg, c] = f.params()[..] else {
        panic!()
    };
    let safepoint = f.blocks()[0].instructions()[2];
    let b = Builder::new(&module);

    let tracked = b.ptr_type(10).unwrap();
    let i32_ty = b.int_type(32).unwrap();
    let i64_ty = b.int_type(64).unwrap();
    let frame_ty = b.array_type(tracked, 2).unwrap();

    // A frame after the entry block's allocas.
    b.position_after_allocas(f).unwrap();
    let frame = b.alloca(frame_ty, None, "gcframe").unwrap();
    assert_eq!(frame.prev(), Some(i["x"]));
    b.set_alignment(frame, 16).unwrap();
    let count = b.const_int(i32_ty, 3).unwrap();
    let extra = b.alloca(tracked, Some(count), "extra").unwrap();
    assert_eq!(extra.allocated_type(), Some(tracked));

    // Store the roots before the safepoint, then drop its jl_roots bundle.
    b.position_before(safepoint).unwrap();
    let zero = b.const_int(i64_ty, 0).unwrap();
    let mut slots = Vec::new();
    for (k, root) in [a, b_arg].into_iter().enumerate() {
        let idx = b.const_int(i32_ty, k as i64).unwrap();
        let slot = b
            .gep(frame_ty, frame, &[zero, idx], true, &format!("slot{k}"))
            .unwrap();
        b.store(root, slot).unwrap();
        slots.push(slot);
    }
    let new_sp = b
        .recreate_call_without_bundle(safepoint, "jl_roots")
        .unwrap();
    assert_ne!(new_sp, safepoint);
    assert!(safepoint.is_erased());
    assert_eq!(safepoint.block(), None);
    assert!(safepoint.describe().starts_with("erased instruction"));
    let site = new_sp.as_call().unwrap();
    assert_eq!(
        site.operand_bundles()
            .iter()
            .map(|b| b.tag.as_str())
            .collect::<Vec<_>>(),
        ["deopt"]
    );
    assert!(site.has_attribute(AttributeIndex::Function, "cold"));
    assert_eq!(
        site.string_attribute(AttributeIndex::Function, "locus-note")
            .as_deref(),
        Some("kept")
    );
    assert!(new_sp.print().contains("!locus"), "{}", new_sp.print());
    // The builder, positioned before the old call, is now before the new one.
    let marker = b.load(tracked, slots[0], "reload").unwrap();
    assert_eq!(marker.next(), Some(new_sp));

    // Lower `julia.call(@callee, a, b)` to a direct call of @callee.
    let v = i["v"];
    let callee_ty = b
        .function_type(tracked, &[tracked, tracked], false)
        .unwrap();
    let callee = module.function("callee").unwrap();
    let direct = b.replace_callee(v, callee_ty, callee, &[a, b_arg]).unwrap();
    assert!(v.is_erased());
    assert_eq!(direct.name(), "v");
    assert_eq!(
        direct.as_call().unwrap().callee_name().as_deref(),
        Some("callee")
    );
    assert!(direct.as_call().unwrap().has_operand_bundle("jl_roots"));
    assert!(direct
        .as_call()
        .unwrap()
        .has_attribute(AttributeIndex::Function, "nounwind"));
    let direct = b.recreate_call_without_bundle(direct, "jl_roots").unwrap();
    assert_eq!(direct.name(), "v");
    let ret = f.blocks()[3].terminator().unwrap();
    assert_eq!(ret.operand(0), Some(direct.as_value()));

    // A phi, select, vector and aggregate operations in the join block.
    let [_, left, right, join] = f.blocks()[..] else {
        panic!()
    };
    b.position_before(left.terminator().unwrap()).unwrap();
    let loaded = b.load(tracked, slots[1], "loaded").unwrap();
    b.position_at_start(join).unwrap();
    let phi = b.phi(tracked, "merged").unwrap();
    b.add_incoming(phi, loaded, left).unwrap();
    b.add_incoming(phi, b_arg, right).unwrap();
    b.position_at_first_insertion_point(join).unwrap();
    let null = b.null_ptr(10).unwrap();
    let sel = b.select(c, phi, null, "sel").unwrap();
    let vec_ty = b.vector_type(tracked, 2).unwrap();
    let vec0 = b.poison(vec_ty).unwrap();
    let vec1 = b.insert_element(vec0, sel, zero, "vec").unwrap();
    let lane = b.extract_element(vec1, zero, "lane").unwrap();
    let pair_ty = b.struct_type(&[tracked, i64_ty], false).unwrap();
    let agg0 = b.undef(pair_ty).unwrap();
    let agg1 = b.insert_value(agg0, lane, 0, "agg").unwrap();
    let first = b.extract_value(agg1, 0, "first").unwrap();
    let derived = b
        .addrspacecast(first, b.ptr_type(11).unwrap(), "derived")
        .unwrap();
    let field = b
        .gep(
            b.int_type(8).unwrap(),
            derived,
            &[b.const_int(i64_ty, 8).unwrap()],
            false,
            "field",
        )
        .unwrap();
    let word = b.load(i64_ty, field, "word").unwrap();
    let as_vec = b
        .bitcast(word, b.vector_type(i32_ty, 2).unwrap(), "halves")
        .unwrap();
    assert_eq!(as_vec.ty().vector_len(), Some(2));
    let raw = b.ptrtoint(i["x"], i64_ty, "raw").unwrap();
    let back = b.inttoptr(raw, b.ptr_type(0).unwrap(), "back").unwrap();
    b.store(word, back).unwrap();
    // A declared runtime function, called with a bundle.
    let void = b.void_type();
    let push_ty = b
        .function_type(void, &[b.ptr_type(0).unwrap(), i32_ty], false)
        .unwrap();
    let push = b.declare_function("jl_gc_push", push_ty).unwrap();
    assert!(push.is_declaration());
    assert_eq!(b.declare_function("jl_gc_push", push_ty).unwrap(), push);
    let call = b
        .call(
            push_ty,
            push,
            &[frame.into(), count],
            &[OperandBundle {
                tag: "gc-note".into(),
                args: vec![sel],
            }],
            "ignored for void",
        )
        .unwrap();
    assert!(call.name().is_empty());
    b.set_name(sel, "chosen").unwrap();
    assert_eq!(sel.name(), "chosen");

    module.verify().unwrap();
    opt_verify(&module);
    let text = f.print();
    assert!(!text.contains("jl_roots"), "{text}");
    assert!(!text.contains("julia.call"), "{text}");
    assert!(text.contains("\"deopt\"(i32 1)"), "{text}");
    assert!(
        text.contains("%merged = phi ptr addrspace(10) [ %loaded, %left ], [ %b, %right ]"),
        "{text}"
    );
    assert!(
        text.contains("call void @jl_gc_push(ptr %gcframe, i32 3) [ \"gc-note\""),
        "{text}"
    );
    assert!(
        text.contains("%gcframe = alloca [2 x ptr addrspace(10)], align 16"),
        "{text}"
    );
    // Constant operands fold.
    let folded = b.addrspacecast(null, b.ptr_type(11).unwrap(), "").unwrap();
    assert_eq!(folded.kind(), ValueKind::ConstantExpr);
}

#[test]
fn rebuild_an_invoke_without_its_bundle() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "builder.ll", BUILDER).unwrap();
    let f = module.function("with_invoke").unwrap();
    let invoke = f.blocks()[0].terminator().unwrap();
    assert_eq!(invoke.opcode(), Opcode::Invoke);
    let b = Builder::new(&module);
    let new = b.recreate_call_without_bundle(invoke, "jl_roots").unwrap();
    assert_eq!(new.opcode(), Opcode::Invoke);
    assert_eq!(f.blocks()[0].instructions(), vec![new]);
    let site = new.as_call().unwrap();
    assert_eq!(site.normal_dest(), Some(f.blocks()[1]));
    assert_eq!(site.unwind_dest(), Some(f.blocks()[2]));
    assert!(site.operand_bundles().is_empty());
    // Without the bundle to drop, the call is returned as it is.
    assert_eq!(
        b.recreate_call_without_bundle(new, "jl_roots").unwrap(),
        new
    );
    module.verify().unwrap();
    opt_verify(&module);
    assert!(!f.print().contains("jl_roots"));
}

#[test]
fn erasing_keeps_handles_valid() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "builder.ll", BUILDER).unwrap();
    let f = module.function("frame").unwrap();
    let i = by_name(f);
    let a = f.params()[0];
    let b = Builder::new(&module);

    // In use: refused.
    let err = b.erase(i["v"]).unwrap_err();
    assert!(is_edit(&err));
    assert!(
        err.to_string()
            .contains("still used by `ret ptr addrspace(10) %v`"),
        "{err}"
    );

    // Unused: erased, and no longer a user of %a.
    let d = i["d"];
    assert!(a.users().contains(&d.as_value()));
    b.erase(d).unwrap();
    assert!(d.is_erased());
    assert!(!a.users().contains(&d.as_value()));
    assert_eq!(d.next(), None);
    assert_eq!(d.index_in_block(), None);
    assert!(d.successors().is_empty());
    assert!(is_edit(&b.erase(d).unwrap_err()), "erased twice");
    assert!(is_edit(&b.position_before(d).unwrap_err()));
    assert!(!module.print().contains("%d ="));

    // A chain, user first: the callee operand no longer counts as a use either.
    let safepoint = f.blocks()[0].instructions()[1];
    assert_eq!(safepoint.opcode(), Opcode::Call);
    b.position_before(safepoint).unwrap();
    let derived = b.addrspacecast(a, b.ptr_type(11).unwrap(), "tmp").unwrap();
    let user = b
        .addrspacecast(derived, b.ptr_type(0).unwrap(), "tmp2")
        .unwrap();
    assert!(is_edit(
        &b.erase(derived.as_instruction().unwrap()).unwrap_err()
    ));
    b.erase(user.as_instruction().unwrap()).unwrap();
    b.erase(derived.as_instruction().unwrap()).unwrap();

    // A builder positioned before an erased instruction refuses to build.
    b.position_before(safepoint).unwrap();
    b.recreate_call_without_bundle(safepoint, "deopt").unwrap();
    let other = Builder::new(&module);
    other.position_before(i["v"]).unwrap();
    let v2 = b.recreate_call_without_bundle(i["v"], "jl_roots").unwrap();
    let err = other.load(b.int_type(8).unwrap(), a, "x").unwrap_err();
    assert!(err.to_string().contains("erased instruction"), "{err}");
    assert_eq!(v2.name(), "v");

    // Replacing uses selectively.
    let null = b.null_ptr(10).unwrap();
    let n = b
        .replace_uses_if(v2, null, |u| u.user.as_instruction().is_some())
        .unwrap();
    assert_eq!(n, 1);
    b.erase(v2).unwrap();
    module.verify().unwrap();
    opt_verify(&module);
}

#[test]
fn refused_changes() {
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "builder.ll", BUILDER).unwrap();
    let other = Module::parse_ir(&ctx, "other.ll", BUILDER).unwrap();
    let ctx2 = Context::new();
    let foreign = Module::parse_ir(&ctx2, "foreign.ll", BUILDER).unwrap();
    let f = module.function("frame").unwrap();
    let i = by_name(f);
    let [a, _, c] = f.params()[..] else { panic!() };
    let b = Builder::new(&module);
    let tracked = b.ptr_type(10).unwrap();
    let i64_ty = b.int_type(64).unwrap();

    // No position yet.
    assert!(is_edit(&b.load(tracked, i["x"], "l").unwrap_err()));
    b.position_before(i["v"]).unwrap();

    let before = module.print();
    let refusals: Vec<Error> = [
        b.load(tracked, c, "not a pointer").map(|_| ()),
        b.load(b.void_type(), i["x"], "void").map(|_| ()),
        b.store(f.blocks()[0].instructions()[2], i["x"]).map(|_| ()),
        b.bitcast(a, b.ptr_type(11).unwrap(), "bad").map(|_| ()),
        b.bitcast(c, i64_ty, "bad").map(|_| ()),
        b.addrspacecast(a, tracked, "same space").map(|_| ()),
        b.ptrtoint(c, i64_ty, "bad").map(|_| ()),
        b.select(a, a, a, "bad cond").map(|_| ()),
        b.extract_value(a, 0, "bad").map(|_| ()),
        b.extract_element(a, c, "bad").map(|_| ()),
        b.gep(i64_ty, a, &[a], false, "bad index").map(|_| ()),
        b.gep(
            b.struct_type(&[i64_ty], false).unwrap(),
            a,
            &[
                b.const_int(i64_ty, 0).unwrap(),
                b.const_int(i64_ty, 5).unwrap(),
            ],
            false,
            "bad field",
        )
        .map(|_| ()),
        b.call(
            b.function_type(tracked, &[tracked], false).unwrap(),
            module.function("callee").unwrap(),
            &[c],
            &[],
            "bad args",
        )
        .map(|_| ()),
        b.call(i64_ty, a, &[], &[], "not a fn type").map(|_| ()),
        b.ret(Some(c)).map(|_| ()),
        b.int_type(0).map(|_| ()),
        b.ptr_type(1 << 24).map(|_| ()),
        b.vector_type(b.void_type(), 2).map(|_| ()),
        b.vector_type(i64_ty, 0).map(|_| ()),
        b.const_int(tracked, 1).map(|_| ()),
        b.const_null(b.void_type()).map(|_| ()),
        b.undef(b.void_type()).map(|_| ()),
        b.set_alignment(i["v"], 3),
        b.set_alignment(i["x"], 3),
        b.set_name(b.const_int(i64_ty, 1).unwrap(), "k"),
        b.replace_all_uses_with(i["v"], c),
        b.replace_all_uses_with(b.null_ptr(10).unwrap(), a),
        b.set_operand(i["v"], 99, a),
        b.set_operand(i["v"], 0, c),
        b.declare_function("callee", b.function_type(i64_ty, &[], false).unwrap())
            .map(|_| ()),
        b.declare_function("nul\0name", b.function_type(i64_ty, &[], false).unwrap())
            .map(|_| ()),
        b.recreate_call_without_bundle(i["x"], "jl_roots")
            .map(|_| ()),
        b.replace_callee(
            i["v"],
            b.function_type(i64_ty, &[], false).unwrap(),
            module.function("callee").unwrap(),
            &[],
        )
        .map(|_| ()),
        // Handles of another module or context.
        b.position_before(other.function("frame").unwrap().instructions()[0]),
        b.load(tracked, other.function("frame").unwrap().params()[0], "x")
            .map(|_| ()),
        b.call(
            b.function_type(b.void_type(), &[], false).unwrap(),
            other.function("safepoint").unwrap(),
            &[],
            &[],
            "",
        )
        .map(|_| ()),
        b.store(foreign.function("frame").unwrap().params()[0], i["x"])
            .map(|_| ()),
        b.const_null(foreign.function("frame").unwrap().params()[0].ty())
            .map(|_| ()),
        b.add_incoming(i["v"], a, f.blocks()[0]),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    assert_eq!(refusals.len(), 39, "{refusals:#?}");
    for e in &refusals {
        assert!(is_edit(e), "{e:?}");
        assert!(!e.to_string().is_empty());
    }
    // Nothing changed.
    assert_eq!(module.print(), before);

    // A phi fed from another function's block, or with a value of another type.
    let join = f.blocks()[3];
    b.position_at_start(join).unwrap();
    let phi = b.phi(tracked, "p").unwrap();
    let g = module.function("with_invoke").unwrap();
    assert!(is_edit(&b.add_incoming(phi, a, g.blocks()[0]).unwrap_err()));
    assert!(is_edit(&b.add_incoming(phi, c, f.blocks()[1]).unwrap_err()));
    b.erase(phi).unwrap();
    module.verify().unwrap();
}

#[test]
fn debug_info_survives_changes() {
    let ctx = Context::new();
    let text = include_str!("../../fixtures/debug_info.ll");
    let module = Module::parse_ir(&ctx, "debug_info.ll", text).unwrap();
    let f = module.function("dbg").unwrap();
    let i = by_name(f);
    let b = Builder::new(&module);
    // Only debug information refers to %d: it can go, and the record then describes poison.
    b.erase(i["d"]).unwrap();
    let call = f
        .instructions()
        .into_iter()
        .find(|i| i.as_call().and_then(|c| c.callee_name()).as_deref() == Some("safepoint"))
        .unwrap();
    let new = b.recreate_call_without_bundle(call, "jl_roots").unwrap();
    assert!(new.print().contains("!dbg !"), "{}", new.print());
    module.verify().unwrap();
    opt_verify(&module);
    let printed = f.print();
    assert!(!printed.contains("%d"), "{printed}");
    assert!(printed.contains("poison"), "{printed}");
}

/// Review findings, each once undefined behaviour or a runaway from safe code.
#[test]
fn safe_calls_stay_safe_on_odd_input() {
    let ctx = Context::new();
    let ir = r#"
declare void @f()
declare i32 @__gxx_personality_v0(...)
define void @g(ptr %p) personality ptr @__gxx_personality_v0 {
entry:
  %x = load i64, ptr %p, !self !0
  invoke void @f() to label %ok unwind label %bad
ok:
  ret void
bad:
  %lp = landingpad { ptr, i32 } cleanup
  ret void
}
!0 = distinct !{!0, !0, !0, !0, !0}
"#;
    let module = Module::parse_ir(&ctx, "odd.ll", ir).unwrap_or_else(|e| panic!("{e}"));
    let g = module.function("g").unwrap_or_else(|| panic!("no @g"));
    let insts = g.instructions();
    // A self-referencing node reads as a cycle, not 5^16 nodes.
    let load = insts[0];
    let md = load.metadata("self").unwrap_or_else(|| panic!("no !self"));
    assert_eq!(md.operands().len(), 5);
    assert!(md.operands().iter().all(|o| matches!(o, Metadata::Other)));
    // An erased invoke has no destinations (they were poison; reading them as blocks
    // crashed).
    let invoke = insts[1];
    let b = Builder::new(&module);
    assert!(b
        .add_call_attribute(invoke, AttributeIndex::Param(0), "byval", 0)
        .is_err());
    b.erase(invoke).unwrap_or_else(|e| panic!("{e}"));
    let call = invoke.as_call().unwrap_or_else(|| panic!("not a call"));
    assert!(call.normal_dest().is_none() && call.unwind_dest().is_none());
}

/// `Module::linked_definitions` lists what a linker resolves to the module (definitions
/// not `internal`, `private` or `available_externally`, hidden ones included); `Builder::rename_global` renames a
/// function, variable or alias with its references (opt-19 verifies the result), leaves
/// strings and comdats alone and refuses a taken name.
#[test]
fn linked_definitions_and_renaming_globals() {
    let ctx = Context::new();
    let module = Module::parse_ir(
        &ctx,
        "globals",
        r#"
$read = comdat any
@text = private constant [6 x i8] c"@read\00"
@count = global i64 1
@hidden = hidden global i64 2
@local = internal global i64 3
@external = external global i64
@alias = alias i64, ptr @count
declare i64 @write(i64)
define available_externally i64 @inline_only(i64 %x) {
  ret i64 %x
}
define linkonce_odr i64 @read(i64 %x) comdat {
  %c = load i64, ptr @count
  %y = add i64 %x, %c
  ret i64 %y
}
define internal i64 @helper() {
  %r = call i64 @read(i64 1)
  ret i64 %r
}
define i64 @main() {
  %r = call i64 @helper()
  ret i64 %r
}
"#,
    )
    .unwrap();
    assert_eq!(
        module.linked_definitions(),
        ["read", "main", "count", "hidden", "alias"]
    );
    let b = Builder::new(&module);
    b.rename_global("read", "program.read").unwrap();
    b.rename_global("count", "program.count").unwrap();
    b.rename_global("alias", "program.alias").unwrap();
    assert!(is_edit(
        &b.rename_global("main", "program.read").unwrap_err()
    ));
    assert!(is_edit(&b.rename_global("nothing", "x").unwrap_err()));
    assert!(is_edit(&b.rename_global("main", "").unwrap_err()));
    let text = module.print();
    assert!(text.contains("call i64 @program.read(i64 1)"), "{text}");
    assert!(
        text.contains("define linkonce_odr i64 @program.read(i64 %x) comdat($read)"),
        "{text}"
    );
    assert!(text.contains("load i64, ptr @program.count"), "{text}");
    assert!(
        text.contains("@program.alias = alias i64, ptr @program.count"),
        "{text}"
    );
    assert!(text.contains(r#"c"@read\00""#), "{text}");
    opt_verify(&module);
}
