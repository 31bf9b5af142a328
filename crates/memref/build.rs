//! Exports the test and bench executables' symbols to the dynamic loader, so
//! kernels loaded at run time can call `_mlir_ciface_*` callbacks defined in them.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic");
        println!("cargo:rustc-link-arg-benches=-Wl,--export-dynamic");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
