#!/bin/sh
# coverage_html.sh MOECTS CHROMIUM DATA_DIR WORK_DIR: render the coverage page of the hand-built run
# (tests/fixtures/data/coverage/run.json) and of the built-in registry, open both in headless Chromium and
# check that the DOM holds the summary table and one SVG heat map per kernel with every cell.
# Exit 77 (CTest: skipped) when Chromium is not installed (Debian package `chromium`).
set -eu
moects=$1 chromium=$2 data=$3 work=$4
if [ -z "$chromium" ] || ! command -v "$chromium" >/dev/null 2>&1; then
    echo "chromium not installed (apt-get install chromium): skipped"
    exit 77
fi
rm -rf "$work"
mkdir -p "$work/registry" "$work/profile"
fail() { echo "FAIL: $*"; exit 1; }
browse() { # browse PAGE: DOM on stdout; screenshot next to the page
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --user-data-dir="$work/profile" --window-size=1500,1400 \
        --screenshot="${1%.html}.png" "file://$1" >/dev/null 2>>"$work/chromium.log" || true
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
        --user-data-dir="$work/profile" --dump-dom "file://$1" 2>>"$work/chromium.log"
}
count() { grep -o "$1" "$2" | wc -l; }

# 1. hand-built run against an empty registry: 2 kernels x 2 models x 3 layouts (expected.md)
"$moects" coverage "$data/run.json" --registry "$work/registry" --out "$work/small"
browse "$work/small/coverage.html" > "$work/small/dom.html"
[ "$(count '<svg ' "$work/small/dom.html")" -eq 2 ] || fail "small: want 2 svg heat maps"
[ "$(count '<g class="cell ' "$work/small/dom.html")" -eq 12 ] || fail "small: want 12 cells"
[ "$(count '<table class="sum"' "$work/small/dom.html")" -eq 1 ] || fail "small: no summary table"
grep -q '<code>k.eg</code>' "$work/small/dom.html" || fail "small: kernel row missing"
[ -s "$work/small/coverage.png" ] || fail "small: no screenshot"

# 2. the built-in registry, no run (every model x layout; the page must still render)
"$moects" coverage --out "$work/builtin"
browse "$work/builtin/coverage.html" > "$work/builtin/dom.html"
nsvg=$(count '<svg ' "$work/builtin/dom.html")
ncell=$(count '<g class="cell ' "$work/builtin/dom.html")
[ "$nsvg" -ge 1 ] || fail "builtin: no heat map"
dims=$(sed -n 's/.*Registry: \([0-9]*\) models x \([0-9]*\) layouts.*/\1 \2/p' "$work/builtin/coverage.md")
set -- $dims
[ "$#" -eq 2 ] || fail "builtin: no 'Registry: N models x L layouts' in coverage.md"
[ "$ncell" -eq $((nsvg * $1 * $2)) ] || fail "builtin: $ncell cells for $nsvg kernels x $1 models x $2 layouts"
grep -q '>kimi-k3</text>' "$work/builtin/dom.html" || fail "builtin: kimi-k3 row missing"
[ -s "$work/builtin/coverage.png" ] || fail "builtin: no screenshot"
echo "ok: $work/small/coverage.png, $work/builtin/coverage.png"
