#!/bin/sh
# gpus.sh: `moects run --gpus` (issue 33 item 1) on CPU, the GPUs stood in for by MOECTS_FAKE_GPUS=4:
# gpus_spread: a smoke subset (every 30th smoke case, every kernel) over 4 fake GPUs, one worker each,
#   against one run without GPUs: every result names its GPU, a case's results one, every GPU ran
#   cases, verdicts, mismatches and hashes identical case by case, and the per-GPU busy seconds within
#   the bound of docs/scale-out.md (tools/gpus_check.py); the check fails on a run bent to load GPU 0.
# gpus_env: each worker got its set's CUDA_VISIBLE_DEVICES: a kernel with a bug only where that is odd
#   (tests/fixtures/plugins/plugin_planted.c odd_gpu) fails exactly the cases whose results name GPU 1
#   or 3, 8 workers over 4 GPUs (sets of 2), and --gpus 2,3 uses those two alone.
# gpus_bad: bad lists exit 2 with one line naming the option; one GPU, and none, as before.
# gpus_host_script: tools/h200_gpus.sh, the GPU host's check, passes here over 1 and over 2 fake GPUs.
# Usage: gpus.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR
. "$(dirname "$0")/lib.sh"
check="python3 $root/tools/gpus_check.py"
export MOECTS_BIG_CASE_FLOPS=1e30 # every case one slot: the bound's case

case $name in
gpus_spread)
    "$moects" list --tier smoke | cut -f1 | awk 'NR % 30 == 1' > ids
    [ "$(wc -l < ids)" -ge 40 ] || fail "fewer than 40 smoke cases picked"
    # shellcheck disable=SC2046
    MOECTS_FAKE_GPUS=4 "$moects" run --jobs 4 --perf-phases --out four $(cat ids) > four.tap 2> four.err
    [ $? -le 1 ] || { cat four.err; fail "run over 4 fake GPUs"; }
    # shellcheck disable=SC2046
    "$moects" run --jobs 2 --out none $(cat ids) > none.tap 2> none.err
    [ $? -le 1 ] || { cat none.err; fail "run without GPUs"; }
    grep -q '"gpu"' none/results.json && fail "a run without GPUs names one"
    $check four --gpus 0,1,2,3 --jobs 4 --same-as none || fail "the run over 4 GPUs"
    grep -q "4 jobs over 4 GPUs" four.err || { head -n 1 four.err; fail "first line: the GPUs"; }
    for g in 0 1 2 3; do
        grep -q "^  GPU $g  *[0-9.]* s over [0-9]* results, [0-9]* cases$" four.err || { cat four.err; fail "--perf-phases: GPU $g"; }
        grep -q "^| $g | [0-9]* | [0-9]* | [0-9.]* |$" four/summary.md || fail "summary.md: GPU $g"
    done
    # the negative control: three quarters of the cases moved to GPU 0 break the bound
    mkdir bent && python3 - four/results.json bent/results.json <<'PY' || fail "bending the run"
import json, sys
run = json.load(open(sys.argv[1]))
cases = sorted({r["case"] for r in run["results"]})
moved = set(cases[: 3 * len(cases) // 4])
for r in run["results"]:
    if r["case"] in moved:
        r["gpu"] = "0"
json.dump(run, open(sys.argv[2], "w"))
PY
    $check bent --gpus 0,1,2,3 --jobs 4 > bent.out && { cat bent.out; fail "the check passed a bent run"; }
    grep -q "^FAIL: busy seconds per worker spread over" bent.out || { cat bent.out; fail "bent: not the bound"; }
    ;;
gpus_env)
    "$moects" list -v --tier smoke 'fp4_gemm.mxfp4/regression/k-tail/*' | grep -F 'MXFP4, linear' | cut -f1 | head -n 16 > ids
    [ "$(wc -l < ids)" = 16 ] || fail "16 small smoke MXFP4 cases with linear scales wanted"
    k="--kernel-lib $planted --kernel planted.fp4_gemm"
    # shellcheck disable=SC2046,SC2086
    MOECTS_PLANTED=odd_gpu MOECTS_FAKE_GPUS=4 "$moects" run --jobs 8 $k --out o $(cat ids) > o.tap 2> o.err
    [ $? = 1 ] || { cat o.err; fail "odd_gpu over 4 GPUs: exit not 1"; }
    $check o --gpus 0,1,2,3 --jobs 8 || fail "the odd_gpu run over 4 GPUs"
    python3 - o/results.json <<'PY' || fail "a verdict disagrees with its GPU"
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
assert len(rs) == 16, len(rs)
for r in rs:
    want = "FAIL_MISMATCH" if int(r["gpu"]) % 2 else "PASS_EXACT"
    assert r["verdict"] == want, (r["case"], r["gpu"], r["verdict"])
assert {r["gpu"] for r in rs} == {"0", "1", "2", "3"}, {r["gpu"] for r in rs}
PY
    # shellcheck disable=SC2046,SC2086
    MOECTS_PLANTED=odd_gpu MOECTS_FAKE_GPUS=4 "$moects" run --gpus 2,3 --jobs 2 $k --out two $(cat ids) > two.tap 2>&1
    $check two --gpus 2,3 --jobs 2 || fail "--gpus 2,3"
    ;;
gpus_bad)
    c=ep_gather/kimi-k3/tp8/t1
    bad() { # bad ENV ARGS...: `env ENV moects run ARGS...` exits 2 with one stderr line holding $want
        e=$1
        shift
        # shellcheck disable=SC2086
        env $e "$moects" run --out b "$@" "$c" > /dev/null 2> err
        rc=$?
        [ $rc = 2 ] && [ "$(wc -l < err)" = 1 ] && grep -qF -- "$want" err || { cat err; fail "$e $*: rc $rc, not: $want"; }
    }
    want='moects run: --gpus 0,0: GPU 0 listed twice' bad MOECTS_FAKE_GPUS=4 --gpus 0,0
    want='moects run: --gpus x: "x" is not a GPU number' bad MOECTS_FAKE_GPUS=4 --gpus x
    want='moects run: --gpus 1,-1: "-1" is not a GPU number' bad MOECTS_FAKE_GPUS=4 --gpus 1,-1
    want='moects run: --gpus 0,: "" is not a GPU number' bad MOECTS_FAKE_GPUS=4 --gpus 0,
    want='moects run: --gpus 4: GPU 4 is beyond the 4 GPUs of MOECTS_FAKE_GPUS (0..3)' bad MOECTS_FAKE_GPUS=4 --gpus 4
    want='moects run: --gpus 0: GPU 0 is beyond the 0 GPUs the driver reports (no CUDA device: ' \
        bad "-u MOECTS_FAKE_GPUS" --gpus 0
    want='moects run: MOECTS_FAKE_GPUS=0: not a count of GPUs' bad MOECTS_FAKE_GPUS=0
    want='moects run: --jobs 2 is fewer than the 4 GPUs of --gpus 0,1,2,3' bad MOECTS_FAKE_GPUS=4 --gpus 0,1,2,3 --jobs 2
    # one GPU (all, as a host with one): every result on it, and no GPU at all: as before, none named
    MOECTS_FAKE_GPUS=1 "$moects" run --gpus all --out one "$c" > one.tap 2> one.err || { cat one.err; fail "one GPU"; }
    $check one --gpus 0 --jobs 1 || fail "one GPU: gpu fields"
    "$moects" run --out none "$c" > none.tap 2> none.err || { cat none.err; fail "no GPU"; }
    grep -q '"gpu"' none/results.json && fail "no GPU, yet a result names one"
    grep -q '^## GPUs' none/summary.md && fail "no GPU, yet summary.md has a GPUs section"
    cmp -s one.tap none.tap || fail "one GPU: the TAP differs from the run without any"
    ;;
gpus_host_script)
    for n in 1 2; do
        (cd "$root" && MOECTS_FAKE_GPUS=$n MOECTS_COMMIT=cli-test MOECTS_JOBS=2 \
            MOECTS_GPUS_SELECTION="--tier smoke ep_gather/kimi-k3/* --kernel cpu.ep_gather*,cuda.ep_gather*" \
            bash tools/h200_gpus.sh "$(dirname "$(dirname "$moects")")" "$work/h$n") > h$n.out 2>&1 ||
            { cat h$n.out; fail "h200_gpus.sh over $n fake GPU(s)"; }
        grep -q "^check all: ok: [0-9]* cases over $n GPU(s);.* [0-9]* results identical to " "$work/h$n/status.txt" ||
            { cat "$work/h$n/status.txt"; fail "h200_gpus.sh over $n: the check of --gpus all"; }
    done
    ;;
esac
