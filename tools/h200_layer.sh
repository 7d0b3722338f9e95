#!/usr/bin/env bash
# h200_layer.sh: the GPU run of the CUDA fused MoE layer kernels (gpu/cuda/fused_moe.cu; issue 29
# item 1, docs/fused_moe.md "CUDA kernels"). On the GPU host, from the repository root:
#   tools/h200_layer.sh BUILD [OUTDIR]
# BUILD: a Release build folder made with CUDA (sm_90a) holding bin/moects. OUTDIR (default
# reports/h200/layer/<commit>) receives, step by step:
#   machine.txt   date, commit, GPU, driver, compute-sanitizer
#   smoke/        the fused_moe smoke tier, every CUDA layer kernel and mutant (cuda.*fused_moe*):
#                 honest kernels pass every case they take, every mutant is caught; under MOECTS_STAGES=1,
#                 so a failing exact kernel's reason names its first stage off (the bounded ones' stages
#                 are judged on every case: enclosure, accumulation check)
#   stages.txt    from smoke/: per kernel, the stages its failures name ("first stage off: act" 54, ...),
#                 and its largest accumulation RMS of the exposed GEMM stages (docs/fused_moe.md
#                 "Exposed intermediates")
#   memcheck/     the same smoke cases under compute-sanitizer memcheck, honest CUDA layer kernels;
#                 memcheck.txt counts its error lines (ERROR SUMMARY: 0 errors expected)
#   racecheck/    every MOECTS_RACECHECK_EVERY-th (default 2) of those smoke cases under compute-sanitizer
#                 racecheck (shared-memory hazards: the FP8 scale reduction), honest kernels; racecheck.txt
#                 its summary lines (0 hazards expected); synccheck/, synccheck.txt: every
#                 MOECTS_SYNCCHECK_EVERY-th (default 4) under synccheck (barriers in divergent code)
#   perf.md       build/bin/bench_fused_moe_layer (bench/bench_fused_moe_layer.cu): each honest CUDA layer
#                 kernel's median time against the same layer composed from cuBLAS BF16 GEMMs at the
#                 registry's shapes, a Markdown table for docs/perf.md; MOECTS_LAYER_PERF_ARGS adds
#                 options (--models, --tokens, --cell-ms ...); its --budget-s is what the step has left
#   full/         the fused_moe full tier, honest CUDA layer kernels, time-capped (the last step: a
#                 short budget cuts only it; a cut run leaves full/results.journal, and the next call
#                 with the same OUTDIR continues it with --resume)
#   kernels.txt   one line per (step, kernel): passed, failed, refused, skipped; mutants CAUGHT/ESCAPED
#   status.txt    each step's exit status and seconds
# MOECTS_LAYER_STEPS: a comma list of the steps to run (default smoke,memcheck,racecheck,synccheck,perf,full).
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
STEPS=${MOECTS_LAYER_STEPS:-smoke,memcheck,racecheck,synccheck,perf,full}
has() { case ",$STEPS," in *",$1,"*) return 0 ;; esac; return 1; }

STEP_MARGIN=15 STEP_MIN=20
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"

{ echo "date: $(date -u +%FT%TZ)"; echo "commit: $COMMIT"; echo "cpus: $(nproc)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  compute-sanitizer --version | tail -1; } > "$D/machine.txt" 2>&1
HONEST=$("$M" list --kernels --kernel 'cuda.fused_moe.*' | awk -F'\t' 'NF == 4 { printf "%s%s", s, $1; s = "," }')
echo "honest: $HONEST" >> "$D/machine.txt"

# 1. smoke tier, every CUDA layer kernel and mutant
if has smoke; then
  rm -rf "$D/smoke"
  step smoke 110 env MOECTS_STAGES=1 "$M" run --tier smoke 'fused_moe*' --kernel 'cuda.*fused_moe*' --jobs "$JOBS" \
    --out "$D/smoke"
  python3 - "$D/smoke/results.json" > "$D/stages.txt" <<'EOF'
import collections, json, re, sys
named, rms = collections.defaultdict(collections.Counter), collections.defaultdict(float)
for r in json.load(open(sys.argv[1]))["results"]:
    for m in re.finditer(r"first stage (off|outside its enclosure): [a-z0-9]+|accumulation check of stage [a-z0-9]+ ", r["reason"]):
        named[r["kernel"]][m.group(0).strip()] += 1
    if r.get("acc_check"):
        rms[r["kernel"]] = max(rms[r["kernel"]], r["acc_check"]["rms_sigma"])
for k in sorted(set(named) | set(rms)):
    print("%-48s %s%s" % (k, ", ".join("%s %d" % kv for kv in sorted(named[k].items())) or "-",
                          "; accumulation RMS at most %.3g sigma" % rms[k] if k in rms else ""))
EOF
fi

# 2. compute-sanitizer memcheck on the smoke tier, honest kernels (globs: no must-pass list)
if has memcheck; then
  rm -rf "$D/memcheck"
  step memcheck 110 compute-sanitizer --tool memcheck --target-processes all --leak-check no --error-exitcode 9 \
    "$M" run --tier smoke 'fused_moe*' --kernel "$HONEST" --jobs "$JOBS" --out "$D/memcheck"
  grep -E "ERROR SUMMARY|Invalid|========= [A-Z]" "$D/memcheck.log" "$D/memcheck.err" | sort | uniq -c > "$D/memcheck.txt"
fi

# 2b. racecheck and synccheck on every Nth smoke case, honest kernels, each capped (a cut step fails)
for tool in racecheck synccheck; do
  has $tool || continue
  every=${MOECTS_RACECHECK_EVERY:-2} lim=60
  [ $tool = synccheck ] && every=${MOECTS_SYNCCHECK_EVERY:-4} lim=40
  "$M" list --tier smoke 'fused_moe*' | awk -F'\t' -v n="$every" 'NR % n == 1 % n {print $1}' > "$D/$tool-cases.txt"
  rm -rf "$D/$tool"
  step $tool $lim compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 \
    "$M" run --cases "$D/$tool-cases.txt" --kernel "$HONEST" --jobs "$JOBS" --out "$D/$tool"
  grep -hE "SUMMARY|========= [A-Z]" "$D/$tool.log" "$D/$tool.err" | sort | uniq -c > "$D/$tool.txt"
done

# 2c. each honest layer kernel against a cuBLAS BF16 layer (not a test: the step fails only on a crash)
if has perf; then
  left=$((BUDGET - SECONDS - 15)); plim=$((left < 300 ? left : 300))
  # shellcheck disable=SC2086 # MOECTS_LAYER_PERF_ARGS: options, split on purpose
  step perf "$plim" "$B/bin/bench_fused_moe_layer" --budget-s $((plim > 60 ? plim - 30 : plim / 2)) \
    ${MOECTS_LAYER_PERF_ARGS:-} && cp "$D/perf.log" "$D/perf.md"
fi

# 3. full tier, honest kernels, what time is left (continued by a later call with the same OUTDIR)
if has full; then
  if [ -e "$D/full/results.journal" ]; then od=(--resume "$D/full"); else rm -rf "$D/full"; od=(--out "$D/full"); fi
  F0=$FAILED
  step full 600 "$M" run --tier full 'fused_moe*' --kernel "$HONEST" --jobs "$JOBS" "${od[@]}"
  if [ -e "$D/full/results.journal" ]; then # cut by its limit: expected, not a failure
    FAILED=$F0
    echo "full cut: $(wc -l < "$D/full/results.journal") journal lines; run again with this OUTDIR to continue" >> "$D/status.txt"
  fi
fi

# 4. one line per (step, kernel)
python3 - "$D" "$STEPS" > "$D/kernels.txt" <<'EOF'
import collections, json, os, sys
d, steps = sys.argv[1], sys.argv[2].split(",")
for part in ("smoke", "memcheck", "racecheck", "synccheck", "full"):
    if part not in steps:
        continue
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
grep -qE " FAIL |ESCAPED|^(smoke|memcheck|racecheck|synccheck) .*no results" "$D/kernels.txt" && FAILED=1
pack
echo "h200_layer: $([ $FAILED = 0 ] && echo PASS || echo FAIL) ($D/status.txt)"
exit $FAILED
