//! Variables and their evaluation: what a variable is ([`Variable`], its location
//! expressions), and evaluating it against a target ([`evaluate_variable`] and friends).

extern crate std;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::targets::{Frame, Nesting, Snapshot, WithFrame};
use crate::access::{self, Bits, Target};
use crate::ErrorDetail;
use crate::{
    decode, Encoding, Error, ErrorKind, Evaluation, Expression, LocationDescription, Op, Storage,
    Value, ValueType,
};

/// A base type DIE the typed operations may name: unit offset,
/// `DW_AT_encoding`, `DW_AT_byte_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaseType {
    /// Offset of the `DW_TAG_base_type` DIE in the unit that holds it (for a variable's
    /// type, that may be another unit than the variable's: LTO's references across units).
    pub offset: u64,
    /// Its `DW_ATE_*` encoding.
    pub encoding: u8,
    /// Its size in bytes.
    pub byte_size: u64,
}

/// The type a pointer or reference points to, as far as `*p` needs it: how many bytes of
/// the object an implicit pointer (`DW_OP_implicit_pointer`) names `*p` reads, and how gdb
/// prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pointee {
    /// Its size in bytes, if known.
    pub byte_size: Option<u64>,
    /// The base type it is, through typedefs and qualifiers (as [`Variable::base_type`]).
    pub base_type: Option<BaseType>,
}

/// An expression decoded from bytes: its operations and the byte offset of
/// each (then the length), so that branches are resolved against the
/// original bytes ([`Expression::with_offsets`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The operations.
    pub ops: Vec<Op>,
    /// Byte offset of each operation, then the expression's length.
    pub offsets: Vec<usize>,
}

impl Decoded {
    /// Decodes `bytes`.
    pub fn new(bytes: &[u8], encoding: Encoding) -> Result<Decoded, Error> {
        let decoded = decode(bytes, encoding)?;
        let mut offsets = Vec::with_capacity(decoded.len() + 1);
        let mut ops = Vec::with_capacity(decoded.len());
        for (at, op) in decoded {
            offsets.push(at);
            ops.push(op);
        }
        offsets.push(bytes.len());
        Ok(Decoded { ops, offsets })
    }

    /// A fresh evaluation of the operations, with their byte offsets.
    pub fn evaluation(&self, encoding: Encoding) -> Evaluation<'_> {
        // The offsets are borrowed, not copied (a copy was an allocation per
        // evaluation), and checked only by a branch. They fit for
        // `Decoded::new`'s offsets (increasing, one per operation plus the
        // length); others may not (the fields are public): branches then
        // re-encode instead.
        Evaluation::new(
            Expression::with_unchecked_offsets(&self.ops, &self.offsets),
            encoding,
        )
    }
}

/// Runs `eval` to completion, answering its requests from `snapshot` and
/// `frame` (`eval.evaluate_with(&mut WithFrame::new(snapshot.state(), frame))`).
/// A frame-base request is answered by `snapshot.frame_base`, else by
/// evaluating `frame.frame_base`; an entry value by evaluating its expression
/// against the registers at entry. The snapshot's registers give their sizes
/// ([`Evaluation::set_register_size`]), so offsets and parts past a register's
/// end are errors of the operation that makes them. `ops` is no longer used
/// (the evaluation names its operations itself).
pub fn run(
    eval: &mut Evaluation<'_>,
    ops: &[Op],
    snapshot: &Snapshot,
    frame: Frame<'_>,
) -> Result<(), Error> {
    let _ = ops;
    eval.evaluate_with(&mut WithFrame::new(snapshot.state(), frame))
}

/// [`run`] for an evaluation with [`Evaluation::set_trace`] on: `on_step`
/// sees the evaluation after every executed operation
/// ([`crate::EvaluationResult::Stepped`]: [`Evaluation::stack`] shows its effect,
/// [`Evaluation::pc`] the next operation); nested evaluations (frame base,
/// entry values) are not traced.
pub fn run_traced<'a>(
    eval: &mut Evaluation<'a>,
    ops: &[Op],
    snapshot: &Snapshot,
    frame: Frame<'_>,
    on_step: &mut dyn FnMut(&Evaluation<'a>),
) -> Result<(), Error> {
    let _ = ops;
    eval.evaluate_traced_with(&mut WithFrame::new(snapshot.state(), frame), on_step)
}

/// Reads `bit_len` bits through `location` from the snapshot
/// ([`crate::access::read`]: undefined bits stay undefined, unreadable
/// registers or memory are an error).
pub fn read(
    location: &LocationDescription,
    bit_len: u64,
    snapshot: &Snapshot,
) -> Result<Bits, Error> {
    access::read(location, bit_len, &mut snapshot.state())
}

/// Whether a variable is a formal parameter or a local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VariableKind {
    /// `DW_TAG_formal_parameter`.
    Parameter,
    /// `DW_TAG_variable`.
    Variable,
}

/// Where a variable is at the PC, as the DWARF says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VariableLocation {
    /// A location expression (from `DW_AT_location` or the location-list
    /// entry covering the PC).
    Expression(Vec<u8>),
    /// `DW_AT_const_value`, as target bytes.
    Const(Vec<u8>),
    /// No location at this PC (optimized out).
    None,
}

/// A variable or parameter in scope at a PC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    /// Source name.
    pub name: String,
    /// Parameter or variable.
    pub kind: VariableKind,
    /// The enclosing function (inlined subroutines name the inlined one).
    pub function: String,
    /// Offset of the DIE in `.debug_info`.
    pub die: u64,
    /// The type's name as far as it can be said briefly.
    pub type_name: String,
    /// The type's size in bytes, if known.
    pub byte_size: Option<u64>,
    /// The base type the variable's type is, through typedefs and
    /// qualifiers (its offset in the unit, `DW_ATE_*` encoding and size);
    /// `None` for pointers, enumerations, aggregates and unknown types.
    /// [`Variable::number`] prints a value of it.
    pub base_type: Option<BaseType>,
    /// For a pointer or reference type, the type it points to (`None` for `void *` and
    /// every other type).
    pub pointee: Option<Pointee>,
    /// Where it is.
    pub location: VariableLocation,
    /// The encoding of the expression bytes (address and offset size).
    pub encoding: Encoding,
    /// The enclosing concrete function's `DW_AT_frame_base` expression.
    pub frame_base: Option<Vec<u8>>,
    /// The unit's base types (for typed operations such as `DW_OP_convert`).
    pub base_types: Vec<BaseType>,
    /// The `.debug_info` offset of its unit (`DW_OP_GNU_parameter_ref` names
    /// a DIE of the unit).
    pub unit_offset: u64,
}

/// A location expression with the encoding it was written in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationExpression {
    /// The expression's bytes.
    pub bytes: Vec<u8>,
    /// Its encoding.
    pub encoding: Encoding,
    /// Whether it is an entry of a location list (else the attribute's
    /// single expression).
    pub in_list: bool,
}

/// The result of evaluating a variable's location against a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluated {
    /// The location description (none for constants and optimized-out
    /// variables).
    pub location: Option<LocationDescription>,
    /// The object's bits, `byte_size` bytes of them, with what is undefined.
    pub bits: Bits,
}

/// Evaluates `variable`'s location at the snapshot and reads its bytes
/// ([`evaluate_variable_with`] the snapshot's [`State`](super::State) with the variable's
/// base types).
pub fn evaluate_variable(variable: &Variable, snapshot: &Snapshot) -> Result<Evaluated, Error> {
    let mut state = snapshot.state().with_variable(variable);
    evaluate_variable_with(variable, &mut state)
}

/// Evaluates `variable`'s location against `target` (with the variable's
/// frame base and base types, [`WithFrame`]; entry-value expressions see the
/// base types only if the target has them, as a
/// [`State::with_base_types`](super::State::with_base_types)
/// does) and reads its bytes through the result
/// ([`Entry::into_location`](crate::Entry::into_location): a value result is an address if generic,
/// the object's bits otherwise).
pub fn evaluate_variable_with<T: Target + ?Sized>(
    variable: &Variable,
    target: &mut T,
) -> Result<Evaluated, Error> {
    evaluate_variable_in(variable, &[], target)
}

/// [`evaluate_variable_with`] among the variables in scope, `scope` (those of the same
/// [`Binary::variables_at`](super::Binary::variables_at)): `DW_OP_GNU_variable_value` of one of
/// them gives its value
/// in the same frame, as gdb does.
pub fn evaluate_variable_in<T: Target + ?Sized>(
    variable: &Variable,
    scope: &[Variable],
    target: &mut T,
) -> Result<Evaluated, Error> {
    evaluate_nested(variable, scope, target, Nesting::default()).map(|(e, _)| e)
}

/// [`evaluate_variable_in`], reading `byte_size` bytes at `byte_offset` into the object
/// instead of the whole of it: what `*p` reads when `p` is an implicit pointer
/// (`DW_OP_implicit_pointer`) to `variable` with that byte offset, its pointee
/// ([`Variable::pointee`]) that size. The location is offset by `byte_offset` (an offset
/// outside its storage is an error, as is one outside a constant's bytes); bytes past the
/// end of implicit storage are undefined.
pub fn evaluate_part_in<T: Target + ?Sized>(
    variable: &Variable,
    scope: &[Variable],
    byte_offset: i64,
    byte_size: u64,
    target: &mut T,
) -> Result<Evaluated, Error> {
    evaluate_span(
        variable,
        scope,
        target,
        Nesting::default(),
        Some((byte_offset, byte_size)),
    )
    .map(|(e, _)| e)
}

/// [`evaluate_variable_in`] nested `nesting` deep (`DW_OP_GNU_variable_value`); also gives
/// back the nested evaluations' count.
pub(super) fn evaluate_nested<T: Target + ?Sized>(
    variable: &Variable,
    scope: &[Variable],
    target: &mut T,
    nesting: Nesting,
) -> Result<(Evaluated, Nesting), Error> {
    evaluate_span(variable, scope, target, nesting, None)
}

/// [`evaluate_nested`] reading the whole object, or `part`: (byte offset, byte size).
fn evaluate_span<T: Target + ?Sized>(
    variable: &Variable,
    scope: &[Variable],
    target: &mut T,
    nesting: Nesting,
    part: Option<(i64, u64)>,
) -> Result<(Evaluated, Nesting), Error> {
    let size = part.map_or(variable.byte_size.unwrap_or(0), |(_, n)| n);
    let bit_len = size.saturating_mul(8).min(access::MAX_ACCESS_BITS);
    let bytes = match &variable.location {
        VariableLocation::None => {
            let bits = Bits::undefined(bit_len).map_err(|kind| ErrorDetail::Access { kind })?;
            return Ok((
                Evaluated {
                    location: None,
                    bits,
                },
                nesting,
            ));
        }
        VariableLocation::Const(b) => {
            let bits = match part {
                None => Bits::from_bytes(b),
                // Read as the implicit storage a constant is, so that offsets and sizes
                // mean what they mean for `DW_OP_implicit_value`.
                Some((offset, _)) => {
                    let mut location =
                        LocationDescription::single(Storage::Implicit(b.as_slice().into()), 0);
                    offset_bytes(&mut location, offset, variable.encoding)?;
                    access::read(&location, bit_len, target)?
                }
            };
            return Ok((
                Evaluated {
                    location: None,
                    bits,
                },
                nesting,
            ));
        }
        VariableLocation::Expression(b) => b,
    };
    let enc = variable.encoding;
    let expr = Decoded::new(bytes, enc)?;
    let frame_base = match &variable.frame_base {
        Some(fb) => Some(Decoded::new(fb, enc)?),
        None => None,
    };
    let frame = Frame {
        frame_base: frame_base.as_ref().map(|f| (f, enc)),
        base_types: &variable.base_types,
        variables: scope,
    };
    let mut eval = expr.evaluation(enc);
    let mut with_frame = WithFrame {
        target: &mut *target,
        frame,
        nesting,
    };
    eval.evaluate_with(&mut with_frame)?;
    let nesting = with_frame.nesting;
    // The result is moved out, not cloned.
    let mut location = match eval.take_result() {
        Some(e) => e.into_location(enc.address_size),
        None => LocationDescription::undefined(),
    };
    if let Some((offset, _)) = part {
        offset_bytes(&mut location, offset, enc)?;
    }
    let bits = access::read(&location, bit_len, target)?;
    let evaluated = Evaluated {
        bits,
        location: Some(location),
    };
    Ok((evaluated, nesting))
}

/// Moves `location` by `byte_offset` bytes (an implicit pointer's offset).
fn offset_bytes(
    location: &mut LocationDescription,
    byte_offset: i64,
    encoding: Encoding,
) -> Result<(), Error> {
    location
        .offset_bits(i128::from(byte_offset) * 8, encoding.address_size)
        .map_err(|_| {
            ErrorDetail::Access {
                kind: ErrorKind::OffsetOutOfRange,
            }
            .into()
        })
}

impl Variable {
    /// The variable's bits as gdb prints a value of its base type
    /// ([`Variable::base_type`], [`crate::Value::number`]): signed and
    /// unsigned integers in decimal, floats of 4 and 8 bytes as C's `%g` with
    /// enough digits to read back, `true`/`false` for a boolean 0 or 1, and
    /// characters as their number and the character (`65 'A'`, `10 '\n'`,
    /// `-1 '\377'`). `None` if some bit is undefined, the type is no base
    /// type, or its size or encoding is one of the others (`long double`,
    /// 128-bit integers, UTF characters, complex, decimal floats).
    pub fn number(&self, bits: &Bits) -> Option<String> {
        self.base_type?.number(bits, self.encoding.address_size)
    }
}

impl BaseType {
    /// `bits` as gdb prints a value of this type ([`Variable::number`]; `address_size` is
    /// the unit's).
    pub fn number(&self, bits: &Bits, address_size: u8) -> Option<String> {
        let size = u8::try_from(self.byte_size).ok()?;
        if !matches!(size, 1 | 2 | 4 | 8)
            || !bits.is_fully_defined()
            || bits.bit_len() != u64::from(size) * 8
        {
            return None;
        }
        let mut raw = [0u8; 8];
        raw.get_mut(..usize::from(size))?
            .copy_from_slice(bits.bytes().get(..usize::from(size))?);
        let raw = u64::from_le_bytes(raw);
        let number = |ty| Value::new(ty, raw, address_size).number(address_size);
        Some(match gimli::DwAte(self.encoding) {
            gimli::DW_ATE_boolean if raw <= 1 => String::from(["false", "true"][raw as usize]),
            gimli::DW_ATE_boolean | gimli::DW_ATE_unsigned => {
                number(ValueType::Unsigned(size)).to_string()
            }
            gimli::DW_ATE_signed => number(ValueType::Signed(size)).to_string(),
            gimli::DW_ATE_float if size >= 4 => number(ValueType::Float(size)).to_string(),
            gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char if size == 1 => {
                let ty = if self.encoding == gimli::DW_ATE_signed_char.0 {
                    ValueType::Signed(1)
                } else {
                    ValueType::Unsigned(1)
                };
                format!("{} {}", number(ty), gdb_char(raw as u8))
            }
            _ => return None,
        })
    }
}

/// A byte as gdb prints a C character: `'A'`, its escapes (`'\n'`,
/// `'\''`), and octal for the rest (`'\377'`).
fn gdb_char(b: u8) -> String {
    let escaped = match b {
        7 => "\\a",
        8 => "\\b",
        9 => "\\t",
        10 => "\\n",
        11 => "\\v",
        12 => "\\f",
        13 => "\\r",
        b'\'' => "\\'",
        b'\\' => "\\\\",
        0x20..=0x7e => return format!("'{}'", char::from(b)),
        _ => return format!("'\\{b:03o}'"),
    };
    format!("'{escaped}'")
}
