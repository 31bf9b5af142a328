//! Compiles `src/subtarget.cpp`, the small C++ check of CPU and feature names that the LLVM
//! C API lacks, and `src/fatal.cpp`, LLVM's fatal-error handlers, against the headers of the LLVM that `llvm-sys` found (its `llvm-config`
//! arrives as `DEP_LLVM_19_CONFIG_PATH`, set from `LLVM_SYS_191_PREFIX`).

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/subtarget.cpp");
    println!("cargo:rerun-if-changed=src/fatal.cpp");
    println!("cargo:rerun-if-changed=src/cfg.cpp");
    println!("cargo:rerun-if-env-changed=DEP_LLVM_19_CONFIG_PATH");
    let llvm_config = match env::var("DEP_LLVM_19_CONFIG_PATH") {
        Ok(path) => path,
        Err(_) => fail("llvm-sys did not report its llvm-config (DEP_LLVM_19_CONFIG_PATH)"),
    };
    let output = match Command::new(&llvm_config).arg("--cxxflags").output() {
        Ok(output) if output.status.success() => output,
        Ok(output) => fail(&format!(
            "{llvm_config} --cxxflags failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )),
        Err(e) => fail(&format!("cannot run {llvm_config}: {e}")),
    };
    let cxxflags = String::from_utf8_lossy(&output.stdout).into_owned();

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("src/subtarget.cpp")
        .file("src/fatal.cpp")
        .file("src/cfg.cpp")
        .warnings(false);
    // Like llvm-sys, keep LLVM's own warning flags out: they may not suit this compiler.
    for flag in cxxflags.split_whitespace().filter(|f| !f.starts_with("-W")) {
        build.flag(flag);
    }
    build.compile("locus_llvm_cxx");
}

fn fail(message: &str) -> ! {
    eprintln!("locus-llvm build script: {message}");
    std::process::exit(1);
}
