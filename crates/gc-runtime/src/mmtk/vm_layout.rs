//! The virtual address layout MMTk reserves for its spaces and side metadata.
//!
//! MMTk 0.33 chooses its layout at start-up ([`mmtk::util::heap::vm_layout::VMLayout`]);
//! [`configure`] is the one place the runtime overrides it. It keeps MMTk's 64-bit
//! default (spaces 2 TiB apart from 2 TiB up, `log_address_space` 47), on x86-64 and
//! AArch64 alike, because no layout changes what MMTk reserves, measured with `strace -f`
//! on a `gc build` executable of `list_sum.ll` under `mmtk:immix`:
//!
//! - Each space reserves (`PROT_NONE`, `MAP_NORESERVE`) twice the heap's maximum, not its
//!   layout extent: 128 MiB each in a 64 MiB heap, 23.5 GiB each in the default growing
//!   heap on a 24 GB machine (its maximum is half the RAM). A layout moves them only: with
//!   `log_address_space` 40, spaces 64 GiB apart from 64 GiB up, the same four 128 MiB
//!   reservations sat at 64, 128, 192 and 256 GiB.
//! - The side metadata (the VO bits, mark bits, line marks ...) is reserved in one
//!   mapping of 18,333,139,206,144 bytes (16.67 TiB) under both layouts: mmtk-core sizes
//!   each contiguous side-metadata range from the constant `VMLayout::LOG_ARCH_ADDRESS_SPACE`
//!   (47 on 64-bit targets; `metadata_address_range_size` in
//!   `util/metadata/side_metadata/helpers.rs`), never from the layout in force.
//!
//! That second mapping is what ends MMTk executables under qemu-user 7.2 (Debian 12's
//! `qemu-aarch64-static`), status 137: qemu 7.2 keeps a 24-byte descriptor for every
//! 4 KiB guest page of a mapping, reserved or not (a 64 GiB `PROT_NONE` reservation raised
//! qemu's resident memory by 384 MiB, 24.0 bytes a page), so 16.67 TiB needs about 100 GiB;
//! qemu's resident memory grew by about 0.9 GB/s until the kernel's OOM killer ended it at
//! 24 GB (`dmesg`: `Killed process (qemu-aarch64-st) ... anon-rss:24207968kB`). qemu 8.0
//! and later keep page flags in an interval tree: under qemu 10.0 the same reservation
//! costs nothing measurable and every plan runs in about 40 MB (the test `build_aarch64`
//! of the locus-gc crate runs them there). Nothing in the layout can shrink the side
//! metadata reservation of MMTk 0.33. A real AArch64 Linux kernel with 48-bit virtual
//! addresses (256 TiB, the usual configuration) has room for the default layout (up to
//! 34 TiB) and that reservation; one with 39-bit addresses (512 GiB) has room for neither,
//! whatever the layout (not run here: no AArch64 machine).

use mmtk::MMTKBuilder;

/// Sets the layout MMTk will reserve before the heap is made: MMTk's own 64-bit default
/// (see the module docs for why no other layout helps).
pub(super) fn configure(_builder: &mut MMTKBuilder) {}
