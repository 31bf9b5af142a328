#!/bin/sh
# Seeds the `binary` fuzz target's corpus: the DWARF fixtures built with clang-19 and gcc
# (DWARF 4 and 5, -O0 and -O2; clang also for i386 and AArch64), as small static
# executables without libc whose code and data were dropped (llvm-objcopy-19
# --only-keep-debug): 2-6 KB each, the DWARF, section headers and symbols left.
# Writes crates/dwarf/fuzz/corpus/binary/ (ignored by git), where `cargo fuzz run binary`
# looks, from wherever it is run.
set -eu
cd "$(dirname "$0")"
out=corpus/binary
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags="-nostdlib -static -Wl,-e,main -Wl,--build-id=none -Wl,-N -fno-asynchronous-unwind-tables -fno-stack-protector"
build() { # NAME COMPILER ARGS...
    name=$1
    shift
    # -N (one RWX segment, no page alignment) keeps the files small; ld warns about it.
    "$@" $flags -o "$tmp/$name" 2>/dev/null
    llvm-objcopy-19 --only-keep-debug -R .comment -R .debug_frame "$tmp/$name" "$out/$name"
}
for src in ../fixtures/*.c; do
    base=$(basename "$src" .c)
    for dwarf in 4 5; do
        for opt in O0 O2; do
            build "$base-clang-dwarf$dwarf-$opt" clang-19 -gdwarf-$dwarf -$opt -fcf-protection=none "$src"
            build "$base-gcc-dwarf$dwarf-$opt" gcc -gdwarf-$dwarf -$opt -fcf-protection=none "$src"
        done
    done
    for target in i386-linux-gnu aarch64-linux-gnu; do
        build "$base-clang-$target-O2" clang-19 --target=$target -fuse-ld=lld -g -O2 "$src"
    done
done
ls -l "$out" | awk 'NR > 1 { n++; s += $5 } END { print n " seeds, " s " bytes in '"$out"'" }'
