#!/bin/sh
# slurm_array.sh: the full tier over N GPU hosts as a Slurm job array, one shard a task, then the
# merge (docs/scale-out.md). Each task reads its shard from Slurm's environment: index
# SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT, so --array=0-7 and
# --array=1-8 both make shards 0/8 .. 7/8.
#
#   jid=$(sbatch --parsable examples/scale-out/slurm_array.sh)            # 8 shards, below
#   sbatch --dependency=afterany:$jid examples/scale-out/slurm_array.sh merge
#
# A shard's exit 1 (a failing kernel, a mutant escaped in that shard) is a result, not a failed
# task: the task exits 0 and the merge judges the whole run (exit 1 there when an honest kernel
# failed or a mutant escaped every shard). Any other status (a harness error) fails the task.
# Settings (environment): MOECTS (the binary, default moects on PATH), MOECTS_SELECTION (default
# --tier full), MOECTS_RESULTS (a directory every host sees, default $PWD/moects-results).
#SBATCH --job-name=moects-full
#SBATCH --array=0-7
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=16
#SBATCH --time=01:00:00
#SBATCH --output=moects-%A_%a.log
set -eu
moects=${MOECTS:-moects}
results=${MOECTS_RESULTS:-$PWD/moects-results}
if [ "${1:-}" = merge ]; then
    # the whole run from every shard's results.json; fails when one is missing
    # shellcheck disable=SC2046
    exec "$moects" merge "$results/merged" $(ls "$results"/shard-*/results.json)
fi
: "${SLURM_ARRAY_TASK_ID:?not in a Slurm job array (sbatch --array)}"
: "${SLURM_ARRAY_TASK_COUNT:?not in a Slurm job array (sbatch --array)}"
i=$((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-0})) n=$SLURM_ARRAY_TASK_COUNT
mkdir -p "$results"
out=$results/shard-$i
# a task requeued after a preemption goes on from its journal (--resume)
if [ -e "$out/results.journal" ]; then set -- --resume "$out"; else set -- --out "$out"; fi
# shellcheck disable=SC2086
"$moects" run ${MOECTS_SELECTION:---tier full} --shard "$i/$n" "$@" > "$out.tap" || {
    rc=$?
    [ "$rc" -eq 1 ] || exit "$rc"
}
