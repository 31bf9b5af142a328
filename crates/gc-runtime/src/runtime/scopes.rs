//! Each thread's scope stack: the root regions of statepoint code and its scoped pins, in
//! the order they were made.
//!
//! Code rewritten for statepoint roots registers stack memory that may hold GC pointers
//! (`locus_gc_push_region`) and pins the objects of a `gc_preserve` region or a `jl_roots`
//! bundle while it needs them ([`RUNTIME_PIN_SCOPED`](crate::contract::RUNTIME_PIN_SCOPED),
//! [`RUNTIME_UNPIN_SCOPED`](crate::contract::RUNTIME_UNPIN_SCOPED)). Both go
//! on one stack per thread, innermost last, so that one depth says what a frame and its
//! callers made: `locus_gc_region_depth` reads it, and `locus_gc_region_reset(depth)` drops
//! every entry above it, undoing the pins among them. That is how an exception leaves no
//! pin behind: a frame without a landing pad runs no code while an exception unwinds
//! through it, and the landing pad that catches resets the stack to the depth after its
//! own function's latest entry, dropping the regions and pins of every frame unwound.
//!
//! The same holds for a host that catches, in C++, an exception thrown through compiled
//! frames: it reads `locus_gc_region_depth` before the call and resets to it in its
//! handler (nothing else runs a reset for it; locus-gc's `tests/host_catch.rs` does this
//! from C++). A thread that detaches drops what is left. (Code lowered with frame roots
//! keeps no scope stack; there the host puts the frame chain's head back instead: see
//! [`locus_gc_get_pgcstack`](super::locus_gc_get_pgcstack).)
//!
//! The pins of [`locus_gc_pin`](super::locus_gc_pin) (a host's, or those the lowering
//! holds across one `invoke` and undoes in both of its destinations) and of
//! [`locus_gc_pin_forever`](super::locus_gc_pin_forever) are not on the stack: a reset
//! never undoes them.

use super::{lock, Runtime};

/// One entry of a scope stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// A root region, `[start, end)` of the thread's stack.
    Region(usize, usize),
    /// A pin the heap took, of the object holding this address.
    Pin(usize),
}

/// One thread's scope stack.
#[derive(Debug, Default)]
pub(crate) struct Scopes {
    entries: Vec<Scope>,
}

impl Scopes {
    /// How many entries there are.
    pub(crate) fn depth(&self) -> usize {
        self.entries.len()
    }

    /// Pushes the root region `[start, end)`.
    pub(crate) fn push_region(&mut self, start: usize, end: usize) {
        self.entries.push(Scope::Region(start, end));
    }

    /// Pushes a pin of `addr` (one the heap took).
    fn push_pin(&mut self, addr: usize) {
        self.entries.push(Scope::Pin(addr));
    }

    /// Removes the innermost pin of `addr`; whether there was one (a pad's reset may have
    /// dropped it, or the pin was refused and never pushed).
    fn remove_pin(&mut self, addr: usize) -> bool {
        match self.entries.iter().rposition(|&e| e == Scope::Pin(addr)) {
            Some(at) => {
                self.entries.remove(at);
                true
            }
            None => false,
        }
    }

    /// Drops every entry above `depth`; returns the addresses of the pins dropped, whose
    /// pins the caller undoes.
    fn truncate(&mut self, depth: usize) -> Vec<usize> {
        if depth >= self.entries.len() {
            return Vec::new();
        }
        self.entries
            .drain(depth..)
            .filter_map(|e| match e {
                Scope::Pin(addr) => Some(addr),
                Scope::Region(..) => None,
            })
            .collect()
    }

    /// The root regions, outermost first.
    pub(crate) fn regions(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.entries.iter().filter_map(|&e| match e {
            Scope::Region(start, end) => Some((start, end)),
            Scope::Pin(_) => None,
        })
    }
}

impl Runtime {
    /// The depth of this thread's scope stack (what `locus_gc_region_depth` returns).
    pub fn scope_depth(&self) -> usize {
        lock(&self.me.scopes).depth()
    }

    /// What `locus_gc_pin_scoped` does: pins the live object holding `addr` as
    /// `locus_gc_pin` does and records the pin on this thread's scope stack, where
    /// [`Runtime::unpin_scoped`] or a reset below it undoes it. An address in no live
    /// object (or an object the plan cannot pin: a fault) records nothing. Returns the
    /// depth after.
    pub fn pin_scoped(&self, addr: usize) -> usize {
        let pinned = self.pin_in_heap(addr);
        let mut scopes = lock(&self.me.scopes);
        if pinned {
            scopes.push_pin(addr);
        }
        scopes.depth()
    }

    /// What `locus_gc_unpin_scoped` does: undoes the innermost pin of `addr` still on this
    /// thread's scope stack; nothing when there is none. Callers unpin only their own pins
    /// still in force: after a reset dropped this frame's pin, an outer frame's pin of the
    /// same address would be the innermost. Returns the depth after.
    pub fn unpin_scoped(&self, addr: usize) -> usize {
        let (found, depth) = {
            let mut scopes = lock(&self.me.scopes);
            let found = scopes.remove_pin(addr);
            (found, scopes.depth())
        };
        if found {
            self.unpin_in_heap(addr);
        }
        depth
    }

    /// What `locus_gc_region_reset` does: drops this thread's root regions and scoped pins
    /// above `depth`, undoing those pins.
    pub fn reset_scopes(&self, depth: usize) {
        // The heap's pins are undone after the stack's lock is let go (a collection takes
        // the two one after the other, never together).
        let dropped = lock(&self.me.scopes).truncate(depth);
        for addr in dropped {
            self.unpin_in_heap(addr);
        }
    }
}

/// A depth as the entry points give it to lowered code.
pub(crate) fn depth_as_i64(depth: usize) -> i64 {
    i64::try_from(depth).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::{
        locus_gc_alloc, locus_gc_enter_safe_region, locus_gc_leave_safe_region, locus_gc_pin,
        locus_gc_pin_scoped, locus_gc_push_region, locus_gc_region_depth, locus_gc_region_reset,
        locus_gc_safepoint, locus_gc_unpin, locus_gc_unpin_scoped, Config, OnFault,
    };
    use super::*;

    /// What a catching landing pad does, by hand on the runtime's own stress collector
    /// (no frames: an object is live only while something pins it): a reset to the depth
    /// before two frames' entries frees the objects of their scoped pins, keeps the
    /// objects of the pins below that depth and of plain `locus_gc_pin` (a host's), and a
    /// scoped unpin after it undoes nothing (no second unpin of a pin the reset undid).
    #[test]
    fn a_reset_undoes_the_scoped_pins_above_it_and_no_other() {
        let rt = Runtime::enter(Config::stress().on_fault(OnFault::Record));
        let live = || {
            locus_gc_safepoint();
            rt.stats().objects_live
        };
        // Each allocation collects first: what it returns is pinned before the next.
        let kept = locus_gc_alloc(0, 8);
        assert_eq!(locus_gc_pin_scoped(kept), 1);
        let host = locus_gc_alloc(0, 8);
        locus_gc_pin(host);
        let both = locus_gc_alloc(0, 8);
        locus_gc_pin(both);
        let depth = locus_gc_region_depth();
        // The unwound frames: a region, scoped pins (one of an object the host pins too).
        let words = [0usize; 2];
        let range = words.as_ptr_range();
        locus_gc_push_region(range.start.cast(), range.end.cast());
        assert_eq!(locus_gc_pin_scoped(both), 3);
        let dropped = locus_gc_alloc(0, 8);
        assert_eq!(locus_gc_pin_scoped(dropped), 4);
        // An address in no object is not recorded.
        assert_eq!(locus_gc_pin_scoped(words.as_ptr().cast()), 4);
        assert_eq!(live(), 4);
        locus_gc_region_reset(depth);
        assert_eq!(locus_gc_region_depth(), depth);
        assert_eq!(rt.scope_depth(), 1);
        assert_eq!(live(), 3, "{}", rt.stats());
        // The pin of `both` the reset undid is not undone again: the host's stays.
        assert_eq!(locus_gc_unpin_scoped(both), 1);
        assert_eq!(live(), 3);
        assert_eq!(locus_gc_unpin_scoped(kept), 0);
        locus_gc_unpin(host);
        locus_gc_unpin(both);
        assert_eq!(live(), 0);
        assert!(rt.faults().is_empty(), "{:?}", rt.faults());
    }

    /// A negative depth (no `locus_gc_region_depth` returns one) is a fault naming it and
    /// drops nothing: the region and the pin stay, and the object stays live.
    #[test]
    fn a_negative_depth_is_a_fault_and_drops_nothing() {
        let rt = Runtime::enter(Config::stress().on_fault(OnFault::Record));
        let words = [0usize; 2];
        let range = words.as_ptr_range();
        locus_gc_push_region(range.start.cast(), range.end.cast());
        let obj = locus_gc_alloc(0, 8);
        assert_eq!(locus_gc_pin_scoped(obj), 2);
        locus_gc_region_reset(-1);
        assert_eq!(locus_gc_region_depth(), 2);
        locus_gc_safepoint();
        assert_eq!(rt.stats().objects_live, 1, "{}", rt.stats());
        let faults = rt.faults();
        assert_eq!(faults, [crate::runtime::GcFault::RegionDepth { depth: -1 }]);
        assert!(faults[0].to_string().contains("depth -1 is negative"));
        locus_gc_region_reset(0);
    }

    /// A thread that detaches with scoped pins still on its stack (its code unwound past
    /// every landing pad) does not leave their objects pinned in the heap it shares.
    #[test]
    fn a_detaching_thread_drops_its_scoped_pins() {
        let rt = Runtime::enter(Config::stress().on_fault(OnFault::Record));
        let heap = rt.heap();
        // Safe while it waits: the other thread's allocations collect.
        locus_gc_enter_safe_region();
        let joined = std::thread::spawn(move || {
            let _guard = heap.attach();
            let obj = locus_gc_alloc(0, 8);
            assert_eq!(locus_gc_pin_scoped(obj), 1);
            locus_gc_safepoint();
        })
        .join();
        locus_gc_leave_safe_region();
        joined.unwrap_or_else(|_| panic!("the attached thread panicked"));
        assert_eq!(rt.mutators(), 1);
        locus_gc_safepoint();
        assert_eq!(rt.stats().objects_live, 0, "{}", rt.stats());
    }

    #[test]
    fn a_reset_drops_regions_and_pins_above_the_depth_innermost_first() {
        let mut s = Scopes::default();
        s.push_region(0x1000, 0x1010);
        s.push_pin(0xa0);
        s.push_region(0x2000, 0x2010);
        s.push_pin(0xb0);
        s.push_pin(0xc0);
        assert_eq!(s.depth(), 5);
        assert_eq!(s.truncate(2), vec![0xb0, 0xc0]);
        assert_eq!(s.regions().collect::<Vec<_>>(), vec![(0x1000, 0x1010)]);
        assert_eq!(s.truncate(7), Vec::<usize>::new());
        assert_eq!(s.depth(), 2);
        assert_eq!(s.truncate(0), vec![0xa0]);
        assert_eq!(s.depth(), 0);
    }

    #[test]
    fn an_unpin_removes_the_innermost_pin_of_its_address_only() {
        let mut s = Scopes::default();
        s.push_pin(0xa0);
        s.push_region(0x1000, 0x1010);
        s.push_pin(0xa0);
        s.push_pin(0xb0);
        assert!(s.remove_pin(0xa0));
        assert_eq!(
            s.entries,
            vec![
                Scope::Pin(0xa0),
                Scope::Region(0x1000, 0x1010),
                Scope::Pin(0xb0)
            ]
        );
        assert!(!s.remove_pin(0xc0));
        assert!(s.remove_pin(0xa0));
        assert!(!s.remove_pin(0xa0));
        assert_eq!(s.depth(), 2);
    }
}
