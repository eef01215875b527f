#!/usr/bin/env bash
# Builds the image deploy/Containerfile describes, here, from nothing a registry serves, and runs
# the recorder from it against the embedded mock (issue 57 item 3). Needs Debian's musl-tools and
# podman (apt-get install musl-tools podman) and the Rust target x86_64-unknown-linux-musl (added
# when missing); root, for podman's host network. Prints what each step took and the sizes, for
# BENCHMARKS.md ("A binary to ship").
#
#   scripts/build-image.sh            # build, then run the recorder from the image
#   SKIP_RUN=1 scripts/build-image.sh # build only
#   PODMAN_RUNTIME=runc scripts/...   # a host whose cgroups are hybrid (v1 controllers beside
#                                     # v2), which crun refuses to run on (apt-get install runc)
#   CARGO_TARGET_DIR=DIR scripts/...  # cargo's target folder elsewhere (the image's context stays
#                                     # in target/image)
#
# The runs set their limits below the host's (`--ulimit`): where root lacks CAP_SYS_RESOURCE
# (a container or sandboxed VM), the runtime may not raise a limit to podman's defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
context=target/image
tag=percentes:latest
command -v musl-gcc >/dev/null || { echo "musl-gcc missing: apt-get install musl-tools" >&2; exit 1; }
command -v podman >/dev/null || { echo "podman missing: apt-get install podman" >&2; exit 1; }
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

# The static binary, in the `dist` profile (Cargo.toml: the release profile linked as one unit).
# C code in the dependency tree (blake3's assembly, aws-lc, the stack-growth crate) is compiled by
# musl's gcc wrapper for this target.
start=$(date +%s)
CC_x86_64_unknown_linux_musl=musl-gcc \
    cargo build --profile dist --locked -p percentes --target "$target"
built=$(( $(date +%s) - start ))
bin="${CARGO_TARGET_DIR:-target}/$target/dist/percentes"
file "$bin" | grep -q "static" || { echo "$bin is not statically linked: $(file "$bin")" >&2; exit 1; }
# Its relocations packed (.cargo/config.toml), unless a RUSTFLAGS of the caller's replaced that.
readelf -d "$bin" | grep -q "(RELR)" ||
    echo "warning: $bin has no packed relocations (DT_RELR), 1.6 MB more: RUSTFLAGS in the environment replaces .cargo/config.toml's" >&2

# Stripped for the image; the symbol table kept beside it, linked by build id and debuglink, for a
# crash report's addresses (objcopy --only-keep-debug, the GNU way), with the line tables rustc
# split out into percentes.dwp (the profile's split-debuginfo). Neither goes into the image.
rm -rf "$context" && mkdir -p "$context"
objcopy --only-keep-debug "$bin" "$context/percentes.debug"
objcopy --strip-all --add-gnu-debuglink="$context/percentes.debug" "$bin" "$context/percentes"
[ -f "$bin.dwp" ] && cp "$bin.dwp" "$context/percentes.dwp"

# kubectl from Debian's own package, unpacked (not installed, not downloaded from the internet).
(
    cd "$context"
    apt-get download kubernetes-client >/dev/null 2>&1
    dpkg-deb -x kubernetes-client_*.deb root
    cp root/usr/bin/kubectl kubectl
    rm -rf root kubernetes-client_*.deb
)
file "$context/kubectl" | grep -q "static" || { echo "Debian's kubectl is not static" >&2; exit 1; }

start=$(date +%s)
podman build --quiet -f deploy/Containerfile -t "$tag" "$context" >/dev/null
imaged=$(( $(date +%s) - start ))
echo "== dist build for $target: ${built} s"
echo "== binary: $(stat -c %s "$bin") bytes as built, $(stat -c %s "$context/percentes") stripped, symbols $(stat -c %s "$context/percentes.debug"), line tables $(stat -c %s "$context/percentes.dwp" 2>/dev/null || echo none)"
echo "== kubectl (Debian's kubernetes-client): $(stat -c %s "$context/kubectl") bytes"
echo "== image $tag built in ${imaged} s: $(podman image inspect "$tag" --format '{{.Size}}') bytes"
[ -n "${SKIP_RUN:-}" ] && exit 0

# The recorder from the image against the mock on the host: a short quick run, its journal
# written to a mounted folder, verified by the host's own build afterwards.
scratch=$(mktemp -d)
chmod 0777 "$scratch"
port=$(( 20000 + RANDOM % 20000 ))
"$context/percentes" mock --listen "127.0.0.1:$port" >/dev/null 2>&1 &
mock=$!
trap 'kill $mock 2>/dev/null; rm -rf "$scratch"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
podman_run=(podman ${PODMAN_RUNTIME:+--runtime "$PODMAN_RUNTIME"} run --rm
    --ulimit nofile=16384:16384 --ulimit nproc=4096:4096)
# Exit 2 is a recording whose client gates failed (a busy host): the image still did its work.
status=0
"${podman_run[@]}" --network host --security-opt seccomp=deploy/seccomp-io-uring.json \
    -v "$scratch:/journals" "$tag" \
    record --url "http://127.0.0.1:$port/v1/chat/completions" --model mock --stream \
    --rate 20 --duration 3s --warmup 500ms --quiet -o /journals/image.pj || status=$?
[ "$status" -le 2 ] || { echo "the recorder in the image exited $status" >&2; exit 1; }
echo "== record in the image: exit $status"
"${podman_run[@]}" "$tag" --version
"$context/percentes" verify "$scratch/image.pj"
"${podman_run[@]}" --entrypoint /usr/local/bin/kubectl "$tag" version --client 2>&1 | head -1
echo "== the recorder ran from the image and its journal verifies"
