//! Compiles `src/shim.cpp`, the C++ half of the plugin (the passes LLVM's PassBuilder runs and
//! their diagnostics), against the headers of the LLVM that `llvm-sys` found: the same
//! `libLLVM-19.so` that opt-19 and clang-19 load, so the plugin brings no second LLVM.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.cpp");
    println!("cargo:rerun-if-env-changed=DEP_LLVM_19_CONFIG_PATH");
    let llvm_config = match env::var("DEP_LLVM_19_CONFIG_PATH") {
        Ok(path) => path,
        Err(_) => fail("llvm-sys did not report its llvm-config (DEP_LLVM_19_CONFIG_PATH)"),
    };
    let cxxflags = run(&llvm_config, "--cxxflags");
    let mut build = cc::Build::new();
    build.cpp(true).file("src/shim.cpp").warnings(false);
    // Like locus-llvm's build script: LLVM's own warning flags may not suit this compiler.
    for flag in cxxflags.split_whitespace().filter(|f| !f.starts_with("-W")) {
        build.flag(flag);
    }
    // A libLLVM built without RTTI has no typeinfo for the classes the shim derives from.
    if run(&llvm_config, "--has-rtti").trim() == "NO" {
        build.flag("-fno-rtti");
    }
    build.compile("locus_plugin_shim");
}

fn run(llvm_config: &str, arg: &str) -> String {
    match Command::new(llvm_config).arg(arg).output() {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        Ok(output) => fail(&format!(
            "{llvm_config} {arg} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )),
        Err(e) => fail(&format!("cannot run {llvm_config}: {e}")),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("locus-plugin build script: {message}");
    std::process::exit(1);
}
