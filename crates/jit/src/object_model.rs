//! A language's own objects, as the inline caches see them.
//!
//! A language runtime brings its object model through [`ObjectModel`]: where an object's
//! shape (class, map, hidden class) word is, how a property name resolves for a shape
//! (to a slot the compiled code loads, or to a slow path), and how a read the caches do
//! not answer is answered (the miss, the megamorphic lookup, a slow-path property). The
//! inline caches, their stubs, their inline fast paths and the patching work the same for
//! any model: a site specialized on shapes compares the shape word with each and loads
//! the slot's word; [`super::Runtime::invalidate_shape`] patches back the sites
//! specialized on a shape whose layout changed.
//!
//! The built-in shapes model ([`super::Shapes`]: shape IDs from 0, the shape in word 0,
//! property `i` of a shape in word `i + 1`) is one implementation, the default of
//! [`super::Runtime::new`]; [`super::Runtime::with_model`] runs a program with any other.
//! A model whose objects live in an [`ObjectArena`] says so
//! ([`ObjectModel::object_arena`], as the shapes model does): the compiled code then
//! checks that an object is in the arena's index before it reads its shape word, so a
//! forged pointer goes to the miss handler. A model without one (objects the language
//! allocates itself) is trusted by the compiled code: the pointer a site gets is an
//! object of the model (the language's compiler guarantees it), while the model's
//! [`ObjectModel::shape_of`] checks it on every miss.
//!
//! A model is `Send + Sync`: with [`super::Options::concurrent_patching`] misses and
//! megamorphic lookups call it from any thread running the program.

pub use super::arena::ObjectArena;

/// How a property of objects of a shape is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// A 64-bit word at this byte offset from the object's address: the compiled code
    /// loads it.
    Slot(i32),
    /// Only [`ObjectModel::read`] can answer (a getter, a computed property): the site
    /// is not specialized on the shape, and every read of it misses.
    SlowPath,
}

/// A language's object model (see the [module documentation](self)).
pub trait ObjectModel: Send + Sync {
    /// The byte offset of the shape word from an object's address: the compiled code
    /// compares the 64-bit word there with the shapes a site has seen.
    fn shape_offset(&self) -> i32;

    /// The arena every object of the model lives in, if there is one: the compiled code
    /// then checks an object against the arena's index before reading it. `None` (the
    /// default): the compiled code trusts the pointer.
    fn object_arena(&self) -> Option<&ObjectArena> {
        None
    }

    /// The shape of the object at `object`, or why `object` is not an object of the
    /// model (the error of the call). `object` comes from the program: check it before
    /// reading anything there.
    ///
    /// # Errors
    ///
    /// A message naming what is wrong, which ends the program's call.
    fn shape_of(&self, object: u64) -> Result<u64, String>;

    /// How property `name` of objects of `shape` is read.
    ///
    /// # Errors
    ///
    /// A message (the shape has no such property, say), which ends the program's call.
    fn resolve(&self, shape: u64, name: u64) -> Result<Resolution, String>;

    /// What a miss does: the value of property `name` of the object at `object`, whose
    /// shape [`ObjectModel::shape_of`] just gave. It answers every read the caches do
    /// not: misses, reads at megamorphic sites, slow-path properties, and all reads with
    /// caching off.
    ///
    /// # Errors
    ///
    /// A message, which ends the program's call.
    fn read(&self, object: u64, shape: u64, name: u64) -> Result<i64, String>;
}
