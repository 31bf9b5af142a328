# The whole set-up on a fresh machine is one of these two commands.
.PHONY: run test deps

deps:
	@scripts/install-deps

# The main job: a walk through every contract Locus implements.
run: deps
	cargo run --release --quiet -p locus-cli -- tour

# Format check, lints as errors (clippy's incompatible_msrv included: rust-version is set),
# the libraries and examples in the dev profile (the pass plugin's cdylib, which its tests
# load; the examples ci-checks runs, whose build is then fresh: `cargo test` builds its
# dependencies in the test profile, which shares nothing with the dev one), every test;
# then scripts/ci-checks: docs with warnings as errors, the no_std cores on a
# target without std, the workspace on the minimum Rust version, every fuzz target, the
# AArch64-only code, and every example run.
test: deps
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p locus-memref --all-targets --features ndarray -- -D warnings
	cargo build --workspace --lib --examples
	cargo test --workspace
	cargo test -p locus-memref --features ndarray
	scripts/ci-checks
