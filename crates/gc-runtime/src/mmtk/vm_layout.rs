//! The virtual address layout MMTk reserves for its spaces and side metadata.
//!
//! MMTk 0.33 chooses its layout at start-up ([`mmtk::util::heap::vm_layout::VMLayout`]);
//! [`configure`] is the one place the runtime overrides it.

use mmtk::MMTKBuilder;

/// Sets the layout MMTk will reserve before the heap is made. Today MMTk's own default.
pub(super) fn configure(_builder: &mut MMTKBuilder) {}
