//! What both test files take from the spec: its AMDGPU register numbers and the
//! worked examples' expression texts
//! (`shared/spec/001_dwarf_location_descriptions_on_stack.md`).

// Each test binary uses a different subset.
#![allow(dead_code)]

pub const SGPR0: u16 = 32;
pub const SGPR3: u16 = 35;
pub const VGPR0: u16 = 2560;
pub const VGPR1: u16 = 2561;

/// Register names the examples use, for `parse_text`.
pub fn resolve(name: &str) -> Option<u16> {
    match name {
        "SGPR0" => Some(SGPR0),
        "SGPR3" => Some(SGPR3),
        "VGPR0" => Some(VGPR0),
        "VGPR1" => Some(VGPR1),
        _ => None,
    }
}

/// "Source Language Variable Spread Across Multiple Vector Registers".
pub const MULTI_LANE: &str = "DW_OP_regx VGPR0
 DW_OP_push_lane
 DW_OP_uconst 4
 DW_OP_mul
 DW_OP_offset
 DW_OP_piece 4
 DW_OP_regx VGPR1
 DW_OP_push_lane
 DW_OP_uconst 4
 DW_OP_mul
 DW_OP_offset
 DW_OP_piece 4";

/// "Source Language Variable Spread Across Multiple Kinds of Locations".
pub const MIXED: &str = "DW_OP_regx VGPR0
 DW_OP_push_lane
 DW_OP_uconst 4
 DW_OP_mul
 DW_OP_offset
 DW_OP_piece 4
 DW_OP_addr 0xbeef
 DW_OP_piece 2
 DW_OP_uconst 0xf00d
 DW_OP_stack_value
 DW_OP_piece 2
 DW_OP_piece_end";
