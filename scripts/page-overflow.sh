#!/usr/bin/env bash
# Loads a report folder's report.html in headless Chromium (Debian's `chromium`) at a given width
# and says whether anything runs past the viewport: prints `fits WIDTH` and exits 0, or prints
# `overflows WIDTH: SCROLLWIDTH` with the outermost elements that stick out, and exits 1.
#
#   scripts/page-overflow.sh REPORT_DIR [WIDTH]     (default 1200)
#
# The page itself has no script; a copy with one measuring script appended is what is loaded,
# in a temporary folder. An element inside a box that scrolls or clips (a wide table in its own
# scrolling box) is not past the viewport: the page's own scroll width is the test, and the
# elements are listed only to say where to look. Nothing is installed and nothing is fetched.
set -euo pipefail
dir="${1:?usage: scripts/page-overflow.sh REPORT_DIR [WIDTH]}"
width="${2:-1200}"
html="$(cd "$dir" && pwd)/report.html"
[ -f "$html" ] || { echo "no report.html in $dir (run percentes analyze first)" >&2; exit 2; }
browser="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$browser" ] || { echo "chromium is not installed (apt-get install chromium)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
{
    sed 's#</body></html>##' "$html"
    cat <<'JS'
<script>
(function () {
  var root = document.documentElement, w = root.clientWidth, out = [];
  function clipped(e) {
    for (var a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  }
  var all = document.body.getElementsByTagName('*');
  for (var i = 0; i < all.length && out.length < 10; i++) {
    var e = all[i], r = e.getBoundingClientRect();
    if (clipped(e)) continue;
    var name = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '');
    if (r.right > w + 1 && !(e.parentElement && e.parentElement.getBoundingClientRect().right > w + 1)) {
      out.push(name + ' to ' + Math.round(r.right) + ' px');
    } else if (getComputedStyle(e).overflowX === 'visible' && e.scrollWidth > e.clientWidth + 1
               && r.left + e.scrollWidth > w + 1) {
      out.push('the content of ' + name + ' to ' + Math.round(r.left + e.scrollWidth) + ' px');
    }
  }
  document.body.setAttribute('data-overflow', root.scrollWidth + ' ' + w + ' | ' + out.join('; '));
})();
</script>
</body></html>
JS
} > "$work/page.html"
dom="$("$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --hide-scrollbars --window-size="$width,1200" \
    --virtual-time-budget=2000 --dump-dom "file://$work/page.html" 2>/dev/null)"
measured="$(printf '%s' "$dom" | grep -o 'data-overflow="[^"]*"' | head -1 | sed 's/^data-overflow="//; s/"$//')"
[ -n "$measured" ] || { echo "chromium gave no measurement" >&2; exit 2; }
scroll="${measured%% *}"
rest="${measured#* }"
client="${rest%% *}"
if [ "$scroll" -le "$client" ]; then
    echo "fits $width"
else
    echo "overflows $width: the page is $scroll px wide in a $client px viewport; ${measured#*| }"
    exit 1
fi
