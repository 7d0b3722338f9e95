#!/bin/sh
# shards.sh: end-to-end CLI checks: --jobs and --shard: same results however the run is cut, determinism.
# Usage: shards.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: jobs_and_shards, shard_escape, default_jobs, determinism)
. "$(dirname "$0")/lib.sh"

case $name in
jobs_and_shards)
    pick 'ep_gather/*' 40 > ids
    # shellcheck disable=SC2046
    "$moects" run --out j1 --jobs 1 --kernel 'cpu.*' $(cat ids) > j1.tap
    rc1=$?
    # shellcheck disable=SC2046
    "$moects" run --out j2 --jobs 2 --kernel 'cpu.*' $(cat ids) > j2.tap
    rc2=$?
    [ $rc1 -eq $rc2 ] || fail "exit status differs with --jobs"
    cmp -s j1.tap j2.tap || fail "TAP differs between --jobs 1 and --jobs 2"
    # shards: 0/3, 1/3, 2/3 partition the cases
    for i in 0 1 2; do
        # shellcheck disable=SC2046
        "$moects" run --out s$i --shard $i/3 --kernel cpu.ep_gather -v $(cat ids) > s$i.tap
        grep -E '^    (not )?ok' s$i.tap | sed 's/^    [a-z ]*[0-9]* - //; s/ #.*//' >> shard_ids
    done
    sort shard_ids > a; sort ids > b
    cmp -s a b || fail "shards do not partition the selection"
    grep -q "shard 1/3" s1.tap || fail "shard not in TAP header"
    # Bazel / GoogleTest variables
    # shellcheck disable=SC2046
    TEST_TOTAL_SHARDS=3 TEST_SHARD_INDEX=1 TEST_SHARD_STATUS_FILE=$work/status "$moects" run --out b1 \
        --kernel cpu.ep_gather -v $(cat ids) > b1.tap
    [ -e status ] || fail "TEST_SHARD_STATUS_FILE not touched"
    cmp -s s1.tap b1.tap || { diff s1.tap b1.tap | head; fail "env shard differs from --shard 1/3"; }
    # weighted scheduling: with a threshold of 1 Mflop the FP4 cases hold several of 4 slots and
    # their references run on several threads; the results are those of one job
    pick 'fp4_gemm.*' 12 > fids
    [ -s fids ] || fail "no smoke FP4 case to use"
    # shellcheck disable=SC2046
    MOECTS_BIG_CASE_FLOPS=1e6 "$moects" run --out w4 --jobs 4 --kernel 'cpu.*' $(cat fids) $(head -n 4 ids) > w4.tap
    rc4=$?
    # shellcheck disable=SC2046
    "$moects" run --out w1 --jobs 1 --kernel 'cpu.*' $(cat fids) $(head -n 4 ids) > w1.tap
    [ $rc4 -eq $? ] || fail "exit status differs with weights"
    cmp -s w1.tap w4.tap || { diff w1.tap w4.tap | head; fail "TAP differs between --jobs 1 and weighted --jobs 4"; }
    python3 - <<'PY' || fail "weighted results differ from one job's, or timing missing"
import json, os
w = json.load(open("w4/results.json"))["results"]
o = json.load(open("w1/results.json"))["results"]
assert len(w) == len(o) > 0
# the dequant_sgemm kernels' sgemm rounds in an order that depends on its OpenBLAS thread count
# (ncpu/jobs): only their verdicts are compared (a bounded failure's reason names the worst element)
loose = ("calc_diff", "mismatches", "max_ulp", "first_mismatch", "diag", "reason")
for x, y in zip(w, o):
    skip = ("timing",) + (loose if x["kernel"].endswith(".dequant_sgemm") else ())
    a = {k: v for k, v in x.items() if k not in skip}
    b = {k: v for k, v in y.items() if k not in skip}
    assert a == b, (a, b)
    t = x["timing"]
    assert t["wall_s"] > 0 and min(t.values()) >= 0, t
    assert t["inputs_s"] + t["reference_s"] + t["kernel_s"] + t["compare_s"] <= t["wall_s"] + 1e-5, t
# each of the 4 slots has ncpu/4 threads (at least 1): a weighted reference has more
base = max(1, os.cpu_count() // 4)
assert max(x["timing"]["ref_threads"] for x in w) > base, "no reference ran on more than one slot's threads"
PY
    grep -q "^## Where the time went" w4/summary.md || fail "summary.md lacks the timing section"
    grep -q "^| case | tasks | wall | inputs | reference | kernel | compare |" w4/summary.md ||
        fail "summary.md lacks the slowest cases"
    ;;
shard_escape)
    # a mutant escaping one shard is a TODO point there (exit 0); the merge judges it (exit 1)
    ids=$(pick 'ep_gather/regression/block-divides-h/*' 2)
    for i in 0 1; do
        # shellcheck disable=SC2086
        "$moects" run --out s$i --shard $i/2 --kernel cpu.ep_gather,cpu.mutant.ep_gather.int32_offset $ids > s$i.tap
        rc=$?
        [ $rc -eq 0 ] || { cat s$i.tap; fail "shard $i: escaped mutant made exit $rc, want 0"; }
        grep -q "^ok 2 - cpu.mutant.ep_gather.int32_offset: mutant escaped in this shard.* # TODO " s$i.tap ||
            { cat s$i.tap; fail "shard $i: no TODO point for the escaped mutant"; }
        prove -e cat s$i.tap > prove.log 2>&1 || { cat prove.log; fail "prove failed the shard's TAP"; }
    done
    # the shards' cases are narrowed (case ids): merged, the mutant escaped this selection, a TODO as in the
    # unsharded run (exit 0)
    "$moects" merge m s0/results.json s1/results.json 2> merge.err
    rc=$?
    [ $rc -eq 0 ] || { cat merge.err; fail "merge: exit $rc with a mutant escaping a narrowed selection, want 0"; }
    grep -q "mutant cpu.mutant.ep_gather.int32_offset escaped this selection" merge.err || fail "merge: message"
    grep -q "^ok 2 - cpu.mutant.ep_gather.int32_offset: mutant escaped in this selection, passed.* # TODO " m/run.tap ||
        { cat m/run.tap; fail "merged TAP"; }
    # not narrowed (a model's cases, no case glob): each shard a TODO, the merge judges it (exit 1)
    cat > m.json <<'JSON'
{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
 "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
 "num_hidden_layers": 48}
JSON
    for i in 0 1; do
        "$moects" run --out c$i --shard $i/2 --config m.json --tp 8 --tier smoke \
            --kernel cpu.mutant.ep_gather.int32_offset > c$i.tap 2> c$i.err || { cat c$i.err; fail "config shard $i: exit not 0"; }
    done
    "$moects" merge mc c0/results.json c1/results.json 2> merge.err
    rc=$?
    [ $rc -eq 1 ] || { cat merge.err; fail "merge: exit $rc with an escaped mutant, want 1"; }
    grep -q "mutant cpu.mutant.ep_gather.int32_offset escaped the merged run" merge.err || fail "merge: message"
    grep -q "^not ok 1 - cpu.mutant.ep_gather.int32_offset: mutant escaped, passed" mc/run.tap || fail "merged TAP"
    # Bazel variables: same TODO, same exit 0
    # shellcheck disable=SC2086
    TEST_TOTAL_SHARDS=2 TEST_SHARD_INDEX=1 "$moects" run --out b1 \
        --kernel cpu.ep_gather,cpu.mutant.ep_gather.int32_offset $ids > b1.tap || fail "env shard: exit not 0"
    cmp -s s1.tap b1.tap || fail "env shard differs from --shard 1/2"
    # a kernel refusing every case of a shard: TODO there (another shard may run it); merge judges
    for i in 0 1; do
        # shellcheck disable=SC2086
        MOECTS_PLUGIN_EXAMPLE_BUG=refuse_all "$moects" run --out r$i --shard $i/2 --kernel-lib "$plugin" \
            --kernel plugin.ep_gather $ids > r$i.tap || { cat r$i.tap; fail "shard $i: refused kernel, exit not 0"; }
        grep -q "^ok 1 - plugin.ep_gather: refused all 1 cases it was given in this shard (UNSUPPORTED): .* # TODO " \
            r$i.tap || { cat r$i.tap; fail "shard $i: no TODO point for the refusing kernel"; }
    done
    "$moects" merge rm r0/results.json r1/results.json 2> merge.err
    [ $? -eq 1 ] || { cat merge.err; fail "merge: a kernel that refused every case, exit not 1"; }
    grep -q "kernel plugin.ep_gather refused every case of the merged run" merge.err || { cat merge.err; fail "merge: refused"; }
    # honest-kernel failures still fail a shard
    # shellcheck disable=SC2086
    "$moects" run --out h0 --known-findings /dev/null --shard 0/1 --kernel cpu.fp4_gemm.dequant_sgemm \
        fp4_gemm.mxfp4/regression/k-tail/n256/k48/m16/adversarial > h0.tap
    [ $? -eq 1 ] || fail "an honest failure in a shard: exit not 1"
    # ... and the merge of its shards, as the unsharded run (exit 1)
    "$moects" merge hm h0/results.json 2> merge.err
    [ $? -eq 1 ] || { cat merge.err; fail "merge: an honest kernel failed, exit not 1"; }
    grep -q "kernel cpu.fp4_gemm.dequant_sgemm failed in the merged run" merge.err || { cat merge.err; fail "merge: failed"; }
    ;;
default_jobs)
    # without a GPU the default --jobs is one worker per core: a small FP4 case's reference then
    # runs on ncpu/jobs = 1 OpenBLAS thread (with --jobs 1 on ncpu)
    id=fp4_gemm.mxfp4/regression/k-tail/n256/k48/m16/adversarial
    n=$(getconf _NPROCESSORS_ONLN)
    "$moects" run --out d --kernel cpu.fp4_gemm.blockwise "$id" > d.tap 2> d.err || { cat d.err; fail "default run"; }
    "$moects" run --out one --jobs 1 --kernel cpu.fp4_gemm.blockwise "$id" > one.tap || fail "--jobs 1 run"
    python3 - "$n" <<'PY' || fail "reference threads do not show jobs = one per core"
import json, sys
n = int(sys.argv[1])
d = json.load(open("d/results.json"))["results"][0]["timing"]["ref_threads"]
o = json.load(open("one/results.json"))["results"][0]["timing"]["ref_threads"]
assert (d, o) == (1, n), (d, o, n)
PY
    ;;
determinism)
    # a case alone gets the same result (bytes -> same verdicts/diagnostics) as inside a bigger run
    pick 'ep_gather/regression/*' 30 > ids
    one=$(sed -n 7p ids)
    # shellcheck disable=SC2046
    "$moects" run --out all --kernel 'cpu.*' -v $(cat ids) > all.tap
    "$moects" run --out alone --kernel 'cpu.*' -v "$one" > alone.tap
    python3 - "$one" <<'PY' || fail "case alone differs from the case in a run"
import json, sys
one = sys.argv[1]
a = [r for r in json.load(open("all/results.json"))["results"] if r["case"] == one]
b = json.load(open("alone/results.json"))["results"]
key = lambda r: r["kernel"]
strip = lambda r: {k: v for k, v in r.items() if k not in ("kernel_ms", "timing")}
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
for x, y in zip(sorted(a, key=key), sorted(b, key=key)):
    assert strip(x) == strip(y), (x, y)
PY
    ;;
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
