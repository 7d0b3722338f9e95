#!/bin/sh
# scale_out.sh MOECTS SOURCE_ROOT WORK_DIR: the worked scale-out examples (docs/scale-out.md) on N = 3
# local shards, run as the schedulers would: examples/scale-out/slurm_array.sh once per array index
# (SLURM_ARRAY_TASK_ID 1..3 of an --array=1-3) and then with `merge`, and the two command scripts of
# examples/scale-out/k8s_indexed_job.yaml (read with PyYAML) with JOB_COMPLETION_INDEX 0..2 and then
# the merge Job's. Each merged run must give every (kernel, case) the verdict of an unsharded run.
set -eu
moects=$1 root=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
export MOECTS_ROOT="$root" MOECTS_COMMIT=cli-test MOECTS="$moects"
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
# ~10 cases, every kernel of their op (the CUDA ones SKIP without a device)
export MOECTS_SELECTION="--tier full ep_gather/gpt-oss-20b/*/t16*"
# shellcheck disable=SC2086
"$moects" run $MOECTS_SELECTION --out whole >/dev/null 2>whole.err || [ $? -eq 1 ] || fail "unsharded run"

# Slurm: an array numbered from 1, as `sbatch --array=1-3` sets it
for id in 1 2 3; do
    SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=3 MOECTS_RESULTS=$work/slurm \
        sh "$root/examples/scale-out/slurm_array.sh" 2>>slurm.err || fail "slurm array task $id"
done
MOECTS_RESULTS=$work/slurm sh "$root/examples/scale-out/slurm_array.sh" merge >/dev/null 2>>slurm.err ||
    [ $? -eq 1 ] || fail "slurm merge step"

# Kubernetes: the Indexed Job's and the merge Job's command scripts, with their env (results here)
python3 - "$root/examples/scale-out/k8s_indexed_job.yaml" <<'PY' || fail "reading the Kubernetes example"
import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    spec, c = doc["spec"], doc["spec"]["template"]["spec"]["containers"][0]
    assert c["command"][:2] == ["/bin/sh", "-c"], c["command"]
    env = {e["name"]: e["value"] for e in c["env"] if e["name"] not in ("MOECTS_RESULTS", "MOECTS_SELECTION")}
    assert env["MOECTS_SHARDS"] == str(spec.get("completions", env["MOECTS_SHARDS"])), env
    env["MOECTS_SHARDS"] = "3"
    name = "shard" if spec.get("completionMode") == "Indexed" else "merge"
    with open(name + ".sh", "w") as f:
        f.write("".join("export %s='%s'\n" % kv for kv in env.items()) + c["command"][2])
PY
for i in 0 1 2; do
    JOB_COMPLETION_INDEX=$i MOECTS_RESULTS=$work/k8s sh shard.sh 2>>k8s.err || fail "indexed job pod $i"
done
MOECTS_RESULTS=$work/k8s sh merge.sh >/dev/null 2>>k8s.err || [ $? -eq 1 ] || fail "kubernetes merge job"

python3 - whole/results.json slurm/merged/results.json k8s/merged/results.json <<'PY' || fail "merged verdicts differ"
import json, sys
def verdicts(p):
    return [(r["kernel"], r["case"], r["verdict"]) for r in json.load(open(p))["results"]]
whole = verdicts(sys.argv[1])
assert len(whole) > 0
for p in sys.argv[2:]:
    for i in range(3):  # each index ran its own shard
        assert json.load(open(p.replace("merged", "shard-%d" % i)))["shard"] == "%d/3" % i, (p, i)
    got = verdicts(p)
    assert sorted(got) == sorted(whole), (p, set(got) ^ set(whole))
print("ok: %d verdicts of 3 shards, merged as Slurm and as Kubernetes would, equal the unsharded run's" % len(whole))
PY
