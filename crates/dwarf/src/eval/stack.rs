//! The stack: pushing and popping compact slots in place, the implicit
//! conversions between values and locations, and the size checks of the
//! normative text.

use super::*;

impl<'a> Evaluation<'a> {
    /// Makes room for one more slot, growing out of line. Called before
    /// the slot is built, so that the following `push` (whose own check
    /// the compiler then drops) writes it straight into the buffer instead
    /// of assembling it on the machine stack and copying it (a
    /// store-forwarding stall per push).
    #[inline(always)]
    pub(super) fn make_room(&mut self) {
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack();
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn grow_stack(&mut self) {
        self.stack.reserve(16);
    }

    #[inline(always)]
    pub(super) fn push_value(&mut self, v: Value) {
        self.push_scalar(v.ty, v.bits);
    }

    /// Pushes a value. Out of line and given the parts in registers on
    /// purpose: inlined, the compiler shares one copy of the push among
    /// all its callers, each first assembling its slot on the machine
    /// stack (and the copy then stalls on those narrower stores).
    #[inline(always)]
    pub(super) fn push_scalar(&mut self, ty: ValueType, bits: u64) {
        self.make_room();
        self.push_in_place(Slot::Value(Value { ty, bits }));
    }

    /// `Vec::push` of a slot that owns nothing (a value or a compact
    /// location), after `make_room`. `push` keeps its argument in memory
    /// for its unwinding path (dropping it if growing panics), so the slot
    /// was assembled on the machine stack with narrow stores and copied
    /// with wide loads that stall; here it is written straight into the
    /// buffer.
    #[inline(always)]
    pub(super) fn push_in_place(&mut self, s: Slot) {
        let len = self.stack.len();
        match self.stack.spare_capacity_mut().first_mut() {
            Some(dst) => {
                dst.write(s);
                // SAFETY: element `len` (within the capacity) was just
                // initialised.
                unsafe { self.stack.set_len(len + 1) };
            }
            // Unreachable after `make_room`. `s` owns nothing: forgetting
            // it leaks nothing (and dropping it would need it in memory).
            None => core::mem::forget(s),
        }
    }

    /// Pushes register `register` at offset 0 (see `push_scalar`).
    #[inline(always)]
    pub(super) fn push_register(&mut self, register: u16) {
        self.make_room();
        self.push_in_place(Slot::Register {
            register,
            bit_offset: 0,
        });
    }

    pub(super) fn push_loc(&mut self, l: LocationDescription) {
        self.stack.push(Slot::location(l));
    }

    pub(super) fn pop_slot(&mut self) -> Result<Slot, ErrorKind> {
        // A `match`, not `ok_or`: that built the error and ran its drop
        // code on every pop.
        match self.stack.pop() {
            Some(s) => Ok(s),
            None => Err(ErrorKind::StackUnderflow),
        }
    }

    pub(super) fn pop_value(&mut self) -> Result<Value, ErrorKind> {
        // A value owns nothing: forgetting it skips the drop code the
        // compiler would otherwise call for every popped slot.
        match self.stack.pop() {
            Some(s) => {
                if let Slot::Value(v) = s {
                    core::mem::forget(s);
                    Ok(v)
                } else {
                    self.slot_value(s)
                }
            }
            None => Err(ErrorKind::StackUnderflow),
        }
    }

    /// [`Evaluation::pop_value`] of a slot that is not a value.
    #[inline(never)]
    pub(super) fn slot_value(&self, s: Slot) -> Result<Value, ErrorKind> {
        const NOT_AN_ADDRESS: ErrorKind = ErrorKind::TypeMismatch(
            "expected a value, found a location description that is not a memory address",
        );
        match s {
            Slot::Value(v) => Ok(v),
            Slot::Memory {
                address_space: 0,
                address,
            } => Ok(Value::generic(address, self.address_size)),
            Slot::Memory { .. }
            | Slot::Register { .. }
            | Slot::Implicit { .. }
            | Slot::Open(..) => Err(NOT_AN_ADDRESS),
            Slot::Entry(e) => match *e {
                Entry::Value(v) => Ok(v),
                Entry::Location(l) => match l.as_default_address() {
                    Some(a) => Ok(Value::generic(a, self.address_size)),
                    None => Err(NOT_AN_ADDRESS),
                },
            },
            Slot::Incomplete(..) => Err(ErrorKind::TypeMismatch(
                "expected a value, found an incomplete composite",
            )),
        }
    }

    /// Pops an integral value (address spaces, offsets, masks).
    pub(super) fn pop_integral(&mut self) -> Result<Value, ErrorKind> {
        let v = self.pop_value()?;
        if v.ty.is_integral() {
            Ok(v)
        } else {
            Err(ErrorKind::TypeMismatch("expected an integral value"))
        }
    }

    pub(super) fn pop_location(&mut self) -> Result<LocationDescription, ErrorKind> {
        let v = match self.pop_slot()? {
            Slot::Value(v) => v,
            Slot::Incomplete(..) => {
                return Err(ErrorKind::IllFormed(
                    "a location description is needed, found an incomplete composite",
                ))
            }
            s => match s.into_entry() {
                Entry::Location(l) => return Ok(l),
                Entry::Value(v) => v,
            },
        };
        if v.ty == ValueType::Generic {
            Ok(LocationDescription::memory(0, v.bits))
        } else {
            Err(ErrorKind::TypeMismatch(
                "expected a location description, found a non-generic value",
            ))
        }
    }

    pub(super) fn peek(&self, depth: usize) -> Result<Slot, ErrorKind> {
        let len = self.stack.len();
        if depth >= len {
            return Err(ErrorKind::StackUnderflow);
        }
        match &self.stack[len - 1 - depth] {
            Slot::Incomplete(..) => Err(ErrorKind::IllFormed(STACK_OP_ON_INCOMPLETE)),
            s => Ok(s.clone()),
        }
    }

    /// The normative text's rule for the stack operations: none may touch
    /// an incomplete composite (copies would share its storage).
    pub(super) fn need_complete(&self, n: usize) -> Result<(), ErrorKind> {
        self.need(n)?;
        let top = &self.stack[self.stack.len() - n..];
        if top.iter().any(|s| matches!(s, Slot::Incomplete(..))) {
            return Err(ErrorKind::IllFormed(STACK_OP_ON_INCOMPLETE));
        }
        Ok(())
    }

    pub(super) fn register_bits(&self, register: u16) -> Option<u64> {
        self.register_sizes()
            .iter()
            .find(|(r, _)| *r == register)
            .map(|(_, bits)| *bits)
    }

    /// The size in bits of `storage`, if known: [`Storage::bit_size`], or a
    /// register's size from [`Evaluation::set_register_size`].
    pub(super) fn storage_bits(&self, storage: &Storage) -> Option<u128> {
        match storage {
            Storage::Register(r) => self.register_bits(*r).map(u128::from),
            s => s.bit_size(self.address_size),
        }
    }

    /// The offset rule for registers of known size; `offset_bits` checked
    /// every other storage.
    pub(super) fn check_register_offsets(&self, l: &LocationDescription) -> Result<(), ErrorKind> {
        if self.register_sizes().is_empty() {
            return Ok(());
        }
        for p in l.places.iter() {
            if let Storage::Register(r) = p.storage {
                if self
                    .register_bits(r)
                    .is_some_and(|size| p.bit_offset >= u128::from(size))
                {
                    return Err(ErrorKind::OffsetOutOfRange);
                }
            }
        }
        Ok(())
    }

    /// A part of `bit_size` bits at `l`: its bits must be within the storage
    /// of every place (storage of unknown size is not checked).
    pub(super) fn check_part(
        &self,
        l: &LocationDescription,
        bit_size: u64,
    ) -> Result<(), ErrorKind> {
        for p in l.places.iter() {
            if let Some(size) = self.storage_bits(&p.storage) {
                if p.bit_offset.saturating_add(u128::from(bit_size)) > size {
                    return Err(ErrorKind::IllFormed(
                        "a part is larger than what remains of its location storage",
                    ));
                }
            }
        }
        Ok(())
    }

    /// A composite of `bits` bits may be no larger than the memory of an
    /// address space.
    pub(super) fn check_composite_bits(&self, bits: u128) -> Result<(), ErrorKind> {
        if bits > address_space_bits(self.address_size) {
            return Err(ErrorKind::IllFormed(
                "the composite is larger than the largest address space",
            ));
        }
        Ok(())
    }

    pub(super) fn need(&self, n: usize) -> Result<(), ErrorKind> {
        if self.stack.len() < n {
            Err(ErrorKind::StackUnderflow)
        } else {
            Ok(())
        }
    }

    pub(super) fn reg(r: u64) -> Result<u16, ErrorKind> {
        u16::try_from(r).map_err(|_| ErrorKind::BadRegister(r))
    }

    pub(super) fn value_err(e: ValueError) -> ErrorKind {
        match e {
            ValueError::TypeMismatch => {
                ErrorKind::TypeMismatch("operands have different base types")
            }
            ValueError::DivisionByZero => ErrorKind::DivisionByZero,
            ValueError::IntegralRequired => {
                ErrorKind::TypeMismatch("the operation needs integral operands")
            }
            ValueError::BadConversion => ErrorKind::TypeMismatch(
                "cannot convert or reinterpret to that type (sizes differ?)",
            ),
            ValueError::UnsupportedForType => ErrorKind::TypeMismatch(
                "not defined for this type (neg of unsigned, shr of signed, shra of unsigned, negative shift)",
            ),
        }
    }

    /// The type of base type DIE `offset` (0: generic), if known.
    pub(super) fn base_type(&self, offset: u64) -> Option<ValueType> {
        if offset == 0 {
            return Some(ValueType::Generic);
        }
        self.base_types()
            .iter()
            .find(|(o, _)| *o == offset)
            .map(|(_, t)| *t)
    }
}
