# h200_steps.sh: the step runner of the GPU-host scripts (h200_check.sh, h200_layer.sh,
# h200_route.sh, h200_gpus.sh, h200_python.sh, h200_triton_layer.sh), sourced by them, not run. The
# sourcing script sets D (its OUTDIR, made), BUDGET (the seconds its device call may take) and
# FAILED=0, or has steps_begin set them; STEP_MARGIN (seconds kept for what follows
# the last step, default 15) and STEP_MIN (a step with less left is skipped, default 20) tune it.
# MOECTS_PACK=FILE: OUTDIR packed into FILE (.tar.gz, split into FILE.00, ... over 15 MiB) after
# every step, for a device call that returns files.

# steps_begin USAGE SUBDIR BUDGET BUILD [OUTDIR]: what a GPU-host script sets first (h200_gpus.sh): B
# (BUILD, absolute; missing: USAGE and exit), COMMIT (MOECTS_COMMIT, else git's short HEAD), D (OUTDIR,
# default reports/h200/SUBDIR/COMMIT; made, absolute), BUDGET (MOECTS_BUDGET_S, else BUDGET seconds),
# JOBS (MOECTS_JOBS, else nproc), MOECTS_ROOT (here) and MOECTS_COMMIT exported, an empty
# $D/status.txt, FAILED=0.
steps_begin() {
  B=$(cd "${4:?usage: $1}" && pwd) || exit 2
  COMMIT=${MOECTS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
  D=${5:-reports/h200/$2/$COMMIT}
  BUDGET=${MOECTS_BUDGET_S:-$3}
  JOBS=${MOECTS_JOBS:-$(nproc)}
  export MOECTS_ROOT=$PWD MOECTS_COMMIT=$COMMIT
  mkdir -p "$D" && D=$(cd "$D" && pwd) || exit 2
  : > "$D/status.txt"
  FAILED=0
}

pack() {
  [ -n "${MOECTS_PACK:-}" ] || return 0
  tar -czf "$MOECTS_PACK.tmp" -C "$(dirname "$D")" "$(basename "$D")" || return
  rm -f "$MOECTS_PACK" "$MOECTS_PACK".[0-9][0-9]
  if [ "$(stat -c %s "$MOECTS_PACK.tmp")" -gt 15728640 ]; then
    split -d -a 2 -b 15728640 "$MOECTS_PACK.tmp" "$MOECTS_PACK." && rm -f "$MOECTS_PACK.tmp"
  else mv -f "$MOECTS_PACK.tmp" "$MOECTS_PACK"; fi
}

# step NAME LIMIT_S CMD...: CMD under timeout (LIMIT_S, cut to what the budget leaves), stdout to
# $D/NAME.log, stderr to $D/NAME.err, a line in $D/status.txt; exit OK_RC (default 0) is success,
# anything else (a skip included) sets FAILED=1. Returns CMD's exit status.
step() {
  local name=$1 lim=$2 t0=$SECONDS; shift 2
  local left=$((BUDGET - SECONDS - ${STEP_MARGIN:-15}))
  [ "$left" -lt "$lim" ] && lim=$left
  if [ "$lim" -lt "${STEP_MIN:-20}" ]; then
    echo "$name skipped: ${left}s left" | tee -a "$D/status.txt"; FAILED=1; return 1
  fi
  timeout "$lim" "$@" > "$D/$name.log" 2> "$D/$name.err"
  local rc=$?
  echo "$name rc=$rc seconds=$((SECONDS - t0)) limit=$lim" | tee -a "$D/status.txt"
  [ "$rc" -eq "${OK_RC:-0}" ] || FAILED=1
  pack
  return $rc
}

# py_machine PY: the Python scripts' machine.txt lines (date, commit, Python and its packages, GPU)
py_machine() {
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: ${MOECTS_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  "$1" -c 'import sys, numpy, pytest, torch, triton, moects
print("python:", sys.version.split()[0], "numpy:", numpy.__version__, "pytest:", pytest.__version__)
print("torch:", torch.__version__, "cuda:", torch.version.cuda, "triton:", triton.__version__)
print("moects package:", moects.__file__, "libmoects:", moects.library_version())' 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  echo "cpus: $(nproc)"
}
