#!/usr/bin/env bash
# h200_gpus.sh: `moects run --gpus` on a GPU host (issue 33 item 1, docs/scale-out.md "Every GPU of a
# host"): the same selection run as before (no --gpus), with --gpus all, and, where the host has
# several GPUs, with --gpus 0 alone; each checked by tools/gpus_check.py. On the GPU host, from the
# repository root:
#   tools/h200_gpus.sh BUILD [OUTDIR]
# BUILD: a build folder made with CUDA (sm_90a), carried to the host: bin/moects. OUTDIR (default
# reports/h200/gpus/<commit>) receives, step by step:
#   machine.txt   date, commit, the GPUs (nvidia-smi -L), cpus
#   default/      the selection without --gpus (results.json, run.tap, summary.md; .err: --perf-phases)
#   all/          the same with --gpus all: on one GPU it must be the run above (every result on GPU
#                 0, the same verdicts, mismatches and hashes case by case)
#   one/          (several GPUs) the same with --gpus 0: all/ must give its verdicts, every GPU must
#                 run cases, and the GPUs' busy seconds lie within the bound
#   check-*.txt   tools/gpus_check.py's lines for each; beyond.err: --gpus N (one past the last GPU)
#                 must exit 2 with one line
#   status.txt    each step's exit status and seconds (the time of each run: the speed-up)
# MOECTS_GPUS_SELECTION (default "--tier smoke --kernel cuda.*": every smoke case's reference is under
# MOECTS_BIG_CASE_FLOPS, so each takes one --jobs slot, as the bound assumes): the runs' selection;
# MOECTS_JOBS (default nproc): --jobs; MOECTS_BUDGET_S (default 560): the seconds this call may take;
# MOECTS_PACK=FILE: OUTDIR packed into FILE after every step. MOECTS_FAKE_GPUS=N (a host without a
# GPU: the script's own test) stands in for N GPUs. Exit 1 when any step or check failed.
set -u
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"
steps_begin "tools/h200_gpus.sh BUILD [OUTDIR]" gpus 560 "$@"
STEP_MARGIN=10 STEP_MIN=10
SEL=${MOECTS_GPUS_SELECTION:-"--tier smoke --kernel cuda.*"}

# The GPUs --gpus all takes, as CUDA_VISIBLE_DEVICES values in ordinal order (run_gpus.c's rule)
if [ -n "${MOECTS_FAKE_GPUS:-}" ]; then N=$MOECTS_FAKE_GPUS LIST=$(seq -s, 0 $((N - 1)))
elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then LIST=$CUDA_VISIBLE_DEVICES N=$(echo "$LIST" | tr , '\n' | grep -c .)
else N=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') LIST=$(seq -s, 0 $((N - 1))); fi
{ echo "date: $(date -u +%FT%TZ)"; echo "commit: $COMMIT"; echo "gpus: $N ($LIST)"
  nvidia-smi -L 2>&1; echo "cpus: $(nproc)"; } > "$D/machine.txt"
[ "$N" -ge 1 ] || { echo "h200_gpus: no GPU" | tee -a "$D/status.txt"; exit 1; }
[ "$JOBS" -ge "$N" ] || JOBS=$N

# run NAME ARGS...: the selection with ARGS; its exit 1 (a kernel failed, a mutant escaped) is a verdict
# of the kernels, not of the spreading: the step stands when the run wrote its results
run() {
  local name=$1 before=$FAILED rc; shift
  set -f # SEL's globs are moects's, not the shell's
  # shellcheck disable=SC2086
  step "$name" 200 "$B/bin/moects" run $SEL --jobs "$JOBS" --perf-phases --out "$D/$name" "$@"
  rc=$?
  set +f
  FAILED=$before
  [ $rc -le 1 ] && [ -e "$D/$name/results.json" ] || FAILED=1
}
check() { # check NAME ARGS...: tools/gpus_check.py on $D/NAME
  local name=$1; shift
  python3 "$(dirname "$0")/gpus_check.py" "$D/$name" "$@" > "$D/check-$name.txt" 2>&1 || FAILED=1
  tail -n 1 "$D/check-$name.txt" | sed "s|^|check $name: |" | tee -a "$D/status.txt"
}

run default
run all --gpus all
check default --gpus "$LIST" --jobs "$JOBS"
if [ "$N" -eq 1 ]; then
  check all --gpus "$LIST" --jobs "$JOBS" --same-as "$D/default"
else
  run one --gpus 0
  check one --gpus "${LIST%%,*}" --jobs "$JOBS"
  check all --gpus "$LIST" --jobs "$JOBS" --same-as "$D/one"
fi
"$B/bin/moects" run --gpus "$N" --out "$D/beyond" 'ep_gather/kimi-k3/tp8/t1' > /dev/null 2> "$D/beyond.err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l < "$D/beyond.err")" -eq 1 ] && grep -q "^moects run: --gpus $N: GPU $N is beyond the $N GPU" "$D/beyond.err"
then echo "beyond ok: $(cat "$D/beyond.err")" | tee -a "$D/status.txt"
else echo "beyond FAILED (rc $rc): $(head -c 300 "$D/beyond.err")" | tee -a "$D/status.txt"; FAILED=1; fi
pack
echo "h200_gpus: $([ $FAILED = 0 ] && echo PASS || echo FAIL) ($D/status.txt)"
exit $FAILED
