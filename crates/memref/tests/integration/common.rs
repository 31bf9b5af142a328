//! Shared by the kernel tests: fixtures compiled once per test process.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use locus_memref::{compile, Library, Signature};

/// The fixture's source.
pub fn source(fixture: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(fixture);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture compiled by mlir-opt-19/mlir-translate-19/llc-19/clang-19 and
/// opened; built once per process and kept open for the process's life.
pub fn library(fixture: &str) -> &'static Library {
    static LIBS: OnceLock<Mutex<HashMap<String, &'static Library>>> = OnceLock::new();
    let mut libs = LIBS.get_or_init(Default::default).lock().unwrap();
    if let Some(lib) = libs.get(fixture) {
        return lib;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("memref-{}-{fixture}.so", std::process::id()));
    compile::compile_str(&source(fixture), &out)
        .unwrap_or_else(|e| panic!("compiling {fixture}: {e}"));
    // SAFETY: a library we just built from a fixture.
    let lib: &'static Library = Box::leak(Box::new(unsafe { Library::open(&out) }.unwrap()));
    let _ = std::fs::remove_file(&out);
    libs.insert(fixture.to_string(), lib);
    lib
}

/// The signature of `func.func @name` in the fixture.
pub fn signature(fixture: &str, name: &str) -> Signature {
    Signature::from_mlir(&source(fixture), name).unwrap()
}

/// A dynamic function from a fixture, with its signature from the source.
pub fn function(fixture: &str, name: &str) -> locus_memref::Function<'static> {
    // SAFETY: the signature comes from the source the library was built from.
    unsafe { library(fixture).function(name, signature(fixture, name)) }.unwrap()
}
