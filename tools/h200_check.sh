#!/usr/bin/env bash
# h200_check.sh: the GPU check that a change to a verdict rule, a bound, a recipe or a CUDA kernel
# runs before its issue is resolved (docs/gpu-host.md). On the GPU host, from the repository root:
#   tools/h200_check.sh BUILD [OUTDIR]
# BUILD: a build folder made with CUDA (sm_90a): bin/moects, bin/moects_cublas_schemes,
# lib/libmoects.so.0. OUTDIR (default reports/h200/<commit>) receives, step by step:
#   machine.txt   date, commit, GPU, driver, torch
#   smoke/        the smoke tier, every CUDA kernel and mutant (run.tap, results.json, summary.md),
#                 run with cuBLASLt's log on: lt-smoke.txt counts the reduction schemes it chose
#   sample/       a fixed 1-in-64 sample of the full tier (ids whose SHA-256 is 0 mod 64, plus the
#                 cases of issue 25), honest CUDA kernels
#   schemes.txt   moects_cublas_schemes over every smoke and full shape of the cuBLAS kernels:
#                 no split-K partials reduced in BF16 (REDUCTION_SCHEME_OUTPUT_TYPE)
#   schemes-default-math.txt  the negative control: the same on issue 25's shapes in cuBLAS's
#                 default math mode, where OUTPUT_TYPE must show
#   torch/        examples/torch_fp4_gemm.py:bf16_kernels through --kernel-py on issue 25's case
#                 families: the split-K-declaring kernel and the FP32-reduction one pass, the mutant
#                 (torch's default flag, FP32 declared) is caught; lt-torch.txt: its splits
#   (the sample runs last: the longest step, a short budget cuts only it)
#   kernels.txt   one line per kernel: what it passed, failed, known, refused (printed at the end)
#   status.txt    each step's exit status and seconds
# MOECTS_BUDGET_S (default 560): the seconds this call may take; a step's limit is cut to what is
# left. MOECTS_PACK=FILE: OUTDIR packed into FILE (.tar.gz, split into FILE.00, ... over 15 MiB)
# after every step, for a device call that returns files. Exit 1 when any step failed.
set -u
B=$(cd "${1:?usage: tools/h200_check.sh BUILD [OUTDIR]}" && pwd)
COMMIT=${MOECTS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
D=${2:-reports/h200/$COMMIT}
BUDGET=${MOECTS_BUDGET_S:-560}
JOBS=${MOECTS_JOBS:-$(nproc)}
export MOECTS_ROOT=$PWD MOECTS_LIB=$B/lib/libmoects.so.0 MOECTS_COMMIT=$COMMIT PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$D" && D=$(cd "$D" && pwd)
: > "$D/status.txt"
FAILED=0

STEP_MARGIN=25 STEP_MIN=20
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"
# lt_count LOGDIR OUT: the reduction schemes and the most splits in cuBLASLt's logs
lt_count() {
  { for s in OUTPUT_TYPE COMPUTE_TYPE INPLACE NONE; do
      echo "REDUCTION_SCHEME_$s: $(cat "$1"/* 2>/dev/null | grep -o "reductionScheme=REDUCTION_SCHEME_$s" | wc -l)"
    done
    echo "most numSplitsK: $(cat "$1"/* 2>/dev/null | grep -o 'numSplitsK=[0-9]*' | cut -d= -f2 | sort -n | tail -1)"
  } > "$2"
  ! grep -q "^REDUCTION_SCHEME_OUTPUT_TYPE: [1-9]" "$2"
}

{ echo "date: $(date -u +%FT%TZ)"; echo "commit: $COMMIT"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1; } > "$D/machine.txt"

# Issue 25's cases: the smoke ones and the two full-tier ones.
ISSUE=$D/issue25-cases.txt
{ "$B/bin/moects" list --tier smoke 'fp4_gemm.*/regression/n-not-128/n1[01][06]/k2688/m5*' \
    'fp4_gemm.*/regression/i-not-64/nemotron-nano/gemm1/n116/m16' | cut -f1
  echo 'fp4_gemm.mxfp4/regression/i-not-64/gemm2/n4096/k1500/m64'
  echo 'fp4_gemm.nvfp4/regression/i-not-64/gemm2/n4096/k1500/m64'; } > "$ISSUE"

# 1. smoke tier, every CUDA kernel and mutant, cuBLASLt's choices logged
rm -rf /tmp/lt-smoke && mkdir -p /tmp/lt-smoke
CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=/tmp/lt-smoke/lt.%i.log \
  step smoke 300 "$B/bin/moects" run --tier smoke --kernel 'cuda.*' --jobs "$JOBS" --out "$D/smoke"
lt_count /tmp/lt-smoke "$D/lt-smoke.txt" || { echo "lt-smoke: OUTPUT_TYPE reductions" >> "$D/status.txt"; FAILED=1; }

# 2. cuBLASLt's reduction scheme on every smoke and full shape of the cuBLAS kernels, and the control
step schemes 200 "$B/bin/moects_cublas_schemes" --tier all
OK_RC=1 step schemes-default-math 60 "$B/bin/moects_cublas_schemes" --default-math --glob 'fp4_gemm.*/regression/n-not-128/*'

# 3. torch's flags as declared classes, through --kernel-py (mutant expected caught: exit 0)
rm -rf /tmp/lt-torch && mkdir -p /tmp/lt-torch
"$B/bin/moects" list --tier smoke 'fp4_gemm.*/regression/n-not-128/*' 'fp4_gemm.*/regression/i-not-64/*' |
  cut -f1 > "$D/torch-cases.txt"
grep 'n4096/k1500' "$ISSUE" >> "$D/torch-cases.txt"
CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=/tmp/lt-torch/lt.%i.log \
  step torch 200 "$B/bin/moects" run --kernel-py examples/torch_fp4_gemm.py:bf16_kernels --kernel 'torch.*' \
    --cases "$D/torch-cases.txt" --jobs "$JOBS" --out "$D/torch"
lt_count /tmp/lt-torch "$D/lt-torch.txt" # torch's default flag may reduce in BF16: counted, not a failure

# 4. the full tier's fixed sample and issue 25's full cases, honest CUDA kernels
HONEST=$("$B/bin/moects" list --kernels --kernel 'cuda.*' | awk -F'\t' 'NF == 4 { printf "%s%s", s, $1; s = "," }')
"$B/bin/moects" list --tier full | cut -f1 |
  python3 -c 'import hashlib, sys
for l in sys.stdin:
    i = l.strip()
    if int(hashlib.sha256(i.encode()).hexdigest(), 16) % 64 == 0: print(i)' > "$D/sample-cases.txt"
grep 'n4096/k1500' "$ISSUE" >> "$D/sample-cases.txt"
# shellcheck disable=SC2046 # ids as exact globs (a --cases list would be must-pass: a sampled case every
# kernel refuses would fail the run)
step sample 240 "$B/bin/moects" run --tier full --kernel "$HONEST" --jobs "$JOBS" --out "$D/sample" $(cat "$D/sample-cases.txt")

# 5. one line per kernel, and issue 25's cases for every kernel that ran them
python3 - "$D" "$ISSUE" > "$D/kernels.txt" <<'EOF'
import collections, json, os, sys
d, issue = sys.argv[1], set(open(sys.argv[2]).read().split())
rows = collections.OrderedDict()
for part in ("smoke", "sample", "torch"):
    p = os.path.join(d, part, "results.json")
    if not os.path.exists(p):
        print("%s: no results.json" % part)
        continue
    for r in json.load(open(p))["results"]:
        k = rows.setdefault((part, r["kernel"]), collections.Counter())
        v = r["verdict"]
        k["mutant"] = r.get("mutant", False)
        k["known" if r.get("known") and v.startswith("FAIL") else v.split("_")[0]] += 1
        if r["case"] in issue:
            k["issue25 " + v] += 1
for (part, kern), c in rows.items():
    what = "mutant %s" % ("CAUGHT" if c["FAIL"] else "ESCAPED") if c["mutant"] else \
           ("PASS" if not c["FAIL"] else "FAIL")
    extra = " ".join("%s %d" % (k, n) for k, n in sorted(c.items()) if k.startswith("issue25"))
    print("%-7s %-48s %-14s pass %4d fail %4d known %3d unsupported %4d skip %4d %s" % (
        part, kern, what, c["PASS"], c["FAIL"], c["known"], c["UNSUPPORTED"], c["SKIP"], extra))
EOF
cat "$D/kernels.txt"
grep -q "FAIL  \|ESCAPED" "$D/kernels.txt" && FAILED=1
pack
echo "h200_check: $([ $FAILED = 0 ] && echo PASS || echo FAIL) ($D/status.txt)"
exit $FAILED
