# The whole set-up on a fresh machine is one of these two commands.
.PHONY: run test deps

deps:
	@scripts/install-deps

# The main job: a walk through every contract Locus implements.
run: deps
	cargo run --release --quiet -p locus-cli -- tour

# Format check; lints as errors, by the clippy of the minimum Rust version the workspace
# declares (rust-version), which so also checks that every target builds with it, and
# which does not change under the project as stable Rust adds lints; the libraries and examples in the dev profile (the pass plugin's cdylib, which its tests
# load; the examples ci-checks runs, whose build is then fresh: `cargo test` builds its
# dependencies in the test profile, which shares nothing with the dev one), every test;
# then scripts/ci-checks: docs with warnings as errors, the no_std cores on a
# target without std, every fuzz target, the AArch64-only code, and every example run.
MSRV := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
test: deps
	cargo fmt --all -- --check
	cargo +$(MSRV) clippy --locked --workspace --all-targets -- -D warnings
	cargo +$(MSRV) clippy --locked -p locus-memref --all-targets --features ndarray -- -D warnings
	cargo build --workspace --lib --examples
	cargo test --workspace
	cargo test -p locus-memref --features ndarray
	scripts/ci-checks
