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
# ci-checks runs, whose build is then fresh), every test;
# then scripts/ci-checks: docs with warnings as errors, the no_std cores on a
# target without std, the workspace on the minimum Rust version, every fuzz target, the
# AArch64-only code, and every example run.
test: deps
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --all-features -- -D warnings
	cargo clippy -p locus-memref --all-targets -- -D warnings
	cargo build --workspace --lib --examples --all-features
	LOCUS_TEST_GC_RUNTIME_DIR="$(abspath $(or $(CARGO_TARGET_DIR),target))/debug" \
	  cargo test --workspace --all-features
	scripts/ci-checks
