# The whole set-up on a fresh machine is one of these two commands.
.PHONY: run test deps

deps:
	@scripts/install-deps

# The main job: a walk through every contract Locus implements.
run: deps
	cargo run --release --quiet -p locus-cli -- tour

# Format check, lints as errors, the no_std build of the stack map core, the GC runtime
# without LLVM, every test.
test: deps
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p locus-memref --all-targets --features ndarray -- -D warnings
	cargo check -p locus-stackmap --no-default-features
	cargo check -p locus-gc --no-default-features
	cargo test --workspace
	cargo test -p locus-memref --features ndarray
