//! `locus tour`: a walk through every contract Locus implements, on embedded samples.
//!
//! Each chapter shows its input, what Locus found in it, and the cross-check it made against
//! software nobody here wrote. A failed cross-check fails the tour (exit status 1).

mod dwarf;
mod gc;
mod jit;
mod memref;
mod root_stores;
mod sme;
mod stackmap;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use crate::Failure;

/// Arguments of `locus tour`.
#[derive(clap::Args)]
pub struct Args {
    /// Run only the chapter with this name (stackmap, gc, dwarf, memref, sme, jit).
    #[arg(long, value_name = "NAME")]
    chapter: Option<String>,
}

/// A chapter of the tour: a name, a title and what it does.
struct Chapter {
    name: &'static str,
    title: &'static str,
    run: fn(&mut Tour<'_>) -> Result<(), Failure>,
}

const CHAPTERS: &[Chapter] = &[
    Chapter {
        name: "stackmap",
        title: "Stack maps and patch points (spec 000, crate locus-stackmap)",
        run: stackmap::run,
    },
    Chapter {
        name: "gc",
        title: "Precise GC for any LLVM frontend, Julia-style (spec 003, crate locus-gc)",
        run: gc::run_chapter,
    },
    Chapter {
        name: "dwarf",
        title: "DWARF location descriptions on the stack (spec 001, crate locus-dwarf)",
        run: dwarf::run_chapter,
    },
    Chapter {
        name: "memref",
        title: "MLIR memrefs from Rust (spec 002, crate locus-memref)",
        run: memref::run_chapter,
    },
    Chapter {
        name: "sme",
        title: "AArch64 SME streaming mode and ZA (spec 004, crate locus-sme)",
        run: sme::run_chapter,
    },
    Chapter {
        name: "jit",
        title:
            "A JIT that keeps its stack maps: inline caches and deopt (spec 000, crate locus-llvm)",
        run: jit::run_chapter,
    },
];

/// What a chapter writes to, and where it may put scratch files.
pub struct Tour<'a> {
    out: &'a mut dyn Write,
    scratch: PathBuf,
    checks: usize,
}

impl Tour<'_> {
    /// Writes one line of the tour.
    fn line(&mut self, text: impl AsRef<str>) -> Result<(), Failure> {
        writeln!(self.out, "{}", text.as_ref()).map_err(|e| Failure::Message(e.to_string()))
    }

    /// A path for a scratch file of this tour run.
    fn scratch_file(&self, name: &str) -> PathBuf {
        self.scratch.join(name)
    }

    /// Records a passed cross-check and says so.
    fn passed(&mut self, what: impl AsRef<str>) -> Result<(), Failure> {
        self.checks += 1;
        self.line(format!("  check: {} .. ok", what.as_ref()))
    }
}

/// Runs an external tool and returns its standard output; a missing tool or a failure is
/// an error that names the command.
fn tool(program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, Failure> {
    use std::process::Stdio;
    let mut cmd = Command::new(program);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().map_err(|e| {
        Failure::Message(format!(
            "cannot run {program} ({e}); `make run` installs it via scripts/install-deps"
        ))
    })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())
            .map_err(|e| Failure::Message(format!("{program}: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| Failure::Message(format!("{program}: {e}")))?;
    if !output.status.success() {
        return Err(Failure::Message(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    String::from_utf8(output.stdout).map_err(|e| Failure::Message(format!("{program}: {e}")))
}

/// Runs the tour.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), Failure> {
    let chosen: Vec<&Chapter> = match &args.chapter {
        Some(name) => {
            let c = CHAPTERS
                .iter()
                .find(|c| c.name == name.as_str())
                .ok_or_else(|| {
                    let names: Vec<&str> = CHAPTERS.iter().map(|c| c.name).collect();
                    Failure::Message(format!(
                        "no chapter `{name}` (chapters: {})",
                        names.join(", ")
                    ))
                })?;
            vec![c]
        }
        None => CHAPTERS.iter().collect(),
    };
    // A fresh directory only this user can enter (mkdtemp's), not a predictable name in
    // the shared temporary directory: the tour writes objects and shared libraries there
    // and then loads one.
    let scratch = {
        use std::os::unix::fs::PermissionsExt;
        tempfile::Builder::new()
            .prefix("locus-tour-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|e| {
                Failure::Message(format!(
                    "{}: cannot make a private directory: {e}",
                    std::env::temp_dir().display()
                ))
            })?
    };
    let mut tour = Tour {
        out,
        scratch: scratch.path().to_path_buf(),
        checks: 0,
    };
    tour.line("Locus tour: the runtime side of LLVM's code-generation contracts")?;
    tour.line("=================================================================")?;
    let mut result = Ok(());
    for (i, c) in chosen.iter().enumerate() {
        tour.line("")?;
        let heading = format!("{}. {}", i + 1, c.title);
        tour.line(&heading)?;
        tour.line("-".repeat(heading.len()))?;
        result = (c.run)(&mut tour);
        if result.is_err() {
            break;
        }
    }
    drop(scratch);
    result?;
    let checks = tour.checks;
    tour.line("")?;
    tour.line(format!(
        "{} chapter(s), {checks} cross-checks passed.",
        chosen.len()
    ))
}
