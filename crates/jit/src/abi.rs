//! The runtime's surface for programs: what the IR declares and calls to make shapes and
//! objects, change a shape and invalidate a function (the list and the signatures are in
//! the [module documentation](super)).
//!
//! Nothing a program passes is trusted. An object is an address the runtime handed out
//! (looked up in the runtime's table of objects before any word of it is read or written),
//! a shape an ID the runtime handed out, a function the address of a function of the
//! program, and an array of property names must lie wholly in a section of the program
//! (a global) or in the program's own stack (between the call and [`Runtime::call`]'s
//! frame, both on the thread's stack: a program that moved its stack pointer elsewhere
//! passes names in a global). Anything else is an error that ends the call.

use std::collections::HashSet;

use super::inline_cache::ShapeId;
use super::x86_64::Caller;
use super::Runtime;

/// The message of a runtime error, without the error's kind (the call's error adds it).
fn message(error: &locus_llvm::Error) -> String {
    match error {
        locus_llvm::Error::Jit { message } => message.clone(),
        other => other.to_string(),
    }
}

/// The most properties a shape may have.
pub const MAX_PROPERTIES: u64 = 1 << 16;

impl Runtime {
    /// `@locus_shape_new(ptr names, i64 count)`: a new shape of `count` distinct property
    /// names read from `names`; returns its ID.
    pub(super) fn abi_shape_new(
        &self,
        names: u64,
        count: u64,
        caller: Caller,
    ) -> Result<u64, String> {
        let names = self.read_names(names, count, caller)?;
        let mut seen = HashSet::new();
        if let Some(twice) = names.iter().find(|n| !seen.insert(**n)) {
            return Err(format!("property {twice} is named twice"));
        }
        Ok(self.shapes().add_shape(&names).0)
    }

    /// `@locus_shape_change(i64 shape, ptr names, i64 count)`: [`Runtime::change_shape`]
    /// with the names read from `names`; returns the number of sites patched back.
    pub(super) fn abi_shape_change(
        &self,
        shape: u64,
        names: u64,
        count: u64,
        caller: Caller,
    ) -> Result<u64, String> {
        let names = self.read_names(names, count, caller)?;
        let patched = self
            .change_shape(ShapeId(shape), &names)
            .map_err(|e| message(&e))?;
        Ok(patched as u64)
    }

    /// `@locus_object_new(i64 shape)`: a new object of `shape`, every property 0; returns
    /// its address.
    pub(super) fn abi_object_new(&self, shape: u64) -> Result<u64, String> {
        let count = self.shapes().properties(shape)?.len();
        self.shapes().new_object(ShapeId(shape), &vec![0; count])
    }

    /// `@locus_object_set(ptr object, i64 name, i64 value)`.
    pub(super) fn abi_object_set(&self, object: u64, name: u64, value: u64) -> Result<u64, String> {
        self.shapes().set_property(object, name, value as i64)?;
        Ok(0)
    }

    /// `@locus_object_get(ptr object, i64 name)`: the property, read without a cache.
    pub(super) fn abi_object_get(&self, object: u64, name: u64) -> Result<u64, String> {
        Ok(self.shapes().property(object, name)? as u64)
    }

    /// `@locus_invalidate(ptr function)`: [`Runtime::invalidate`] of the program's function
    /// at `function`; returns the number of shadows patched.
    pub(super) fn abi_invalidate(&self, function: u64) -> Result<u64, String> {
        let name = self
            .jit()
            .functions()
            .iter()
            .find(|f| f.address == function)
            .map(|f| f.name.clone())
            .ok_or_else(|| format!("{function:#x} is not a function of the program"))?;
        let patched = self.invalidate(&name).map_err(|e| message(&e))?;
        Ok(patched as u64)
    }

    /// The `count` 64-bit property names at `names`, which must lie in a section of the
    /// program or on the program's stack.
    fn read_names(&self, names: u64, count: u64, caller: Caller) -> Result<Vec<u64>, String> {
        if count > MAX_PROPERTIES {
            return Err(format!(
                "{count} properties; a shape has at most {MAX_PROPERTIES}"
            ));
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let end = names
            .checked_add(count * 8)
            .ok_or_else(|| format!("{count} names at {names:#x} wrap around"))?;
        let in_section = self
            .jit()
            .sections()
            .iter()
            .any(|s| s.contains(names) && end <= s.address + s.size);
        if !in_section && !caller.on_stack(names, end) {
            return Err(format!(
                "{count} names at {names:#x} are neither in the program's sections nor on \
                 its stack"
            ));
        }
        let words = (0..count)
            .map(|i| {
                let at = (names + i * 8) as *const u64;
                // SAFETY: the range lies in a section of the live JIT (mapped and readable
                // while it lives) or between the caller's frame and `Runtime::call`'s, both
                // on this thread's stack (`Caller::on_stack`), which is mapped between
                // them; no Rust reference points there.
                unsafe { at.read_unaligned() }
            })
            .collect();
        Ok(words)
    }
}
