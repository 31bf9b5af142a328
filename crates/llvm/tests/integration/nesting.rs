//! IR text nested deeper than LLVM's parser can recurse is refused before LLVM reads it,
//! naming the line and column; nesting up to the limit parses (on a test thread's 2 MiB
//! stack), whatever brackets strings and comments hold.

use locus_llvm::{Context, Error, Module, MAX_NESTING};

/// A global whose type nests `depth` structs.
fn nested_struct(depth: usize) -> String {
    format!(
        "; {{{{{{ in a comment\n@s = constant [4 x i8] c\"(((\\00\"\n@g = global {}i8{} zeroinitializer\n",
        "{ ".repeat(depth),
        " }".repeat(depth)
    )
}

/// A global initialised by `depth` nested constant expressions.
fn nested_constant(depth: usize) -> String {
    format!(
        "@g = global ptr {}null{}\n",
        "getelementptr (i8, ptr ".repeat(depth),
        ", i64 1)".repeat(depth)
    )
}

#[test]
fn nesting_up_to_the_limit_parses() {
    let ctx = Context::new();
    for text in [nested_struct(MAX_NESTING), nested_constant(MAX_NESTING)] {
        let module = Module::parse_ir(&ctx, "deep.ll", &text).unwrap_or_else(|e| panic!("{e}"));
        module.verify().unwrap_or_else(|e| panic!("{e}"));
        assert!(module.print().contains("@g = global"));
    }
}

#[test]
fn deeper_nesting_is_refused_where_it_starts() {
    let ctx = Context::new();
    for (text, column) in [
        // The struct's brackets start at column 13 of line 3, two characters each.
        (nested_struct(100_000), 13 + 2 * MAX_NESTING),
        // After `@g = global ptr ` (16 characters), `getelementptr (i8, ptr ` (23) per
        // level, its bracket the 15th.
        (nested_constant(100_000), 16 + 23 * MAX_NESTING + 15),
    ] {
        let line = if text.starts_with(';') { 3 } else { 1 };
        match Module::parse_ir(&ctx, "deep.ll", &text) {
            Err(Error::Parse { message }) => assert!(
                message.starts_with(&format!(
                    "deep.ll:{line}:{column}: error: brackets nested more than {MAX_NESTING} deep"
                )),
                "{message}"
            ),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a module nested 100 000 deep was parsed"),
        }
    }
}

#[test]
fn the_orc_jit_refuses_what_module_parsing_refuses() {
    // Jit::add_ir parses with LLVM itself: without the same checks, 100 000 levels
    // overflow LLVM's parser's stack and a bitcode magic with garbage behind it reaches
    // LLVM's bitcode reader.
    let mut jit = locus_llvm::jit::Jit::new().unwrap_or_else(|e| panic!("{e}"));
    let mut bitcode = b"BC\xC0\xDE".to_vec();
    bitcode.extend_from_slice(&[0xff; 64]);
    for (name, text) in [
        ("deep.ll", nested_struct(100_000).into_bytes()),
        ("damaged.bc", bitcode),
    ] {
        match jit.add_ir(name, &text) {
            Err(Error::Parse { message }) => {
                assert!(message.starts_with(name), "{message}");
                assert!(
                    message.contains("nested more than") || message.contains("at byte"),
                    "{message}"
                );
            }
            other => panic!("{name}: expected a parse error, got {other:?}"),
        }
    }
}
