#!/usr/bin/env bash
# h200_layer.sh: the GPU run of the CUDA fused MoE layer kernels (gpu/cuda/fused_moe.cu; issue 29
# item 1, docs/fused_moe.md "CUDA kernels"). On the GPU host, from the repository root:
#   tools/h200_layer.sh BUILD [OUTDIR]
# BUILD: a Release build folder made with CUDA (sm_90a) holding bin/moects. OUTDIR (default
# reports/h200/layer/<commit>) receives, step by step:
#   machine.txt   date, commit, GPU, driver, compute-sanitizer
#   smoke/        the fused_moe smoke tier, every CUDA layer kernel and mutant (cuda.*fused_moe*):
#                 honest kernels pass every case they take, every mutant is caught
#   memcheck/     the same smoke cases under compute-sanitizer memcheck, honest CUDA layer kernels;
#                 memcheck.txt counts its error lines (ERROR SUMMARY: 0 errors expected)
#   full/         the fused_moe full tier, honest CUDA layer kernels, time-capped (the last step: a
#                 short budget cuts only it; a cut run leaves full/results.journal, and the next call
#                 with the same OUTDIR continues it with --resume)
#   kernels.txt   one line per (step, kernel): passed, failed, refused, skipped; mutants CAUGHT/ESCAPED
#   status.txt    each step's exit status and seconds
# MOECTS_BUDGET_S (default 300): the seconds this call may take; each step's limit is cut to what is
# left. MOECTS_JOBS: workers (default nproc). MOECTS_PACK=FILE: OUTDIR packed into FILE (.tar.gz, split
# into FILE.00, ... over 15 MiB) after every step, for a device call that returns files. Exit 1 when
# a step failed, an honest kernel failed or a mutant escaped. tools/h200_check.sh is the general check;
# this one touches only fused_moe.
set -u
B=$(cd "${1:?usage: tools/h200_layer.sh BUILD [OUTDIR]}" && pwd)
COMMIT=${MOECTS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
D=${2:-reports/h200/layer/$COMMIT}
BUDGET=${MOECTS_BUDGET_S:-300}
JOBS=${MOECTS_JOBS:-$(nproc)}
M="$B/bin/moects"
export MOECTS_ROOT=$PWD MOECTS_COMMIT=$COMMIT
mkdir -p "$D" && D=$(cd "$D" && pwd)
: > "$D/status.txt"
FAILED=0

pack() {
  [ -n "${MOECTS_PACK:-}" ] || return 0
  tar -czf "$MOECTS_PACK.tmp" -C "$(dirname "$D")" "$(basename "$D")" || return
  rm -f "$MOECTS_PACK" "$MOECTS_PACK".[0-9][0-9]
  if [ "$(stat -c %s "$MOECTS_PACK.tmp")" -gt 15728640 ]; then
    split -d -a 2 -b 15728640 "$MOECTS_PACK.tmp" "$MOECTS_PACK." && rm -f "$MOECTS_PACK.tmp"
  else mv -f "$MOECTS_PACK.tmp" "$MOECTS_PACK"; fi
}
# step NAME LIMIT_S CMD...: stdout to NAME.log, stderr to NAME.err; OK_RC (default 0) is success
step() {
  local name=$1 lim=$2 t0=$SECONDS; shift 2
  local left=$((BUDGET - SECONDS - 15))
  [ "$left" -lt "$lim" ] && lim=$left
  if [ "$lim" -lt 20 ]; then echo "$name skipped: ${left}s left" | tee -a "$D/status.txt"; FAILED=1; return 1; fi
  timeout "$lim" "$@" > "$D/$name.log" 2> "$D/$name.err"
  local rc=$?
  echo "$name rc=$rc seconds=$((SECONDS - t0)) limit=$lim" | tee -a "$D/status.txt"
  [ "$rc" -eq "${OK_RC:-0}" ] || FAILED=1
  pack
  return $rc
}

{ echo "date: $(date -u +%FT%TZ)"; echo "commit: $COMMIT"; echo "cpus: $(nproc)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  compute-sanitizer --version | tail -1; } > "$D/machine.txt" 2>&1
HONEST=$("$M" list --kernels --kernel 'cuda.fused_moe.*' | awk -F'\t' 'NF == 4 { printf "%s%s", s, $1; s = "," }')
echo "honest: $HONEST" >> "$D/machine.txt"

# 1. smoke tier, every CUDA layer kernel and mutant
rm -rf "$D/smoke"
step smoke 110 "$M" run --tier smoke 'fused_moe*' --kernel 'cuda.*fused_moe*' --jobs "$JOBS" --out "$D/smoke"

# 2. compute-sanitizer memcheck on the smoke tier, honest kernels (globs: no must-pass list)
rm -rf "$D/memcheck"
step memcheck 110 compute-sanitizer --tool memcheck --target-processes all --leak-check no --error-exitcode 9 \
  "$M" run --tier smoke 'fused_moe*' --kernel "$HONEST" --jobs "$JOBS" --out "$D/memcheck"
grep -E "ERROR SUMMARY|Invalid|========= [A-Z]" "$D/memcheck.log" "$D/memcheck.err" | sort | uniq -c > "$D/memcheck.txt"

# 3. full tier, honest kernels, what time is left (continued by a later call with the same OUTDIR)
if [ -e "$D/full/results.journal" ]; then od=(--resume "$D/full"); else rm -rf "$D/full"; od=(--out "$D/full"); fi
F0=$FAILED
step full 600 "$M" run --tier full 'fused_moe*' --kernel "$HONEST" --jobs "$JOBS" "${od[@]}"
if [ -e "$D/full/results.journal" ]; then # cut by its limit: expected, not a failure
  FAILED=$F0
  echo "full cut: $(wc -l < "$D/full/results.journal") journal lines; run again with this OUTDIR to continue" >> "$D/status.txt"
fi

# 4. one line per (step, kernel)
python3 - "$D" > "$D/kernels.txt" <<'EOF'
import collections, json, os, sys
d = sys.argv[1]
for part in ("smoke", "memcheck", "full"):
    p = os.path.join(d, part, "results.json")
    if not os.path.exists(p):
        print("%-8s no results.json" % part)
        continue
    rows = collections.OrderedDict()
    for r in json.load(open(p))["results"]:
        c = rows.setdefault(r["kernel"], collections.Counter())
        c["mutant"] = r.get("mutant", False)
        c[r["verdict"].split("_")[0]] += 1
    for kern, c in rows.items():
        what = "mutant %s" % ("CAUGHT" if c["FAIL"] else "ESCAPED") if c["mutant"] else ("PASS" if not c["FAIL"] else "FAIL")
        print("%-8s %-48s %-14s pass %4d fail %4d unsupported %4d skip %4d" % (
            part, kern, what, c["PASS"], c["FAIL"], c["UNSUPPORTED"], c["SKIP"]))
EOF
cat "$D/kernels.txt"
grep -q " FAIL \|ESCAPED\|^smoke.*no results\|^memcheck.*no results" "$D/kernels.txt" && FAILED=1
pack
echo "h200_layer: $([ $FAILED = 0 ] && echo PASS || echo FAIL) ($D/status.txt)"
exit $FAILED
