//! Objects with shapes, and the inline caches on the patch points that read them.
//!
//! An object is a block of 64-bit words in the runtime's arena: its shape's ID, then one
//! slot per property, in the order the shape lists the properties. A property name is a
//! 64-bit number.
//!
//! On a miss at a site, the handler adds (shape, slot) to the cases the site has seen and
//! patches the site to call a stub for exactly those cases: a check that the object is
//! one of the runtime's (its word in the object index, `arena.rs`), then a `switch` on the
//! object's shape whose arms load the slot (and count a hit), and whose default (and a
//! failed check) jumps to the miss handler with the site's return address intact
//! (`musttail`), which answers or refuses the read as it does with caching off. Stubs are compiled with
//! LLVM on demand and shared by every site with the same cases. Each (site, shape) pair
//! thus misses once until its shape changes. A site with room for it gets the stub's fast
//! path written into its own bytes instead ([`super::fast_path`]).

use std::collections::HashMap;
use std::fmt::Write as _;

use locus_stackmap::patch::{encode_call, write_code, x86_64::CALL_LEN, Arch};

use crate::error::Result;
use crate::jit_stackmaps::StackMapJit;

use super::arena::Arena;
use super::fast_path::{encode_fast_path, ObjectIndex, HITS_OFFSET};
use super::sites::SiteKind;
use super::{jit_error, Runtime, Stats};

/// A shape: which property is in which slot of its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(pub u64);

/// The runtime's mutable state.
pub(super) struct State {
    /// Each shape's property names, in slot order; index = shape ID.
    shapes: Vec<Vec<u64>>,
    /// Where the objects' words are, with the index the compiled code checks.
    pub(super) arena: Arena,
    /// Every object made: its address in the arena and its length in words.
    objects: Vec<(u64, usize)>,
    /// The index in `objects` of each object, by the address handed out for it: the one
    /// way an address from outside becomes an object here (the compiled code asks the
    /// arena's index, which holds the same addresses).
    by_address: HashMap<u64, usize>,
    /// The (shape, slot) cases each patched site answers, by site address.
    cases: HashMap<u64, Vec<(u64, usize)>>,
    /// A stub's address for each set of cases.
    stubs: HashMap<Vec<(u64, usize)>, u64>,
    /// The site of each inline fast path, by the return address of its miss call.
    inline_misses: HashMap<u64, u64>,
    /// The stubs' code, kept until the runtime goes (a stub may be on a stack).
    stub_jits: Vec<StackMapJit>,
    pub(super) stats: Stats,
    /// The first failure during the current call.
    pub(super) error: Option<String>,
    /// The original bytes of each patched shadow, by address.
    pub(super) shadows: HashMap<u64, Vec<u8>>,
    /// Invalidate this function at that poll.
    pub(super) poll_plan: Option<(String, u64)>,
    /// Polls since the plan was made.
    pub(super) polls: u64,
    /// The location kinds (as numbered in the section) deoptimizations have read.
    pub(super) location_kinds: std::collections::BTreeSet<u8>,
}

impl State {
    /// A runtime's state with no shapes or objects yet, its objects in `arena`.
    pub(super) fn new(arena: Arena) -> Self {
        State {
            shapes: Vec::new(),
            arena,
            objects: Vec::new(),
            by_address: HashMap::new(),
            cases: HashMap::new(),
            stubs: HashMap::new(),
            inline_misses: HashMap::new(),
            stub_jits: Vec::new(),
            stats: Stats::default(),
            error: None,
            shadows: HashMap::new(),
            poll_plan: None,
            polls: 0,
            location_kinds: std::collections::BTreeSet::new(),
        }
    }

    /// Keeps `words` (shape ID, then the slots) as an object; returns its address. An
    /// error if the arena is full.
    pub(super) fn push_object(&mut self, words: &[u64]) -> std::result::Result<u64, String> {
        let address = self.arena.alloc(words)?;
        self.by_address.insert(address, self.objects.len());
        self.objects.push((address, words.len()));
        Ok(address)
    }

    /// The words of the object at `object`, if it is one of this runtime's.
    pub(super) fn object(&self, object: u64) -> Option<&[u64]> {
        let index = *self.by_address.get(&object)?;
        let (address, len) = *self.objects.get(index)?;
        // SAFETY: the arena made an object of `len` words at `address`.
        Some(unsafe { self.arena.words(address, len) })
    }

    /// The words of the object at `object`, to change, if it is one of this runtime's.
    fn object_mut(&mut self, object: u64) -> Option<&mut [u64]> {
        let index = *self.by_address.get(&object)?;
        let (address, len) = *self.objects.get(index)?;
        // SAFETY: as in `object`.
        Some(unsafe { self.arena.words_mut(address, len) })
    }

    /// Word `index` of the object at `object` (0 is its shape).
    fn word(&self, object: u64, index: usize) -> Option<u64> {
        self.object(object)?.get(index).copied()
    }

    /// The shape of the object at `object` and the slot of its property `name`; the
    /// message says which of the two is not there.
    pub(super) fn slot_of(
        &self,
        object: u64,
        name: u64,
    ) -> std::result::Result<(u64, usize), String> {
        let words = self
            .object(object)
            .ok_or_else(|| format!("{object:#x} is not an object of this runtime"))?;
        let shape = *words.first().ok_or("an empty object")?;
        let properties = self.properties(shape)?;
        let slot = properties
            .iter()
            .position(|p| *p == name)
            .ok_or_else(|| format!("shape {shape} has no property {name}"))?;
        Ok((shape, slot))
    }

    /// Sets property `name` of the object at `object`.
    pub(super) fn set(
        &mut self,
        object: u64,
        name: u64,
        value: u64,
    ) -> std::result::Result<(), String> {
        let (_, slot) = self.slot_of(object, name)?;
        let word = self
            .object_mut(object)
            .and_then(|words| words.get_mut(slot + 1))
            .ok_or_else(|| format!("{object:#x}: a short object"))?;
        *word = value;
        Ok(())
    }

    /// The property names of `shape`, in slot order.
    pub(super) fn properties(&self, shape: u64) -> std::result::Result<&[u64], String> {
        usize::try_from(shape)
            .ok()
            .and_then(|s| self.shapes.get(s))
            .map(|p| &p[..])
            .ok_or_else(|| format!("no shape {shape}"))
    }
}

impl Runtime {
    /// Where this runtime's fast paths and stubs check objects, find the miss handler and
    /// count hits ([`super::fast_path`]).
    #[must_use]
    pub fn object_index(&self) -> ObjectIndex {
        let state = self.state.borrow();
        ObjectIndex {
            base: state.arena.index_base(),
            mask: state.arena.mask(),
        }
    }

    /// Whether `address` is an object of this runtime, as the miss handler and
    /// [`Runtime::property`] see it: in the runtime's table of objects.
    #[must_use]
    pub fn is_object(&self, address: u64) -> bool {
        self.state.borrow().object(address).is_some()
    }

    /// Whether `address` is an object of this runtime as the compiled fast paths and
    /// stubs see it: its word in the object index holds it. Always
    /// [`Runtime::is_object`]'s answer.
    #[must_use]
    pub fn is_indexed(&self, address: u64) -> bool {
        self.state.borrow().arena.indexed(address)
    }

    /// Adds a shape whose objects hold `properties` in this order.
    pub fn add_shape(&self, properties: &[u64]) -> ShapeId {
        let mut state = self.state.borrow_mut();
        state.shapes.push(properties.to_vec());
        ShapeId(state.shapes.len() as u64 - 1)
    }

    /// Makes an object of `shape` with `values` for the shape's properties (in the shape's
    /// order); it lives as long as the runtime. Returns its address, to pass to the program.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Jit`] for an unknown shape or the wrong number of values.
    pub fn new_object(&self, shape: ShapeId, values: &[i64]) -> Result<u64> {
        let mut state = self.state.borrow_mut();
        let properties = state
            .shapes
            .get(shape.0 as usize)
            .ok_or_else(|| jit_error(&format!("no shape {}", shape.0)))?;
        if properties.len() != values.len() {
            return Err(jit_error(&format!(
                "shape {} has {} properties, not {}",
                shape.0,
                properties.len(),
                values.len()
            )));
        }
        let mut words = vec![shape.0];
        words.extend(values.iter().map(|v| *v as u64));
        state.push_object(&words).map_err(|e| jit_error(&e))
    }

    /// The value of property `name` of the object at `object` (made by
    /// [`Runtime::new_object`]), found through its shape as the miss handler finds it.
    #[must_use]
    pub fn property(&self, object: u64, name: u64) -> Option<i64> {
        let state = self.state.borrow();
        let (_, slot) = state.slot_of(object, name).ok()?;
        state.word(object, slot + 1).map(|v| v as i64)
    }

    /// Sets property `name` of the object at `object` (made by [`Runtime::new_object`] or
    /// by the program) to `value`.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Jit`] if `object` is not an object of this runtime or its shape has
    /// no property `name`.
    pub fn set_property(&self, object: u64, name: u64, value: i64) -> Result<()> {
        self.state
            .borrow_mut()
            .set(object, name, value as u64)
            .map_err(|e| jit_error(&e))
    }

    /// Changes `shape` to hold `properties` in this order: the objects of the shape are
    /// rearranged to match, and every site specialized on the shape is patched back to the
    /// miss handler (its cases forgotten). Returns how many sites were patched back.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Jit`] for an unknown shape, properties that are not a rearrangement
    /// of the shape's, or a failed patch.
    pub fn change_shape(&self, shape: ShapeId, properties: &[u64]) -> Result<usize> {
        let sites = {
            let mut state = self.state.borrow_mut();
            let old = state
                .shapes
                .get(shape.0 as usize)
                .cloned()
                .ok_or_else(|| jit_error(&format!("no shape {}", shape.0)))?;
            let mut sorted_old = old.clone();
            let mut sorted_new = properties.to_vec();
            sorted_old.sort_unstable();
            sorted_new.sort_unstable();
            if sorted_old != sorted_new {
                return Err(jit_error(&format!(
                    "shape {}: {properties:?} is not a rearrangement of {old:?}",
                    shape.0
                )));
            }
            let addresses: Vec<u64> = state.objects.iter().map(|(a, _)| *a).collect();
            for address in addresses {
                let Some(object) = state.object_mut(address) else {
                    continue;
                };
                if object.first() != Some(&shape.0) {
                    continue;
                }
                let values: HashMap<u64, u64> = old
                    .iter()
                    .zip(object.iter().skip(1))
                    .map(|(p, v)| (*p, *v))
                    .collect();
                for (slot, name) in properties.iter().enumerate() {
                    if let (Some(word), Some(v)) = (object.get_mut(slot + 1), values.get(name)) {
                        *word = *v;
                    }
                }
            }
            if let Some(s) = state.shapes.get_mut(shape.0 as usize) {
                *s = properties.to_vec();
            }
            state
                .stubs
                .retain(|cases, _| cases.iter().all(|(s, _)| *s != shape.0));
            let sites: Vec<u64> = state
                .cases
                .iter()
                .filter(|(_, cases)| cases.iter().any(|(s, _)| *s == shape.0))
                .map(|(site, _)| *site)
                .collect();
            for site in &sites {
                state.cases.remove(site);
            }
            sites
        };
        let miss = Runtime::miss_handler_address();
        for site in &sites {
            self.patch_site(*site, miss)?;
        }
        Ok(sites.len())
    }

    /// The miss handler's work: answers the read, and unless caching is off patches the
    /// site to a stub (or an inline fast path) that also answers this shape. Returns the
    /// value and the address to return to: the end of the site when it is known (a miss
    /// from an inline fast path does not return to the end, and the site may change form
    /// meanwhile), else `return_address`. On an error (not an object of this runtime, a
    /// property its shape lacks, a failed patch) the call of the program ends.
    pub(super) fn ic_miss(
        &self,
        object: *const u64,
        name: u64,
        return_address: u64,
    ) -> std::result::Result<(i64, u64), String> {
        self.state.borrow_mut().stats.misses += 1;
        let site = self.site_of_miss(return_address);
        let resume = site.map_or(return_address, |(site, reserved)| site + reserved as u64);
        let value = self.miss(object, name, return_address, site)?;
        Ok((value, resume))
    }

    /// The patch point (address, reserved bytes) whose miss call returns to
    /// `return_address`: an inline fast path's, or a site whose first 13 bytes are a call
    /// (LLVM's, or the runtime's to a stub, whose miss tail-calls the handler).
    fn site_of_miss(&self, return_address: u64) -> Option<(u64, usize)> {
        let inline = self
            .state
            .borrow()
            .inline_misses
            .get(&return_address)
            .copied();
        let site = inline.unwrap_or(return_address.wrapping_sub(CALL_LEN as u64));
        self.patch_point_reserved(site)
            .map(|reserved| (site, reserved))
    }

    /// The bytes the patch point at `site` reserves; `None` if no patch point is there.
    fn patch_point_reserved(&self, site: u64) -> Option<usize> {
        self.jit
            .stack_maps()
            .lookup(site)
            .find_map(|r| self.sites.get(&r.record.id()))
            .filter(|s| s.kind == SiteKind::PatchPoint)
            .map(|s| s.reserved)
    }

    fn miss(
        &self,
        object: *const u64,
        name: u64,
        return_address: u64,
        site: Option<(u64, usize)>,
    ) -> std::result::Result<i64, String> {
        let (shape, slot, value) = {
            let state = self.state.borrow();
            let (shape, slot) = state.slot_of(object as u64, name)?;
            let value = state
                .word(object as u64, slot + 1)
                .ok_or("a short object")? as i64;
            (shape, slot, value)
        };
        if !self.options.caching {
            return Ok(value);
        }
        let Some((site, reserved)) = site else {
            return Err(format!(
                "no patch point record at {:#x}",
                return_address.wrapping_sub(CALL_LEN as u64)
            ));
        };
        let cases = {
            let mut state = self.state.borrow_mut();
            let cases = state.cases.entry(site).or_default();
            if !cases.contains(&(shape, slot)) {
                cases.push((shape, slot));
                cases.sort_unstable();
            }
            cases.clone()
        };
        if self.options.inline_fast_path {
            let index = self.object_index();
            if let Some(path) = encode_fast_path(&cases, index, self.options.count_hits, reserved) {
                self.write_site(site, &path.bytes, Some(path.miss_return))
                    .map_err(|e| e.to_string())?;
                return Ok(value);
            }
        }
        let stub = self.stub(&cases).map_err(|e| e.to_string())?;
        self.patch_site(site, stub).map_err(|e| e.to_string())?;
        Ok(value)
    }

    /// The stub for `cases`, compiled if there is none yet.
    fn stub(&self, cases: &[(u64, usize)]) -> Result<u64> {
        if let Some(address) = self.state.borrow().stubs.get(cases) {
            return Ok(*address);
        }
        let ir = stub_ir(cases, self.object_index(), self.options.count_hits);
        let symbols = [("locus_ic_miss", Runtime::miss_handler_address() as usize)];
        let jit = StackMapJit::new("locus.ic.stub", ir, &symbols)?;
        let address = jit
            .function_address("stub")
            .ok_or_else(|| jit_error("the stub was not compiled"))?;
        let mut state = self.state.borrow_mut();
        state.stub_jits.push(jit);
        state.stubs.insert(cases.to_vec(), address);
        state.stats.stubs += 1;
        Ok(address)
    }

    /// Rewrites the patch point at `site` (all its reserved bytes) to call `target`.
    fn patch_site(&self, site: u64, target: u64) -> Result<()> {
        let reserved = self
            .patch_point_reserved(site)
            .ok_or_else(|| jit_error(&format!("no patch point at {site:#x}")))?;
        let bytes =
            encode_call(Arch::X86_64, target, reserved).map_err(|e| jit_error(&e.to_string()))?;
        self.write_site(site, &bytes, None)
    }

    /// Writes `bytes`, all the reserved bytes of the patch point at `site`; `miss_return`
    /// is the offset of the return address of an inline fast path's miss call.
    fn write_site(&self, site: u64, bytes: &[u8], miss_return: Option<usize>) -> Result<()> {
        let reserved = self
            .patch_point_reserved(site)
            .ok_or_else(|| jit_error(&format!("no patch point at {site:#x}")))?;
        if bytes.len() != reserved || self.code_bytes(site, reserved).is_none() {
            return Err(jit_error(&format!(
                "{site:#x} is not in the program's code, or {} bytes are not its {reserved}",
                bytes.len()
            )));
        }
        // SAFETY: the region is a whole patch point of this runtime's program (its record
        // and reserved size checked, inside the program's code); compiled code runs only on
        // this thread, which is in the runtime now, so nothing executes those pages
        // meanwhile (a pending miss at this site returns to the end of the site, where the
        // miss handler moves its return address); `bytes` are a complete sequence for the
        // region (a call of a target taking the patch point's arguments, or a fast path).
        unsafe { write_code(site as *mut u8, bytes) }.map_err(|e| jit_error(&e.to_string()))?;
        let mut state = self.state.borrow_mut();
        state.inline_misses.retain(|_, s| *s != site);
        if let Some(offset) = miss_return {
            state.inline_misses.insert(site + offset as u64, site);
        }
        state.stats.patches += 1;
        Ok(())
    }
}

/// The IR of a stub answering `cases` for objects in `index`, counting hits in the
/// index's counter if `count_hits`.
fn stub_ir(cases: &[(u64, usize)], index: ObjectIndex, count_hits: bool) -> String {
    let ObjectIndex { base, mask } = index;
    // The hit counter is the word before the index (`fast_path::HITS_OFFSET`).
    let hits = count_hits.then_some(base.wrapping_add_signed(i64::from(HITS_OFFSET)));
    let mut ir = format!(
        "declare i64 @locus_ic_miss(ptr, i64)\n\n\
         define i64 @stub(ptr %obj, i64 %name) {{\n\
         entry:\n  \
         %address = ptrtoint ptr %obj to i64\n  \
         %offset = and i64 %address, {mask}\n  \
         %word = getelementptr i8, ptr inttoptr (i64 {base} to ptr), i64 %offset\n  \
         %indexed = load i64, ptr %word, align 8\n  \
         %known = icmp eq i64 %indexed, %address\n  \
         br i1 %known, label %object, label %miss\n\
         object:\n  %shape = load i64, ptr %obj, align 8\n  switch i64 %shape, label %miss ["
    );
    for (i, (shape, _)) in cases.iter().enumerate() {
        let _ = write!(ir, "\n    i64 {shape}, label %case{i}");
    }
    ir.push_str("\n  ]\n");
    for (i, (_, slot)) in cases.iter().enumerate() {
        let _ = write!(ir, "case{i}:\n  ");
        if let Some(hits) = hits {
            let _ = write!(
                ir,
                "%h{i} = load atomic i64, ptr inttoptr (i64 {hits} to ptr) monotonic, align 8\n  \
                 %n{i} = add i64 %h{i}, 1\n  \
                 store atomic i64 %n{i}, ptr inttoptr (i64 {hits} to ptr) monotonic, align 8\n  "
            );
        }
        let _ = write!(
            ir,
            "%p{i} = getelementptr i64, ptr %obj, i64 {word}\n  \
             %v{i} = load i64, ptr %p{i}, align 8\n  \
             ret i64 %v{i}\n",
            word = slot + 1
        );
    }
    ir.push_str(
        "miss:\n  %r = musttail call i64 @locus_ic_miss(ptr %obj, i64 %name)\n  ret i64 %r\n}\n",
    );
    ir
}
