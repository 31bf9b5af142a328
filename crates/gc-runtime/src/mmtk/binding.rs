//! The `VMBinding` that tells MMTk about the runtime's objects, roots and threads.
//!
//! MMTk calls a binding through static functions, so they find the heap through
//! [`super::instance`] (the one heap of the process) and a mutator through its thread
//! handle, which is the address of its [`MutatorRecord`].

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::PoisonError;

use mmtk::scheduler::GCWorker;
use mmtk::util::copy::{CopySemantics, GCWorkerCopyContext};
use mmtk::util::heap::{GCTriggerPolicy, SpaceStats};
use mmtk::util::opaque_pointer::{OpaquePointer, VMMutatorThread, VMThread, VMWorkerThread};
use mmtk::util::{Address, ObjectReference};
use mmtk::vm::slot::{SimpleSlot, UnimplementedMemorySlice};
use mmtk::vm::{
    ActivePlan, Collection, GCThreadContext, ObjectModel, ObjectTracer, ReferenceGlue,
    RootsWorkFactory, Scanning, SlotVisitor, VMBinding, VMGlobalLogBitSpec,
    VMLocalForwardingBitsSpec, VMLocalForwardingPointerSpec, VMLocalLOSMarkNurserySpec,
    VMLocalMarkBitSpec, VMLocalPinningBitSpec,
};
use mmtk::{memory_manager, Mutator, ObjectQueue, MMTK};

use super::layout;
use super::layout::HEADER_BYTES;
use super::{address, instance, lock, Instance, RootSet};
use crate::runtime::heap::OBJECT_ALIGN;

/// The runtime, as MMTk knows it.
#[derive(Default)]
pub struct Locus;

impl VMBinding for Locus {
    type VMObjectModel = Objects;
    type VMScanning = Scan;
    type VMCollection = Collect;
    type VMActivePlan = Mutators;
    type VMReferenceGlue = NoReferences;
    type VMSlot = SimpleSlot;
    type VMMemorySlice = UnimplementedMemorySlice<SimpleSlot>;

    // Every object address is 16-byte aligned; an untagged object's allocation starts 8
    // bytes before it (its one header word: allocation offset 8), a tagged object's 32
    // (a multiple of 16). MMTk honours an offset only when the minimum alignment is below
    // the maximum.
    const MIN_ALIGNMENT: usize = 8;
    const MAX_ALIGNMENT: usize = OBJECT_ALIGN;
    const USE_ALLOCATION_OFFSET: bool = true;
}

/// What one mutator thread published when it stopped for a collection.
#[derive(Default)]
pub(crate) struct Published {
    /// Objects kept in place for this collection (frame roots under a plan that pins,
    /// objects a conservative region names).
    pub(crate) pinned: Vec<ObjectReference>,
    /// Root slots MMTk may rewrite.
    pub(crate) slots: Vec<SimpleSlot>,
    /// (base slot, derived slot, base before the collection): moved with their base after.
    pub(crate) derived: Vec<(usize, usize, usize)>,
    /// Cells off the stack standing in as base slots for statepoint slots that hold a
    /// pointer into an object on a copying plan: each holds the object's address, MMTk
    /// rewrites it, and the real slots move by as much (entries of `derived`). Boxed
    /// once, so that the addresses in `slots` and `derived` stay valid.
    pub(crate) cells: Box<[usize]>,
}

/// A thread's root provider, its lifetime erased.
pub(crate) type RootsFn = *mut (dyn FnMut(&mut RootSet) + 'static);

/// A mutator: MMTk's allocation context and what its thread publishes at a collection.
/// Its address is the thread handle MMTk knows it by.
pub(crate) struct MutatorRecord {
    /// Set once, right after binding (binding needs the record's address).
    pub(crate) mutator: UnsafeCell<Option<Box<Mutator<Locus>>>>,
    /// While the thread is inside an allocation or a collection request: where its roots
    /// come from. Lifetime erased; cleared before the call that set it returns.
    pub(crate) roots: UnsafeCell<Option<RootsFn>>,
    /// Written by the thread before it parks, read by GC workers while it is parked.
    pub(crate) published: UnsafeCell<Published>,
    /// The collections ended (the heap's epoch) when the thread's current
    /// allocation or request began: a collection it asked for ends after that.
    pub(crate) epoch_before: std::sync::atomic::AtomicU64,
    /// Objects and bytes this mutator allocated: written by its thread only, read by
    /// [`super::MmtkHeap::stats`] under the heap's lock.
    pub(crate) objects: std::sync::atomic::AtomicU64,
    pub(crate) bytes: std::sync::atomic::AtomicU64,
}

impl MutatorRecord {
    pub(crate) fn tls(&self) -> VMMutatorThread {
        VMMutatorThread(VMThread(OpaquePointer::from_address(Address::from_ptr(
            self as *const MutatorRecord,
        ))))
    }
}

/// The record behind a mutator thread handle.
///
/// # Safety
/// `tls` must be the handle of a bound mutator that is still registered.
unsafe fn record(tls: VMMutatorThread) -> &'static MutatorRecord {
    // SAFETY: the caller's promise: the handle is the address of a live, boxed record.
    unsafe { &*tls.0 .0.to_address().to_ptr::<MutatorRecord>() }
}

/// The MMTk mutator of a registered record.
///
/// # Safety
/// The record must be registered, its thread parked or the caller (no one else uses the
/// mutator at the same time).
#[allow(clippy::mut_from_ref)]
unsafe fn mutator_of(rec: &MutatorRecord) -> &'static mut Mutator<Locus> {
    // SAFETY: the caller's promise; the mutator is set right after binding, before the
    // record is registered.
    match unsafe { (*rec.mutator.get()).as_deref_mut() } {
        // SAFETY: the box lives as long as the registration.
        Some(m) => unsafe { &mut *(m as *mut Mutator<Locus>) },
        None => super::fatal("an MMTk mutator was used before it was bound"),
    }
}

/// The object model: the header of [`layout`] before each object, metadata on the side
/// but for the forwarding pointer, which overwrites a from-space copy's first body word.
pub struct Objects;

impl ObjectModel<Locus> for Objects {
    const GLOBAL_LOG_BIT_SPEC: VMGlobalLogBitSpec = VMGlobalLogBitSpec::side_first();
    const LOCAL_FORWARDING_POINTER_SPEC: VMLocalForwardingPointerSpec =
        VMLocalForwardingPointerSpec::in_header(layout::FORWARDING_POINTER_BITS);
    const LOCAL_FORWARDING_BITS_SPEC: VMLocalForwardingBitsSpec =
        VMLocalForwardingBitsSpec::side_first();
    const LOCAL_MARK_BIT_SPEC: VMLocalMarkBitSpec =
        VMLocalMarkBitSpec::side_after(Self::LOCAL_FORWARDING_BITS_SPEC.as_spec());
    const LOCAL_LOS_MARK_NURSERY_SPEC: VMLocalLOSMarkNurserySpec =
        VMLocalLOSMarkNurserySpec::side_after(Self::LOCAL_MARK_BIT_SPEC.as_spec());
    const LOCAL_PINNING_BIT_SPEC: VMLocalPinningBitSpec =
        VMLocalPinningBitSpec::side_after(Self::LOCAL_LOS_MARK_NURSERY_SPEC.as_spec());
    // Tagged objects are scanned conservatively: which of their words are objects is
    // asked while tracing.
    const NEED_VO_BITS_DURING_TRACING: bool = true;
    const OBJECT_REF_OFFSET_LOWER_BOUND: isize = HEADER_BYTES as isize;

    fn copy(
        from: ObjectReference,
        semantics: CopySemantics,
        copy_context: &mut GCWorkerCopyContext<Locus>,
    ) -> ObjectReference {
        let obj = from.to_raw_address().as_usize();
        // SAFETY: MMTk copies only objects it traced, which this module allocated.
        let start = unsafe { layout::start_of(obj) };
        // SAFETY: as above.
        let bytes = unsafe { layout::size_of(obj) };
        instance().objects_moved.fetch_add(1, Ordering::Relaxed);
        let dst = copy_context.alloc_copy(
            from,
            bytes,
            OBJECT_ALIGN,
            Self::get_align_offset_when_copied(from),
            semantics,
        );
        // SAFETY: `dst` is a fresh allocation of `bytes` bytes; the source is the object's
        // whole allocation.
        unsafe { std::ptr::copy_nonoverlapping(start as *const u8, dst.to_mut_ptr::<u8>(), bytes) };
        let to = dst + (obj - start);
        // SAFETY: `to` is inside a fresh allocation, so not zero.
        let to = unsafe { ObjectReference::from_raw_address_unchecked(to) };
        copy_context.post_copy(to, bytes, semantics);
        to
    }

    fn copy_to(from: ObjectReference, to: ObjectReference, region: Address) -> Address {
        let obj = from.to_raw_address().as_usize();
        // SAFETY: as in `copy`.
        let start = unsafe { layout::start_of(obj) };
        // SAFETY: as above.
        let bytes = unsafe { layout::size_of(obj) };
        let dst = to.to_raw_address().as_usize() - (obj - start);
        if dst != start {
            // SAFETY: the caller reserved the region for this object.
            unsafe { std::ptr::copy(start as *const u8, dst as *mut u8, bytes) };
        }
        let _ = region;
        address(dst + bytes)
    }

    fn get_reference_when_copied_to(from: ObjectReference, to: Address) -> ObjectReference {
        let obj = from.to_raw_address().as_usize();
        // SAFETY: as in `copy`.
        let offset = obj - unsafe { layout::start_of(obj) };
        // SAFETY: `to` is not zero, so neither is `to + offset`.
        unsafe { ObjectReference::from_raw_address_unchecked(to + offset) }
    }

    fn get_current_size(object: ObjectReference) -> usize {
        // SAFETY: MMTk asks only about its objects.
        unsafe { layout::size_of(object.to_raw_address().as_usize()) }
    }

    fn get_size_when_copied(object: ObjectReference) -> usize {
        Self::get_current_size(object)
    }

    fn get_align_when_copied(_object: ObjectReference) -> usize {
        OBJECT_ALIGN
    }

    fn get_align_offset_when_copied(object: ObjectReference) -> usize {
        let obj = object.to_raw_address().as_usize();
        // SAFETY: MMTk asks only about its objects.
        let start = unsafe { layout::start_of(obj) };
        // Untagged: 8; tagged (which never move): 0.
        (obj - start) % OBJECT_ALIGN
    }

    fn get_type_descriptor(_reference: ObjectReference) -> &'static [i8] {
        &[]
    }

    fn ref_to_object_start(object: ObjectReference) -> Address {
        // SAFETY: MMTk asks only about its objects.
        address(unsafe { layout::start_of(object.to_raw_address().as_usize()) })
    }

    fn ref_to_header(object: ObjectReference) -> Address {
        object.to_raw_address() - HEADER_BYTES
    }

    fn dump_object(object: ObjectReference) {
        let obj = object.to_raw_address().as_usize();
        // SAFETY: MMTk asks only about its objects.
        let word = unsafe { layout::word_before(obj) };
        eprintln!("locus: mmtk: object {obj:#x}: header word {word:#x}");
    }
}

/// Scanning: untagged objects' fields precisely, tagged objects' words conservatively,
/// roots from what each mutator published and the heap's pins.
pub struct Scan;

/// Asks the CPU to load the cache line at `addr` (any address: a prefetch never faults).
#[inline(always)]
fn prefetch(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Whether `word` may be an object's address (non-zero, 16-byte aligned) and is one.
fn object_at(word: usize) -> Option<ObjectReference> {
    if word == 0 || !word.is_multiple_of(OBJECT_ALIGN) {
        return None;
    }
    memory_manager::is_mmtk_object(address(word))
}

impl Scanning<Locus> for Scan {
    fn support_slot_enqueuing(_tls: VMWorkerThread, _object: ObjectReference) -> bool {
        // Every object is scanned by `scan_object_and_trace_edges`, which traces each field
        // as soon as it reads it, while the object's cache line is still loaded: with slot
        // enqueuing MMTk read the fields again from its slot buffers, mostly cache misses
        // (29% of GC workers' samples on a 100 MB tree).
        false
    }

    fn scan_object<SV: SlotVisitor<SimpleSlot>>(
        _tls: VMWorkerThread,
        object: ObjectReference,
        slot_visitor: &mut SV,
    ) {
        // Not called while `support_slot_enqueuing` is false; precise for untagged objects.
        let obj = object.to_raw_address().as_usize();
        // SAFETY: MMTk scans only its objects.
        if unsafe { layout::is_tagged(obj) } {
            return;
        }
        // SAFETY: an untagged object of this heap.
        let nptrs = unsafe { layout::nptrs_of(obj) };
        for i in 0..nptrs {
            let slot = address(obj + 8 * i);
            slot_visitor.visit_slot(SimpleSlot::from_address(slot));
        }
    }

    fn scan_object_and_trace_edges<OT: ObjectTracer>(
        _tls: VMWorkerThread,
        object: ObjectReference,
        object_tracer: &mut OT,
    ) {
        let obj = object.to_raw_address().as_usize();
        // SAFETY: MMTk scans only its objects.
        if !unsafe { layout::is_tagged(obj) } {
            // Precisely: each pointer field is null or an object.
            // SAFETY: an untagged object of this heap.
            let nptrs = unsafe { layout::nptrs_of(obj) };
            for i in 0..nptrs {
                let at = (obj + 8 * i) as *mut usize;
                // SAFETY: pointer field `i` of the object.
                let word = unsafe { at.read() };
                // No object, of the heap or static, has an address off a word boundary.
                if !word.is_multiple_of(ObjectReference::ALIGNMENT) {
                    continue;
                }
                let Some(target) = ObjectReference::from_raw_address(address(word)) else {
                    continue;
                };
                // The field's target is scanned later (when its packet runs), and reading
                // its header there was the GC's largest cost: a cache miss per object, 82%
                // of this function's samples on churn (4 threads, Immix, 64 MiB). Asking
                // for the line now: 10% less CPU time, 5% less wall time (8 interleaved
                // runs each, user 1.16 -> 1.04 s, wall 0.63 -> 0.60 s).
                prefetch(word.wrapping_sub(HEADER_BYTES));
                let new = object_tracer.trace_object(target);
                if new != target {
                    // SAFETY: as above.
                    unsafe { at.write(new.to_raw_address().as_usize()) };
                }
            }
            return;
        }
        // A tagged object: conservatively.
        // SAFETY: a tagged object of this heap.
        let words = unsafe { layout::body_words(obj) };
        for i in 0..words {
            let at = (obj + 8 * i) as *mut usize;
            // SAFETY: inside the object's body.
            let word = unsafe { at.read() };
            if let Some(target) = object_at(word) {
                let new = object_tracer.trace_object(target);
                if new != target {
                    // Only copying plans move an object a tagged word names (the others
                    // pinned it before the trace): the word equals its address exactly.
                    // SAFETY: as above.
                    unsafe { at.write(new.to_raw_address().as_usize()) };
                }
            }
        }
    }

    fn notify_initial_thread_scan_complete(_partial_scan: bool, _tls: VMWorkerThread) {}

    fn scan_roots_in_mutator_thread(
        _tls: VMWorkerThread,
        mutator: &'static mut Mutator<Locus>,
        mut factory: impl RootsWorkFactory<SimpleSlot>,
    ) {
        // SAFETY: MMTk scans registered mutators while their threads are parked.
        let rec = unsafe { record(mutator.mutator_tls) };
        // SAFETY: the thread wrote it before parking and waits until the collection ends.
        let published = unsafe { &*rec.published.get() };
        if !published.pinned.is_empty() {
            // Transitively: compiled code keeps in registers pointers it loaded from a
            // rooted object's fields (Julia's Loaded, addrspace 13) and from what those
            // point to, while only the object it loaded them from is in its frame; Immix's
            // defragmentation and StickyImmix's nursery copying must not move any of them.
            factory.create_process_tpinning_roots_work(published.pinned.clone());
        }
        if !published.slots.is_empty() {
            factory.create_process_roots_work(published.slots.clone());
        }
    }

    fn scan_vm_specific_roots(
        _tls: VMWorkerThread,
        mut factory: impl RootsWorkFactory<SimpleSlot>,
    ) {
        let inst = instance();
        let pins: Vec<ObjectReference> = lock(&inst.pins)
            .keys()
            .filter_map(|&addr| object_at(addr))
            .collect();
        if pins.is_empty() {
            return;
        }
        if inst.plan.pins() {
            factory.create_process_pinning_roots_work(pins);
            return;
        }
        // A plan that cannot pin has no pinning trace: its pins are objects of the large
        // object space (`MmtkHeap::pin` refuses the others), which never move, handed over
        // as slots of cells that live until the next collection's roots replace them.
        let cells: Box<[usize]> = pins.iter().map(|o| o.to_raw_address().as_usize()).collect();
        let slots = cells
            .iter()
            .map(|c| SimpleSlot::from_address(address(c as *const usize as usize)))
            .collect();
        *lock(&inst.pin_cells) = cells;
        factory.create_process_roots_work(slots);
    }

    fn supports_return_barrier() -> bool {
        false
    }

    fn prepare_for_roots_re_scanning() {}
}

/// Stopping and resuming mutators, GC worker threads.
pub struct Collect;

impl Collection<Locus> for Collect {
    fn stop_all_mutators<F>(_tls: VMWorkerThread, mut mutator_visitor: F)
    where
        F: FnMut(&'static mut Mutator<Locus>),
    {
        let inst = instance();
        let records = {
            let mut sync = lock(&inst.sync);
            sync.in_gc = true;
            sync.stopped_at = Some(std::time::Instant::now());
            // Other threads' polls see it and park.
            inst.pending.store(true, Ordering::SeqCst);
            while sync.parked < sync.mutators.len() {
                sync = inst
                    .cond
                    .wait(sync)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            sync.mutators.clone()
        };
        pin_tagged_targets(inst);
        for addr in records {
            // SAFETY: registered records are live; their threads are parked.
            let rec = unsafe { &*(addr as *const MutatorRecord) };
            // SAFETY: as above.
            mutator_visitor(unsafe { mutator_of(rec) });
        }
    }

    fn resume_mutators(_tls: VMWorkerThread) {
        let inst = instance();
        for obj in std::mem::take(&mut *lock(&inst.temp_pins)) {
            memory_manager::unpin_object(obj);
        }
        // Forget the tagged objects this collection freed (before anything reuses them).
        lock(&inst.tagged).retain(|&(addr, serial)| {
            object_at(addr).is_some_and(|_| {
                // SAFETY: a live object this module allocated.
                let tagged = unsafe { layout::is_tagged(addr) };
                // SAFETY: as above, and the object is tagged.
                tagged && unsafe { layout::tagged_serial(addr) } == serial
            })
        });
        let mut sync = lock(&inst.sync);
        if let Some(at) = sync.stopped_at.take() {
            sync.pauses.end(at);
        }
        sync.epoch += 1;
        inst.epoch.store(sync.epoch, Ordering::Release);
        sync.in_gc = false;
        inst.pending.store(false, Ordering::SeqCst);
        inst.collections.fetch_add(1, Ordering::Relaxed);
        inst.cond.notify_all();
    }

    fn block_for_gc(tls: VMMutatorThread) {
        // SAFETY: MMTk calls this on a bound mutator's own thread.
        let rec = unsafe { record(tls) };
        let asked = rec.epoch_before.load(Ordering::Relaxed);
        park(instance(), rec, Some(asked));
    }

    fn spawn_gc_thread(_tls: VMThread, ctx: GCThreadContext<Locus>) {
        let GCThreadContext::Worker(worker) = ctx;
        let inst = instance();
        let ordinal = inst.workers_spawned.fetch_add(1, Ordering::Relaxed) + 1;
        let spawned = std::thread::Builder::new()
            .name(format!("locus-mmtk-gc-{ordinal}"))
            .spawn(move || {
                let tls = VMWorkerThread(VMThread(OpaquePointer::from_address(address(ordinal))));
                let run = std::panic::AssertUnwindSafe(|| {
                    memory_manager::start_worker(instance().mmtk, tls, worker)
                });
                // A worker that panicked would leave every mutator waiting for ever.
                if std::panic::catch_unwind(run).is_err() {
                    super::fatal("an MMTk GC worker thread panicked");
                }
            });
        if let Err(e) = spawned {
            super::fatal(&format!("cannot start an MMTk GC worker thread: {e}"));
        }
    }

    fn out_of_memory(_tls: VMThread, err_kind: mmtk::util::alloc::AllocationError) {
        // The allocation then returns null, which the allocating call reports (as
        // `MmtkError::OutOfMemory`); only a failure to map memory is worth a line more.
        instance().out_of_memory.store(true, Ordering::Relaxed);
        if !matches!(
            err_kind,
            mmtk::util::alloc::AllocationError::HeapOutOfMemory
        ) {
            super::record_fault(instance(), format!("out of memory ({err_kind:?})"));
        }
    }

    fn create_gc_trigger() -> Box<dyn GCTriggerPolicy<Locus>> {
        // Set by `MmtkHeap::new` before it starts MMTk, which asks only for a dynamic heap.
        let (min, max) = *TRIGGER_BOUNDS.get().unwrap_or_else(|| {
            super::fatal("MMTk asked for the binding's heap-size policy before it was set")
        });
        Box::new(ProportionalTrigger::new(min, max))
    }
}

/// The bounds, in bytes, of the dynamic heap [`ProportionalTrigger`] sizes: set once, before
/// MMTk starts, by [`super::MmtkHeap::new`] (MMTk asks for its trigger through a static
/// function, and a process has one heap).
pub(crate) static TRIGGER_BOUNDS: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

/// The heap limit after a full collection is this many times what it kept (numerator,
/// denominator), within the bounds: live data up to two thirds of the heap, Boehm's
/// default growth rule (`GC_free_space_divisor` 3).
pub(crate) const HEAP_PER_LIVE: (usize, usize) = (3, 2);

/// A dynamic heap as Boehm sizes its own: it starts at `min`, and after each full-heap
/// collection the limit grows to [`HEAP_PER_LIVE`] times the pages the collection kept
/// (plus its copy reserve and the allocation that triggered it) when that is more, up to
/// `max`; it never shrinks (neither does Boehm's heap).
/// MMTk 0.33's MemBalancer, the alternative, sets the limit to the live size plus a square
/// root term computed in pages, which stays within a few hundred KiB of the live size:
/// once the live data passes `min` every few hundred KiB of allocation collected (GCBench
/// with its long-lived tree at depth 20, 100 MB live: 696 collections and 118 s with
/// 32M..4G, against 21 and 11 s in a fixed 256M heap).
struct ProportionalTrigger {
    max_pages: usize,
    current_pages: AtomicUsize,
    /// Pages of allocations that failed and triggered the running collection.
    pending_pages: AtomicUsize,
}

impl ProportionalTrigger {
    fn new(min: usize, max: usize) -> ProportionalTrigger {
        let page = mmtk::util::constants::BYTES_IN_PAGE;
        let max_pages = (max / page).max(1);
        let min_pages = (min / page).clamp(1, max_pages);
        ProportionalTrigger {
            max_pages,
            current_pages: AtomicUsize::new(min_pages),
            pending_pages: AtomicUsize::new(0),
        }
    }
}

impl GCTriggerPolicy<Locus> for ProportionalTrigger {
    fn on_pending_allocation(&self, pages: usize) {
        self.pending_pages.fetch_add(pages, Ordering::SeqCst);
    }

    fn on_gc_end(&self, mmtk: &'static MMTK<Locus>) {
        let plan = mmtk.get_plan();
        let pending = self.pending_pages.swap(0, Ordering::SeqCst);
        // A nursery collection leaves the old objects' garbage uncounted: size the heap
        // after full-heap collections only.
        if plan
            .generational()
            .is_some_and(|g| g.is_current_gc_nursery())
        {
            return;
        }
        let reserve = plan.get_collection_reserved_pages();
        let live = plan.get_reserved_pages().saturating_sub(reserve);
        let (num, den) = HEAP_PER_LIVE;
        let target = (live.saturating_mul(num) / den)
            .saturating_add(reserve)
            .saturating_add(pending);
        // Never lower: MMTk 0.33 keeps the pages it touched (it gives no memory back), so
        // a lower limit would cost collections and save nothing.
        self.current_pages
            .fetch_max(target.min(self.max_pages), Ordering::Relaxed);
    }

    fn is_gc_required(
        &self,
        space_full: bool,
        space: Option<SpaceStats<Locus>>,
        plan: &dyn mmtk::plan::Plan<VM = Locus>,
    ) -> bool {
        plan.collection_required(space_full, space)
    }

    fn is_heap_full(&self, plan: &dyn mmtk::plan::Plan<VM = Locus>) -> bool {
        plan.get_reserved_pages() > self.current_pages.load(Ordering::Relaxed)
    }

    fn get_current_heap_size_in_pages(&self) -> usize {
        self.current_pages.load(Ordering::Relaxed)
    }

    fn get_max_heap_size_in_pages(&self) -> usize {
        self.max_pages
    }

    fn can_heap_size_grow(&self) -> bool {
        self.current_pages.load(Ordering::Relaxed) < self.max_pages
    }
}

/// Parks the calling thread, the owner of `rec`, for a collection: publishes its roots,
/// counts it parked, and waits until no collection runs and, when it asked for one
/// (`asked`: the collections ended before it asked), one has ended since. Waiting for
/// "the next collection" alone could wait for ever: a request MMTk merged into a
/// collection that ended before this thread got here is served already. Then moves its
/// derived slots after their bases.
pub(crate) fn park(inst: &Instance, rec: &MutatorRecord, asked: Option<u64>) {
    publish(inst, rec);
    {
        let mut sync = lock(&inst.sync);
        sync.parked += 1;
        inst.cond.notify_all();
        while sync.in_gc || asked.is_some_and(|e| sync.epoch == e) {
            sync = inst.cond.wait(sync).unwrap_or_else(PoisonError::into_inner);
        }
        sync.parked -= 1;
        rec.epoch_before.store(sync.epoch, Ordering::Relaxed);
    }
    finish_published(rec);
}

/// After the collections the thread was parked for: moves each derived slot it published
/// by as much as its base moved, and forgets what it published.
pub(crate) fn finish_published(rec: &MutatorRecord) {
    // SAFETY: no collection runs and the thread is not counted parked: it owns its record.
    let published = unsafe { &mut *rec.published.get() };
    for &(base_slot, derived_slot, old) in &published.derived {
        // SAFETY: the slots were published as the thread's live stack slots (or its own
        // cells), and the thread has not run since.
        let new = unsafe { layout::read_word(base_slot) };
        if new != old {
            // SAFETY: as above.
            let derived = unsafe { layout::read_word(derived_slot) };
            // SAFETY: as above.
            unsafe {
                layout::write_word(derived_slot, derived.wrapping_add(new.wrapping_sub(old)))
            };
        }
    }
    *published = Published::default();
}

/// Collects what the thread `rec` must publish before it parks: its frame roots (pinned,
/// or as slots on a copying plan), its slots, its derived pairs and conservative regions.
pub(crate) fn publish(inst: &Instance, rec: &MutatorRecord) {
    let mut set = RootSet::default();
    // SAFETY: only this thread touches its own provider; it is set for the duration of
    // the allocation or request that got here.
    if let Some(provider) = unsafe { *rec.roots.get() } {
        // SAFETY: as above; the provider outlives the call that set it.
        unsafe { (*provider)(&mut set) };
    }
    let mut out = Published::default();
    let pins = inst.plan.pins();
    let mut frame_slots = Vec::new();
    for &first in &set.frames {
        if let Err(fault) = super::walk_frames(first, &mut frame_slots) {
            super::record_fault(inst, fault);
        }
    }
    let check = |slot: usize, what: &dyn Fn() -> String| -> Option<ObjectReference> {
        // SAFETY: the provider vouches for its slots: readable words.
        let value = unsafe { (slot as *const usize).read_volatile() };
        if value == 0 {
            return None;
        }
        let obj = object_at(value);
        // Outside MMTk's memory (and above the first 64 KiB, where nothing is mapped): a
        // static object (spec 003's constant cast to the tracked space), never traced or
        // moved, as in a statepoint lane.
        let could_be_static =
            value >= crate::runtime::collector::LOWEST_MAPPED && !super::in_heap(value);
        if obj.is_none() && !could_be_static {
            super::record_fault(
                inst,
                format!(
                    "{} holds {value:#x}, which is not an object's address",
                    what()
                ),
            );
        }
        obj
    };
    for &(frame, root, slot) in &frame_slots {
        if let Some(obj) = check(slot, &|| format!("root {root} of frame #{frame}")) {
            if pins {
                out.pinned.push(obj);
            } else {
                out.slots.push(SimpleSlot::from_address(address(slot)));
            }
        }
    }
    let mut slots: Vec<usize> = set.slots.clone();
    let mut derived_pairs = set.derived.clone();
    // Statepoint lanes: a base slot may hold a pointer into an object (RS4GC could not
    // trace it to its object) or an address outside the heap (a constant object made
    // from a plain pointer), which a precise slot may not.
    let mut interior: Vec<(usize, usize, ObjectReference)> = Vec::new();
    for &(base, derived) in &set.statepoint {
        // SAFETY: the provider vouches for its slots: readable words.
        let value = unsafe { (base as *const usize).read_volatile() };
        if value == 0 {
            continue;
        }
        if object_at(value).is_some() {
            derived_pairs.push((base, derived));
        } else if let Some(obj) = super::object_containing(value) {
            interior.push((base, derived, obj));
        } else if super::in_heap(value) {
            super::record_fault(
                inst,
                format!(
                    "statepoint slot {base:#x} holds {value:#x}, in the heap but in no live \
                     object (a dangling reference)"
                ),
            );
        }
    }
    if pins {
        out.pinned.extend(interior.iter().map(|&(_, _, obj)| obj));
    } else if !interior.is_empty() {
        out.cells = interior
            .iter()
            .map(|&(_, _, obj)| obj.to_raw_address().as_usize())
            .collect();
        for (k, &(base, derived, obj)) in interior.iter().enumerate() {
            let cell = &out.cells[k] as *const usize as usize;
            let old = obj.to_raw_address().as_usize();
            out.slots.push(SimpleSlot::from_address(address(cell)));
            out.derived.push((cell, base, old));
            if derived != base {
                out.derived.push((cell, derived, old));
            }
        }
    }
    for &(base, _) in &derived_pairs {
        slots.push(base);
    }
    slots.sort_unstable();
    slots.dedup();
    for &(base, derived) in &derived_pairs {
        // A slot that is a base slot too holds an object's address, which MMTk rewrites
        // itself: moving it again by another base's delta would break it.
        if derived == base || slots.binary_search(&derived).is_ok() {
            continue;
        }
        // SAFETY: as for the slots.
        let old = unsafe { (base as *const usize).read_volatile() };
        out.derived.push((base, derived, old));
    }
    for slot in slots {
        if check(slot, &|| format!("root slot {slot:#x}")).is_some() {
            out.slots.push(SimpleSlot::from_address(address(slot)));
        }
    }
    for &(start, end) in &set.regions {
        let mut at = start.next_multiple_of(8);
        while at.checked_add(8).is_some_and(|e| e <= end) {
            // SAFETY: the provider vouches for its regions: readable memory.
            let word = unsafe { (at as *const usize).read_volatile() };
            if let Some(obj) = object_at(word) {
                if pins {
                    out.pinned.push(obj);
                } else {
                    if obj.is_movable() {
                        // Traced all the same (so the object lives on), and rewritten.
                        super::record_fault(
                            inst,
                            format!(
                                "the root region [{start:#x}, {end:#x}) names object \
                                 {word:#x} at {at:#x}, which MMTk plan {} moves: it cannot \
                                 pin what root regions name (use immix, stickyimmix or \
                                 marksweep)",
                                inst.plan
                            ),
                        );
                    }
                    out.slots.push(SimpleSlot::from_address(address(at)));
                }
            }
            at += 8;
        }
    }
    // SAFETY: the thread has not parked yet: no worker reads it now.
    unsafe { *rec.published.get() = out };
}

/// Before a trace on a plan that pins: pins (for this collection) every object a word of a
/// tagged object names, so it stays where the word says. Every tagged object allocated
/// and not yet known dead is scanned, live or not: pinning keeps nothing alive.
fn pin_tagged_targets(inst: &Instance) {
    if !inst.plan.pins() {
        return;
    }
    let tagged = lock(&inst.tagged).clone();
    let mut pinned = lock(&inst.temp_pins);
    for (obj, _) in tagged {
        // SAFETY: registered tagged objects are in the heap until pruned after the
        // collection that frees them.
        let words = unsafe { layout::body_words(obj) };
        for i in 0..words {
            // SAFETY: inside the object's body.
            let word = unsafe { layout::read_word(obj + 8 * i) };
            if let Some(target) = object_at(word) {
                if memory_manager::pin_object(target) {
                    pinned.push(target);
                }
            }
        }
    }
}

/// The mutators, for MMTk.
pub struct Mutators;

impl ActivePlan<Locus> for Mutators {
    fn is_mutator(tls: VMThread) -> bool {
        let addr = tls.0.to_address().as_usize();
        lock(&instance().sync).mutators.contains(&addr)
    }

    fn mutator(tls: VMMutatorThread) -> &'static mut Mutator<Locus> {
        // SAFETY: MMTk asks about bound mutators.
        let rec = unsafe { record(tls) };
        // SAFETY: as above; MMTk uses it while the thread is parked or on the thread.
        unsafe { mutator_of(rec) }
    }

    fn mutators<'a>() -> Box<dyn Iterator<Item = &'a mut Mutator<Locus>> + 'a> {
        let records = lock(&instance().sync).mutators.clone();
        Box::new(records.into_iter().map(|addr| {
            // SAFETY: MMTk iterates the mutators during a collection, while every thread
            // is parked and none binds or unbinds.
            let rec = unsafe { &*(addr as *const MutatorRecord) };
            // SAFETY: as above.
            unsafe { mutator_of(rec) }
        }))
    }

    fn number_of_mutators() -> usize {
        lock(&instance().sync).mutators.len()
    }

    /// An object outside every MMTk space: a static object (spec 003 lets code cast a plain
    /// pointer to a constant object into the tracked space, and a precise field may hold
    /// it). It lives for ever and is neither scanned nor moved: the objects it names must
    /// be static too, or held by a root region.
    fn vm_trace_object<Q: ObjectQueue>(
        _queue: &mut Q,
        object: ObjectReference,
        _worker: &mut GCWorker<Locus>,
    ) -> ObjectReference {
        object
    }
}

/// No weak references or finalizers: the runtime has none.
pub struct NoReferences;

impl ReferenceGlue<Locus> for NoReferences {
    type FinalizableType = ObjectReference;

    fn clear_referent(_new_reference: ObjectReference) {}

    fn get_referent(_object: ObjectReference) -> Option<ObjectReference> {
        None
    }

    fn set_referent(_reff: ObjectReference, _referent: ObjectReference) {}

    fn enqueue_references(_references: &[ObjectReference], _tls: VMWorkerThread) {}
}
