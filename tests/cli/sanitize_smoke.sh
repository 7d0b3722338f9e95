#!/bin/sh
# sanitize_smoke.sh MOECTS ROOT WORKDIR: `moects run` of an ASan+UBSan build (-DMOECTS_SANITIZE=ON)
# on a smoke subset, honest CPU kernels only (the mutants' bugs are deliberate): every 8th smoke case
# in list order, without the 64-bit-addressing class (its largest case needs 5.5 GB, several times
# that under ASan). Any sanitizer report fails: the parent's (LeakSanitizer at exit: exit status) and
# the workers' (they _exit, so each runs __lsan_do_leak_check() first; reports land in kernels.log).
set -eu
moects=$1 root=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
# and every smoke case of the layer formats and activation that only a few kernels take (NVFP4, W4A8,
# Kimi K3's situ), so that each honest kernel has a case here (one that refuses all fails the run)
"$moects" list -l --root "$root" --tier all | awk -F'\t' '$2 ~ /smoke/ && $1 !~ /addr64/ &&
    (NR % 8 == 1 || $1 ~ /^fused_moe\.(nvfp4|w4a8)\// || $1 ~ /^fused_moe\.[a-z0-9_]+\/kimi-k3\//) {print $1}' > ids.txt
echo "sanitize_smoke: $(wc -l < ids.txt) cases"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}" UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
rc=0
"$moects" run --root "$root" --out out --kernel 'cpu.[ef]*' --cases ids.txt > run.tap 2> err.txt || rc=$?
if grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' err.txt out/kernels.log 2>/dev/null; then
    cat err.txt out/kernels.log >&2
    echo "sanitize_smoke: sanitizer report" >&2
    exit 1
fi
[ $rc -eq 0 ] || { cat err.txt >&2; tail -20 run.tap >&2; echo "sanitize_smoke: moects run exit $rc" >&2; exit 1; }
echo "sanitize_smoke: clean ($(grep -c '^    ok' run.tap) points)"
