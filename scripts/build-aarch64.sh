#!/usr/bin/env bash
# A static Linux aarch64 build of percentes (recorder and analyzer), cross-compiled on an x86_64
# Debian host from Debian's packages alone (issue 57 item 3), then run under qemu-user to show it
# is a working program: `--version`, and `verify` and `analyze` of a golden journal (the whole
# analyzer, polars included). Prints the sizes for BENCHMARKS.md ("A binary to ship").
#
#   scripts/build-aarch64.sh                 # the image's profile (dist: LTO, one codegen unit)
#   PROFILE=release scripts/build-aarch64.sh # the release profile (minutes, not tens of minutes)
#   HOST_BIN=PATH ...                         # the host build whose report it must equal
#
# Needs: apt-get install clang lld qemu-user-static; Debian's arm64 musl headers, which the
# script unpacks from musl-dev:arm64 (dpkg --add-architecture arm64 && apt-get update, once);
# the Rust target aarch64-unknown-linux-musl (added when missing). The recorder is not run:
# qemu-user does not pass io_uring through, so a recording needs an aarch64 machine.
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-musl
profile=${PROFILE:-dist}
sysroot=target/aarch64-musl-sysroot
for tool in clang ld.lld llvm-ar qemu-aarch64-static; do
    command -v "$tool" >/dev/null || { echo "$tool missing: apt-get install clang lld qemu-user-static" >&2; exit 1; }
done
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

# The C library's headers for the C in the tree (aws-lc, zstd, lz4, blake3's C): Debian's
# musl-dev for arm64, unpacked, not installed. The libraries themselves come with Rust's target
# (self-contained musl), so only the headers are read from here.
if [ ! -d "$sysroot/usr/include/aarch64-linux-musl" ]; then
    dpkg --print-foreign-architectures | grep -qx arm64 ||
        { echo "arm64 packages unknown to apt: dpkg --add-architecture arm64 && apt-get update" >&2; exit 1; }
    mkdir -p "$sysroot"
    (cd "$sysroot" && apt-get download musl-dev:arm64 >/dev/null && dpkg-deb -x musl-dev_*_arm64.deb . && rm musl-dev_*_arm64.deb)
fi

# clang as the cross C compiler: aarch64 code, musl's headers, clang's own (stddef.h, arm_neon.h).
cc_wrapper="$PWD/target/aarch64-musl-clang"
cat >"$cc_wrapper" <<EOF
#!/bin/sh
exec clang --target=aarch64-linux-musl -nostdinc -isystem "$(clang -print-resource-dir)/include" \\
    -isystem "$PWD/$sysroot/usr/include/aarch64-linux-musl" "\$@"
EOF
chmod +x "$cc_wrapper"

start=$(date +%s)
CC_aarch64_unknown_linux_musl="$cc_wrapper" AR_aarch64_unknown_linux_musl=llvm-ar \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld \
    cargo build --profile "$profile" --locked -p percentes --target "$target"
built=$(( $(date +%s) - start ))
bin="target/$target/$profile/percentes"
file "$bin" | grep -q "ARM aarch64.*static" || { echo "$bin is not a static aarch64 executable: $(file "$bin")" >&2; exit 1; }
out=target/aarch64
rm -rf "$out" && mkdir -p "$out"
llvm-objcopy --only-keep-debug "$bin" "$out/percentes.debug"
llvm-objcopy --strip-all --add-gnu-debuglink="$out/percentes.debug" "$bin" "$out/percentes"
echo "== $profile build for $target: ${built} s"
echo "== binary: $(stat -c %s "$bin") bytes as built, $(stat -c %s "$out/percentes") stripped"

run=(qemu-aarch64-static "$out/percentes")
"${run[@]}" --version
"${run[@]}" verify golden/v1/sealed.pj
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
"${run[@]}" analyze golden/runs/demo-clean-delete-factor10.pj -o "$scratch/report" >/dev/null || status=$?
[ "$status" -le 2 ] || { echo "analyze under qemu exited $status" >&2; exit 1; }
# The same report as this host's own build would write: the analysis is the same on both.
host=${HOST_BIN:-target/release/percentes}
if [ -x "$host" ]; then
    "$host" analyze golden/runs/demo-clean-delete-factor10.pj -o "$scratch/host" >/dev/null || true
    if diff -q <(grep -v '"analyzer_commit"' "$scratch/report/report.json") \
            <(grep -v '"analyzer_commit"' "$scratch/host/report.json") >/dev/null; then
        echo "== report.json from aarch64 under qemu equals this host's (the commit line aside)"
    else
        echo "== report.json from aarch64 differs from this host's build: diff $scratch/report $scratch/host" >&2
        trap - EXIT
        exit 1
    fi
fi
echo "== the aarch64 build verifies and analyzes under qemu-user"
