//! DWARF expressions as text: the parser ([`parse_text`], [`parse_text_with`]: the crate's
//! own spelling, llvm-dwarfdump's and gdb's) and the printer ([`to_text`], the crate's
//! spelling, which the parser reads back).

mod parse;
mod print;

pub use parse::{parse_text, parse_text_with, Syntax};
pub use print::to_text;
