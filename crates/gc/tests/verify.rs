//! The GC invariant verifier (spec 003, "Инварианты").
//!
//! - Every program in `fixtures/programs` verifies clean: they are the positive cases.
//! - Every fixture in `fixtures/verify` is valid LLVM IR (`opt-19 -passes=verify` accepts
//!   it; this test does not skip when opt-19 is missing) that breaks exactly one rule. Its
//!   header says which:
//!
//!   ```text
//!   ; rule: addrspacecast
//!   ; function: bad
//!   ; instruction: %t = addrspacecast ptr addrspace(11) %d to ptr addrspace(10)
//!   ```
//!
//!   with one `; instruction:` line per expected violation, in order, each a part of the
//!   instruction as LLVM prints it. The verifier must report exactly those violations, all
//!   of that rule and in that function, and each message line must name the instruction.
//!   Most fixtures also hold a function `@ok` doing the allowed counterpart, which must not
//!   be reported.
//! - Every rule has a fixture, and `run` refuses a module with violations.

mod common;

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::process::Command;

use locus_gc::run::prepare;
use locus_gc::verify::{verify_module, Rule, Severity, VerifyOptions};
use locus_gc::Error;
use locus_llvm::{Context, Module};

use common::ll_files;

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What a negative fixture's header promises.
struct Expected {
    rule: Rule,
    function: String,
    instructions: Vec<String>,
}

fn expected(path: &Path, text: &str) -> Expected {
    let field = |key: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(&format!("; {key}: ")))
            .map(|v| v.trim().to_string())
            .collect()
    };
    let one = |key: &str| -> String {
        let v = field(key);
        assert_eq!(v.len(), 1, "{}: want one `; {key}:` line", path.display());
        v[0].clone()
    };
    let rule_name = one("rule");
    let rule = Rule::from_name(&rule_name)
        .unwrap_or_else(|| panic!("{}: unknown rule `{rule_name}`", path.display()));
    let instructions = field("instruction");
    assert!(
        !instructions.is_empty(),
        "{}: no `; instruction:` line",
        path.display()
    );
    Expected {
        rule,
        function: one("function"),
        instructions,
    }
}

/// `opt-19 -passes=verify` must accept the file.
fn opt_verify(path: &Path) {
    let out = match Command::new("opt-19")
        .args(["-passes=verify", "-disable-output"])
        .arg(path)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => panic!(
            "`opt-19` was not found on PATH: the negative fixtures are checked to be valid \
             LLVM IR with it (Debian package llvm-19; scripts/install-deps installs it). \
             This test does not skip."
        ),
        Err(e) => panic!("cannot run opt-19: {e}"),
    };
    assert!(
        out.status.success(),
        "{} is not valid LLVM IR, so it cannot test the GC verifier:\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every program passes the strict check (warnings aside).
#[test]
fn every_program_verifies_clean() {
    for path in ll_files("fixtures/programs") {
        let text = read(&path);
        let ctx = Context::new();
        let module = Module::parse_ir(&ctx, &path.display().to_string(), &text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Warnings are allowed (pgcstack_late_block.ll has one on purpose).
        let violations: Vec<_> = verify_module(&module, VerifyOptions::STRICT)
            .into_iter()
            .filter(|v| v.is_error())
            .collect();
        assert!(
            violations.is_empty(),
            "{} should verify clean:\n{}",
            path.display(),
            violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn every_negative_fixture_breaks_exactly_its_rule() {
    let mut counts: Vec<(Rule, usize)> = Rule::ALL.iter().map(|&r| (r, 0)).collect();
    for path in ll_files("fixtures/verify") {
        opt_verify(&path);
        let text = read(&path);
        let want = expected(&path, &text);
        let ctx = Context::new();
        let module = Module::parse_ir(&ctx, &path.display().to_string(), &text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        module
            .verify()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let got = verify_module(&module, VerifyOptions::STRICT);
        let listing = got
            .iter()
            .map(|v| format!("  {v}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            got.len(),
            want.instructions.len(),
            "{}: want {} violation(s) of {} in @{}, got:\n{listing}",
            path.display(),
            want.instructions.len(),
            want.rule,
            want.function
        );
        for (v, instruction) in got.iter().zip(&want.instructions) {
            assert_eq!(v.rule, want.rule, "{}:\n{listing}", path.display());
            assert_eq!(v.function, want.function, "{}:\n{listing}", path.display());
            assert!(
                v.instruction.contains(instruction.as_str()),
                "{}: want the instruction `{instruction}`, got:\n{listing}",
                path.display()
            );
            let line = v.to_string();
            assert!(!line.contains('\n'), "{}: {line:?}", path.display());
            assert!(
                line.starts_with(&format!(
                    "{}: function @{}, instruction `{}`: ",
                    want.rule, want.function, v.instruction
                )),
                "{}: {line}",
                path.display()
            );
            assert!(!v.message.is_empty());
        }
        if let Some(c) = counts.iter_mut().find(|(r, _)| *r == want.rule) {
            c.1 += 1;
        }
    }
    let summary: Vec<String> = counts.iter().map(|(r, n)| format!("{r}: {n}")).collect();
    println!("negative fixtures per rule: {}", summary.join(", "));
    for (rule, n) in counts {
        assert!(n > 0, "no negative fixture for rule {rule}");
    }
}

/// The messages say what the cast was and what is allowed.
#[test]
fn cast_messages_name_both_spaces_and_the_allowed_casts() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verify/cast_derived_to_tracked.ll");
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "cast", read(&path)).unwrap_or_else(|e| panic!("{e}"));
    let got = verify_module(&module, VerifyOptions::STRICT);
    assert_eq!(
        got[0].to_string(),
        "addrspacecast: function @bad, instruction `%t = addrspacecast ptr addrspace(11) %d \
         to ptr addrspace(10)`: addrspacecast from Derived (11) to Tracked (10) is not allowed \
         (allowed: 0 -> 10/11/12, 10 -> 11, 10 -> 12); a decayed pointer never goes back: the \
         root placement could not find its base"
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/verify/cast_derived_to_callee_rooted.ll");
    let module = Module::parse_ir(&ctx, "cast2", read(&path)).unwrap_or_else(|e| panic!("{e}"));
    let got = verify_module(&module, VerifyOptions::STRICT);
    assert!(
        got[0]
            .message
            .contains("Derived -> CalleeRooted is forbidden explicitly"),
        "{}",
        got[0]
    );
}

#[test]
fn only_the_pgcstack_rule_is_a_warning() {
    for rule in Rule::ALL {
        let want = if rule == Rule::PgcstackEntry {
            Severity::Warning
        } else {
            Severity::Error
        };
        assert_eq!(rule.severity(), want, "{rule}");
        assert_eq!(Rule::from_name(rule.name()), Some(rule));
        assert!(!rule.summary().is_empty());
    }
}

/// `run` verifies first (leniently, as Julia does): a module breaking an invariant is
/// refused with every error, and not lowered or run.
#[test]
fn run_refuses_a_module_with_violations() {
    let ir = r#"
        declare ptr @julia.get_pgcstack()
        declare noalias nonnull ptr addrspace(10) @locus_gc_alloc(i64, i64)
        define i64 @main() {
        entry:
          %pgcstack = call ptr @julia.get_pgcstack()
          %o = call ptr addrspace(10) @locus_gc_alloc(i64 0, i64 16)
          %f = getelementptr i8, ptr addrspace(10) %o, i64 8
          %bits = ptrtoint ptr addrspace(10) %f to i64
          ret i64 %bits
        }
    "#;
    match prepare("bad.ll", ir, "main") {
        Err(Error::Invariants(v)) => {
            let rules: Vec<Rule> = v.iter().map(|v| v.rule).collect();
            // Lenient, as Julia's own verifier: the GEP on a Tracked pointer passes.
            assert_eq!(rules, [Rule::IntPtrCast]);
            let text = Error::Invariants(v).to_string();
            assert!(
                text.starts_with("1 GC invariant violation(s), not lowered:\n  int-ptr-cast: "),
                "{text}"
            );
        }
        other => panic!("want Error::Invariants, got {other:?}"),
    }
}

/// A warning alone does not stop `run` at verification (this module then fails in the JIT,
/// which is the warning's point: `@helper` was not lowered, so its `julia.get_pgcstack` call
/// is left unresolved).
#[test]
fn run_does_not_refuse_a_module_with_only_warnings() {
    let ir = r#"
        declare ptr @julia.get_pgcstack()
        define i64 @helper() {
        entry:
          br label %body
        body:
          %pgcstack = call ptr @julia.get_pgcstack()
          ret i64 5
        }
        define i64 @main() {
        entry:
          %pgcstack = call ptr @julia.get_pgcstack()
          %v = call i64 @helper()
          ret i64 %v
        }
    "#;
    let ctx = Context::new();
    let module = Module::parse_ir(&ctx, "warn.ll", ir).unwrap_or_else(|e| panic!("{e}"));
    let got = verify_module(&module, VerifyOptions::STRICT);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].rule, Rule::PgcstackEntry);
    assert!(!got[0].is_error());
    let result = prepare("warn.ll", ir, "main");
    assert!(
        !matches!(result, Err(Error::Invariants(_))),
        "{:?}",
        result.err()
    );
}
