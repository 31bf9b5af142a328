# The whole set-up on a fresh machine is one of these two commands.
.PHONY: run test deps

deps:
	@scripts/install-deps

# The main job: a walk through every contract Locus implements.
run: deps
	cargo run --release --quiet -p locus-cli -- tour

# Format check, lints as errors (clippy's incompatible_msrv included: rust-version is set),
# with every feature (locus-memref's ndarray is the one no crate turns on), and locus-memref
# without it; the libraries and examples (the pass plugin's cdylib, which its tests load;
# the GC runtime's libraries, which the tests link programs against; the examples
# ci-checks runs, whose build is then fresh), the GC runtime for AArch64 with the options
# of crates/gc/tests/support/cross_aarch64.rs (here, where the host's build scripts it
# needs are built already: about 45 s less than in a directory of its own), every test;
# then scripts/ci-checks: docs with warnings as errors, the no_std cores on a
# target without std, the workspace on the minimum Rust version, every fuzz target, the
# AArch64-only code, and every example run.
test: deps
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --all-features -- -D warnings
	cargo clippy -p locus-memref --all-targets -- -D warnings
	cargo build --workspace --lib --examples --all-features
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc cargo build \
	  --target aarch64-unknown-linux-gnu -p locus-gc-runtime \
	  --config 'profile.dev.package.locus-gc-runtime.opt-level=2' \
	  --config 'profile.dev.debug="line-tables-only"'
	LOCUS_TEST_GC_RUNTIME_DIR="$(abspath $(or $(CARGO_TARGET_DIR),target))/debug" \
	LOCUS_TEST_GC_RUNTIME_AARCH64_DIR="$(abspath $(or $(CARGO_TARGET_DIR),target))/aarch64-unknown-linux-gnu/debug" \
	  cargo test --workspace --all-features
	scripts/ci-checks
