//! Nothing panics across the boundary, whatever the section holds: the stack map section of
//! `fixtures/runtime.ll` (llc-19, x86-64 and AArch64) with each byte replaced by 0, 1, 0x80
//! and 0xff goes through `locus_index_from_section`, strict and lenient, and every index that
//! is built is walked through every read-only entry point (tables, functions, constants,
//! records in both orders, locations, live-outs, statepoint views, lookups of one and of
//! many addresses, values from a frame whose memory callback refuses everything). No call
//! may return `LOCUS_ERR_INTERNAL` (a caught panic), and every status must have a name.

// The walk makes hundreds of FFI calls under one contract (a live index, pointers to
// locals); one block per call would bury what it tests.
#![allow(clippy::multiple_unsafe_ops_per_block)]

use std::ffi::{c_void, CStr};
use std::path::Path;
use std::process::Command;
use std::ptr::null_mut;

use locus_capi::*;

fn section_of(triple: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-damaged");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let obj = dir.join(format!("runtime.{triple}.o"));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/runtime.ll");
    let out = Command::new("llc-19")
        .arg(format!("-mtriple={triple}"))
        .arg("-filetype=obj")
        .arg(&fixture)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap_or_else(|e| panic!("llc-19 is required (scripts/install-deps): {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = std::fs::read(&obj).unwrap_or_else(|e| panic!("{e}"));
    // The section's bytes as stored, through the object reader of the crate under test.
    let (_, section) =
        locus_stackmap::object::find_section(&file).unwrap_or_else(|e| panic!("{e}"));
    section
        .unwrap_or_else(|| panic!("no stack map section in {}", obj.display()))
        .data
        .to_vec()
}

unsafe extern "C" fn no_memory(_: *mut c_void, _: u64, _: *mut u8, _: usize) -> bool {
    false
}

/// Checks one status: never an internal error, always named.
fn ok(status: LocusStatus, calls: &mut u64) -> bool {
    *calls += 1;
    assert_ne!(status, LOCUS_ERR_INTERNAL, "a panic was caught");
    // SAFETY: the name is a static C string.
    let name = unsafe { CStr::from_ptr(locus_status_name(status)) };
    assert_ne!(name.to_bytes(), b"LOCUS_UNKNOWN_STATUS", "status {status}");
    status == LOCUS_OK
}

/// Walks everything an index offers; returns the number of calls made.
///
/// # Safety
///
/// `index` is a live index.
unsafe fn walk(index: *const LocusIndex, calls: &mut u64) {
    let regs = [0x1000u64; 32];
    let frame = LocusFrame {
        context: null_mut(),
        read_register: None,
        registers: regs.as_ptr(),
        num_registers: regs.len(),
        read_memory: Some(no_memory),
        big_endian: false,
    };
    let e = null_mut();
    let mut info = LocusIndexInfo::default();
    // SAFETY: `index` is live and every pointer is to a local, for every call below.
    unsafe {
        if !ok(locus_index_info(index, &mut info, e), calls) {
            return;
        }
        for t in 0..=info.num_tables {
            let mut table = LocusTable::default();
            if !ok(locus_index_table(index, t, &mut table, e), calls) {
                continue;
            }
            let mut f = LocusFunction::default();
            for i in 0..=u64::from(table.num_functions.min(64)) {
                ok(locus_index_function(index, t, i, &mut f, e), calls);
            }
            let mut c = 0u64;
            for i in 0..=u64::from(table.num_constants.min(64)) {
                ok(locus_index_constant(index, t, i, &mut c, e), calls);
            }
        }
        let mut records = [LocusRecord::default(); 4];
        for number in 0..=info.num_records {
            let mut r = LocusRecord::default();
            ok(
                locus_index_record_by_address(index, number, &mut r, e),
                calls,
            );
            if !ok(locus_index_record(index, number, &mut r, e), calls) {
                continue;
            }
            let mut n = 0usize;
            ok(
                locus_index_lookup(index, r.address, records.as_mut_ptr(), 4, &mut n, e),
                calls,
            );
            ok(
                locus_index_lookup_id(index, r.id, records.as_mut_ptr(), 4, &mut n, e),
                calls,
            );
            let near = [
                r.address,
                r.address.wrapping_add(1),
                r.address.wrapping_sub(1),
            ];
            let mut counts = [0usize; 3];
            ok(
                locus_index_lookup_each(
                    index,
                    near.as_ptr(),
                    3,
                    records.as_mut_ptr(),
                    counts.as_mut_ptr(),
                    e,
                ),
                calls,
            );
            ok(
                locus_index_nearest_before(index, r.address, &mut r, e),
                calls,
            );
            ok(locus_index_record(index, number, &mut r, e), calls);
            let mut values = vec![0u64; usize::from(r.num_locations)];
            ok(
                locus_record_values(index, number, &frame, values.as_mut_ptr(), values.len(), e),
                calls,
            );
            for i in 0..=u64::from(r.num_locations) {
                let mut l = LocusLocation::default();
                if ok(locus_record_location(index, number, i, &mut l, e), calls) {
                    let mut v = 0u64;
                    ok(locus_location_value(&l, &frame, &mut v, e), calls);
                    ok(locus_location_address(&l, &frame, &mut v, e), calls);
                }
            }
            for i in 0..=u64::from(r.num_live_outs) {
                let mut l = LocusLiveOut::default();
                ok(locus_record_live_out(index, number, i, &mut l, e), calls);
            }
            let mut sp = LocusStatepoint::default();
            if ok(locus_record_statepoint(index, number, &mut sp, e), calls) {
                let mut l = LocusLocation::default();
                for i in 0..=sp.num_deopt.min(64) {
                    ok(locus_statepoint_deopt(index, number, i, &mut l, e), calls);
                }
                let mut p = LocusGcPointer::default();
                for i in 0..=sp.num_gc_pointers.min(64) {
                    ok(
                        locus_statepoint_gc_pointer(index, number, i, &mut p, e),
                        calls,
                    );
                }
            }
        }
    }
}

#[test]
fn damaged_sections_never_panic() {
    let mut built = 0u64;
    let mut refused = 0u64;
    let mut calls = 0u64;
    for triple in ["x86_64-linux-gnu", "aarch64-linux-gnu"] {
        let section = section_of(triple);
        for at in 0..section.len() {
            for value in [0x00u8, 0x01, 0x80, 0xff] {
                let mut damaged = section.clone();
                if damaged[at] == value {
                    continue;
                }
                damaged[at] = value;
                for flags in [0, LOCUS_INDEX_LENIENT] {
                    let mut index = null_mut();
                    let mut err = std::mem::MaybeUninit::<LocusError>::uninit();
                    // SAFETY: valid buffer, out-pointer and error record.
                    let status = unsafe {
                        locus_index_from_section(
                            damaged.as_ptr(),
                            damaged.len(),
                            LOCUS_ENDIAN_LITTLE,
                            0x10000,
                            flags,
                            &mut index,
                            err.as_mut_ptr(),
                        )
                    };
                    if ok(status, &mut calls) {
                        built += 1;
                        // SAFETY: a live index, freed once.
                        unsafe {
                            walk(index, &mut calls);
                            locus_index_free(index);
                        }
                    } else {
                        refused += 1;
                        assert!(index.is_null());
                        // SAFETY: the call wrote the error record.
                        let err = unsafe { err.assume_init() };
                        assert_eq!(err.code, status);
                        assert_ne!(err.message[0], 0, "an error without a message");
                    }
                }
            }
        }
    }
    // SAFETY: null is accepted.
    unsafe { locus_index_free(null_mut()) };
    println!("damaged sections: {built} indexed and walked, {refused} refused, {calls} calls");
    assert!(built > 0 && refused > 0);
}
