//! The built-in object model: shapes of 64-bit property names, objects in an
//! [`ObjectArena`] the compiled code checks them against.
//!
//! [`Shapes`] is an ordinary [`ObjectModel`]: the runtime's caches, stubs, fast paths and
//! patching use it through the trait alone, as they use a language's model. The runtime
//! knows it by name only for the program's surface (`@locus_shape_new`,
//! `@locus_object_new`, ... in the [crate documentation](super#the-programs-surface)),
//! which makes shapes and objects for the IR, and for the conveniences on
//! [`super::Runtime`] that forward here ([`super::Runtime::add_shape`] and friends).
//!
//! A shape is a list of distinct property names, its ID its index in the order shapes
//! were added (from 0). An object is the address of `1 + n` words of the arena: its
//! shape's ID, then one word per property in the shape's order, so property `i` of a
//! shape resolves to the word at byte offset `8 * (i + 1)`. Every object is in the
//! arena's index, so the compiled code checks it before reading its shape, and
//! [`ObjectModel::shape_of`] refuses any other address.
//!
//! Shared between threads: shapes are read under a read lock, object words are read and
//! written atomically. A layout change ([`Shapes::rearrange`]) rewrites the objects of the
//! shape while other threads may read them; the caller patches back the sites specialized
//! on the shape afterwards ([`super::Runtime::invalidate_shape`]), so a read that runs
//! meanwhile may see either layout: change layouts only while no other thread reads
//! objects of the shape.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError, RwLock};

use super::arena::{ObjectArena, ARENA_BITS};
use super::inline_cache::ShapeId;
use super::object_model::{ObjectModel, Resolution};

/// The built-in shapes model (see the [module documentation](self)).
pub struct Shapes {
    /// Where the objects are, with the index the compiled code checks.
    arena: ObjectArena,
    /// Each shape's property names, in slot order; index = shape ID.
    shapes: RwLock<Vec<Vec<u64>>>,
    /// Every object made, in address order (the arena hands addresses out upwards): the
    /// table [`Shapes::is_object`] answers from, apart from the index.
    objects: Mutex<Vec<u64>>,
}

impl Shapes {
    /// No shapes and no objects yet; the arena (256 MiB) is reserved, not committed.
    ///
    /// # Errors
    ///
    /// The arena could not be mapped.
    pub fn new() -> Result<Self, String> {
        Ok(Shapes::with_arena(ObjectArena::new(ARENA_BITS)?))
    }

    /// [`Shapes::new`] for shapes no compiled code reads (the program's surface beside a
    /// language's model): its index is not placed in the low 2 GiB, whose room is kept
    /// for the indexes the compiled code reads.
    pub(super) fn unread() -> Result<Self, String> {
        Ok(Shapes::with_arena(ObjectArena::anywhere(ARENA_BITS)?))
    }

    fn with_arena(arena: ObjectArena) -> Self {
        Shapes {
            arena,
            shapes: RwLock::new(Vec::new()),
            objects: Mutex::new(Vec::new()),
        }
    }

    /// Adds a shape whose objects hold `properties` in this order.
    pub fn add_shape(&self, properties: &[u64]) -> ShapeId {
        let mut shapes = self.shapes.write().unwrap_or_else(PoisonError::into_inner);
        shapes.push(properties.to_vec());
        ShapeId(shapes.len() as u64 - 1)
    }

    /// `f` of the property names of `shape`, in slot order.
    fn with_properties<T>(
        &self,
        shape: u64,
        f: impl FnOnce(&[u64]) -> Result<T, String>,
    ) -> Result<T, String> {
        let shapes = self.shapes.read().unwrap_or_else(PoisonError::into_inner);
        let properties = usize::try_from(shape)
            .ok()
            .and_then(|s| shapes.get(s))
            .ok_or_else(|| format!("no shape {shape}"))?;
        f(properties)
    }

    /// The property names of `shape`, in slot order.
    ///
    /// # Errors
    ///
    /// An unknown shape.
    pub fn properties(&self, shape: u64) -> Result<Vec<u64>, String> {
        self.with_properties(shape, |p| Ok(p.to_vec()))
    }

    /// Makes an object of `shape` with `values` for the shape's properties (in the shape's
    /// order); it lives as long as the model. Returns its address.
    ///
    /// # Errors
    ///
    /// An unknown shape, the wrong number of values, or a full arena.
    pub fn new_object(&self, shape: ShapeId, values: &[i64]) -> Result<u64, String> {
        let count = self.with_properties(shape.0, |p| Ok(p.len()))?;
        if count != values.len() {
            return Err(format!(
                "shape {} has {count} properties, not {}",
                shape.0,
                values.len()
            ));
        }
        let mut words = vec![shape.0];
        words.extend(values.iter().map(|v| *v as u64));
        let mut objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        let address = self.arena.alloc(&words)?;
        objects.push(address);
        Ok(address)
    }

    /// Whether `address` is an object of this model, by its table of objects (the
    /// compiled code asks the arena's index, [`Shapes::is_indexed`]: always the same
    /// answer).
    #[must_use]
    pub fn is_object(&self, address: u64) -> bool {
        let objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        objects.binary_search(&address).is_ok()
    }

    /// Whether the arena's index holds `address`: the compiled code's check.
    #[must_use]
    pub fn is_indexed(&self, address: u64) -> bool {
        self.arena.indexed(address)
    }

    /// The shape of the object at `object` and the slot (0 for the first property) of its
    /// property `name`; the message says which of the two is not there.
    fn slot_of(&self, object: u64, name: u64) -> Result<(u64, usize), String> {
        let shape = self.shape_of(object)?;
        let slot = self.with_properties(shape, |p| {
            p.iter()
                .position(|p| *p == name)
                .ok_or_else(|| format!("shape {shape} has no property {name}"))
        })?;
        Ok((shape, slot))
    }

    /// The word of `slot` of the object at `object`.
    fn slot_word(&self, object: u64, slot: usize) -> Result<&std::sync::atomic::AtomicU64, String> {
        (slot as u64)
            .checked_add(1)
            .and_then(|w| w.checked_mul(8))
            .and_then(|b| object.checked_add(b))
            .and_then(|a| self.arena.word(a))
            .ok_or_else(|| format!("{object:#x}: a short object"))
    }

    /// The value of property `name` of the object at `object`.
    ///
    /// # Errors
    ///
    /// Not an object of this model, or its shape has no property `name`.
    pub fn property(&self, object: u64, name: u64) -> Result<i64, String> {
        let (_, slot) = self.slot_of(object, name)?;
        Ok(self.slot_word(object, slot)?.load(Ordering::Relaxed) as i64)
    }

    /// Sets property `name` of the object at `object` to `value`.
    ///
    /// # Errors
    ///
    /// As for [`Shapes::property`].
    pub fn set_property(&self, object: u64, name: u64, value: i64) -> Result<(), String> {
        let (_, slot) = self.slot_of(object, name)?;
        self.slot_word(object, slot)?
            .store(value as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Changes `shape` to hold `properties` in this order (the same names) and rearranges
    /// its objects to match. Sites specialized on the shape are then wrong: the caller
    /// patches them back ([`super::Runtime::invalidate_shape`]; [`super::Runtime::change_shape`]
    /// does both).
    ///
    /// # Errors
    ///
    /// An unknown shape, or properties that are not a rearrangement of the shape's.
    pub fn rearrange(&self, shape: ShapeId, properties: &[u64]) -> Result<(), String> {
        let mut shapes = self.shapes.write().unwrap_or_else(PoisonError::into_inner);
        let old = usize::try_from(shape.0)
            .ok()
            .and_then(|s| shapes.get_mut(s))
            .ok_or_else(|| format!("no shape {}", shape.0))?;
        let mut sorted_old = old.clone();
        let mut sorted_new = properties.to_vec();
        sorted_old.sort_unstable();
        sorted_new.sort_unstable();
        if sorted_old != sorted_new {
            return Err(format!(
                "shape {}: {properties:?} is not a rearrangement of {old:?}",
                shape.0
            ));
        }
        let objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        for &object in objects.iter() {
            let is_of_shape = self
                .arena
                .word(object)
                .is_some_and(|w| w.load(Ordering::Relaxed) == shape.0);
            if !is_of_shape {
                continue;
            }
            let values: HashMap<u64, u64> = old
                .iter()
                .enumerate()
                .filter_map(|(slot, p)| {
                    Some((
                        *p,
                        self.slot_word(object, slot).ok()?.load(Ordering::Relaxed),
                    ))
                })
                .collect();
            for (slot, name) in properties.iter().enumerate() {
                if let (Ok(word), Some(v)) = (self.slot_word(object, slot), values.get(name)) {
                    word.store(*v, Ordering::Relaxed);
                }
            }
        }
        *old = properties.to_vec();
        Ok(())
    }

    /// The arena the objects are in.
    #[must_use]
    pub fn arena(&self) -> &ObjectArena {
        &self.arena
    }
}

impl ObjectModel for Shapes {
    fn shape_offset(&self) -> i32 {
        0
    }

    fn object_arena(&self) -> Option<&ObjectArena> {
        Some(&self.arena)
    }

    fn shape_of(&self, object: u64) -> Result<u64, String> {
        // The index, as the compiled code checks it: only an object handed out finds
        // itself there.
        if !self.arena.indexed(object) {
            return Err(format!("{object:#x} is not an object of this runtime"));
        }
        self.arena
            .word(object)
            .map(|w| w.load(Ordering::Relaxed))
            .ok_or_else(|| format!("{object:#x} is not an object of this runtime"))
    }

    fn resolve(&self, shape: u64, name: u64) -> Result<Resolution, String> {
        let slot = self.with_properties(shape, |p| {
            p.iter()
                .position(|p| *p == name)
                .ok_or_else(|| format!("shape {shape} has no property {name}"))
        })?;
        let offset = slot
            .checked_add(1)
            .and_then(|w| w.checked_mul(8))
            .and_then(|b| i32::try_from(b).ok())
            .ok_or_else(|| format!("shape {shape}: slot {slot} is too far"))?;
        Ok(Resolution::Slot(offset))
    }

    fn read(&self, object: u64, shape: u64, name: u64) -> Result<i64, String> {
        let slot = self.with_properties(shape, |p| {
            p.iter()
                .position(|p| *p == name)
                .ok_or_else(|| format!("shape {shape} has no property {name}"))
        })?;
        Ok(self.slot_word(object, slot)?.load(Ordering::Relaxed) as i64)
    }
}
