//! The contract's names and numbers, written once: the address spaces, the `julia.*`
//! intrinsics the frontend and the lowering speak, the frame layout, and the runtime's
//! symbols. The verifier, the lowering and the runtime all take them from here; nothing here
//! needs LLVM, so the runtime builds without it.

// Address spaces (spec 003, "Представление").

/// Untracked pointers.
pub const UNTRACKED: u32 = 0;
/// GC-tracked pointers (`jl_value_t*`): what frame slots hold.
pub const TRACKED: u32 = 10;
/// Pointers derived from a tracked pointer (interior pointers).
pub const DERIVED: u32 = 11;
/// Callee-rooted pointers: need no root when passed to a call.
pub const CALLEE_ROOTED: u32 = 12;
/// Pointers loaded from a tracked object, alive while it is.
pub const LOADED: u32 = 13;

// What the frontend writes.

/// The call that gives a function its thread's GC chain head (and makes it take part).
pub const GET_PGCSTACK: &str = "julia.get_pgcstack";
/// The same for a thread Julia does not know yet.
pub const GET_PGCSTACK_OR_NEW: &str = "julia.get_pgcstack_or_new";
/// The parameter attribute that marks a function's chain-head parameter instead.
pub const GCSTACK_ATTR: &str = "gcstack";
/// Julia's raw-pointer escape hatch: Tracked in, untracked out.
pub const POINTER_FROM_OBJREF: &str = "julia.pointer_from_objref";
/// The jlcall convention's marker calls: `julia.call(fptr, F, args...)` and
/// `julia.call2(fptr, F, X, args...)`.
pub const JULIA_CALL: &str = "julia.call";
/// See [`JULIA_CALL`].
pub const JULIA_CALL2: &str = "julia.call2";
/// Keeps its operands rooted at every safepoint it dominates and its end does not.
pub const PRESERVE_BEGIN: &str = "llvm.julia.gc_preserve_begin";
/// Ends a preserve region.
pub const PRESERVE_END: &str = "llvm.julia.gc_preserve_end";
/// `julia.gc_loaded(obj, ptr)`: `ptr`, loaded from `obj`, lives as long as `obj`.
pub const GC_LOADED: &str = "julia.gc_loaded";
/// The operand bundle that roots extra values during a call.
pub const JL_ROOTS: &str = "jl_roots";
/// The call-site parameter attribute of Julia's return-roots convention: the argument is
/// a buffer of that many tracked pointers the callee fills.
pub const RETURN_ROOTS: &str = "julia.return_roots";

/// `julia.gc_alloc_obj(task, size, tag)`: a new object of `size` bytes with type tag `tag`.
pub const GC_ALLOC_OBJ: &str = "julia.gc_alloc_obj";
/// `julia.gc_alloc_bytes(ptls, size, tag)`: what [`GC_ALLOC_OBJ`] becomes; the tag word is
/// then stored in the word before the object.
pub const GC_ALLOC_BYTES: &str = "julia.gc_alloc_bytes";
/// Bundle of a [`GC_ALLOC_OBJ`] call: byte offsets of pointer fields to null at once.
pub const ALLOC_PTR_OFFSETS: &str = "julia.gc_alloc_ptr_offsets";
/// Bundle of a [`GC_ALLOC_OBJ`] call: `(offset, size)` of bytes to zero at once.
pub const ALLOC_ZEROINIT: &str = "julia.gc_alloc_zeroinit";
/// Bundle of an allocating call: `(field offset, size)`: zero `size` bytes at the pointer
/// stored at that offset of the new object.
pub const ALLOC_ZEROINIT_INDIRECT: &str = "julia.gc_alloc_zeroinit_indirect";
/// `julia.gc_alloc_memory(task, nbytes, tag, length, zeroinit)`: a new `GenericMemory` (a
/// `length` word, a data pointer, then the data when it is inline) of `nbytes` data bytes,
/// zeroed when `zeroinit` is true.
pub const GC_ALLOC_MEMORY: &str = "julia.gc_alloc_memory";
/// `jl_alloc_genericmemory_unchecked(ptls, nbytes, tag)`: Julia's runtime call that
/// [`GC_ALLOC_MEMORY`] becomes when its data does not fit a small object; it sets the data
/// pointer, the caller the length.
pub const ALLOC_GENERICMEMORY: &str = "jl_alloc_genericmemory_unchecked";
/// A `GenericMemory`'s words: the length at byte 0, the data pointer at byte 8, inline data
/// from byte 16 (`sizeof(jl_genericmemory_t)` rounded to 16).
pub const MEMORY_LENGTH_OFFSET: i64 = 0;
/// See [`MEMORY_LENGTH_OFFSET`].
pub const MEMORY_PTR_OFFSET: i64 = 8;
/// See [`MEMORY_LENGTH_OFFSET`].
pub const MEMORY_INLINE_DATA_OFFSET: i64 = 16;
/// The most data bytes a `GenericMemory` holds inline, in one small object: Julia's largest
/// pool size class (`GC_MAX_SZCLASS`, 2032 - 8 on 64-bit targets) less the header.
pub const MEMORY_INLINE_MAX_BYTES: u64 = 2024 - MEMORY_INLINE_DATA_OFFSET as u64;
/// Julia's task object: the word index of its `ptls` field (`offsetof(jl_task_t, ptls) / 8`),
/// which the expansion of [`GC_ALLOC_OBJ`] reads.
pub const TASK_PTLS_WORD: i64 = 16;
/// Julia's task object: the word index of its `gcstack` field, the chain head. Julia's
/// code finds the current task `TASK_GCSTACK_WORD` words before the chain head
/// (`getelementptr ptr, ptr %pgcstack, i64 -12`), so the runtime keeps its chain head at
/// this word of a task-shaped block.
pub const TASK_GCSTACK_WORD: usize = 12;

// The allocation fast path: words of the runtime's task-shaped block, after `ptls`, that say
// how to allocate on MMTk without calling the runtime (as Julia's MMTk binding lets compiled
// code bump the thread's allocation buffer). Code finds them from the chain head
// (`pgcstack + 8 * (word - TASK_GCSTACK_WORD)`). The runtime's own `locus_gc_alloc` takes
// the same path first; compiled code that inlines it must do exactly what it does:
//
// 1. `bp = task[TASK_ALLOC_BUMP_WORD]`; null: call `locus_gc_alloc` (the runtime's own
//    collector, a plan without a bump pointer, `LOCUS_GC_MMTK_COLLECT_EVERY`, a safe region);
// 2. `*task[TASK_ALLOC_PENDING_WORD] != 0` (a byte: another thread's collection is
//    stopping the world): call `locus_gc_alloc`, which parks the thread (compiled code may
//    skip this step, as Julia's inline allocation does: the thread then parks at its next
//    safepoint or when its buffer runs out, which bounds the delay);
// 3. `size` = 8 + (8 * nptrs + nbytes) rounded up to 8 (at least 8), rounded up to 16, at
//    most [`INLINE_ALLOC_MAX_BYTES`] ([`untagged_allocation_bytes`]); `start = bp[0] | 8`
//    (the cursor, always a multiple of 8, moved to 8 past a multiple of 16, so that the
//    object is 16-byte aligned), `end = start + size`; `bp[0] == 0 || end > bp[1]` (the
//    limit): call `locus_gc_alloc` (no buffer has a cursor and a limit of 0);
// 4. `bp[0] = end`; the object is `obj = start + 8`, its one header word
//    [`untagged_header_word`]`(nptrs, nbytes)` at `start`; the body `[obj, end)` is zero
//    already (nothing to write), and so are the 8 bytes the cursor skipped: every plan that
//    publishes a bump pointer allocates it from memory MMTk 0.33.0 zeroed when it handed
//    the buffer out (its plan constructors make every space `zeroed`: a clean block is
//    zeroed when its space acquires it, recyclable Immix lines when the allocator takes
//    them);
// 5. the valid-object bit: the byte at `task[TASK_ALLOC_VO_WORD] + (obj >> 6)` gets bit
//    `(obj >> 3) & 7` (a plain load and store: only this thread writes it);
// 6. the counters: the `u64` at `task[TASK_ALLOC_OBJECTS_WORD]` + 1, the one at
//    `task[TASK_ALLOC_BYTES_WORD]` + `size` (plain: only this thread writes them).

/// The task word holding the address of the thread's MMTk bump pointer (`{cursor, limit}`,
/// two words), or null when an allocation must call `locus_gc_alloc`.
pub const TASK_ALLOC_BUMP_WORD: usize = 17;
/// The task word holding the address of MMTk's valid-object bit table.
pub const TASK_ALLOC_VO_WORD: usize = 18;
/// The task word holding the address of the thread's count of objects allocated (`u64`).
pub const TASK_ALLOC_OBJECTS_WORD: usize = 19;
/// The task word holding the address of the thread's count of bytes allocated (`u64`).
pub const TASK_ALLOC_BYTES_WORD: usize = 20;
/// The task word holding the address of the heap's collection-pending byte (nonzero: the
/// allocation must call `locus_gc_alloc`).
pub const TASK_ALLOC_PENDING_WORD: usize = 21;
/// The largest allocation (header included) the fast path makes; larger ones call
/// `locus_gc_alloc`.
pub const INLINE_ALLOC_MAX_BYTES: usize = 256;

/// The bit of an MMTk object's header word (the word before the object) that says the
/// object is untagged: that word is then its [`untagged_header_word`]; in a tagged object
/// it is the type tag, which must not have this bit set (a tag is a type's address or a
/// small number: on MMTk `locus_gc_alloc_bytes` refuses one with this bit).
pub const UNTAGGED_HEADER_FLAG: u64 = 1 << 63;

/// The bytes of an untagged object's header on MMTk: one word, before the object (step 4
/// above).
pub const UNTAGGED_HEADER_BYTES: u64 = 8;

/// The most pointer fields an untagged object may have on MMTk (31 bits of its header).
pub const UNTAGGED_MAX_NPTRS: u64 = (1 << 31) - 1;

/// The most raw bytes an untagged object may have on MMTk (32 bits of its header).
pub const UNTAGGED_MAX_NBYTES: u64 = u32::MAX as u64;

/// The one header word of an untagged object of `nptrs` pointer fields and `nbytes` raw
/// bytes on MMTk (step 4 above): [`UNTAGGED_HEADER_FLAG`], `nptrs` in bits 32 to 62,
/// `nbytes` in bits 0 to 31; `None` when a count does not fit.
pub fn untagged_header_word(nptrs: u64, nbytes: u64) -> Option<u64> {
    (nptrs <= UNTAGGED_MAX_NPTRS && nbytes <= UNTAGGED_MAX_NBYTES)
        .then_some(UNTAGGED_HEADER_FLAG | nptrs << 32 | nbytes)
}

/// The bytes an untagged object of `nptrs` pointer fields and `nbytes` raw bytes takes on
/// MMTk (step 3 above): its 8-byte header word, the body in whole words (at least one),
/// all rounded up to 16; `None` when a count does not fit the header or that overflows.
pub fn untagged_allocation_bytes(nptrs: u64, nbytes: u64) -> Option<u64> {
    untagged_header_word(nptrs, nbytes)?;
    let body = nptrs.checked_mul(8)?.checked_add(nbytes)?;
    let words = body.div_ceil(8).max(1);
    words
        .checked_mul(8)?
        .checked_add(UNTAGGED_HEADER_BYTES)?
        .checked_next_multiple_of(16)
}

// Julia's TBAA type tree, whose tags the lowering puts on the memory accesses it adds, as
// Julia's passes do: `!{!"jtbaa"}` is the root, `!{!"jtbaa", root, i64 0}` the scalar type
// every other one descends from.

/// The name of Julia's TBAA root and of the scalar type under it.
pub const TBAA_ROOT: &str = "jtbaa";
/// Accesses to GC frames and the task's fields: never aliased by the program's data.
pub const TBAA_GCFRAME: &str = "jtbaa_gcframe";
/// The program's mutable data.
pub const TBAA_DATA: &str = "jtbaa_data";
/// An object's type tag word (a child of [`TBAA_DATA`]).
pub const TBAA_TAG: &str = "jtbaa_tag";

/// A function attribute: calls to a function that has it are safepoints, whatever its
/// memory effects say.
pub const SAFEPOINT_ATTR: &str = "julia.safepoint";
/// `julia.safepoint(ptr)`: Julia's safepoint poll, a call that may collect.
pub const SAFEPOINT: &str = "julia.safepoint";

/// `julia.typeof(obj)`: the object's type tag, itself a permanently rooted object.
pub const TYPEOF: &str = "julia.typeof";
/// The low bits of a tag word that are the collector's (mark bits), not the type's.
pub const TAG_FLAG_BITS: i64 = 15;
/// `julia.write_barrier(parent, children...)`: `parent` now refers to the children.
pub const WRITE_BARRIER: &str = "julia.write_barrier";
/// `julia.object_write_barrier(parent, ...)`: the same, for a whole object copied in.
pub const OBJECT_WRITE_BARRIER: &str = "julia.object_write_barrier";
/// `julia.field_write_barrier.<suffix>(parent, (slot, child)...)`: the same, per field.
pub const FIELD_WRITE_BARRIER_PREFIX: &str = "julia.field_write_barrier.";

/// Calls that never collect, by name, besides intrinsics and calls that only read memory:
/// the helpers above, the frame intrinsics, and the runtime entry points Julia's own pass
/// knows not to be safepoints.
pub const NOT_SAFEPOINTS: &[&str] = &[
    GET_PGCSTACK,
    GET_PGCSTACK_OR_NEW,
    POINTER_FROM_OBJREF,
    PRESERVE_BEGIN,
    PRESERVE_END,
    GC_LOADED,
    NEW_GC_FRAME,
    PUSH_GC_FRAME,
    POP_GC_FRAME,
    GET_GC_FRAME_SLOT,
    RUNTIME_GET_PGCSTACK,
    TYPEOF,
    WRITE_BARRIER,
    OBJECT_WRITE_BARRIER,
    RUNTIME_WRITE_BARRIER_INTERIOR,
    "julia.pop_handler_noexcept",
    "jl_egal__unboxed",
    "jl_lock_value",
    "jl_unlock_value",
    "jl_lock_field",
    "jl_unlock_field",
    "memcmp",
];

// Julia's intermediate form (what LateLowerGCFrame writes and FinalLowerGC reads).

/// `julia.new_gc_frame(i32 N)`: a frame of N roots.
pub const NEW_GC_FRAME: &str = "julia.new_gc_frame";
/// `julia.push_gc_frame(frame, i32 N)`: links a frame into the chain.
pub const PUSH_GC_FRAME: &str = "julia.push_gc_frame";
/// `julia.get_gc_frame_slot(frame, i32 k)`: the address of root k.
pub const GET_GC_FRAME_SLOT: &str = "julia.get_gc_frame_slot";
/// `julia.pop_gc_frame(frame)`: unlinks a frame.
pub const POP_GC_FRAME: &str = "julia.pop_gc_frame";

// The frame (Julia's `jl_gcframe_t`).

/// Words before the roots: `nroots << 2`, then `prev`.
pub const HEADER_WORDS: usize = 2;
/// The shift of the root count in the frame's first word (the low bits are flags).
pub const ROOT_COUNT_SHIFT: u32 = 2;

// The runtime's symbols, which lowered code calls.

/// A symbol `locus gc build` defines in an executable with statepoint roots: when the
/// program has no statepoint at all (no call that may collect), LLVM writes no
/// `.llvm_stackmaps` section, and the runtime, finding this symbol, walks no frames instead
/// of refusing the program as one built without statepoint roots.
pub const STATEPOINT_PROGRAM_MARKER: &str = "locus_gc_statepoint_program";

/// Returns the address of this thread's chain head; replaces `julia.get_pgcstack`.
pub const RUNTIME_GET_PGCSTACK: &str = "locus_gc_get_pgcstack";
/// `locus_gc_alloc(i64 nptrs, i64 nbytes)`: a new object; may collect first.
pub const RUNTIME_ALLOC: &str = "locus_gc_alloc";
/// `locus_gc_safepoint()`: may collect.
pub const RUNTIME_SAFEPOINT: &str = "locus_gc_safepoint";
/// `locus_gc_foreign_read(ptr, i64 offset)`: may collect, then reads a word of an object.
pub const RUNTIME_FOREIGN_READ: &str = "locus_gc_foreign_read";
/// `locus_gc_callee_rooted_read(ptr, i64 offset)`: a callee that roots its argument itself.
pub const RUNTIME_CALLEE_ROOTED_READ: &str = "locus_gc_callee_rooted_read";
/// `locus_gc_write_barrier(ptr addrspace(10) parent)`: what Julia's write barriers become.
pub const RUNTIME_WRITE_BARRIER: &str = "locus_gc_write_barrier";
/// `locus_gc_write_barrier_interior(ptr addr)`: the write barrier on the object holding
/// `addr` (an address inside it, or outside the heap: no barrier), placed after a store
/// whose object the lowering cannot name (through a Derived argument, say); never collects.
pub const RUNTIME_WRITE_BARRIER_INTERIOR: &str = "locus_gc_write_barrier_interior";
/// `locus_gc_alloc_bytes(ptr ptls, i64 size, i64 tag)`: a new tagged object; what
/// [`GC_ALLOC_BYTES`] becomes; may collect first.
pub const RUNTIME_ALLOC_BYTES: &str = "locus_gc_alloc_bytes";
/// `locus_gc_alloc_genericmemory(ptr ptls, i64 nbytes, ptr tag)`: a new tagged
/// `GenericMemory` with its data pointer set; what [`ALLOC_GENERICMEMORY`] becomes; may
/// collect first.
pub const RUNTIME_ALLOC_GENERICMEMORY: &str = "locus_gc_alloc_genericmemory";
/// Statepoint roots: pins the live object holding an address (`void (ptr)`) until
/// [`RUNTIME_UNPIN`], whatever unwinds: the pin of an object live into a landing pad that
/// uses the exception, across its `invoke`.
pub const RUNTIME_PIN: &str = "locus_gc_pin";
/// Statepoint roots: undoes one [`RUNTIME_PIN`].
pub const RUNTIME_UNPIN: &str = "locus_gc_unpin";
/// Statepoint roots: the object never moves again (`julia.pointer_from_objref`).
pub const RUNTIME_PIN_FOREVER: &str = "locus_gc_pin_forever";
/// Statepoint roots: pins the live object holding an address and records the pin on the
/// thread's scope stack (`i64 (ptr)`, the depth after), what `gc_preserve_begin` and a
/// `jl_roots` bundle become; a [`RUNTIME_REGION_RESET`] below it undoes it.
pub const RUNTIME_PIN_SCOPED: &str = "locus_gc_pin_scoped";
/// Statepoint roots: undoes the innermost [`RUNTIME_PIN_SCOPED`] of an address still on the
/// stack (`i64 (ptr)`, the depth after).
pub const RUNTIME_UNPIN_SCOPED: &str = "locus_gc_unpin_scoped";
/// Statepoint roots: the depth of the thread's scope stack, its memory root regions and
/// scoped pins (`i64 ()`), read on entry by a function that registers regions.
pub const RUNTIME_REGION_DEPTH: &str = "locus_gc_region_depth";
/// Statepoint roots: registers stack memory `[start, end)` holding GC pointers that
/// stayed in memory (`void (ptr, ptr)`), scanned conservatively by each collection.
pub const RUNTIME_PUSH_REGION: &str = "locus_gc_push_region";
/// Statepoint roots: drops the regions and scoped pins above a depth (`void (i64)`), before
/// a return and in a landing pad.
pub const RUNTIME_REGION_RESET: &str = "locus_gc_region_reset";

// Threads (the runtime's thread API; see the runtime's docs).

/// `locus_gc_poll()`: stops the thread while another one collects; never starts a
/// collection. What `--safepoint-polls` calls at loop back edges.
pub const RUNTIME_POLL: &str = "locus_gc_poll";
/// `locus_gc_enter_safe_region()`: the thread counts as stopped until it leaves (around a
/// foreign call that may block).
pub const RUNTIME_ENTER_SAFE_REGION: &str = "locus_gc_enter_safe_region";
/// `locus_gc_leave_safe_region()`: ends a safe region, waiting for a collection to end.
pub const RUNTIME_LEAVE_SAFE_REGION: &str = "locus_gc_leave_safe_region";
/// `ptr locus_gc_heap()`: the calling thread's heap, for another thread to attach to.
pub const RUNTIME_HEAP: &str = "locus_gc_heap";
/// `i32 locus_gc_thread_attach_heap(ptr heap)`: attaches the calling thread to a heap.
pub const RUNTIME_THREAD_ATTACH_HEAP: &str = "locus_gc_thread_attach_heap";
/// `i32 locus_gc_thread_detach()`: detaches the calling thread.
pub const RUNTIME_THREAD_DETACH: &str = "locus_gc_thread_detach";
/// `void locus_gc_add_root_region(ptr start, ptr end)`: a global root table.
pub const RUNTIME_ADD_ROOT_REGION: &str = "locus_gc_add_root_region";
/// `i32 locus_gc_remove_root_region(ptr start)`: drops a global root table.
pub const RUNTIME_REMOVE_ROOT_REGION: &str = "locus_gc_remove_root_region";
