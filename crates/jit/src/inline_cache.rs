//! The inline caches on the patch points that read objects of the program's
//! [`ObjectModel`] (the built-in [`Shapes`] or a language's).
//!
//! On a miss at a site, the handler asks the model for the object's shape and how the
//! property resolves, adds (shape, byte offset) to the cases the site has seen and
//! patches the site to call a stub for exactly those cases ([`super::stub`]: if the model
//! keeps its objects in an arena, a check that the object is in the arena's index
//! (`arena.rs`), then a compare of the object's shape with each case's, whose hit loads the slot (and counts
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
use std::sync::Arc;

use locus_stackmap::patch::{encode_call, write_code, x86_64::CALL_LEN, Arch};

use locus_llvm::Result;

use super::code_area::CodeArea;
use super::fast_path::{encode_fast_path_in, Layout, ObjectIndex};
use super::object_model::{ObjectModel, Resolution};
use super::shapes::Shapes;
use super::sites::SiteKind;
use super::stub::encode_stub_in;
use super::{cross_modify, jit_error, x86_64, Runtime, Stats};

/// The cases a site answers, (shape, byte offset of the property), sorted.
type Cases = Vec<(u64, i32)>;

/// A shape: which property is in which slot of its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShapeId(pub u64);

/// The runtime's mutable state.
pub(super) struct State {
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
    /// With concurrent patching, the cases of the fast path written in each site's body
    /// (after its call form), by site address: written once, since a thread may be
    /// running it, and switched to by the site's first instruction whenever the site's
    /// cases are these again; with the offset in the site of its miss call's return.
    bodies: HashMap<u64, (Cases, usize)>,
    pub(super) stats: Stats,
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
    /// A runtime's state before its program ran.
    pub(super) fn new() -> Self {
        State {
            cases: HashMap::new(),
            stubs: HashMap::new(),
            inline_misses: HashMap::new(),
            bodies: HashMap::new(),
            site_stubs: HashMap::new(),
            code: CodeArea::new(),
            retired: Vec::new(),
            megamorphic: HashSet::new(),
            stats: Stats::default(),
            shadows: HashMap::new(),
            poll_plan: None,
            polls: 0,
            location_kinds: std::collections::BTreeSet::new(),
        }
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
    /// count hits ([`super::fast_path`]): the model's arena, or the runtime's own header.
    #[must_use]
    pub fn object_index(&self) -> ObjectIndex {
        self.header_arena().index()
    }

    /// The arena whose header the compiled code reaches: the model's, or
    /// the runtime's own (header only) for a model without one.
    pub(super) fn header_arena(&self) -> &super::arena::ObjectArena {
        self.model.object_arena().unwrap_or(&self.header)
    }

    /// The built-in shapes model the program's surface (`@locus_shape_new`, ...) makes
    /// shapes and objects in; the program's object model too unless the runtime was made
    /// [`Runtime::with_model`].
    #[must_use]
    pub fn shapes(&self) -> &Arc<Shapes> {
        &self.shapes
    }

    /// [`Shapes::is_object`] of the runtime's [`Runtime::shapes`].
    #[must_use]
    pub fn is_object(&self, address: u64) -> bool {
        self.shapes.is_object(address)
    }

    /// [`Shapes::is_indexed`] of the runtime's [`Runtime::shapes`].
    #[must_use]
    pub fn is_indexed(&self, address: u64) -> bool {
        self.shapes.is_indexed(address)
    }

    /// [`Shapes::add_shape`] of the runtime's [`Runtime::shapes`].
    pub fn add_shape(&self, properties: &[u64]) -> ShapeId {
        self.shapes.add_shape(properties)
    }

    /// [`Shapes::new_object`] of the runtime's [`Runtime::shapes`].
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] for an unknown shape or the wrong number of values.
    pub fn new_object(&self, shape: ShapeId, values: &[i64]) -> Result<u64> {
        self.shapes
            .new_object(shape, values)
            .map_err(|e| jit_error(&e))
    }

    /// [`Shapes::property`] of the runtime's [`Runtime::shapes`].
    #[must_use]
    pub fn property(&self, object: u64, name: u64) -> Option<i64> {
        self.shapes.property(object, name).ok()
    }

    /// [`Shapes::set_property`] of the runtime's [`Runtime::shapes`].
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] if `object` is not an object of the shapes or its shape
    /// has no property `name`.
    pub fn set_property(&self, object: u64, name: u64, value: i64) -> Result<()> {
        self.shapes
            .set_property(object, name, value)
            .map_err(|e| jit_error(&e))
    }

    /// Changes `shape` of the runtime's [`Runtime::shapes`] to hold `properties` in this
    /// order ([`Shapes::rearrange`]: its objects rearranged to match), then patches every
    /// site specialized on the shape back to the miss handler
    /// ([`Runtime::invalidate_shape`]), as a language does when its model changes a
    /// layout. Returns how many sites were patched back.
    ///
    /// # Errors
    ///
    /// [`locus_llvm::Error::Jit`] for an unknown shape, properties that are not a
    /// rearrangement of the shape's, or a failed patch.
    pub fn change_shape(&self, shape: ShapeId, properties: &[u64]) -> Result<usize> {
        self.shapes
            .rearrange(shape, properties)
            .map_err(|e| jit_error(&e))?;
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
        let _patching = self.patching();
        let sites: Vec<u64> = {
            let mut state = self.state();
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

    /// Runs `f` on the program's object model.
    fn on_model<T>(&self, f: impl FnOnce(&dyn ObjectModel) -> T) -> T {
        f(self.model.as_ref())
    }

    /// How property `name` of objects of `shape` resolves in the program's object model.
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
            check_objects: self.model.object_arena().is_some(),
            shape_offset: self.model.shape_offset(),
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
        self.state().stats.misses += 1;
        let site = self.site_of_miss(return_address);
        let resume = site.map_or(return_address, |(site, reserved)| site + reserved as u64);
        let value = self.miss(object, name, return_address, site)?;
        Ok((value, resume))
    }

    /// The patch point (address, reserved bytes) whose miss call returns to
    /// `return_address`: an inline fast path's, or a site whose first 13 bytes are a call
    /// (LLVM's, or the runtime's to a stub, whose miss tail-calls the handler).
    fn site_of_miss(&self, return_address: u64) -> Option<(u64, usize)> {
        let inline = self.state().inline_misses.get(&return_address).copied();
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
        // One miss decides and patches at a time (other threads may miss at this site
        // meanwhile, with concurrent patching): the cases are read and the site written
        // under the lock.
        let _patching = self.patching();
        let cases = {
            let mut state = self.state();
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
                let mut state = self.state();
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
        if self.options.inline_fast_path && self.options.concurrent_patching {
            if self.concurrent_fast_path(site, reserved, &cases, &layout)? {
                return Ok(());
            }
        } else if self.options.inline_fast_path {
            if let Some(path) =
                encode_fast_path_in(&layout, &cases, self.options.count_hits, reserved)
            {
                return self.write_site(site, &path.bytes, Some(path.miss_return), None);
            }
        }
        let stub = self
            .state()
            .acquire_stub(&cases, &layout, self.options.count_hits)
            .map_err(|e| jit_error(&e))?;
        self.patch_site(site, stub, Some(cases))
    }

    /// With concurrent patching, switches `site` to its fast path for `cases` (see
    /// `cross_modify.rs`): the body after the call form is written the first time (it was
    /// never run), and later only switched to, by the first instruction, when the site's
    /// cases are the body's again. Returns false (the caller calls a stub) when the site
    /// has no room for one, or its body answers other cases.
    fn concurrent_fast_path(
        &self,
        site: u64,
        reserved: usize,
        cases: &Cases,
        layout: &Layout,
    ) -> Result<bool> {
        if !cross_modify::has_tail(reserved) {
            return Ok(false);
        }
        let Some(old) = self.code_bytes(site, reserved) else {
            return Ok(false);
        };
        let body = self.state().bodies.get(&site).cloned();
        let (body, miss_return) = match body {
            Some((body_cases, miss_return)) if body_cases == *cases => {
                (old[cross_modify::TAIL..].to_vec(), miss_return)
            }
            Some(_) => return Ok(false),
            None => {
                let Some(path) = encode_fast_path_in(
                    layout,
                    cases,
                    self.options.count_hits,
                    reserved - cross_modify::TAIL,
                ) else {
                    return Ok(false);
                };
                (path.bytes, cross_modify::TAIL + path.miss_return)
            }
        };
        let Some(bytes) = cross_modify::fast_path_form(&old, &body) else {
            return Ok(false);
        };
        self.write_site(site, &bytes, Some(miss_return), None)?;
        self.state()
            .bodies
            .insert(site, (cases.clone(), miss_return));
        Ok(true)
    }

    /// The megamorphic lookup's work: answers the read from the object's shape, without
    /// patching anything. On an error the call of the program ends.
    pub(super) fn ic_lookup(&self, object: u64, name: u64) -> std::result::Result<i64, String> {
        self.lookups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
        let bytes = if self.options.concurrent_patching {
            // The body of a fast path stays as it is (a thread may be running it).
            let body = if self.state().bodies.contains_key(&site) {
                self.code_bytes(site, reserved)
                    .and_then(|old| old.get(cross_modify::TAIL..).map(<[u8]>::to_vec))
            } else {
                None
            };
            cross_modify::call_form(target, reserved, body.as_deref()).map_err(|e| jit_error(&e))?
        } else {
            encode_call(Arch::X86_64, target, reserved).map_err(|e| jit_error(&e.to_string()))?
        };
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
        self.check_thread().map_err(|e| jit_error(&e))?;
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
            let has_body = self.state().bodies.contains_key(&site);
            cross_modify::check_patch(&old, bytes, has_body)
                .map_err(|e| jit_error(&format!("{site:#x}: {e}")))?;
            // SAFETY: the region is a whole patch point of this runtime's program (its
            // record and reserved size checked, inside the program's code), holding `old`;
            // the caller holds the patch lock: one patch at a time; past the first
            // instruction only bytes no thread can be running change (`check_patch`).
            unsafe { cross_modify::write_region(site as *mut u8, &old, bytes) }
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
        let mut state = self.state();
        if !self.options.concurrent_patching {
            // A concurrent site's body stays, and a thread in it may still miss there.
            state.inline_misses.retain(|_, s| *s != site);
        }
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
        let mut state = self.state();
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
        let _patching = self.patching();
        {
            let mut state = self.state();
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
        self.state().code.usage()
    }

    /// Whether the site at `site` is megamorphic.
    #[must_use]
    pub fn is_megamorphic(&self, site: u64) -> bool {
        self.state().megamorphic.contains(&site)
    }

    /// The `len` bytes of the stub memory at `address`, in a stub in use.
    pub(super) fn stub_bytes(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        if !self.state().code.contains(address, len) {
            return None;
        }
        // SAFETY: the range lies in a stub in use: mapped read+execute while the runtime
        // lives.
        let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, len) };
        Some(bytes.to_vec())
    }
}
