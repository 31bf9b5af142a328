//! Reading the text syntax: [`parse_text`] and [`parse_text_with`] read the crate's
//! own spelling ([`to_text`](super::to_text)'s), llvm-dwarfdump's and gdb's.
//!
//! Three spellings of the same operations:
//!
//! | | register | operands | entry value |
//! |---|---|---|---|
//! | Locus | `DW_OP_breg7 8`, `DW_OP_bregx 7 8` | decimal or `0x` hex, blocks `[01 02]` | `DW_OP_entry_value [55]` |
//! | llvm-dwarfdump 19 | `DW_OP_breg7 RSP+8`, `DW_OP_bregx RSP+8` | unsigned in hex (`0x8`), signed with a sign (`+8`), `, ` between operations, base types `(0x0000002a) "int"` | `DW_OP_entry_value(DW_OP_reg5 RDI)` |
//! | gdb 13 (`info scope`, `info address`) | `DW_OP_breg7 8 [$rsp]`, `DW_OP_bregx register 7 [$rsp] offset 8` | decimal, one operation a line after its byte offset (`  2: `), `DW_OP_piece 4 (bytes)`, branch targets as byte offsets, base types `<int [0x2a]>` | the nested operations on the following, further indented lines |
//!
//! What llvm-dwarfdump prints of a location list entry (`[0x10, 0x37):
//! DW_OP_reg5 RDI`) and an attribute's closing parenthesis are accepted as
//! printed; so are its `<empty>` and its `<decoding error> a4 2a ...` (the bytes it could not
//! print are decoded), and its entry value without a closing parenthesis
//! (llvm-dwarfdump 19 prints none after a nested expression of more than
//! one operation: the nested expression then runs to the end). Register
//! names printed next to a number (`DW_OP_reg5 RDI`, `[$rdi]`) are checked
//! against it when the name is known. gdb prints neither the bytes of
//! `DW_OP_implicit_value` nor the index of `DW_OP_addrx` (it prints the
//! address): the first is refused, the second read as the index.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::Error;
use crate::op::{decode, encode, gnu_name, Encoding, Op};
use crate::regnames::register_number;
use crate::ErrorDetail;

/// How [`parse_text_with`] reads names and nested expressions.
pub struct Syntax<'r> {
    /// Encoding of nested expressions (`DW_OP_entry_value(...)`), of the
    /// bytes after llvm-dwarfdump's `<decoding error>`, and of the byte
    /// offsets gdb's branch targets are counted in.
    pub encoding: Encoding,
    /// Subtracted from llvm-dwarfdump's base type references
    /// (`(0x0000002a) "int"`), which are offsets in `.debug_info`, to give
    /// the operand (an offset in the unit): the unit's offset.
    pub unit_offset: u64,
    /// Register names beyond the built-in x86-64 and AArch64 ones
    /// ([`crate::register_number`]); asked first.
    pub registers: &'r dyn Fn(&str) -> Option<u16>,
}

/// Assembles text into operations: the crate's spelling, llvm-dwarfdump's
/// or gdb's (see the module docs), with the default encoding for nested
/// expressions.
///
/// * Operations are separated by whitespace, newlines, `;` or `,`; operands
///   follow their operation, separated the same way.
/// * Names: DWARF 5's (`DW_OP_breg7`), the spec's for the extension
///   (`DW_OP_offset`, `DW_OP_push_lane`, ...) and LLVM's (`DW_OP_LLVM_offset`);
///   a `DW_OP_LLVM_user` token before an extension operation is ignored, as
///   llvm-dwarfdump prints it. `DW_OP_uconst` (used in the spec's examples)
///   is accepted for `DW_OP_constu`, and the GNU names of operations DWARF 5
///   standardized (`DW_OP_GNU_entry_value`, ...) for the DWARF 5 operation.
///   The DWARF 6 draft's names are read where they name the same operation:
///   the extension's names without `LLVM_` (the draft's `DW_OP_undefined`,
///   `DW_OP_offset`, `DW_OP_overlay`, ...), `DW_OP_push_object_location`
///   and `DW_OP_form_tls_location`; printing keeps LLVM 19's names. The
///   draft's `DW_OP_composite` is its own operation ([`Op::Composite`]): it
///   begins a composite, where LLVM's `DW_OP_LLVM_piece_end` ends one.
/// * Numbers: decimal or `0x` hex; signed operands may be negative (`-8`,
///   `-0x10`) or carry a `+`. Branch operands are the DWARF byte
///   displacement, except in gdb's listing (operations after byte offsets)
///   and after `to`, where they are the target's byte offset.
/// * Register operands (`regx`, `bregx`, `regval_type`, `aspace_bregx`,
///   `call_frame_entry_reg`): a number, or a name given to
///   `resolve_register`, or an x86-64 or AArch64 name
///   ([`crate::register_number`]).
/// * Type operands: a DIE offset, or `Generic` for 0.
/// * Blocks (`implicit_value`, `entry_value`, `const_type`'s value): hex bytes
///   in brackets, spaces optional: `[01 02 ff]`, `[0102ff]`, `[]`. An entry
///   value's block may be followed by its operations in parentheses, as
///   `locus dwarf vars` prints it (`DW_OP_entry_value [55] (DW_OP_reg5)`);
///   they must encode to the block.
pub fn parse_text(
    text: &str,
    resolve_register: impl Fn(&str) -> Option<u16>,
) -> Result<Vec<Op>, Error> {
    parse_text_with(
        text,
        &Syntax {
            encoding: Encoding::default(),
            unit_offset: 0,
            registers: &resolve_register,
        },
    )
}

/// [`parse_text`] with the encoding, unit offset and register names given.
pub fn parse_text_with(text: &str, syntax: &Syntax<'_>) -> Result<Vec<Op>, Error> {
    let mut p = Parser {
        tokens: tokenize(text)?,
        pos: 0,
        end: text.len(),
        syntax,
    };
    let ops = p.sequence(Stop::End, 0)?;
    Ok(ops)
}

/// The DWARF 6 draft's names for operations this crate has under another
/// name (Issue 230524.1, "Locations on the stack", renames the two context
/// operations that now push locations); the DWARF 5 name they replace.
/// The draft's names of the extension operations (`DW_OP_undefined`,
/// `DW_OP_offset`, `DW_OP_bit_offset`, `DW_OP_push_lane`, `DW_OP_overlay`,
/// ...) are the spec's names without `LLVM_`, read as they are.
fn dwarf6_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "push_object_location" => "push_object_address",
        "form_tls_location" => "form_tls_address",
        _ => return None,
    })
}

// ---------------------------------------------------------------------------
// Tokens

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A run of characters up to a separator or one of `()[]<>"`.
    Word,
    /// `(`.
    Open,
    /// `)`.
    Close,
    /// `[...]`, brackets included.
    Block,
    /// `<...>`, brackets included.
    Angle,
    /// `"..."`, quotes included.
    Str,
    /// gdb's byte offset before an operation: hex digits and `:`.
    Label,
}

#[derive(Clone, Copy)]
struct Token<'a> {
    offset: usize,
    /// Bytes from the start of the token's line (gdb's nesting).
    column: usize,
    text: &'a str,
    kind: Kind,
}

fn syntax_error(offset: usize, token: &str, message: &'static str) -> Error {
    ErrorDetail::Syntax {
        offset,
        token: String::from(token),
        message,
    }
    .into()
}

/// Where llvm-dwarfdump's location list prefix `[0x10, 0x37):` ends, if the
/// text starts with one.
fn range_prefix(text: &str) -> Option<usize> {
    let lead = text.len() - text.trim_start().len();
    let rest = text.get(lead..)?;
    if !rest.starts_with("[0x") {
        return None;
    }
    let end = rest.find("):")?;
    let inside = rest.get(1..end)?;
    let ok = inside
        .bytes()
        .all(|b| b.is_ascii_hexdigit() || b == b'x' || b == b',' || b == b' ');
    ok.then_some(lead + end + 2)
}

fn tokenize(text: &str) -> Result<Vec<Token<'_>>, Error> {
    let mut tokens = Vec::new();
    let bytes = text.as_bytes();
    let mut i = range_prefix(text).unwrap_or(0);
    let mut line_start = 0;
    let is_sep = |b: u8| b.is_ascii_whitespace() || b == b';' || b == b',';
    let is_punct = |b: u8| matches!(b, b'(' | b')' | b'[' | b']' | b'<' | b'>' | b'"');
    while let Some(&b) = bytes.get(i) {
        if b == b'\n' {
            line_start = i + 1;
        }
        if is_sep(b) {
            i += 1;
            continue;
        }
        let start = i;
        let closing = |close: char, what: &'static str| -> Result<usize, Error> {
            match text.get(start + 1..).and_then(|t| t.find(close)) {
                Some(end) => Ok(start + 1 + end + 1),
                None => Err(syntax_error(start, &text[start..], what)),
            }
        };
        let kind = match b {
            b'(' => {
                i += 1;
                Kind::Open
            }
            b')' => {
                i += 1;
                Kind::Close
            }
            b'[' => {
                i = closing(']', "unterminated `[` block")?;
                Kind::Block
            }
            b'<' => {
                i = closing('>', "unterminated `<`")?;
                Kind::Angle
            }
            b'"' => {
                i = closing('"', "unterminated `\"` string")?;
                Kind::Str
            }
            _ => {
                while i < bytes.len() && !is_sep(bytes[i]) && !is_punct(bytes[i]) {
                    i += 1;
                }
                if i == start {
                    // A lone `]` or `>`.
                    return Err(syntax_error(start, &text[start..=start], "unexpected"));
                }
                let word = &text[start..i];
                match word.strip_suffix(':') {
                    Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                        Kind::Label
                    }
                    _ => Kind::Word,
                }
            }
        };
        tokens.push(Token {
            offset: start,
            column: start - line_start,
            text: &text[start..i],
            kind,
        });
    }
    // A leading `DW_AT_location` (or any attribute name) as llvm-dwarfdump
    // prints it before the expression.
    if tokens
        .first()
        .is_some_and(|t| t.kind == Kind::Word && t.text.starts_with("DW_AT_"))
    {
        tokens.remove(0);
    }
    Ok(tokens)
}

// ---------------------------------------------------------------------------
// Numbers and blocks

pub(crate) fn parse_u64(t: &str) -> Option<u64> {
    let t = t.strip_prefix('+').unwrap_or(t);
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        parse_hex_digits(h)
    } else {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }
}

fn parse_hex_digits(h: &str) -> Option<u64> {
    if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

pub(crate) fn parse_i64(t: &str) -> Option<i64> {
    if let Some(m) = t.strip_prefix('-') {
        if m.starts_with(['+', '-']) {
            return None;
        }
        let v = parse_u64(m)?;
        if v == 1u64 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(v).ok().map(|v| -v)
        }
    } else {
        i64::try_from(parse_u64(t)?).ok()
    }
}

fn parse_block(t: &str) -> Option<Vec<u8>> {
    let inner = t.strip_prefix('[')?.strip_suffix(']')?;
    let digits: Vec<u8> = inner
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b',' && *b != b';')
        .collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let hex = |b: u8| -> Option<u8> { (b as char).to_digit(16).map(|d| d as u8) };
    digits
        .chunks(2)
        .map(|p| Some((hex(*p.first()?)? << 4) | hex(*p.get(1)?)?))
        .collect()
}

/// One byte as llvm-dwarfdump (`0x01`) or gdb (`01`) prints it.
fn parse_byte(t: &str) -> Option<u8> {
    let h = t.strip_prefix("0x").unwrap_or(t);
    if h.len() != 2 {
        return None;
    }
    u8::try_from(parse_hex_digits(h)?).ok()
}

/// A name that may be a register's: a letter or `$`, then letters, digits
/// and `_`.
fn looks_like_register(t: &str) -> bool {
    let t = t.strip_prefix('$').unwrap_or(t);
    t.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !t.starts_with("DW_")
}

/// A register name followed by a signed offset, as llvm-dwarfdump prints a
/// base register (`RSP+8`, `R12-16`).
fn split_register_offset(t: &str) -> Option<(&str, &str)> {
    let at = t.get(1..)?.find(['+', '-'])? + 1;
    let (name, offset) = t.split_at(at);
    looks_like_register(name).then_some((name, offset))
}

// ---------------------------------------------------------------------------
// Parser

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The whole input.
    End,
    /// Up to a `)` (or the end: llvm-dwarfdump may not print it).
    Close,
    /// gdb's nested lines: up to a label at this column or further left.
    Outdent(usize),
}

#[derive(Clone, Copy)]
enum Width {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
}

struct Parser<'t, 's> {
    tokens: Vec<Token<'t>>,
    pos: usize,
    end: usize,
    syntax: &'s Syntax<'s>,
}

/// gdb's byte offset of the operation being parsed, and its label's column.
#[derive(Clone, Copy)]
struct Label {
    offset: u64,
    column: usize,
}

impl<'t> Parser<'t, '_> {
    fn peek(&self) -> Option<Token<'t>> {
        self.tokens.get(self.pos).copied()
    }

    fn peek_kind(&self, kind: Kind) -> Option<Token<'t>> {
        self.peek().filter(|t| t.kind == kind)
    }

    fn next(&mut self) -> Result<Token<'t>, Error> {
        let t = self
            .peek()
            .ok_or_else(|| syntax_error(self.end, "", "missing operand at end of input"))?;
        self.pos += 1;
        Ok(t)
    }

    /// Consumes the word `keyword` if it is next (gdb's `size`, `offset`,
    /// `register`, `to`, `DIE`).
    fn keyword(&mut self, keyword: &str) -> bool {
        let hit = self
            .peek_kind(Kind::Word)
            .is_some_and(|t| t.text == keyword);
        if hit {
            self.pos += 1;
        }
        hit
    }

    /// Consumes gdb's `(bytes)` / `(bits)` after a piece's operands.
    fn unit_note(&mut self, unit: &str) {
        let at = |i: usize| self.tokens.get(self.pos + i);
        if at(0).is_some_and(|t| t.kind == Kind::Open)
            && at(1).is_some_and(|t| t.kind == Kind::Word && t.text == unit)
            && at(2).is_some_and(|t| t.kind == Kind::Close)
        {
            self.pos += 3;
        }
    }

    fn word(&mut self, what: &'static str) -> Result<Token<'t>, Error> {
        let t = self.next()?;
        if t.kind == Kind::Word {
            Ok(t)
        } else {
            Err(syntax_error(t.offset, t.text, what))
        }
    }

    fn unsigned(&mut self, width: Width) -> Result<u64, Error> {
        let t = self.word("expected an unsigned number (decimal or 0x-hex)")?;
        unsigned_in(t, width)
    }

    fn signed(&mut self, width: Width) -> Result<i64, Error> {
        let t = self.word("expected a signed number (decimal or 0x-hex)")?;
        signed_in(t, width)
    }

    /// An unsigned number gdb prints in hex without `0x` after `offset` or
    /// `DIE` (`DW_OP_call2 offset 2b`), else as [`Parser::unsigned`].
    fn gdb_hex(&mut self, keyword: &str, width: Width) -> Result<u64, Error> {
        if !self.keyword(keyword) {
            return self.unsigned(width);
        }
        let t = self.word("expected hex digits")?;
        let v = parse_u64(t.text)
            .filter(|_| t.text.starts_with("0x"))
            .or_else(|| parse_hex_digits(t.text))
            .ok_or_else(|| syntax_error(t.offset, t.text, "expected hex digits"))?;
        check_unsigned(t, v, width)
    }

    fn resolve(&self, name: &str) -> Option<u16> {
        let bare = name.strip_prefix('$').unwrap_or(name);
        (self.syntax.registers)(bare).or_else(|| register_number(bare))
    }

    /// A register operand: a number or a name.
    fn register(&mut self) -> Result<u64, Error> {
        let t = self.word("expected a register number or name")?;
        let r = match parse_u64(t.text) {
            Some(v) => v,
            None => self
                .resolve(t.text)
                .map(u64::from)
                .ok_or_else(|| syntax_error(t.offset, t.text, "unknown register name"))?,
        };
        self.annotation(r)?;
        Ok(r)
    }

    /// Checks a register name printed next to its number, if it is known.
    fn check_name(&self, t: Token<'_>, name: &str, register: u64) -> Result<(), Error> {
        match self.resolve(name) {
            Some(n) if u64::from(n) != register => Err(syntax_error(
                t.offset,
                t.text,
                "register name does not match the register number",
            )),
            _ => Ok(()),
        }
    }

    /// gdb's `[$rsp]` after a register number, checked when known.
    fn annotation(&mut self, register: u64) -> Result<(), Error> {
        let Some(t) = self.peek_kind(Kind::Block) else {
            return Ok(());
        };
        let Some(name) = t.text.strip_prefix("[$").and_then(|n| n.strip_suffix(']')) else {
            return Ok(());
        };
        self.pos += 1;
        self.check_name(t, name, register)
    }

    /// The name llvm-dwarfdump prints after `DW_OP_regN` (`RDI`), or gdb's
    /// `[$rdi]`.
    fn register_note(&mut self, register: u64) -> Result<(), Error> {
        if let Some(t) = self.peek_kind(Kind::Word) {
            if looks_like_register(t.text) {
                self.pos += 1;
                return self.check_name(t, t.text, register);
            }
        }
        self.annotation(register)
    }

    /// The offset of `DW_OP_bregN`: `8`, `+8`, `RSP+8`, `8 [$rsp]`.
    fn base_offset(&mut self, register: u64) -> Result<i64, Error> {
        if let Some(t) = self.peek_kind(Kind::Word) {
            if let Some((name, offset)) = split_register_offset(t.text) {
                self.pos += 1;
                self.check_name(t, name, register)?;
                return signed_in(
                    Token {
                        offset: t.offset + name.len(),
                        text: offset,
                        ..t
                    },
                    Width::I64,
                );
            }
        }
        let v = self.signed(Width::I64)?;
        self.annotation(register)?;
        Ok(v)
    }

    /// `DW_OP_bregx`'s operands: `7 8`, `RSP 8`, `RSP+8`, `0x38 +8`,
    /// `register 7 [$rsp] offset 8`.
    fn bregx(&mut self) -> Result<Op, Error> {
        if let Some(t) = self.peek_kind(Kind::Word) {
            if let Some((name, _)) = split_register_offset(t.text) {
                let r = self
                    .resolve(name)
                    .ok_or_else(|| syntax_error(t.offset, name, "unknown register name"))?;
                let r = u64::from(r);
                return Ok(Op::Bregx(r, self.base_offset(r)?));
            }
        }
        self.keyword("register");
        let r = self.register()?;
        self.keyword("offset");
        Ok(Op::Bregx(r, self.signed(Width::I64)?))
    }

    /// A base type operand: `0x2a`, `Generic`, llvm-dwarfdump's
    /// `(0x0000002a) "int"` or `<base_type ref: 0x2a>`, gdb's `<int [0x2a]>`
    /// or `<0>`.
    fn base_type(&mut self) -> Result<u64, Error> {
        let t = self.next()?;
        match t.kind {
            Kind::Word if t.text.eq_ignore_ascii_case("generic") => Ok(0),
            Kind::Word => unsigned_in(t, Width::U64),
            Kind::Open => {
                let n = self.word("expected a DIE offset")?;
                let close = self.next()?;
                if close.kind != Kind::Close {
                    return Err(syntax_error(close.offset, close.text, "expected `)`"));
                }
                let die = unsigned_in(n, Width::U64)?;
                if self.peek_kind(Kind::Str).is_some() {
                    self.pos += 1;
                }
                die.checked_sub(self.syntax.unit_offset).ok_or_else(|| {
                    syntax_error(n.offset, n.text, "DIE offset before the unit's start")
                })
            }
            Kind::Angle => {
                let inner = t.text.trim_start_matches('<').trim_end_matches('>').trim();
                let number = match (inner.rfind('['), inner.rfind(']')) {
                    (Some(a), Some(b)) if a < b => &inner[a + 1..b],
                    _ => inner.rsplit(' ').next().unwrap_or(inner),
                };
                parse_u64(number).ok_or_else(|| {
                    syntax_error(t.offset, t.text, "expected a base type DIE offset")
                })
            }
            _ => Err(syntax_error(t.offset, t.text, "expected a base type")),
        }
    }

    fn block(&mut self) -> Result<Vec<u8>, Error> {
        let t = self.next()?;
        if t.kind != Kind::Block {
            return Err(syntax_error(
                t.offset,
                t.text,
                "expected a block `[hex bytes]`",
            ));
        }
        parse_block(t.text)
            .ok_or_else(|| syntax_error(t.offset, t.text, "expected a block `[hex bytes]`"))
    }

    /// `count` bytes printed one a word (`0x01` or `01`).
    fn bytes(&mut self, count: u64, at: Token<'_>) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        for _ in 0..count {
            let t = self
                .peek_kind(Kind::Word)
                .ok_or_else(|| syntax_error(at.offset, at.text, "fewer bytes than the length"))?;
            let b = parse_byte(t.text)
                .ok_or_else(|| syntax_error(t.offset, t.text, "expected a byte in hex"))?;
            self.pos += 1;
            out.push(b);
        }
        Ok(out)
    }

    /// `DW_OP_implicit_value`'s bytes: `[01 02]`, or llvm-dwarfdump's
    /// length and bytes `0x2 0x01 0x02`.
    fn implicit_value(&mut self) -> Result<Vec<u8>, Error> {
        if self.peek_kind(Kind::Block).is_some() {
            return self.block();
        }
        let t = self.word("expected a block `[hex bytes]`")?;
        let n = unsigned_in(t, Width::U64)?;
        if n > 0
            && self
                .peek_kind(Kind::Word)
                .is_none_or(|w| parse_byte(w.text).is_none())
        {
            return Err(syntax_error(
                t.offset,
                t.text,
                "no bytes after the length (gdb does not print them)",
            ));
        }
        self.bytes(n, t)
    }

    /// `DW_OP_const_type`'s value: `[01 00 00 00]`, or gdb's
    /// `4 byte block: 01 00 00 00`.
    fn const_value(&mut self) -> Result<Vec<u8>, Error> {
        if self.peek_kind(Kind::Block).is_some() {
            return self.block();
        }
        let t = self.word("expected a block `[hex bytes]`")?;
        let n = unsigned_in(t, Width::U8)?;
        if !(self.keyword("byte") && self.keyword("block:")) {
            return Err(syntax_error(t.offset, t.text, "expected `N byte block:`"));
        }
        self.bytes(n, t)
    }

    /// An entry value's nested expression: `[55]`, `[55] (DW_OP_reg5)`,
    /// `(DW_OP_reg5 RDI)`, or gdb's further indented lines.
    fn entry_value(
        &mut self,
        op: Token<'_>,
        label: Option<Label>,
        depth: usize,
    ) -> Result<Op, Error> {
        let nested = |p: &mut Self, stop| -> Result<Vec<u8>, Error> {
            let ops = p.sequence(stop, depth + 1)?;
            encode(&ops, p.syntax.encoding).map_err(|_| {
                syntax_error(
                    op.offset,
                    op.text,
                    "the nested expression cannot be encoded",
                )
            })
        };
        if self.peek_kind(Kind::Block).is_some() {
            let block = self.block()?;
            if let Some(open) = self.peek_kind(Kind::Open) {
                self.pos += 1;
                if nested(self, Stop::Close)? != block {
                    return Err(syntax_error(
                        open.offset,
                        open.text,
                        "the operations in parentheses do not encode to the block",
                    ));
                }
            }
            return Ok(Op::EntryValue(block));
        }
        if self.peek_kind(Kind::Open).is_some() {
            self.pos += 1;
            return Ok(Op::EntryValue(nested(self, Stop::Close)?));
        }
        match label {
            Some(l)
                if self
                    .peek_kind(Kind::Label)
                    .is_some_and(|t| t.column > l.column) =>
            {
                Ok(Op::EntryValue(nested(self, Stop::Outdent(l.column))?))
            }
            _ => Err(syntax_error(
                op.offset,
                op.text,
                "expected a block `[hex bytes]` or `(operations)`",
            )),
        }
    }

    /// A branch's displacement: `-4` (the DWARF operand), or the target's
    /// byte offset in gdb's listing (`DW_OP_bra 4`, `DW_OP_skip to 5`).
    fn branch(&mut self, label: Option<Label>, done: &[Op]) -> Result<i16, Error> {
        let to = self.keyword("to");
        if !to && label.is_none() {
            return Ok(self.signed(Width::I16)? as i16);
        }
        let t = self.word("expected a byte offset")?;
        let target = unsigned_in(t, Width::U64)?;
        let here = match label {
            Some(l) => l.offset,
            None => encode(done, self.syntax.encoding)
                .map_err(|_| syntax_error(t.offset, t.text, "cannot count the bytes before"))?
                .len() as u64,
        };
        // A branch is 3 bytes: the displacement counts from its end.
        let d = i128::from(target) - i128::from(here) - 3;
        i16::try_from(d)
            .map_err(|_| syntax_error(t.offset, t.text, "branch target too far for 16 bits"))
    }

    /// Operations up to `stop`.
    fn sequence(&mut self, stop: Stop, depth: usize) -> Result<Vec<Op>, Error> {
        if depth > MAX_NESTING {
            return Err(syntax_error(self.end, "", "entry values nested too deeply"));
        }
        let mut ops = Vec::new();
        let mut label = None;
        while let Some(tok) = self.peek() {
            match tok.kind {
                Kind::Close => {
                    self.pos += 1;
                    match stop {
                        Stop::Close => return Ok(ops),
                        // llvm-dwarfdump's attribute ends with `)`.
                        _ if self.pos == self.tokens.len() && depth == 0 => return Ok(ops),
                        _ => return Err(syntax_error(tok.offset, tok.text, "unmatched `)`")),
                    }
                }
                Kind::Label => {
                    if let Stop::Outdent(c) = stop {
                        if tok.column <= c {
                            return Ok(ops);
                        }
                    }
                    self.pos += 1;
                    let offset = tok.text.trim_end_matches(':');
                    label = Some(Label {
                        offset: parse_hex_digits(offset).ok_or_else(|| {
                            syntax_error(tok.offset, tok.text, "byte offset too large")
                        })?,
                        column: tok.column,
                    });
                    continue;
                }
                Kind::Open if ops.is_empty() && depth == 0 && stop == Stop::End => {
                    // llvm-dwarfdump's `(DW_OP_reg5 RDI)` attribute value.
                    self.pos += 1;
                    ops.extend(self.sequence(Stop::Close, depth)?);
                    continue;
                }
                Kind::Angle if tok.text == "<empty>" && depth == 0 => {
                    // llvm-dwarfdump's empty expression.
                    self.pos += 1;
                    continue;
                }
                Kind::Angle if tok.text == "<decoding error>" => {
                    self.pos += 1;
                    let mut bytes = Vec::new();
                    while let Some(b) = self.peek_kind(Kind::Word).and_then(|t| parse_byte(t.text))
                    {
                        bytes.push(b);
                        self.pos += 1;
                    }
                    let decoded = decode(&bytes, self.syntax.encoding)?;
                    ops.extend(decoded.into_iter().map(|(_, op)| op));
                    continue;
                }
                _ => {}
            }
            self.pos += 1;
            if let Some(op) = self.operation(tok, label.take(), &ops, depth)? {
                ops.push(op);
            }
        }
        Ok(ops)
    }

    /// One operation named by `tok`; `None` for `DW_OP_LLVM_user`, which
    /// only introduces the next one.
    fn operation(
        &mut self,
        tok: Token<'_>,
        label: Option<Label>,
        done: &[Op],
        depth: usize,
    ) -> Result<Option<Op>, Error> {
        let (offset, t) = (tok.offset, tok.text);
        let name = match t.strip_prefix("DW_OP_") {
            Some(n) if tok.kind == Kind::Word => n,
            _ => {
                return Err(syntax_error(
                    offset,
                    t,
                    "expected an operation name `DW_OP_...`",
                ))
            }
        };
        if name == "LLVM_user" {
            return Ok(None);
        }
        if name == "composite" {
            return Ok(Some(Op::Composite));
        }
        let name = gnu_name(name).or_else(|| dwarf6_name(name)).unwrap_or(name);
        let ext_name = name.strip_prefix("LLVM_");
        let base = ext_name.unwrap_or(name);
        use Width::*;
        let op = match base {
            "form_aspace_address" => Some(Op::FormAspaceAddress),
            "push_lane" => Some(Op::PushLane),
            "push_iteration" => Some(Op::PushIteration),
            "offset" => Some(Op::Offset),
            "offset_uconst" => Some(Op::OffsetUconst(self.unsigned(U64)?)),
            "bit_offset" => Some(Op::BitOffset),
            "call_frame_entry_reg" => Some(Op::CallFrameEntryReg(self.register()?)),
            "undefined" => Some(Op::Undefined),
            "aspace_bregx" => Some(Op::AspaceBregx {
                register: self.register()?,
                offset: self.signed(I64)?,
            }),
            "aspace_implicit_pointer" => Some(Op::AspaceImplicitPointer {
                die: self.unsigned(U64)?,
                offset: self.signed(I64)?,
            }),
            "piece_end" => Some(Op::PieceEnd),
            "extend" => Some(Op::Extend {
                bit_size: self.unsigned(U64)?,
                count: self.unsigned(U64)?,
            }),
            "select_bit_piece" => Some(Op::SelectBitPiece {
                bit_size: self.unsigned(U64)?,
                count: self.unsigned(U64)?,
            }),
            "overlay" => Some(Op::Overlay),
            "bit_overlay" => Some(Op::BitOverlay),
            // `DW_OP_nop` is the standard operation; only the `LLVM_` spelling
            // is the DW_OP_LLVM_user one.
            "nop" if ext_name.is_some() => Some(Op::LlvmNop),
            _ => None,
        };
        let op = match (op, ext_name) {
            (Some(op), _) => op,
            (None, Some(_)) => {
                return Err(syntax_error(offset, t, "unknown LLVM extension operation"))
            }
            (None, None) => match name {
                "addr" => Op::Addr(self.unsigned(U64)?),
                "deref" => Op::Deref,
                "const1u" => Op::Const1u(self.unsigned(U8)? as u8),
                "const1s" => Op::Const1s(self.signed(I8)? as i8),
                "const2u" => Op::Const2u(self.unsigned(U16)? as u16),
                "const2s" => Op::Const2s(self.signed(I16)? as i16),
                "const4u" => Op::Const4u(self.unsigned(U32)? as u32),
                "const4s" => Op::Const4s(self.signed(I32)? as i32),
                "const8u" => Op::Const8u(self.unsigned(U64)?),
                "const8s" => Op::Const8s(self.signed(I64)?),
                "constu" | "uconst" => Op::Constu(self.unsigned(U64)?),
                "consts" => Op::Consts(self.signed(I64)?),
                "dup" => Op::Dup,
                "drop" => Op::Drop,
                "over" => Op::Over,
                "pick" => Op::Pick(self.unsigned(U8)? as u8),
                "swap" => Op::Swap,
                "rot" => Op::Rot,
                "xderef" => Op::Xderef,
                "abs" => Op::Abs,
                "and" => Op::And,
                "div" => Op::Div,
                "minus" => Op::Minus,
                "mod" => Op::Mod,
                "mul" => Op::Mul,
                "neg" => Op::Neg,
                "not" => Op::Not,
                "or" => Op::Or,
                "plus" => Op::Plus,
                "plus_uconst" => Op::PlusUconst(self.unsigned(U64)?),
                "shl" => Op::Shl,
                "shr" => Op::Shr,
                "shra" => Op::Shra,
                "xor" => Op::Xor,
                "bra" => Op::Bra(self.branch(label, done)?),
                "eq" => Op::Eq,
                "ge" => Op::Ge,
                "gt" => Op::Gt,
                "le" => Op::Le,
                "lt" => Op::Lt,
                "ne" => Op::Ne,
                "skip" => Op::Skip(self.branch(label, done)?),
                "regx" => Op::Regx(self.register()?),
                "fbreg" => Op::Fbreg(self.signed(I64)?),
                "bregx" => self.bregx()?,
                "piece" => {
                    let size = self.unsigned(U64)?;
                    self.unit_note("bytes");
                    Op::Piece(size)
                }
                "deref_size" => Op::DerefSize(self.unsigned(U8)? as u8),
                "xderef_size" => Op::XderefSize(self.unsigned(U8)? as u8),
                "nop" => Op::Nop,
                "GNU_uninit" => Op::GnuUninit,
                "push_object_address" => Op::PushObjectAddress,
                "call2" => Op::Call2(self.gdb_hex("offset", U16)? as u16),
                "call4" => Op::Call4(self.gdb_hex("offset", U32)? as u32),
                "call_ref" => Op::CallRef(self.gdb_hex("offset", U64)?),
                "GNU_parameter_ref" => Op::GnuParameterRef(self.gdb_hex("offset", U32)? as u32),
                "GNU_variable_value" => Op::GnuVariableValue(self.gdb_hex("offset", U64)?),
                "form_tls_address" => Op::FormTlsAddress,
                "call_frame_cfa" => Op::CallFrameCfa,
                "bit_piece" => {
                    self.keyword("size");
                    let size = self.unsigned(U64)?;
                    self.keyword("offset");
                    let offset = self.unsigned(U64)?;
                    self.unit_note("bits");
                    Op::BitPiece { size, offset }
                }
                "implicit_value" => Op::ImplicitValue(self.implicit_value()?),
                "stack_value" => Op::StackValue,
                "implicit_pointer" => {
                    let die = if self.peek_kind(Kind::Angle).is_some() {
                        self.base_type()?
                    } else {
                        self.gdb_hex("DIE", U64)?
                    };
                    self.keyword("offset");
                    Op::ImplicitPointer {
                        die,
                        offset: self.signed(I64)?,
                    }
                }
                "addrx" => Op::Addrx(self.unsigned(U64)?),
                "constx" => Op::Constx(self.unsigned(U64)?),
                "entry_value" => self.entry_value(tok, label, depth)?,
                "const_type" => Op::ConstType {
                    type_offset: self.base_type()?,
                    value: self.const_value()?,
                },
                "regval_type" => {
                    if self.peek_kind(Kind::Angle).is_some() {
                        // gdb: `<int [0x2a]> [$rdi]`, the register by name only.
                        let type_offset = self.base_type()?;
                        let note = self.next()?;
                        let name = match note.kind {
                            Kind::Block => note
                                .text
                                .strip_prefix("[$")
                                .and_then(|n| n.strip_suffix(']')),
                            _ => None,
                        };
                        let Some(name) = name else {
                            return Err(syntax_error(
                                note.offset,
                                note.text,
                                "expected a register `[$name]` after the type",
                            ));
                        };
                        let register = self.resolve(name).ok_or_else(|| {
                            syntax_error(note.offset, note.text, "unknown register name")
                        })?;
                        Op::RegvalType {
                            register: u64::from(register),
                            type_offset,
                        }
                    } else {
                        Op::RegvalType {
                            register: self.register()?,
                            type_offset: self.base_type()?,
                        }
                    }
                }
                "deref_type" | "xderef_type" => {
                    let (size, type_offset) = if self.peek_kind(Kind::Angle).is_some() {
                        // gdb: `<int [0x2a]> 4`.
                        let ty = self.base_type()?;
                        (self.unsigned(U8)? as u8, ty)
                    } else {
                        let size = self.unsigned(U8)? as u8;
                        (size, self.base_type()?)
                    };
                    if name == "deref_type" {
                        Op::DerefType { size, type_offset }
                    } else {
                        Op::XderefType { size, type_offset }
                    }
                }
                "convert" => Op::Convert(self.base_type()?),
                "reinterpret" => Op::Reinterpret(self.base_type()?),
                _ => self
                    .numbered(name)?
                    .ok_or_else(|| syntax_error(offset, t, "unknown operation"))?,
            },
        };
        Ok(Some(op))
    }

    /// `DW_OP_litN`, `DW_OP_regN`, `DW_OP_bregN`.
    fn numbered(&mut self, name: &str) -> Result<Option<Op>, Error> {
        let split = |prefix: &str| -> Option<u8> {
            let n = name.strip_prefix(prefix)?;
            if n.is_empty()
                || !n.bytes().all(|b| b.is_ascii_digit())
                || (n.len() > 1 && n.starts_with('0'))
            {
                return None;
            }
            n.parse::<u8>().ok().filter(|&v| v < 32)
        };
        if let Some(n) = split("lit") {
            return Ok(Some(Op::Lit(n)));
        }
        if let Some(n) = split("reg") {
            self.register_note(u64::from(n))?;
            return Ok(Some(Op::Reg(n)));
        }
        if let Some(n) = split("breg") {
            return Ok(Some(Op::Breg(n, self.base_offset(u64::from(n))?)));
        }
        Ok(None)
    }
}

/// Deepest nesting of entry values in text.
const MAX_NESTING: usize = 64;

fn check_unsigned(t: Token<'_>, v: u64, width: Width) -> Result<u64, Error> {
    let max = match width {
        Width::U8 => u8::MAX.into(),
        Width::U16 => u16::MAX.into(),
        Width::U32 => u32::MAX.into(),
        _ => u64::MAX,
    };
    if v > max {
        return Err(syntax_error(
            t.offset,
            t.text,
            "number too large for this operand",
        ));
    }
    Ok(v)
}

fn unsigned_in(t: Token<'_>, width: Width) -> Result<u64, Error> {
    let v = parse_u64(t.text).ok_or_else(|| {
        syntax_error(
            t.offset,
            t.text,
            "expected an unsigned number (decimal or 0x-hex)",
        )
    })?;
    check_unsigned(t, v, width)
}

fn signed_in(t: Token<'_>, width: Width) -> Result<i64, Error> {
    let v = parse_i64(t.text).ok_or_else(|| {
        syntax_error(
            t.offset,
            t.text,
            "expected a signed number (decimal or 0x-hex)",
        )
    })?;
    let (min, max) = match width {
        Width::I8 => (i8::MIN.into(), i8::MAX.into()),
        Width::I16 => (i16::MIN.into(), i16::MAX.into()),
        Width::I32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    };
    if v < min || v > max {
        return Err(syntax_error(
            t.offset,
            t.text,
            "number out of range for this operand",
        ));
    }
    Ok(v)
}
