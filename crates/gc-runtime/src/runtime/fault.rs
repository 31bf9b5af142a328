//! Faults: what the runtime reports instead of crashing when compiled code broke the contract.
//!
//! Every fault prints as one line that starts with its kind (`dangling reference:`,
//! `interior pointer:`, `not an object:`, `corrupt heap:`, `corrupt frame:`, `foreign read:`,
//! `allocation:`), names where the bad pointer was found (a root slot of a numbered frame, or
//! a pointer field of an object and the root it was reached from), what it points to, and the
//! collection that found it. The CLI prints it after `locus: gc: `.
//!
//! A fatal signal's line (`locus: SIGSEGV ... in function `NAME``) names the function with
//! `dladdr`; in an executable of `locus gc build`, whose `main` is Locus's, the module's own
//! `main` is the symbol [`RENAMED_MAIN`], and a function named as one the runtime takes
//! from the C library has [`PROGRAM_PREFIX`] before its name; [`source_function_name`]
//! turns both back into the source's names for that line.

use std::fmt;

use super::frames::{MAX_FRAMES, MAX_FRAME_ROOTS, ROOT_FLAGS_MASK};
use super::heap::{ObjectInfo, HEADER_BYTES, MAX_OBJECT_BYTES};

/// What `locus gc build` renames a module's own `main` to: the executable's `main` is the
/// one the build adds (it makes the thread's runtime and calls the entry). The build's
/// `RENAMED_MAIN` is this name.
pub const RENAMED_MAIN: &str = "locus_entry";

/// What `locus gc build` puts before a module symbol named as one the runtime library
/// takes from the C library (`read`, `malloc`): in one static link, the module's `read`
/// would take the runtime's calls to the C library's. The build's `PROGRAM_PREFIX` is this.
pub const PROGRAM_PREFIX: &str = "locus.program.";

/// The name the program's source gives the function whose symbol is `symbol`, for a fault
/// line: `main` for [`RENAMED_MAIN`], `NAME` for [`PROGRAM_PREFIX`]`NAME`, `symbol` itself
/// otherwise. It only compares bytes, so a signal handler may call it.
pub fn source_function_name(symbol: &[u8]) -> &[u8] {
    if symbol == RENAMED_MAIN.as_bytes() {
        b"main"
    } else {
        symbol
            .strip_prefix(PROGRAM_PREFIX.as_bytes())
            .unwrap_or(symbol)
    }
}

/// Where a traced pointer was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Referrer {
    /// Root slot `slot` of the frame numbered `frame` (0 is the innermost frame, the one the
    /// chain head points to; 1 is its `prev`, and so on).
    Root {
        /// The frame's number, counted from the innermost frame (0).
        frame: usize,
        /// The frame's address.
        frame_addr: usize,
        /// The frame's root count.
        nroots: usize,
        /// The root slot (0-based).
        slot: usize,
    },
    /// Pointer field `field` of a live object.
    Field {
        /// The address of the object holding the field.
        object: usize,
        /// The object's allocation number.
        serial: u64,
        /// The field (0-based; field `i` is at offset `8 * i`).
        field: usize,
        /// The root through which the object was reached: `(frame number, slot)`.
        root: (usize, usize),
    },
    /// A base slot of a statepoint (statepoint roots,
    /// [`crate::runtime::statepoints`]).
    Statepoint {
        /// The compiled frame's number, counted from the innermost (0).
        frame: usize,
        /// The return address of the statepoint's call.
        return_address: usize,
        /// The pair (lane) of the record.
        pair: usize,
        /// The slot's address.
        slot: usize,
    },
    /// Word `word` of the global root region that starts at `region`
    /// (`locus_gc_add_root_region`).
    Global {
        /// The region's start address.
        region: usize,
        /// The word (0-based; word `i` is at `region + 8 * i`, rounded up to 8).
        word: usize,
    },
    /// An object pinned by `gc_preserve` or a `jl_roots` bundle.
    Pinned {
        /// The object's address.
        object: usize,
    },
}

impl fmt::Display for Referrer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Referrer::Root {
                frame,
                frame_addr,
                nroots,
                slot,
            } => write!(
                f,
                "root {slot} of frame #{frame} (frame at {frame_addr:#x}, {nroots} root{})",
                plural(nroots)
            ),
            Referrer::Field {
                object,
                serial,
                field,
                root: (frame, slot),
            } => write!(
                f,
                "field {field} of object {object:#x} (#{serial}, reached from root {slot} of \
                 frame #{frame})"
            ),
            Referrer::Statepoint {
                frame,
                return_address,
                pair,
                slot,
            } => write!(
                f,
                "base slot {pair} of the statepoint returning to {return_address:#x} \
                 (compiled frame #{frame}, slot at {slot:#x})"
            ),
            Referrer::Pinned { object } => write!(f, "the pin on {object:#x}"),
            Referrer::Global { region, word } => {
                write!(f, "word {word} of the global root region at {region:#x}")
            }
        }
    }
}

/// What is wrong with a frame in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameProblem {
    /// The frame address is not a multiple of 8.
    Misaligned,
    /// The frame lies below the stack pointer of the collection, in stack memory no running
    /// function owns: typically a function returned without unlinking its frame.
    BelowStackPointer {
        /// The approximate stack pointer at the collection.
        sp: usize,
    },
    /// The frame header lies outside the current thread's stack.
    OutsideStack {
        /// The lowest stack address.
        low: usize,
        /// One past the highest stack address.
        high: usize,
    },
    /// The frame's root slots run past the end of the current thread's stack.
    RootsOutsideStack {
        /// The root count read from the frame.
        nroots: usize,
        /// One past the highest stack address.
        high: usize,
    },
    /// The root count is larger than [`MAX_FRAME_ROOTS`].
    TooManyRoots {
        /// The root count read from the frame.
        nroots: usize,
    },
    /// The low two bits of the header word are not zero (Julia's indirect-roots flag and a
    /// reserved bit; neither is part of this ABI).
    Flags {
        /// The whole header word.
        word: usize,
    },
    /// Following `prev` came back to a frame already walked.
    Cycle {
        /// The number the frame had when it was first walked.
        first: usize,
    },
    /// The chain is longer than [`MAX_FRAMES`].
    TooManyFrames,
}

impl fmt::Display for FrameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FrameProblem::Misaligned => write!(f, "is not aligned to 8 bytes"),
            FrameProblem::BelowStackPointer { sp } => write!(
                f,
                "lies below the stack pointer {sp:#x}, in no running function's stack frame \
                 (did a function return without unlinking it?)"
            ),
            FrameProblem::OutsideStack { low, high } => {
                write!(f, "lies outside this thread's stack {low:#x}..{high:#x}")
            }
            FrameProblem::RootsOutsideStack { nroots, high } => write!(
                f,
                "claims {nroots} root{}, which run past the end of this thread's stack at {high:#x}",
                plural(nroots)
            ),
            FrameProblem::TooManyRoots { nroots } => write!(
                f,
                "claims {nroots} roots, more than the limit of {MAX_FRAME_ROOTS}"
            ),
            FrameProblem::Flags { word } => write!(
                f,
                "has flag bits {:#04b} in its header word {word:#x}; only direct roots (flags 0) \
                 are supported",
                word & ROOT_FLAGS_MASK
            ),
            FrameProblem::Cycle { first } => write!(
                f,
                "was already walked as frame #{first}: the chain is a cycle"
            ),
            FrameProblem::TooManyFrames => {
                write!(f, "is past the limit of {MAX_FRAMES} frames in one chain")
            }
        }
    }
}

/// What is wrong with the memory a foreign read asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadProblem {
    /// The bytes are inside an object that was freed (stress mode keeps freed objects).
    Freed(ObjectInfo),
    /// The bytes start inside a live object but run past the end of its body, or start in
    /// its header.
    OutOfBounds(ObjectInfo),
    /// The bytes are not inside any object of this heap.
    NotInHeap,
    /// `raw + offset` overflows the address space, or `raw` is null.
    BadAddress,
}

/// What is wrong with an allocation request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocProblem {
    /// `nptrs` or `nbytes` is negative.
    Negative,
    /// `8 * nptrs + nbytes` is larger than [`MAX_OBJECT_BYTES`].
    TooLarge,
    /// The global allocator returned null.
    OutOfMemory,
    /// The MMTk heap is full even after a collection: it may not grow past `limit` bytes
    /// (see [`crate::runtime::Config::heap_bytes`], `LOCUS_GC_HEAP_SIZE`).
    HeapFull {
        /// The heap's largest size in bytes.
        limit: usize,
    },
}

/// A broken contract found by the runtime. See the module documentation of
/// [`crate::runtime`] for when each is reported and what the run does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GcFault {
    /// A root or a field points to (or into) an object that a collection freed.
    DanglingReference {
        /// Where the pointer was found.
        from: Referrer,
        /// The pointer.
        target: usize,
        /// The freed object it points to or into (`freed_in` is set).
        object: ObjectInfo,
        /// The collection that found it.
        collection: u64,
    },
    /// A root or a field points inside a live object (or into its header) instead of at its
    /// start.
    InteriorPointer {
        /// Where the pointer was found.
        from: Referrer,
        /// The pointer.
        target: usize,
        /// The object it points into.
        object: ObjectInfo,
        /// The collection that found it.
        collection: u64,
    },
    /// A root or a field holds an address on a mutator's stack or below 64 KiB: no object,
    /// of the heap or static, can be there. (Any other address no object of the heap holds
    /// is a static object, skipped.)
    NotAnObject {
        /// Where the pointer was found.
        from: Referrer,
        /// The pointer.
        target: usize,
        /// The collection that found it.
        collection: u64,
    },
    /// A live object's header no longer matches what the allocator wrote: something wrote
    /// out of bounds of a neighbouring object or through a stale pointer.
    CorruptHeader {
        /// Where the pointer to the object was found.
        from: Referrer,
        /// The object, as the allocator recorded it.
        object: ObjectInfo,
        /// The collection that found it.
        collection: u64,
    },
    /// A frame in the chain cannot be a GC frame.
    CorruptFrame {
        /// The frame's number, counted from the innermost frame (0).
        frame: usize,
        /// The frame's address.
        addr: usize,
        /// The address of the frame whose `prev` led here (`None` for the chain head).
        via: Option<usize>,
        /// What is wrong.
        problem: FrameProblem,
        /// The collection that found it (or 0 when the chain was walked outside a
        /// collection, by [`crate::runtime::Runtime::frames`]).
        collection: u64,
    },
    /// A compiled frame the statepoint walk cannot read.
    StatepointFrame {
        /// The compiled frame's number, counted from the innermost (0).
        frame: usize,
        /// The return address into it (0 if not read).
        return_address: usize,
        /// What is wrong.
        problem: &'static str,
        /// The collection that found it.
        collection: u64,
    },
    /// A statepoint walk met a frame of foreign code below compiled frames it cannot walk
    /// past: compiled code called back from foreign code (`qsort` calling a compiled
    /// comparator). The frame-pointer chain does not lead through foreign frames, so the
    /// roots of the compiled frames that called the foreign code would be missed; the
    /// collection ends here instead. Found only below the point where the host called the
    /// compiled code through [`crate::runtime::Runtime::call_compiled`].
    ForeignFrame {
        /// The number of the compiled frame the foreign code called, counted from the
        /// innermost (0).
        frame: usize,
        /// The return address into the foreign code.
        return_address: usize,
        /// An address of compiled code found above it: the return address into the
        /// compiled frame that called the foreign code.
        compiled_return: usize,
        /// The collection that found it.
        collection: u64,
    },
    /// The MMTk collector ([`crate::mmtk`]) recorded faults (a root that is not an object,
    /// a broken frame, running out of memory); each was printed on a line of its own
    /// before this one.
    Mmtk {
        /// How many.
        count: usize,
    },
    /// `gc_preserve`, a `jl_roots` bundle, `julia.pointer_from_objref` or an `invoke` whose
    /// landing pad uses the object (under statepoint roots, `locus_gc_pin` /
    /// `locus_gc_pin_forever`) asked to pin an object that the MMTk
    /// plan moves and cannot pin (SemiSpace, GenCopy): the program's raw pointers into it
    /// would go stale at the next collection.
    PinRefused {
        /// The address the pin named.
        addr: usize,
        /// The plan.
        plan: crate::mmtk::Plan,
    },
    /// Something read or wrote the memory of an object a collection freed (or the old copy
    /// of one the moving collector moved), and stress mode's page protection caught the
    /// access as a fault (see [`crate::runtime::pages`]). Reported by the signal handler
    /// ([`crate::signals`]).
    FreedAccess {
        /// The address accessed.
        addr: usize,
        /// The freed object whose pages hold it (`freed_in` is set).
        object: ObjectInfo,
    },
    /// `locus_gc_foreign_read` was asked to read memory that is not in a live object.
    ForeignRead {
        /// The `raw` argument.
        raw: usize,
        /// The `offset` argument.
        offset: i64,
        /// What is wrong.
        problem: ReadProblem,
    },
    /// `locus_gc_alloc` cannot allocate the object asked for.
    Allocation {
        /// The `nptrs` argument.
        nptrs: i64,
        /// The `nbytes` argument.
        nbytes: i64,
        /// What is wrong.
        problem: AllocProblem,
    },
    /// `locus_gc_region_reset` was given a negative depth, which no
    /// `locus_gc_region_depth` returns; nothing was dropped (dropping everything would
    /// drop live callers' root regions and pins).
    RegionDepth {
        /// The `depth` argument.
        depth: i64,
    },
}

impl std::error::Error for GcFault {}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Where `target` points relative to `object`: "points to object 0x..", "points 8 bytes into
/// object 0x..", or "points into the header of object 0x..".
struct Points {
    target: usize,
    object: usize,
}

impl fmt::Display for Points {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let object = self.object;
        if self.target == object {
            write!(f, "points to object {object:#x}")
        } else if self.target > object {
            let off = self.target - object;
            write!(
                f,
                "points {off} byte{} into object {object:#x}",
                plural(off)
            )
        } else {
            write!(f, "points into the header of object {object:#x}")
        }
    }
}

impl fmt::Display for GcFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GcFault::DanglingReference {
                from,
                target,
                object,
                collection,
            } => {
                let points = Points {
                    target,
                    object: object.addr,
                };
                write!(f, "dangling reference: {from} {points}")?;
                if let Some(freed) = object.freed_in {
                    let how = if object.moved { "moved away" } else { "freed" };
                    write!(f, " {how} in collection {freed}")?;
                }
                write!(f, " ({object}; found in collection {collection})")
            }
            GcFault::InteriorPointer {
                from,
                target,
                object,
                collection,
            } => {
                let points = Points {
                    target,
                    object: object.addr,
                };
                write!(
                    f,
                    "interior pointer: {from} {points} ({object}; found in collection \
                     {collection}); roots and pointer fields must hold an object's address"
                )
            }
            GcFault::NotAnObject {
                from,
                target,
                collection,
            } => write!(
                f,
                "not an object: {from} holds {target:#x}, where no object can be (a thread's \
                 stack, or the first 64 KiB) (found in collection {collection})"
            ),
            GcFault::CorruptHeader {
                from,
                object,
                collection,
            } => write!(
                f,
                "corrupt heap: {from} points to object {:#x} ({object}) whose header was \
                 overwritten (found in collection {collection})",
                object.addr
            ),
            GcFault::CorruptFrame {
                frame,
                addr,
                via,
                problem,
                collection,
            } => {
                write!(f, "corrupt frame: frame #{frame} at {addr:#x} (")?;
                match via {
                    None => write!(f, "the chain head")?,
                    Some(prev) => write!(f, "prev of frame #{} at {prev:#x}", frame - 1)?,
                }
                write!(f, ") {problem}")?;
                if collection != 0 {
                    write!(f, " (found in collection {collection})")?;
                }
                Ok(())
            }
            GcFault::StatepointFrame {
                frame,
                return_address,
                problem,
                collection,
            } => write!(
                f,
                "corrupt stack: compiled frame #{frame} (return address {return_address:#x}) \
                 {problem} (found in collection {collection})"
            ),
            GcFault::ForeignFrame {
                frame,
                return_address,
                compiled_return,
                collection,
            } => write!(
                f,
                "callback from foreign code: compiled frame #{frame} was called from foreign \
                 code (return address {return_address:#x}) that compiled code called (its \
                 return address {compiled_return:#x} lies above): statepoint roots cannot \
                 walk past foreign frames, so the roots of the frames above would be lost; \
                 frame roots can (found in collection {collection})"
            ),
            GcFault::PinRefused { addr, plan } => write!(
                f,
                "pin: gc_preserve, a jl_roots bundle, pointer_from_objref or (with statepoint \
                 roots) an invoke whose landing pad uses the object pins the object at \
                 {addr:#x}, but MMTk plan {plan} moves every object it keeps and cannot pin \
                 one (use mmtk:immix, mmtk:stickyimmix or mmtk:marksweep)"
            ),
            GcFault::Mmtk { count } => {
                write!(
                    f,
                    "the MMTk collector reported {count} fault(s) (printed above)"
                )
            }
            GcFault::FreedAccess { addr, object } => {
                let start = object.addr;
                let end = start + object.size();
                write!(f, "dangling reference: an access ")?;
                if addr == start {
                    write!(f, "to object {start:#x}")?;
                } else if addr > start && addr < end {
                    let off = addr - start;
                    write!(f, "{off} byte{} into object {start:#x}", plural(off))?;
                } else if addr < start && start - addr <= HEADER_BYTES {
                    write!(f, "to the header of object {start:#x}")?;
                } else if addr < start {
                    let off = start - addr;
                    write!(f, "{off} byte{} before object {start:#x}", plural(off))?;
                } else {
                    let off = addr - end;
                    write!(
                        f,
                        "{off} byte{} past the end of object {start:#x}",
                        plural(off)
                    )?;
                }
                if addr != start {
                    write!(f, " (at {addr:#x})")?;
                }
                let how = if object.moved { "moved away" } else { "freed" };
                write!(
                    f,
                    " {how} in collection {} ({object})",
                    object.freed_in.unwrap_or(0)
                )
            }
            GcFault::ForeignRead {
                raw,
                offset,
                problem,
            } => {
                let at = raw.wrapping_add_signed(offset as isize);
                // A raw pointer into a freed object is a dangling reference like any other;
                // say so first, so that one prefix catches them all.
                if let ReadProblem::Freed(object) = problem {
                    return write!(
                        f,
                        "dangling reference: a foreign read of 8 bytes at {at:#x} ({raw:#x} + \
                         {offset}) is inside object {:#x} freed in collection {} ({object}); the \
                         object was not kept alive across the call",
                        object.addr,
                        object.freed_in.unwrap_or(0)
                    );
                }
                write!(f, "foreign read: 8 bytes at {at:#x} ({raw:#x} + {offset}) ")?;
                match problem {
                    ReadProblem::Freed(_) => Ok(()),
                    ReadProblem::OutOfBounds(object) => write!(
                        f,
                        "are not inside the body of object {:#x} ({object})",
                        object.addr
                    ),
                    ReadProblem::NotInHeap => write!(f, "are not inside an object of this heap"),
                    ReadProblem::BadAddress => write!(f, "are not a valid address"),
                }
            }
            GcFault::Allocation {
                nptrs,
                nbytes,
                problem,
            } => {
                write!(
                    f,
                    "allocation: cannot allocate an object of {nptrs} pointer fields and \
                     {nbytes} raw bytes: "
                )?;
                match problem {
                    AllocProblem::Negative => write!(f, "sizes must not be negative"),
                    AllocProblem::TooLarge => {
                        write!(f, "larger than the limit of {MAX_OBJECT_BYTES} bytes")
                    }
                    AllocProblem::OutOfMemory => write!(f, "out of memory"),
                    AllocProblem::HeapFull { limit } => write!(
                        f,
                        "out of memory: the heap is full at its limit of {limit} bytes \
                         (LOCUS_GC_HEAP_SIZE sets the limit)"
                    ),
                }
            }
            GcFault::RegionDepth { depth } => write!(
                f,
                "locus_gc_region_reset: depth {depth} is negative (a depth \
                 locus_gc_region_depth returned); nothing dropped"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The renamed main reads as `main`; every other symbol, `main` and names that only
    /// start or end like the renamed one included, reads as itself.
    #[test]
    fn the_renamed_main_reads_as_main() {
        assert_eq!(source_function_name(b"locus_entry"), b"main");
        for other in [
            &b"main"[..],
            b"deref",
            b"locus_entry2",
            b"_locus_entry",
            b"locus_entr",
            b"",
        ] {
            assert_eq!(source_function_name(other), other);
        }
    }
}
