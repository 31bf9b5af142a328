//! Objects with shapes, and the inline caches on the patch points that read them.
//!
//! An object is a block of 64-bit words in the runtime's arena: its shape's ID, then one
//! slot per property, in the order the shape lists the properties. A property name is a
//! 64-bit number.
//!
//! On a miss at a site, the handler adds (shape, slot) to the cases the site has seen and
//! patches the site to call a stub for exactly those cases ([`super::stub`]: a check that
//! the object is one of the runtime's (its word in the object index, `arena.rs`), then a
//! compare of the object's shape with each case's, whose hit loads the slot (and counts
//! a hit), and a tail jump to the miss handler for anything else, which answers or refuses
//! the read as it does with caching off). Stubs are encoded directly as machine code into
//! the runtime's stub memory (`code_area.rs`), shared by every site with the same cases,
//! and their memory is reused once no site calls them. Each (site, shape) pair thus
//! misses once until its shape changes. A site with room for it gets the stub's fast path
//! written into its own bytes instead ([`super::fast_path`]).
//!
//! A site is *polymorphic* while it has seen up to [`super::Options::max_shapes`] shapes;
//! the next shape makes it *megamorphic*: it is patched once more, to call the runtime's
//! lookup (`locus_rt_ic_lookup`), which answers every read from the object's shape and
//! never patches the site again (a shape change leaves it so).

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use locus_stackmap::patch::{encode_call, write_code, x86_64::CALL_LEN, Arch};

use locus_llvm::Result;

use super::arena::Arena;
use super::code_area::CodeArea;
use super::fast_path::{encode_fast_path_in, Layout, ObjectIndex};
use super::object_model::{ObjectModel, Resolution};
use super::sites::SiteKind;
use super::stub::encode_stub_in;
use super::{cross_modify, jit_error, x86_64, Runtime, Stats};

/// A hasher for object addresses (the table the miss handler and the megamorphic lookup
/// consult on every read they answer): a multiplicative hash, far cheaper than SipHash;
/// the addresses are the runtime's own, not chosen by an adversary.
#[derive(Default)]
pub(super) struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The cases a site answers, (shape, byte offset of the property), sorted.
type Cases = Vec<(u64, i32)>;

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
    by_address: HashMap<u64, usize, BuildHasherDefault<AddressHasher>>,
    /// The (shape, slot) cases each patched site answers, by site address.
    cases: HashMap<u64, Cases>,
    /// A stub's address for each set of cases, and how many sites call it.
    stubs: HashMap<Cases, (u64, usize)>,
    /// The cases of the stub each site calls, by site address.
    site_stubs: HashMap<u64, Cases>,
    /// The stubs' memory.
    code: CodeArea,
    /// Stubs no site calls any more that a thread may still be running (concurrent
    /// patching): freed by [`Runtime::reclaim_stubs`].
    retired: Vec<u64>,
    /// Megamorphic sites, by address.
    megamorphic: HashSet<u64>,
    /// The site of each inline fast path, by the return address of its miss call.
    inline_misses: HashMap<u64, u64>,
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
            by_address: HashMap::default(),
            cases: HashMap::new(),
            stubs: HashMap::new(),
            inline_misses: HashMap::new(),
            site_stubs: HashMap::new(),
            code: CodeArea::new(),
            retired: Vec::new(),
            megamorphic: HashSet::new(),
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

    /// The stub for `cases`, encoded into stub memory if there is none yet, with one more
    /// site calling it.
    fn acquire_stub(
        &mut self,
        cases: &[(u64, i32)],
        layout: &Layout,
        count_hits: bool,
    ) -> std::result::Result<u64, String> {
        if let Some((address, users)) = self.stubs.get_mut(cases) {
            *users += 1;
            return Ok(*address);
        }
        let code = encode_stub_in(layout, cases, count_hits)
            .ok_or_else(|| format!("no stub can answer {cases:?}"))?;
        let address = self.code.add(&code)?;
        self.stubs.insert(cases.to_vec(), (address, 1));
        self.stats.stubs += 1;
        Ok(address)
    }

    /// The site at `site` no longer calls the stub it called, if any: the stub's memory
    /// is freed when no site calls it (or retired, if a thread may still be in it).
    fn release_stub(&mut self, site: u64, concurrent: bool) {
        let Some(cases) = self.site_stubs.remove(&site) else {
            return;
        };
        let Some((address, users)) = self.stubs.get_mut(&cases) else {
            return;
        };
        *users -= 1;
        if *users == 0 {
            let address = *address;
            self.stubs.remove(&cases);
            if concurrent {
                self.retired.push(address);
            } else {
                self.code.free(address);
            }
        }
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
    /// [`locus_llvm::Error::Jit`] for an unknown shape or the wrong number of values.
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
    /// [`locus_llvm::Error::Jit`] if `object` is not an object of this runtime or its shape has
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
    /// [`locus_llvm::Error::Jit`] for an unknown shape, properties that are not a rearrangement
    /// of the shape's, or a failed patch.
    pub fn change_shape(&self, shape: ShapeId, properties: &[u64]) -> Result<usize> {
        {
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
        }
        self.invalidate_shape(shape.0)
    }

    /// Patches every site specialized on `shape` back to the miss handler (its cases
    /// forgotten): what a language whose [`ObjectModel`] changed the layout of a shape's
    /// objects calls ([`Runtime::change_shape`] calls it for the runtime's own shapes).
    /// Megamorphic sites stay so. Returns how many sites were patched back.
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] for a failed patch.
    pub fn invalidate_shape(&self, shape: u64) -> Result<usize> {
        let sites: Vec<u64> = {
            let mut state = self.state.borrow_mut();
            let sites: Vec<u64> = state
                .cases
                .iter()
                .filter(|(_, cases)| cases.iter().any(|(s, _)| *s == shape))
                .map(|(site, _)| *site)
                .collect();
            for site in &sites {
                state.cases.remove(site);
            }
            sites
        };
        let miss = Runtime::miss_handler_address();
        for site in &sites {
            self.patch_site(*site, miss, None)?;
        }
        Ok(sites.len())
    }

    /// Runs `f` on the program's object model: the language's, or the runtime's own
    /// shapes.
    fn on_model<T>(&self, f: impl FnOnce(&dyn ObjectModel) -> T) -> T {
        match &self.model {
            Some(model) => f(model.as_ref()),
            None => f(&*self.state.borrow()),
        }
    }

    /// How property `name` of objects of `shape` resolves in the program's object model
    /// (the language's, or the runtime's own shapes).
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] with the model's message (an unknown shape, say).
    pub fn resolve(&self, shape: u64, name: u64) -> Result<Resolution> {
        self.on_model(|model| model.resolve(shape, name))
            .map_err(|e| jit_error(&e))
    }

    /// How the compiled code finds and checks objects of the program's model.
    #[must_use]
    pub fn layout(&self) -> Layout {
        Layout {
            index: self.object_index(),
            check_objects: self.model.is_none(),
            shape_offset: self.model.as_ref().map_or(0, |m| m.shape_offset()),
        }
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
        let (shape, resolution, value) = self.on_model(|model| {
            let shape = model.shape_of(object as u64)?;
            let resolution = model.resolve(shape, name)?;
            let value = model.read(object as u64, shape, name)?;
            Ok::<_, String>((shape, resolution, value))
        })?;
        let Resolution::Slot(offset) = resolution else {
            return Ok(value);
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
            if state.megamorphic.contains(&site) {
                return Ok(value);
            }
            let cases = state.cases.entry(site).or_default();
            if !cases.contains(&(shape, offset)) {
                cases.retain(|(s, _)| *s != shape);
                cases.push((shape, offset));
                cases.sort_unstable();
            }
            cases.clone()
        };
        if cases.len() > self.options.max_shapes {
            // Megamorphic: the lookup answers from now on, and the site is not specialized
            // on any shape any more.
            {
                let mut state = self.state.borrow_mut();
                state.cases.remove(&site);
                state.megamorphic.insert(site);
            }
            self.patch_site(site, x86_64::ic_lookup_address() as u64, None)
                .map_err(|e| e.to_string())?;
            return Ok(value);
        }
        self.specialize_site(site, reserved, cases)
            .map_err(|e| e.to_string())?;
        Ok(value)
    }

    /// Patches `site` (of `reserved` bytes) to answer `cases`: their fast path inline if
    /// it fits and may be used, else a call of their stub.
    fn specialize_site(&self, site: u64, reserved: usize, cases: Cases) -> Result<()> {
        let layout = self.layout();
        if self.options.inline_fast_path && !self.options.concurrent_patching {
            if let Some(path) =
                encode_fast_path_in(&layout, &cases, self.options.count_hits, reserved)
            {
                return self.write_site(site, &path.bytes, Some(path.miss_return), None);
            }
        }
        let stub = self
            .state
            .borrow_mut()
            .acquire_stub(&cases, &layout, self.options.count_hits)
            .map_err(|e| jit_error(&e))?;
        self.patch_site(site, stub, Some(cases))
    }

    /// The megamorphic lookup's work: answers the read from the object's shape, without
    /// patching anything. On an error the call of the program ends.
    pub(super) fn ic_lookup(&self, object: u64, name: u64) -> std::result::Result<i64, String> {
        self.state.borrow_mut().stats.lookups += 1;
        self.on_model(|model| {
            let shape = model.shape_of(object)?;
            model.read(object, shape, name)
        })
    }

    /// Rewrites the patch point at `site` (all its reserved bytes) to call `target`, the
    /// stub for `stub` if given.
    fn patch_site(&self, site: u64, target: u64, stub: Option<Cases>) -> Result<()> {
        let reserved = self
            .patch_point_reserved(site)
            .ok_or_else(|| jit_error(&format!("no patch point at {site:#x}")))?;
        let bytes =
            encode_call(Arch::X86_64, target, reserved).map_err(|e| jit_error(&e.to_string()))?;
        self.write_site(site, &bytes, None, stub)
    }

    /// Writes `bytes`, all the reserved bytes of the patch point at `site`; `miss_return`
    /// is the offset of the return address of an inline fast path's miss call, `stub` the
    /// cases of the stub the bytes call. The stub the site called before is released.
    fn write_site(
        &self,
        site: u64,
        bytes: &[u8],
        miss_return: Option<usize>,
        stub: Option<Cases>,
    ) -> Result<()> {
        let reserved = self
            .patch_point_reserved(site)
            .ok_or_else(|| jit_error(&format!("no patch point at {site:#x}")))?;
        let old = self.code_bytes(site, reserved);
        let Some(old) = old.filter(|_| bytes.len() == reserved) else {
            return Err(jit_error(&format!(
                "{site:#x} is not in the program's code, or {} bytes are not its {reserved}",
                bytes.len()
            )));
        };
        if self.options.concurrent_patching {
            // SAFETY: the region is a whole patch point of this runtime's program (its
            // record and reserved size checked, inside the program's code), holding `old`;
            // with concurrent patching every form of a site is a call (no inline fast
            // path), and only this thread, in the runtime, patches.
            unsafe { cross_modify::write_site(site as *mut u8, &old, bytes) }
                .map_err(|e| jit_error(&e))?;
        } else {
            // SAFETY: the region is a whole patch point of this runtime's program (its
            // record and reserved size checked, inside the program's code); compiled code
            // runs only on this thread, which is in the runtime now, so nothing executes
            // those pages meanwhile (a pending miss at this site returns to the end of the
            // site, where the miss handler moves its return address); `bytes` are a
            // complete sequence for the region (a call of a target taking the patch
            // point's arguments, or a fast path).
            unsafe { write_code(site as *mut u8, bytes) }.map_err(|e| jit_error(&e.to_string()))?;
        }
        let mut state = self.state.borrow_mut();
        state.inline_misses.retain(|_, s| *s != site);
        if let Some(offset) = miss_return {
            state.inline_misses.insert(site + offset as u64, site);
        }
        state.release_stub(site, self.options.concurrent_patching);
        if let Some(cases) = stub {
            state.site_stubs.insert(site, cases);
        }
        state.stats.patches += 1;
        Ok(())
    }
}

impl Runtime {
    /// Frees the memory of the stubs no site calls any more that concurrent patching kept
    /// ([`super::Options::concurrent_patching`]: a thread past a site's first instruction
    /// may still call the stub it called). Returns how many.
    ///
    /// # Safety
    ///
    /// No thread is running, or about to call, a stub a site called before its last patch:
    /// every thread that ran compiled code since then has left it, or is stopped outside it.
    pub unsafe fn reclaim_stubs(&self) -> usize {
        let mut state = self.state.borrow_mut();
        let retired = std::mem::take(&mut state.retired);
        for address in &retired {
            state.code.free(*address);
        }
        retired.len()
    }

    /// Specializes the patch point `id` on `shapes` for property `name`, as misses of
    /// objects of those shapes would (a host seeding a cache it knows, say): its cases
    /// become exactly those, and it is patched to their stub, or their fast path inline.
    /// With [`super::Options::concurrent_patching`] other threads may be running the site
    /// meanwhile. Returns nothing new if caching is off.
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] for an unknown site, an unknown shape, a shape without
    /// `name` (or whose `name` has a slow path), more shapes than
    /// [`super::Options::max_shapes`], none, or a failed patch.
    pub fn specialize(&self, id: u64, name: u64, shapes: &[ShapeId]) -> Result<()> {
        if !self.options.caching {
            return Ok(());
        }
        let site = self
            .site_address(id)
            .filter(|s| self.patch_point_reserved(*s).is_some())
            .ok_or_else(|| jit_error(&format!("no patch point {id}")))?;
        let reserved = self.patch_point_reserved(site).unwrap_or(0);
        if shapes.is_empty() || shapes.len() > self.options.max_shapes {
            return Err(jit_error(&format!(
                "site {id}: {} shapes; a site is specialized on 1 to {}",
                shapes.len(),
                self.options.max_shapes
            )));
        }
        let mut cases: Cases = self
            .on_model(|model| {
                shapes
                    .iter()
                    .map(|shape| match model.resolve(shape.0, name)? {
                        Resolution::Slot(offset) => Ok((shape.0, offset)),
                        Resolution::SlowPath => Err(format!(
                            "property {name} of shape {} has a slow path",
                            shape.0
                        )),
                    })
                    .collect::<std::result::Result<_, String>>()
            })
            .map_err(|e| jit_error(&e))?;
        cases.sort_unstable();
        cases.dedup();
        {
            let mut state = self.state.borrow_mut();
            state.megamorphic.remove(&site);
            state.cases.insert(site, cases.clone());
        }
        self.specialize_site(site, reserved, cases)
    }

    /// The address a megamorphic site calls: the runtime's lookup.
    #[must_use]
    pub fn lookup_address() -> u64 {
        x86_64::ic_lookup_address() as u64
    }

    /// Bytes of stub memory in stubs, and mapped.
    #[must_use]
    pub fn stub_memory(&self) -> (usize, usize) {
        self.state.borrow().code.usage()
    }

    /// Whether the site at `site` is megamorphic.
    #[must_use]
    pub fn is_megamorphic(&self, site: u64) -> bool {
        self.state.borrow().megamorphic.contains(&site)
    }

    /// The `len` bytes of the stub memory at `address`, in a stub in use.
    pub(super) fn stub_bytes(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        if !self.state.borrow().code.contains(address, len) {
            return None;
        }
        // SAFETY: the range lies in a stub in use: mapped read+execute while the runtime
        // lives.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, len) };
        Some(bytes.to_vec())
    }
}

/// The runtime's own shapes model: objects in the arena, checked against its table, the
/// shape in word 0, property `i` of a shape in word `i + 1`.
impl ObjectModel for State {
    fn shape_offset(&self) -> i32 {
        0
    }

    fn shape_of(&self, object: u64) -> std::result::Result<u64, String> {
        let words = self
            .object(object)
            .ok_or_else(|| format!("{object:#x} is not an object of this runtime"))?;
        words
            .first()
            .copied()
            .ok_or_else(|| "an empty object".to_owned())
    }

    fn resolve(&self, shape: u64, name: u64) -> std::result::Result<Resolution, String> {
        let slot = self
            .properties(shape)?
            .iter()
            .position(|p| *p == name)
            .ok_or_else(|| format!("shape {shape} has no property {name}"))?;
        let offset = slot
            .checked_add(1)
            .and_then(|w| w.checked_mul(8))
            .and_then(|b| i32::try_from(b).ok())
            .ok_or_else(|| format!("shape {shape}: slot {slot} is too far"))?;
        Ok(Resolution::Slot(offset))
    }

    fn read(&self, object: u64, _shape: u64, name: u64) -> std::result::Result<i64, String> {
        // One look-up of the object: its words give the shape and the slot.
        let words = self
            .object(object)
            .ok_or_else(|| format!("{object:#x} is not an object of this runtime"))?;
        let shape = *words.first().ok_or("an empty object")?;
        let slot = self
            .properties(shape)?
            .iter()
            .position(|p| *p == name)
            .ok_or_else(|| format!("shape {shape} has no property {name}"))?;
        words
            .get(slot + 1)
            .map(|v| *v as i64)
            .ok_or_else(|| format!("{object:#x}: a short object"))
    }
}
