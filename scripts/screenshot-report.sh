#!/usr/bin/env bash
# Opens a report folder's report.html in headless Chromium (Debian's `chromium` package) and
# writes a full-page screenshot beside it, so a person can look at what `percentes analyze` made.
#
#   scripts/screenshot-report.sh REPORT_DIR [WIDTHxHEIGHT]     (default 1200x6000)
#
# Installs nothing: `apt-get install chromium` first where it is missing. The flags keep Chromium
# off the network (this machine has none to offer) and out of the user's profile.
set -euo pipefail
dir="${1:?usage: scripts/screenshot-report.sh REPORT_DIR [WIDTHxHEIGHT]}"
size="${2:-1200x6000}"
html="$(cd "$dir" && pwd)/report.html"
[ -f "$html" ] || { echo "no report.html in $dir (run percentes analyze first)" >&2; exit 1; }
browser="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$browser" ] || { echo "chromium is not installed (apt-get install chromium)" >&2; exit 1; }
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --hide-scrollbars \
    --window-size="${size/x/,}" --screenshot="$(cd "$dir" && pwd)/report.png" "file://$html" 2>/dev/null
echo "wrote $dir/report.png"
