//! Decodes the live values of a real LLVM frame, stopped inside a call, in this process.
//!
//! At test time `llc-19` compiles `tests/fixtures/live_frame.ll` and `ld.lld-19` links it
//! into a shared object that the test `dlopen`s. Its function `@run` calls back into Rust
//! twice, through a `gc.statepoint` (ID 100) and through a plain call followed by a
//! `stackmap` (ID 200). The callback is a naked trampoline that, at entry, captures what
//! a runtime stopped at that call knows: the return address, the caller's stack pointer
//! as the stack map sees it, and the callee-saved registers (which still hold the
//! caller's values). An ordinary Rust function then finds the record by return address,
//! decodes every location with [`Frame::value`] over that snapshot (memory reads go to
//! the caller's live stack frame) and saves the results. After `@run` returns, the test
//! checks them against the values the code was given: this proves the index key (function
//! address + load bias + instruction offset = return address), the location semantics of
//! every kind LLVM produced (Register, Indirect via `%rsp` and `%rbp`, Direct, Constant,
//! ConstantIndex, a 4-byte value), and the statepoint view (calling convention, flags,
//! deopt values, (base, derived) pairs).
//!
//! The stack maps are read two ways that must agree: from the `.so` file with
//! [`find_section`] (indexed with load bias = the load base) and from the loaded,
//! relocated section in memory (indexed with bias 0). Both are consulted at each stop.
//!
//! Missing LLVM 19 tools make the test fail with a message saying so.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use locus_stackmap::{Frame, Location, LocationKind, StatepointRecord};

type TestResult = Result<(), String>;

use crate::common;

use common::*;

// ---------------------------------------------------------------------------------------
// The stop: trampoline, register snapshot, frame
// ---------------------------------------------------------------------------------------

/// What the trampoline captures at the callee's entry. Layout shared with the asm.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Snapshot {
    /// `[rsp]` at entry: the call's return address.
    return_address: u64,
    /// `rsp + 8` at entry: the caller's stack pointer before the call pushed the return
    /// address, i.e. after it returns (DWARF 7 as the stack map sees it).
    sp: u64,
    rbx: u64,
    rbp: u64,
    r12: u64,
    r13: u64,
    r14: u64,
    r15: u64,
}

/// The callback `@run` calls: `void callback(ptr ctx)`.
///
/// Captures the snapshot on its own stack (72 bytes: the snapshot and 8 of padding, which
/// realigns the stack to 16 for the call) and calls `on_stop(ctx, &snapshot)`. `ctx`
/// stays in `rdi`. Callee-saved registers are only read; `on_stop` preserves them.
#[unsafe(naked)]
extern "C" fn trampoline(_ctx: *mut c_void) {
    core::arch::naked_asm!(
        "mov rax, [rsp]",
        "lea rcx, [rsp + 8]",
        "sub rsp, 72",
        "mov [rsp], rax",
        "mov [rsp + 8], rcx",
        "mov [rsp + 16], rbx",
        "mov [rsp + 24], rbp",
        "mov [rsp + 32], r12",
        "mov [rsp + 40], r13",
        "mov [rsp + 48], r14",
        "mov [rsp + 56], r15",
        "mov rsi, rsp",
        "call {on_stop}",
        "add rsp, 72",
        "ret",
        on_stop = sym on_stop,
    );
}

/// The caller's frame at the stop.
struct LiveFrame<'s> {
    regs: &'s Snapshot,
    /// End of the caller's frame: `sp + ` the function's stack size. Reads must fall in
    /// `sp .. frame_end`, where the stack map's stack slots are.
    frame_end: u64,
}

impl Frame for LiveFrame<'_> {
    fn register(&self, dwarf_reg: u16) -> Option<u64> {
        let r = self.regs;
        match dwarf_reg {
            3 => Some(r.rbx),
            6 => Some(r.rbp),
            7 => Some(r.sp),
            12 => Some(r.r12),
            13 => Some(r.r13),
            14 => Some(r.r14),
            15 => Some(r.r15),
            _ => None,
        }
    }

    fn read_memory(&self, address: u64, buf: &mut [u8]) -> bool {
        let Some(end) = address.checked_add(buf.len() as u64) else {
            return false;
        };
        if address < self.regs.sp || end > self.frame_end {
            return false;
        }
        for (i, b) in buf.iter_mut().enumerate() {
            let byte = (address as *const u8).wrapping_add(i);
            // SAFETY: the range lies in the caller's frame, which is live (we are running
            // inside its call) and which nothing writes while we read.
            *b = unsafe { byte.read_unaligned() };
        }
        true
    }
}

/// What `@run` reads and what the stops write; `inputs` and `narrow` are read by the
/// fixture with volatile loads (i64 at bytes 0..64, i32 at byte 64).
#[repr(C)]
struct Ctx<'a> {
    inputs: [u64; 8],
    narrow: u32,
    maps: &'a StackMaps,
    stops: Vec<Result<Stop, String>>,
}

/// One stop, decoded.
#[derive(Debug)]
struct Stop {
    return_address: u64,
    sp: u64,
    rbp: u64,
    id: u64,
    stack_size: u64,
    locations: Vec<Location>,
    /// `Frame::value` of each location.
    values: Vec<u64>,
    /// For each Direct location: the 8 bytes at the address it gives.
    direct_contents: Vec<u64>,
    statepoint: Option<StatepointStop>,
}

#[derive(Debug)]
struct StatepointStop {
    calling_convention: u64,
    flags: u64,
    deopt: Vec<u64>,
    /// (base, derived) values.
    gc: Vec<(u64, u64)>,
}

extern "C" fn on_stop(ctx: *mut c_void, regs: *const Snapshot) {
    // SAFETY: `ctx` is the `Ctx` the test passed to `@run`, which passed it on untouched
    // in rdi; the test does not touch it until `@run` returns. `regs` points at the
    // trampoline's snapshot, live for this call.
    let ctx = unsafe { &mut *ctx.cast::<Ctx<'_>>() };
    // SAFETY: as above.
    let regs = unsafe { &*regs };
    let maps = ctx.maps;
    let stop = catch_unwind(AssertUnwindSafe(|| decode_stop(maps, regs)))
        .unwrap_or_else(|_| Err(String::from("decoding panicked")));
    ctx.stops.push(stop);
}

fn decode_stop(maps: &StackMaps, regs: &Snapshot) -> Result<Stop, String> {
    let ret = regs.return_address;
    let found: Vec<_> = maps.file.lookup(ret).collect();
    let [found] = found[..] else {
        return Err(format!(
            "{} records at return address {ret:#x} (file)",
            found.len()
        ));
    };
    let in_memory: Vec<_> = maps.memory.lookup(ret).collect();
    let [in_memory] = in_memory[..] else {
        return Err(format!(
            "{} records at return address {ret:#x} (memory)",
            in_memory.len()
        ));
    };
    let stack_size = found
        .function
        .static_stack_size()
        .ok_or("the function's stack size is not static")?;
    let frame = LiveFrame {
        regs,
        frame_end: regs.sp.wrapping_add(stack_size),
    };

    let record = found.record;
    let locations: Vec<Location> = record.locations().collect();
    let values = locations
        .iter()
        .map(|l| frame.value(l))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("decoding record {}: {e}", record.id()))?;
    let again = in_memory
        .record
        .locations()
        .map(|l| frame.value(&l))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("decoding record {} from memory: {e}", record.id()))?;
    if again != values {
        return Err(format!("file decodes to {values:x?}, memory to {again:x?}"));
    }
    let mut direct_contents = Vec::new();
    for l in locations
        .iter()
        .filter(|l| l.kind() == LocationKind::Direct)
    {
        let address = frame
            .address(l)
            .map_err(|e| e.to_string())?
            .ok_or("Direct without address")?;
        let mut word = [0u8; 8];
        if !frame.read_memory(address, &mut word) {
            return Err(format!(
                "Direct location {l:?} points outside the frame: {address:#x}"
            ));
        }
        direct_contents.push(u64::from_le_bytes(word));
    }

    let statepoint = if record.id() == STATEPOINT_ID {
        let sp = StatepointRecord::new(record).map_err(|e| e.to_string())?;
        let value = |l: Location| frame.value(&l).map_err(|e| e.to_string());
        let deopt = sp.deopt().map(value).collect::<Result<Vec<_>, _>>()?;
        let gc = sp
            .gc_pointers()
            .map(|g| Ok((value(g.base)?, value(g.derived)?)))
            .collect::<Result<Vec<_>, String>>()?;
        if gc.len() != sp.num_gc_pointers() {
            return Err(format!(
                "{} pairs iterated, num_gc_pointers {}",
                gc.len(),
                sp.num_gc_pointers()
            ));
        }
        Some(StatepointStop {
            calling_convention: sp.calling_convention(),
            flags: sp.flags(),
            deopt,
            gc,
        })
    } else {
        None
    };

    Ok(Stop {
        return_address: ret,
        sp: regs.sp,
        rbp: regs.rbp,
        id: record.id(),
        stack_size,
        locations,
        values,
        direct_contents,
        statepoint,
    })
}

// ---------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------

const STATEPOINT_ID: u64 = 100;
const STACKMAP_ID: u64 = 200;

type RunFn = unsafe extern "C" fn(
    ctx: *mut c_void,
    callback: extern "C" fn(*mut c_void),
    a: i64,
    b: i64,
    p: *mut u8,
    q: *mut u8,
    qd: *mut u8,
);

#[test]
fn live_frame_values_decode() -> TestResult {
    let dir = TempDir::new("run")?;
    let so = build_shared(&dir, "live_frame")?;
    let loaded = Loaded::open(&so, "run")?;
    let maps = stack_maps(&so, &loaded)?;

    let kinds: Vec<LocationKind> = maps
        .file
        .iter()
        .flat_map(|r| r.record.locations().map(|l| l.kind()).collect::<Vec<_>>())
        .collect();
    for kind in [
        LocationKind::Register,
        LocationKind::Direct,
        LocationKind::Indirect,
        LocationKind::Constant,
        LocationKind::ConstantIndex,
    ] {
        if !kinds.contains(&kind) {
            return Err(format!(
                "the fixture no longer produces a {kind:?} location: {kinds:?}"
            ));
        }
    }

    let run_ptr = loaded.symbol("run")?;
    // SAFETY: `run` has this signature in the fixture.
    let run_fn: RunFn = unsafe { std::mem::transmute::<*mut c_void, RunFn>(run_ptr) };

    // Real heap objects stand in for GC pointers; nothing moves them.
    let p_obj = Box::new([0x11u64; 4]);
    let q_obj = Box::new([0x22u64; 4]);
    let p = (&raw const *p_obj).cast::<u8>().cast_mut();
    let q = (&raw const *q_obj).cast::<u8>().cast_mut();
    // SAFETY: 16 bytes into a 32-byte object.
    let qd = unsafe { q.add(16) };
    let (p, q, qd) = (p as u64, q as u64, qd as u64);

    let a: i64 = 0x0bad_cafe_1234;
    let b: i64 = -77;
    let inputs = [
        1,
        u64::MAX,
        0x8000_0000_0000_0000,
        0xdead_beef,
        0x0123_4567_89ab_cdef,
        5,
        0xffff_ffff,
        0x7fff_ffff_ffff_fffe,
    ];
    let narrow = 0xfeed_f00d_u32;
    let mut ctx = Ctx {
        inputs,
        narrow,
        maps: &maps,
        stops: Vec::new(),
    };

    // SAFETY: the arguments match the fixture's `@run`; `trampoline` has the callback's
    // signature; `ctx` outlives the call.
    unsafe {
        run_fn(
            (&raw mut ctx).cast(),
            trampoline,
            a,
            b,
            p as *mut u8,
            q as *mut u8,
            qd as *mut u8,
        )
    };
    drop((p_obj, q_obj));

    let stops = std::mem::take(&mut ctx.stops)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let [first, second] = &stops[..] else {
        return Err(format!("expected two stops, got {stops:#?}"));
    };
    for stop in [first, second] {
        // The function's stack size leads from the stack pointer at the call to the
        // slot of the function's own return address (so the caller's stack pointer is
        // sp + stack_size + 8); the frame pointer was pushed right below that slot.
        if stop.sp.wrapping_add(stop.stack_size).wrapping_sub(8) != stop.rbp {
            return Err(format!(
                "stack size {} does not lead from sp {:#x} to rbp {:#x} + 8",
                stop.stack_size, stop.sp, stop.rbp
            ));
        }
    }

    // (1) The statepoint.
    let (a, b) = (a as u64, b as u64);
    let c = a.wrapping_mul(b);
    let d = a.wrapping_add(0x1_2345_6789);
    assert_eq!(first.id, STATEPOINT_ID, "{first:#?}");
    let sp = first.statepoint.as_ref().ok_or("no statepoint view")?;
    assert_eq!(sp.calling_convention, 0, "C calling convention");
    assert_eq!(sp.flags, 1, "GC transition flag");
    assert_eq!(
        sp.deopt,
        [a, c, 7, -3i64 as u64, 0x0123_4567_89ab_cdef, d],
        "deopt values"
    );
    // Which location kinds the deopt values took: spilled values and both constant forms.
    let deopt_kinds: Vec<_> = first.locations[3..9].iter().map(|l| l.kind()).collect();
    assert_eq!(
        deopt_kinds,
        [
            LocationKind::Indirect,
            LocationKind::Indirect,
            LocationKind::Constant,
            LocationKind::Constant,
            LocationKind::ConstantIndex,
            LocationKind::Indirect
        ]
    );
    // LLVM orders the pairs its own way (LLVM 19: reverse of the relocates); a collector
    // must not care, so compare as sets.
    let mut gc = sp.gc.clone();
    gc.sort_unstable();
    let mut expected = vec![(p, p), (q, q), (q, qd)];
    expected.sort_unstable();
    assert_eq!(gc, expected, "gc (base, derived) pairs");
    // The constants and the layout, straight from the locations.
    assert_eq!(first.values[..3], [0, 1, 6]);
    assert_eq!(first.values.len(), 3 + 6 + 2 * 3);

    // (2) The stack map after the plain call.
    assert_eq!(second.id, STACKMAP_ID, "{second:#?}");
    let [i0, i1, i2, i3, i4, i5, i6, i7] = inputs;
    let expected = [
        a,
        b,
        c,
        d,
        i0,
        i1,
        i2,
        i3,
        i4,
        i5,
        i6,
        i7,
        p,
        q,
        qd,
        42,
        0x1122_3344_5566_7788,
        u64::from(narrow),
    ];
    assert_eq!(second.values.len(), expected.len() + 1, "{second:#?}");
    assert_eq!(
        second.values[..expected.len()],
        expected,
        "stack map values: {second:#?}"
    );
    // The alloca: its address, which holds `a`.
    let slot = second.locations[expected.len()];
    assert!(matches!(slot, Location::Direct { .. }), "{slot:?}");
    assert_eq!(second.direct_contents, [a]);
    let slot_address = second.values[expected.len()];
    assert!((second.sp..second.sp + second.stack_size).contains(&slot_address));

    // Values that survive a call live in callee-saved registers or in spill slots; this
    // fixture has more of them than there are callee-saved registers, so both occur, and
    // a 4-byte value is among them.
    let has = |pred: &dyn Fn(&Location) -> bool| second.locations.iter().any(pred);
    assert!(
        has(&|l| matches!(l, Location::Register { .. })),
        "{second:#?}"
    );
    assert!(
        has(&|l| matches!(l, Location::Indirect { .. })),
        "{second:#?}"
    );
    assert!(has(&|l| l.size() == 4), "{second:#?}");
    assert_ne!(first.return_address, second.return_address);
    Ok(())
}
