#!/bin/sh
# cli_tests.sh: end-to-end CTest checks of `moects list|run` (harness/CMakeLists.txt registers one
# CTest test per NAME). Usage: cli_tests.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR
set -u
name=$1 moects=$2 plugin=$3 root=$4 work=$5/$1
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail() { echo "FAIL [$name]: $*" >&2; exit 1; }
export MOECTS_ROOT="$root" MOECTS_COMMIT=cli-test
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
planted=$(dirname "$plugin")/libmoects_plugin_planted.so # tests/plugin_planted.c
# a few cheap smoke cases, whatever the registry holds
pick() { "$moects" list --tier smoke "$1" | cut -f1 | head -n "$2"; }

case $name in
gate_pr)
    # A kernel PR in miniature: a baseline run of plugin.ep_gather, then the same kernel name with
    # a bug (BLOCK_D = min(H, 1024)): the gate passes the clean run and fails the buggy one,
    # naming the broken cases (H = 3584 and 2880 crash; H = 7168 and 384 still pass).
    ids="ep_gather/regression/block-divides-h/h3584/t64 ep_gather/regression/block-divides-h/h7168/t64
         ep_gather/regression/block-divides-h/h2880/t64 ep_gather/regression/block-divides-h/h384/t64"
    # shellcheck disable=SC2086
    "$moects" run --kernel-lib "$plugin" --kernel plugin.ep_gather --out base $ids > base.tap ||
        fail "baseline run failed"
    # shellcheck disable=SC2086
    "$moects" run --kernel-lib "$plugin" --kernel plugin.ep_gather --out clean $ids > clean.tap || fail "clean run"
    "$moects" gate clean/results.json --baseline base/results.json > clean.md || { cat clean.md; fail "gate failed a clean run"; }
    # shellcheck disable=SC2086
    MOECTS_PLUGIN_EXAMPLE_BUG=block_min1024 "$moects" run --kernel-lib "$plugin" --kernel plugin.ep_gather \
        --out pr $ids > pr.tap 2> pr.err && fail "the buggy run exited 0"
    "$moects" gate pr/results.json --baseline base/results.json > pr.md; rc=$?
    [ $rc -eq 1 ] || { cat pr.md; fail "gate exit $rc on a regressed kernel, want 1"; }
    for h in 3584 2880; do
        grep -q "^- \*\*regression\*\* \`ep_gather/regression/block-divides-h/h$h/t64\`" pr.md ||
            { cat pr.md; fail "gate summary does not name h$h"; }
    done
    for h in 7168 384; do
        grep -q "^- \*\*regression\*\* \`ep_gather/regression/block-divides-h/h$h/t64\`" pr.md &&
            { cat pr.md; fail "gate summary names h$h, which passes"; }
    done
    # the repro line under a problem loads the same kernel library
    grep -q "moects run --kernel plugin.ep_gather --seed 1 .*--kernel-lib .*$(basename "$plugin")" pr.md ||
        { cat pr.md; fail "gate repro line lacks --kernel-lib"; }
    ;;
prove_mustpass)
    # prove runs `moects run --cases FILE` on each list: honest kernels only, must pass.
    pick 'ep_gather/regression/block-divides-h/*' 4 > a.txt
    [ -s a.txt ] || fail "no smoke case to use"
    { echo "# comment line"; pick 'ep_gather/regression/non-pow2-h/*' 2; } > b.txt
    prove --exec "$moects run --out $work/out --cases" a.txt b.txt > prove.log 2>&1 ||
        { cat prove.log; fail "prove failed on must-pass lists"; }
    grep -q "Result: PASS" prove.log || { cat prove.log; fail "no PASS"; }
    grep -qi "parse error" prove.log && fail "TAP parse errors"
    # an id that is not registered: a failing test point naming it, prove fails
    { cat a.txt; echo "ep_gather/no-such-model/tp1/t1"; } > c.txt
    prove --exec "$moects run --out $work/out --cases" c.txt > prove2.log 2>&1 &&
        fail "prove passed with an unregistered must-pass id"
    "$moects" run --out out --cases c.txt > c.tap 2> c.err
    [ $? -eq 1 ] || fail "exit status not 1 for a missing must-pass id"
    grep -qx "moects run: --cases c.txt: 1 must-pass id not registered (first: ep_gather/no-such-model/tp1/t1): the \
run fails; summary.md lists them" c.err || { cat c.err; fail "stderr does not say why the run fails"; }
    grep -q "^not ok .* must-pass case ep_gather/no-such-model/tp1/t1 is not registered (c.txt)" c.tap ||
        fail "missing id not named"
    ;;
junit)
    pick 'ep_gather/regression/block-divides-h/*' 6 > ids
    # shellcheck disable=SC2046
    "$moects" run --out out --kernel 'cpu.ep_gather*' -v $(cat ids) > run.tap || fail "run failed"
    cmp -s run.tap out/run.tap || fail "stdout and out/run.tap differ"
    prove -e cat run.tap > prove.log 2>&1 || { cat prove.log; fail "prove -e cat failed"; }
    prove --formatter TAP::Formatter::JUnit -e cat run.tap > junit.xml 2> junit.err || { cat junit.err; fail "JUnit formatter"; }
    xmllint --noout junit.xml || fail "JUnit XML not well-formed"
    grep -q "<testcase" junit.xml || fail "no testcase in JUnit XML"
    grep -q "<testsuite" junit.xml || fail "no testsuite in JUnit XML"
    grep -q "<failure" junit.xml && fail "failures in JUnit XML of a passing run"
    # counts: 'cpu.ep_gather*' selects the 2 honest CPU ep_gather kernels (cpu.ep_gather and
    # cpu.ep_gather.saxpy), one top-level TAP point each: 2 testcases, 0 failures, 0 errors
    n=$(xmllint --xpath 'count(//testcase)' junit.xml)
    [ "$n" = 2 ] || fail "JUnit testcases: $n, want 2"
    n=$(xmllint --xpath 'count(//failure) + count(//error)' junit.xml)
    [ "$n" = 0 ] || fail "JUnit failures+errors: $n, want 0"
    # and a failing point: the muladd mutant escapes these exact-data cases (fma and mul-add agree
    # when every product and sum is exact), so its one top-level point is "not ok": 1 failure
    # shellcheck disable=SC2046
    "$moects" run --out out2 --kernel 'cpu.mutant.ep_gather.muladd' $(cat ids) > esc.tap
    prove --formatter TAP::Formatter::JUnit -e cat esc.tap > junit2.xml 2> /dev/null
    xmllint --noout junit2.xml || fail "JUnit XML (failing run) not well-formed"
    n=$(xmllint --xpath 'count(//testcase)' junit2.xml)
    [ "$n" = 1 ] || fail "JUnit testcases (failing run): $n, want 1"
    n=$(xmllint --xpath 'count(//testcase/failure)' junit2.xml)
    [ "$n" = 1 ] || fail "JUnit failures (failing run): $n, want 1"
    for f in results.json summary.md run.tap; do [ -s out/$f ] || fail "out/$f missing"; done
    ;;
tap14)
    id=$(pick 'ep_gather/regression/block-divides-h/*' 1)
    "$moects" run --out out --kernel cpu.ep_gather --tap-version 14 "$id" > run.tap || fail "run failed"
    [ "$(head -n1 run.tap)" = "TAP version 14" ] || fail "header is not TAP version 14"
    "$moects" run --out out --kernel cpu.ep_gather "$id" > run13.tap || fail "run failed"
    [ "$(head -n1 run13.tap)" = "TAP version 13" ] || fail "default header is not TAP version 13"
    [ "$(tail -n +2 run.tap)" = "$(tail -n +2 run13.tap)" ] || fail "bodies of 13 and 14 differ"
    ;;
second_run)
    # issue 13: a kernel correct in run 1 that leaves its last element unwritten in run 2 (it sees the
    # second poison) fails with run 2's mismatch: 1 element, run 2 named. The runner compares run 2's
    # bits with run 1's before judging it (a memcmp); that must not hide the difference.
    id=ep_gather/regression/block-divides-h/h1024/t64
    MOECTS_PLUGIN_EXAMPLE_BUG=second_run "$moects" run --jobs 1 --out sr --kernel-lib "$plugin" \
        --kernel plugin.ep_gather --kernel cpu.ep_gather $id > sr.tap 2> sr.err && fail "second_run: the run exited 0"
    q() { jq -r --arg k "$1" ".results[] | select(.kernel == \$k) | $2" sr/results.json; }
    [ "$(q plugin.ep_gather .verdict)" = FAIL_MISMATCH ] || { cat sr.tap; fail "second_run: not FAIL_MISMATCH"; }
    [ "$(q plugin.ep_gather .mismatches)" = 1 ] || fail "second_run: not 1 mismatch"
    q plugin.ep_gather .reason | grep -q 'run 2 (fresh poison) failed where run 1 passed' ||
        fail "second_run: the reason does not name run 2"
    [ "$(q cpu.ep_gather .verdict)" = PASS_EXACT ] || fail "second_run: cpu.ep_gather does not pass"
    ;;
oob_write)
    # issue 13: a CPU kernel that writes one tile past its output (H 136: 56 elements past the end
    # of the last token's row) gets FAIL_OOB_WRITE naming buffer, side and offset on those cases
    # only, alone or batched with honest kernels in one worker (--jobs 1), and the honest kernels
    # keep every PASS (the overrun faults in the kernel's own process, never in the worker's heap).
    ids="ep_gather/regression/numeric-adversaries/k1/adversarial/bf16 ep_gather/regression/block-divides-h/h1024/t64
         ep_gather/regression/numeric-adversaries/k2/nan/f32"
    for mode in alone batched; do
        ks="--kernel plugin.ep_gather"
        [ $mode = batched ] && ks="$ks --kernel cpu.ep_gather --kernel cpu.ep_gather.saxpy"
        # shellcheck disable=SC2086
        MOECTS_PLUGIN_EXAMPLE_BUG=oob_tile "$moects" run --jobs 1 --out $mode --kernel-lib "$plugin" $ks $ids \
            > $mode.tap 2> $mode.err && fail "$mode: the overrunning kernel's run exited 0"
        v() { jq -r --arg k "$1" --arg c "$2" '.results[] | select(.kernel == $k and .case == $c) | .verdict' \
              $mode/results.json; }
        [ "$(v plugin.ep_gather ep_gather/regression/numeric-adversaries/k1/adversarial/bf16)" = FAIL_OOB_WRITE ] ||
            { cat $mode.tap; fail "$mode: H 136 bf16 not FAIL_OOB_WRITE"; }
        [ "$(v plugin.ep_gather ep_gather/regression/numeric-adversaries/k2/nan/f32)" = FAIL_OOB_WRITE ] ||
            fail "$mode: H 136 f32 not FAIL_OOB_WRITE"
        [ "$(v plugin.ep_gather ep_gather/regression/block-divides-h/h1024/t64)" = PASS_EXACT ] ||
            fail "$mode: H 1024 (no tail tile) does not pass"
        jq -r '.results[] | select(.verdict == "FAIL_OOB_WRITE") | .reason' $mode/results.json |
            grep -q '^out: after the end (byte offset +0): write' || fail "$mode: reason does not name out, side, offset"
        if [ $mode = batched ]; then
            n=$(jq '[.results[] | select(.kernel != "plugin.ep_gather" and (.verdict | startswith("PASS")))] | length' \
                batched/results.json)
            [ "$n" -eq 6 ] || { cat batched.tap; fail "honest kernels lost a PASS ($n of 6)"; }
        fi
    done
    ;;
plugin)
    pick 'ep_gather/regression/block-divides-h/*' 8 > ids
    "$moects" list --kernels --kernel-lib "$plugin" | grep -q "^plugin.ep_gather	ep_gather	cpu	ep_gather.fma_v1" ||
        fail "plugin kernel not listed"
    # shellcheck disable=SC2046
    "$moects" run --out out --kernel-lib "$plugin" --kernel plugin.ep_gather $(cat ids) > run.tap ||
        { cat run.tap; fail "honest plugin kernel did not pass"; }
    grep -q "^ok 1 - plugin.ep_gather: 8 of 8 cases pass" run.tap || fail "plugin top-level point"
    grep -q -- "--kernel-lib '" out/run.tap || true
    # errors name the file
    "$moects" run --kernel-lib ./nope.so > /dev/null 2> err.txt
    [ $? -eq 2 ] || fail "missing library: exit status not 2"
    grep -q "nope.so" err.txt || fail "missing library: file not named"
    MOECTS_PLUGIN_EXAMPLE_BAD_ABI=1 "$moects" run --kernel-lib "$plugin" > /dev/null 2> err.txt
    [ $? -eq 2 ] || fail "wrong ABI: exit status not 2"
    grep -q "abi_version" err.txt && grep -q "$(basename "$plugin")" err.txt || { cat err.txt; fail "wrong ABI message"; }
    [ "$(wc -l < err.txt)" -eq 1 ] || fail "more than one error line"
    # a descriptor that declares no recipe, bound or tolerance, or a bound of 99 bits, is refused at load
    for decl in '.recipe = 0' '.acc = {99, 0}' '.acc = {24, 1}, .split_k = {300, MOECTS_BF16}'; do
        cat > undeclared.c <<EOF
#include "moects_kernel.h"
static int ok(const void *s, char *w, size_t n) { (void)s, (void)w, (void)n; return 1; }
static int run(const void *s, const void *a, void *st) { (void)s, (void)a, (void)st; return 0; }
static const moects_kernel k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "u.k", .op = MOECTS_OP_MOE_GEMM,
    .device = MOECTS_DEVICE_CPU, .supports = ok, .run = run, $decl};
static const moects_kernel *const v[] = {&k};
const moects_kernel *const *moects_plugin_kernels(size_t *n) { *n = 1; return v; }
EOF
        ${CC:-cc} -shared -fPIC -I"$root/include/moects" -o undeclared.so undeclared.c || fail "cannot build undeclared.so"
        "$moects" run --kernel-lib ./undeclared.so --out u > /dev/null 2> err.txt
        [ $? -eq 2 ] && [ "$(wc -l < err.txt)" -eq 1 ] && [ ! -e u ] || { cat err.txt; fail "$decl: not refused at load"; }
        case $decl in
        .recipe*) grep -q "undeclared.so: kernel 0 (u.k): declare a recipe, a bound (acc.bits) or a tolerance" err.txt ;;
        *split_k*) grep -q "undeclared.so: kernel 0 (u.k): split_k: max_splits 300, dtype 1: a split-K reduction needs" err.txt ;;
        *) grep -q "undeclared.so: kernel 0 (u.k): acc: bits 99, truncation 0: bits 2..64" err.txt ;;
        esac || { cat err.txt; fail "$decl: message"; }
    done
    # a kernel built against ABI 2 (no split_k: its descriptor ends at last_error) still loads and passes
    cat > abi2.c <<EOF
#include <dlfcn.h>
#include "moects_kernel.h"
typedef struct { /* moects_kernel as ABI version 2 laid it out */
    uint32_t abi_version; const char *name; moects_op op; moects_device device; const char *recipe;
    moects_tolerance tol; const char *bug; int (*supports)(const void *, char *, size_t);
    int (*run)(const void *, const void *, void *); moects_accumulation acc; const char *(*last_error)(void);
} kernel_v2;
static const moects_kernel *real;
static int ok(const void *s, char *w, size_t n) { return real->supports(s, w, n); }
static int run(const void *s, const void *a, void *st) { return real->run(s, a, st); }
static const kernel_v2 k = {2, "v2.ep_gather", MOECTS_OP_EP_GATHER, MOECTS_DEVICE_CPU, "ep_gather.fma_v1", {0, 0}, 0,
                            ok, run, {0, 0}, 0};
static const kernel_v2 *const v[] = {&k};
const void *const *moects_plugin_kernels(size_t *n)
{
    void *h = dlopen("$plugin", RTLD_NOW);
    size_t m;
    real = h ? ((moects_kernels_fn)dlsym(h, MOECTS_PLUGIN_SYMBOL))(&m)[0] : 0;
    *n = real ? 1 : 0;
    return (const void *const *)v;
}
EOF
    ${CC:-cc} -shared -fPIC -I"$root/include/moects" -o abi2.so abi2.c -ldl || fail "cannot build abi2.so"
    # shellcheck disable=SC2046
    "$moects" run --out v2 --kernel-lib ./abi2.so --kernel v2.ep_gather $(cat ids) > v2.tap ||
        { cat v2.tap; fail "an ABI-2 kernel did not load or pass"; }
    grep -q "^ok 1 - v2.ep_gather: 8 of 8 cases pass" v2.tap || fail "ABI-2 kernel's top-level point"
    # a kernel that refuses every case it is given fails (UNSUPPORTED is a gap, never a pass)
    # shellcheck disable=SC2046
    MOECTS_PLUGIN_EXAMPLE_BUG=refuse_all "$moects" run --out out --kernel-lib "$plugin" --kernel plugin.ep_gather \
        $(cat ids) > refused.tap
    [ $? -eq 1 ] || fail "a kernel refusing every case: exit status not 1"
    grep -q "^not ok 1 - plugin.ep_gather: refused all 8 cases it was given (UNSUPPORTED): refuses every shape" \
        refused.tap || { cat refused.tap; fail "refused kernel's point"; }
    MOECTS_PLUGIN_EXAMPLE_BUG=refuse_all prove --exec "$moects run --out $work/out --kernel-lib $plugin --kernel \
        plugin.ep_gather --cases" ids > prove.log 2>&1 && { cat prove.log; fail "prove passed a kernel that refused all"; }
    ;;
host_oom)
    # a case too big for this host's memory is not judged: exit 2 with one line saying so, and a
    # must-pass list holding it fails (the x of this case alone is 4.8 GB; 3 GB of address space)
    id=ep_gather/regression/addr64-combine/h3584/k16/t37500
    "$moects" list "$id" | grep -q . || fail "$id is not registered"
    (ulimit -v 3000000 && exec "$moects" run --out out --kernel cpu.ep_gather "$id" > oom.tap 2> oom.err)
    rc=$?
    [ $rc -eq 2 ] || { cat oom.tap oom.err; fail "out of host memory: exit $rc, want 2"; }
    grep -q "^moects run: 1 result not judged, out of host memory (first: cpu.ep_gather, case $id: out of host memory (" \
        oom.err || { cat oom.err; fail "no one-line reason on stderr"; }
    echo "$id" > list.txt
    (ulimit -v 3000000 && exec prove --exec "$moects run --out $work/out2 --kernel cpu.ep_gather --cases" list.txt \
        > prove.log 2>&1) && { cat prove.log; fail "prove passed a must-pass case nobody judged"; }
    "$moects" gate out/results.json --mustpass list.txt > gate.md 2>&1 && fail "gate passed it"
    grep -q "not ok 2 - must-pass case $id was not judged" "$work/out2/run.tap" ||
        { cat "$work/out2/run.tap"; fail "the unjudged must-pass case is not a failing point"; }
    ;;
isolation)
    # SIGSEGV (in the kernel's own process, harness/run/guard.c) and a hang in workers cost one task
    # each; the run goes on, case-major.
    t1=$(pick 'ep_gather/regression/block-divides-h/kimi-k3-tp8/t1' 1)
    t16=$(pick 'ep_gather/regression/block-divides-h/kimi-k3-tp8/t16' 1)
    [ -n "$t1" ] && [ -n "$t16" ] || fail "kimi-k3-tp8 regression cases not registered"
    "$moects" run --out out --timeout 2 --kernel-lib "$plugin" --kernel 'plugin.*' "$t16" "$t1" > run.tap 2> err.txt
    rc=$?
    [ $rc -eq 0 ] || { cat run.tap; fail "exit status $rc (mutants caught, honest passing: want 0)"; }
    grep -q 'verdict: FAIL_CRASH' run.tap || fail "no FAIL_CRASH"
    grep -q 'reason: "kernel process killed by signal 11 (SIGSEGV: Segmentation fault) while the kernel ran"' run.tap || fail "crash reason"
    grep -q 'verdict: FAIL_TIMEOUT' run.tap || fail "no FAIL_TIMEOUT"
    grep -q 'reason: "killed after 2 s in the kernel"' run.tap || fail "timeout reason"
    grep -q "^ok 1 - plugin.ep_gather: 2 of 2 cases pass" run.tap || fail "honest kernel after the crash"
    grep -q "^ok 2 - plugin.mutant.segv: mutant caught by 1 of 2 cases" run.tap || fail "segv mutant"
    grep -q "^ok 3 - plugin.mutant.hang: mutant caught by 1 of 2 cases" run.tap || fail "hang mutant"
    # the kernel log names each lost task after what its worker printed
    grep -qxF "moects: plugin.mutant.segv on $t16: FAIL_CRASH: kernel process killed by signal 11 (SIGSEGV: Segmentation fault) while the kernel ran" \
        out/kernels.log || { cat out/kernels.log; fail "kernel log: crash line"; }
    grep -qxF "moects: plugin.mutant.hang on $t16: FAIL_TIMEOUT: killed after 2 s in the kernel" out/kernels.log ||
        { cat out/kernels.log; fail "kernel log: timeout line"; }
    prove -e cat run.tap > prove.log 2>&1 || { cat prove.log; fail "prove"; }
    ;;
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
bad_input)
    for args in "--tier nightly" "--shard 3/3" "--seed -4" "--tap-version 12" "--jobs 0" "no/such/case/*" "--kernel nosuch" "--bogus"; do
        # shellcheck disable=SC2086
        "$moects" run --out out $args > out.txt 2> err.txt
        rc=$?
        [ $rc -eq 2 ] || fail "run $args: exit $rc, want 2"
        [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "run $args: want one stderr line"; }
        [ -s out.txt ] && fail "run $args: wrote to stdout"
        [ -e out ] && fail "run $args: created the out directory"
    done
    for v in abc 0 -5 1e400 nan; do
        MOECTS_BIG_CASE_FLOPS=$v "$moects" run --out out > out.txt 2> err.txt
        rc=$?
        [ $rc -eq 2 ] || fail "MOECTS_BIG_CASE_FLOPS=$v: exit $rc, want 2"
        [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "MOECTS_BIG_CASE_FLOPS=$v: want one stderr line"; }
        grep -q "MOECTS_BIG_CASE_FLOPS=$v" err.txt || { cat err.txt; fail "MOECTS_BIG_CASE_FLOPS=$v not named"; }
        [ -e out ] && fail "MOECTS_BIG_CASE_FLOPS=$v: created the out directory"
    done
    "$moects" run --help | grep -q MOECTS_BIG_CASE_FLOPS || fail "run --help does not document MOECTS_BIG_CASE_FLOPS"
    grep -q 'no case matches "no/such/case/\*"' err.txt 2>/dev/null || true
    "$moects" run --out out 'no/such/case/*' 2>&1 | grep -q 'no case matches' || fail "glob message"
    # malformed model file: one line naming the file, exit 2, nothing written
    mkdir -p badroot/cases/models badroot/cases/regressions
    echo '{"name": "broken", "hidden_size": ' > badroot/cases/models/broken.json
    "$moects" run --root badroot --out out > out.txt 2> err.txt
    [ $? -eq 2 ] || fail "malformed model: exit status"
    grep -q "broken.json" err.txt || { cat err.txt; fail "malformed model: file not named"; }
    [ -e out ] && fail "malformed model: created out"
    "$moects" list 'no/such/*' > /dev/null 2>&1
    [ $? -eq 2 ] || fail "list: glob matching nothing must exit 2"
    ;;
exit_status)
    id=$(pick 'ep_gather/regression/block-divides-h/*' 1)
    "$moects" run --out out --kernel cpu.ep_gather "$id" > /dev/null || fail "honest pass must exit 0"
    # a mutant that the selected case does not catch: escaped -> exit 1
    "$moects" run --out out --kernel cpu.mutant.ep_gather.int32_offset "$id" > esc.tap
    [ $? -eq 1 ] || fail "escaped mutant must exit 1"
    grep -q "^not ok 1 - cpu.mutant.ep_gather.int32_offset: mutant escaped" esc.tap || fail "escaped point"
    # list
    "$moects" list --kernels | grep -q "^cpu.ep_gather	" || fail "list --kernels"
    "$moects" list 'ep_gather/*' | head -n1 | grep -q "	" && fail "list: ids alone by default"
    "$moects" list -l 'ep_gather/*' | head -n1 | grep -q "	" || fail "list -l: id TAB tiers"
    # ids alone are a --cases file, also read from a pipe
    "$moects" list 'ep_gather/regression/block-divides-h/*' | head -n 3 |
        "$moects" run --kernel cpu.ep_gather --cases - > piped.tap || fail "run --cases -: exit status"
    grep -q "^ok 1 - cpu.ep_gather: 3 of 3 cases pass" piped.tap || { cat piped.tap; fail "run --cases -: not the 3 piped ids"; }
    : | "$moects" run --cases - > /dev/null 2> err.txt; [ $? = 2 ] || fail "run --cases - (empty): exit"
    grep -q "^moects run: --cases -: no case ids" err.txt || { cat err.txt; fail "run --cases - (empty): message"; }
    # list selects as run does: the smoke tier by default (each line's tiers hold smoke, and there are
    # ep_gather cases outside it), an exact id whatever its tier unless --tier is given
    "$moects" list -l 'ep_gather/*' | cut -f2 | grep -qv smoke && fail "list: a case outside the smoke tier by default"
    "$moects" list -l --tier all 'ep_gather/*' | cut -f2 | grep -qv smoke || fail "list --tier all: no case outside smoke"
    [ "$("$moects" list -l ep_gather/kimi-k3/tp8/t128)" = "ep_gather/kimi-k3/tp8/t128	full" ] || fail "list: exact full-tier id"
    "$moects" list --tier smoke ep_gather/kimi-k3/tp8/t128 > out.txt 2> err.txt; [ $? = 2 ] || fail "list --tier smoke: exit"
    [ "$(cat err.txt)" = "moects list: 1 case match but none is in tier smoke (use --tier full|large|all)" ] ||
        { cat err.txt; fail "list --tier smoke of a full-tier id: message"; }
    "$moects" list --help | grep -q -- "--tier T .*(default: smoke, as moects run" || fail "list --help: default tier"
    # without --kernel a narrow selection (one W4A16 case) fails the kernels made for other formats; the
    # line before the verdict names them (CUDA builds add their own) and says how to leave them out
    w16=moe_gemm.w4a16/regression/moe-k-tail-scales/e8/n256/k208/linear
    "$moects" run --out out "$w16" > /dev/null 2> hint.err; [ $? = 1 ] || fail "W4A16 alone with every kernel: exit"
    grep -q "^moects run: [0-9]* kernels refused every selected case (cpu.moe_gemm.blockwise[,)].*: --kernel GLOB names the kernels to judge$" hint.err ||
        { cat hint.err; fail "no hint naming cpu.moe_gemm.blockwise"; }
    "$moects" run --out out --kernel cpu.moe_gemm.dequant_sgemm "$w16" > /dev/null 2> hint.err || fail "dequant_sgemm on W4A16"
    grep -q "refused every selected case" hint.err && fail "a hint though --kernel was given"
    ;;
known_findings)
    # cases/known-findings.txt: dequant_sgemm's FP32 overflow on MXFP4 adversarial data is a TODO point
    adv=fp4_gemm.mxfp4/regression/k-tail/n256/k48/m16/adversarial
    "$moects" run --out out --kernel cpu.fp4_gemm.dequant_sgemm "$adv" > run.tap 2> run.err
    rc=$?
    [ $rc -eq 0 ] || { cat run.tap; fail "a known finding made the run exit $rc (want 0)"; }
    tail -n 1 run.err | grep -q "; 1 results: 0 passed, 1 failed (1 known finding), 0 skipped or unsupported;" ||
        { tail -n 1 run.err; fail "the verdict line does not count the known finding"; }
    # the verdict line counts the kernels that had a case: an ep_gather kernel and mutant more, which take
    # no fp4_gemm case, change nothing
    "$moects" run --out out2 --kernel cpu.fp4_gemm.dequant_sgemm,cpu.ep_gather,cpu.mutant.ep_gather.int32_offset "$adv" \
        > /dev/null 2> run2.err || { cat run2.err; fail "kernels without a case: exit $?"; }
    [ "$(tail -n 1 run2.err)" = "moects run: PASS: 0 of 1 honest kernel fail, 0 of 0 mutants escaped; 1 results: 0 passed, 1 failed (1 known finding), 0 skipped or unsupported; summary: out2/summary.md" ] ||
        { tail -n 1 run2.err; fail "the verdict line counts kernels that had no case"; }
    grep -q "^    not ok 1 - $adv # TODO known finding: dequantized operand overflows FP32" run.tap ||
        { cat run.tap; fail "no TODO known finding point"; }
    grep -q "^      known: \"dequantized operand overflows FP32" run.tap || fail "no known: in the YAML block"
    grep -q "^ok 1 - cpu.fp4_gemm.dequant_sgemm: 0 of 1 cases pass, 1 known finding (TODO)$" run.tap ||
        fail "top-level point"
    prove -e cat run.tap > prove.log 2>&1 || { cat prove.log; fail "prove counted the known finding"; }
    grep -q '"verdict": "FAIL_MISMATCH",.*"known": "dequantized operand overflows FP32' out/results.json ||
        fail "results.json lacks the verdict or \"known\""
    grep -q "^## Known findings (honest kernels" out/summary.md || fail "summary.md: no known findings section"
    "$moects" gate out/results.json > gate.md || { cat gate.md; fail "gate failed on a known finding"; }
    grep -q "1 honest failure is a known finding" gate.md || fail "gate does not count the known finding"
    # without the file the same result fails the run; the NVFP4 twin is outside the entry and passes
    "$moects" run --out out --known-findings /dev/null --kernel cpu.fp4_gemm.dequant_sgemm "$adv" > raw.tap
    [ $? -eq 1 ] || fail "--known-findings /dev/null: exit status not 1"
    grep -q "^not ok 1 - cpu.fp4_gemm.dequant_sgemm: 1 of 1 cases fail$" raw.tap || fail "raw failure point"
    grep -q "TODO" raw.tap && fail "TODO without known findings"
    nv=fp4_gemm.nvfp4/regression/k-tail/n256/k48/m16/adversarial
    "$moects" run --out out --kernel cpu.fp4_gemm.dequant_sgemm "$nv" > nv.tap || fail "NVFP4 twin"
    grep -q "^    ok 1 - $nv$" nv.tap || fail "NVFP4 twin: not a plain pass"
    # an entry matching a case that passes: reported as fixed?, not an error
    t1=ep_gather/regression/block-divides-h/kimi-k3-tp8/t1
    printf '# test\ncpu.ep_gather  %s  pretend it was broken\n' "$t1" > fixed.txt
    "$moects" run --out out --known-findings fixed.txt --kernel cpu.ep_gather "$t1" > fixed.tap ||
        fail "a passing case under an entry: exit status not 0"
    grep -q "^ok 1 - cpu.ep_gather: 1 of 1 cases pass, 1 known finding now passes (fixed?)$" fixed.tap ||
        { cat fixed.tap; fail "fixed? not in the top-level point"; }
    grep -q "pretend it was broken (fixed? remove from known-findings)" out/summary.md || fail "fixed? not in summary.md"
    # malformed and stale entries: one line naming file:line, exit 2, nothing written
    rm -rf out
    for bad in "cpu.x ep_gather/*|known.txt:2: missing reason" "cpu.x|known.txt:2: missing CASE_GLOB" \
               "cpu.x * r|known.txt:2: CASE_GLOB \"*\": matches everything" \
               "cpu.x no/such/case/* r|known.txt:2: CASE_GLOB \"no/such/case/*\" matches no registered case"; do
        printf '# header\n%s\n' "${bad%%|*}" > known.txt
        "$moects" run --out out --known-findings known.txt "$t1" > out.txt 2> err.txt
        [ $? -eq 2 ] || fail "bad entry '${bad%%|*}': exit status not 2"
        [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "bad entry: want one stderr line"; }
        grep -qF "${bad#*|}" err.txt || { cat err.txt; fail "bad entry: message"; }
        [ -s out.txt ] && fail "bad entry: wrote to stdout"
        [ -e out ] && fail "bad entry: created the out directory"
    done
    ;;
early_errors)
    # problems found before any case runs: exit 2, one stderr line naming the culprit, no stdout
    t1=ep_gather/regression/block-divides-h/kimi-k3-tp8/t1
    check() { # what rc: want exit 2, one stderr line containing $what, empty stdout
        [ "$2" -eq 2 ] || { cat err.txt; fail "$1: exit $2, want 2"; }
        [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "$1: want one stderr line"; }
        grep -qF -- "$1" err.txt || { cat err.txt; fail "$1: not named"; }
        [ -s out.txt ] && fail "$1: wrote to stdout"
        return 0
    }
    : > regfile
    "$moects" run --out regfile/sub --kernel cpu.ep_gather "$t1" > out.txt 2> err.txt; check "regfile/sub" $?
    "$moects" run --out regfile --kernel cpu.ep_gather "$t1" > out.txt 2> err.txt; check "--out regfile" $?
    mkdir ro && chmod a-w ro
    if ! touch ro/x 2>/dev/null; then # root writes anywhere: skip there
        "$moects" run --out ro --kernel cpu.ep_gather "$t1" > out.txt 2> err.txt; check "--out ro" $?
    fi
    chmod u+w ro
    rm -f ro/x
    ls -A ro | grep -q . && fail "write test left a file behind"
    "$moects" run --out out --kernel cpu.ep_gather "$t1" > out.txt || fail "a writable --out"
    ls -A out | grep -q moects-write-test && fail "write test file left in --out"
    # --known-findings FILE must exist; /dev/null is none
    "$moects" run --out out --known-findings nosuch.txt --kernel cpu.ep_gather "$t1" > out.txt 2> err.txt
    check "--known-findings nosuch.txt" $?
    "$moects" run --out out --known-findings /dev/null --kernel cpu.ep_gather "$t1" > out.txt ||
        fail "--known-findings /dev/null"
    # Bazel sets both shard variables: one alone is an error
    TEST_TOTAL_SHARDS=3 "$moects" run --out out --kernel cpu.ep_gather "$t1" > out.txt 2> err.txt
    check "TEST_TOTAL_SHARDS=3 without TEST_SHARD_INDEX" $?
    # gate --summary "" ($GITHUB_STEP_SUMMARY unset): no file, one note on stderr, the summary on
    # stdout, and the gate's own exit status (the one cpu.ep_gather case passed: 0)
    : > gate.md
    before=$(ls -A)
    "$moects" gate out/results.json --summary "" > gate.md 2> err.txt
    rc=$?
    [ $rc -eq 0 ] || { cat err.txt; fail "gate --summary '': exit $rc, want 0"; }
    [ "$(cat err.txt)" = "moects gate: --summary is empty: no summary file written" ] ||
        { cat err.txt; fail "gate --summary '': message"; }
    grep -q "^## moects gate: PASS$" gate.md || { cat gate.md; fail "gate --summary '': no summary on stdout"; }
    [ "$(ls -A)" = "$before" ] || fail "gate --summary '': wrote a file"
    # gate --mustpass LIST without case ids: refused as run --cases refuses it
    printf '# only comments\n\n' > noids.txt
    "$moects" gate out/results.json --mustpass noids.txt > out.txt 2> err.txt; check "--mustpass noids.txt: no case ids" $?
    # options that would be ignored are refused
    "$moects" list --kernels 'ep*' > out.txt 2> err.txt; check "--kernels takes --kernel GLOB" $?
    "$moects" list --kernel 'cpu*' > out.txt 2> err.txt; check "--kernel lists kernels only with --kernels" $?
    echo "$t1" > one.txt
    "$moects" run --out out --cases one.txt "$t1" > out.txt 2> err.txt; check "--cases and case globs" $?
    # an option given last without its value is named as such (then the usage)
    for c in "coverage --tp" "gate out/results.json --summary" "merge m --cases"; do
        # shellcheck disable=SC2086
        "$moects" $c > out.txt 2> err.txt
        rc=$?
        [ $rc -eq 2 ] && head -n1 err.txt | grep -q -- "^moects ${c%% *}: --[a-z]*: missing value$" ||
            { cat err.txt; fail "$c: exit $rc, missing value not named"; }
    done
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
    "$moects" merge m s0/results.json s1/results.json 2> merge.err
    rc=$?
    [ $rc -eq 1 ] || { cat merge.err; fail "merge: exit $rc with an escaped mutant, want 1"; }
    grep -q "mutant cpu.mutant.ep_gather.int32_offset escaped the merged run" merge.err || fail "merge: message"
    grep -q "^not ok 2 - cpu.mutant.ep_gather.int32_offset: mutant escaped, passed" m/run.tap || fail "merged TAP"
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
    ;;
dump)
    # run --dump: a mismatching case's inputs, reference and output in the export format; verify
    # judges them again with the same count; the case's reference written as the output passes.
    c=ep_gather/regression/block-divides-h/h896/t16/adversarial
    k=cpu.mutant.ep_gather.muladd
    "$moects" run --kernel "$k" --dump d --out o "$c" > run.tap || fail "run: a caught mutant, exit not 0"
    n=$(sed -n 's/^ *mismatches: //p' run.tap)
    [ -n "$n" ] && [ "$n" -gt 0 ] || { cat run.tap; fail "no mismatch count"; }
    f=d/$k/ep_gather__regression__block-divides-h__h896__t16__adversarial
    [ -f "$f.safetensors" ] && [ -f "$f.out.safetensors" ] || { find d; fail "dump files"; }
    "$moects" verify "d/$k" --kernel "$k" --out v > verify.tap
    [ $? -eq 1 ] || { cat verify.tap; fail "verify of the dump: exit not 1"; }
    [ "$(sed -n 's/^ *mismatches: //p' verify.tap)" = "$n" ] || { cat verify.tap; fail "verify: not $n mismatches"; }
    grep -q '"verdict": "FAIL_MISMATCH"' v/results.json || fail "verify: results.json"
    # an honest kernel leaves no dump
    "$moects" run --kernel cpu.ep_gather --dump d2 --out o2 "$c" > /dev/null || fail "honest run"
    [ ! -e d2 ] || fail "a passing run dumped"
    ;;
kernel_error)
    # A kernel's own error reaches its case: last_error() (ABI 2) after a non-zero run(), with what it
    # printed during that task; a hang is FAIL_TIMEOUT with its output too.
    t16=ep_gather/regression/block-divides-h/kimi-k3-tp8/t16
    cat > err.c <<'EOF'
#include <stdio.h>
#include <unistd.h>
#include "moects_kernel.h"
static int ok(const void *s, char *w, size_t n) { (void)s, (void)w, (void)n; return 1; }
static const char *last(void) { return "an illegal memory access was encountered (cudaErrorIllegalAddress)"; }
static int fails(const void *s, const void *a, void *st) { (void)s, (void)a, (void)st; fprintf(stderr, "launching grid 7x1\n"); return 700; }
static int hangs(const void *s, const void *a, void *st) { (void)s, (void)a, (void)st; printf("waiting for a flag\n"); fflush(stdout); for (;;) pause(); }
static const moects_kernel k1 = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "err.fails", .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU, .recipe = "ep_gather.fma_v1", .supports = ok, .run = fails, .last_error = last};
static const moects_kernel k2 = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "err.hangs", .op = MOECTS_OP_EP_GATHER,
    .device = MOECTS_DEVICE_CPU, .recipe = "ep_gather.fma_v1", .supports = ok, .run = hangs};
static const moects_kernel *const v[] = {&k1, &k2};
const moects_kernel *const *moects_plugin_kernels(size_t *n) { *n = 2; return v; }
EOF
    ${CC:-cc} -shared -fPIC -I"$root/include/moects" -o err.so err.c || fail "cannot build err.so"
    "$moects" run --out out --timeout 2 --kernel-lib ./err.so --kernel 'err.*' "$t16" > run.tap 2> err.txt
    [ $? -eq 1 ] || { cat run.tap err.txt; fail "exit not 1"; }
    r1='run() returned 700: an illegal memory access was encountered (cudaErrorIllegalAddress); kernel output: launching grid 7x1'
    r2='killed after 2 s in the kernel; kernel output: waiting for a flag'
    for r in "$r1" "$r2"; do
        grep -qF "reason: \"$r\"" run.tap || { grep reason: run.tap; fail "reason in the TAP: $r"; }
        grep -qF "\"reason\": \"$r\"" out/results.json || fail "reason in results.json: $r"
    done
    grep -qxF "launching grid 7x1" out/kernels.log || fail "kernels.log keeps the output"
    ;;
kernel_log)
    # What kernels print (stdout and stderr of the workers) goes to OUT/kernels.log, each lost task
    # named after it; stderr keeps the run's own lines; stdout is the TAP alone.
    t16=ep_gather/regression/block-divides-h/kimi-k3-tp8/t16
    cat > noisy.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "moects_kernel.h"
static int ok(const void *s, char *w, size_t n) { (void)s, (void)w, (void)n; return 1; }
static int run(const void *shape, const void *args, void *stream)
{
    (void)args, (void)stream;
    printf("noisy: stdout T=%lld;", (long long)((const moects_ep_gather_shape *)shape)->T); /* no newline */
    fprintf(stderr, " noisy: stderr\n");
    abort();
}
static const moects_kernel k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "noisy.mutant",
    .op = MOECTS_OP_EP_GATHER, .device = MOECTS_DEVICE_CPU, .recipe = "ep_gather.fma_v1",
    .bug = "prints, then aborts", .supports = ok, .run = run};
static const moects_kernel *const v[] = {&k};
const moects_kernel *const *moects_plugin_kernels(size_t *n) { *n = 1; return v; }
EOF
    ${CC:-cc} -shared -fPIC -I"$root/include/moects" -o noisy.so noisy.c || fail "cannot build noisy.so"
    "$moects" run --out out --kernel-lib ./noisy.so --kernel 'cpu.mutant.ep_gather.block_min1024,noisy.*' "$t16" \
        > run.tap 2> err.txt
    rc=$?
    [ $rc -eq 0 ] || { cat run.tap err.txt; fail "exit $rc, want 0 (both mutants caught)"; }
    what="kernel log (what the kernels printed; each crash and timeout)"
    [ "$(head -n 1 err.txt)" = "moects run: $what: 4 lines in out/kernels.log" ] || { cat err.txt; fail "stderr"; }
    [ "$(wc -l < err.txt)" = 2 ] && tail -n 1 err.txt | grep -q "^moects run: PASS: " ||
        { cat err.txt; fail "stderr: the kernel log line, then the verdict"; }
    printf '%s\n' \
        "cpu.mutant.ep_gather.block_min1024: assertion hidden % BLOCK_D == 0 failed (hidden 3584, BLOCK_D 1024)" \
        "moects: cpu.mutant.ep_gather.block_min1024 on $t16: FAIL_CRASH: worker killed by signal 6 (SIGABRT: Aborted) while the kernel ran" \
        "noisy: stdout T=16; noisy: stderr" \
        "moects: noisy.mutant on $t16: FAIL_CRASH: kernel process killed by signal 6 (SIGABRT: Aborted) while the kernel ran" > want.log
    cmp -s want.log out/kernels.log || { diff want.log out/kernels.log; fail "kernels.log"; }
    cmp -s run.tap out/run.tap || fail "stdout is not the TAP alone"
    grep -q "kernels.log" run.tap && fail "the TAP names the kernel log (it depends on the results alone)"
    # each crash carries the signal and what that kernel printed during its task, in the TAP and results.json
    r1='worker killed by signal 6 (SIGABRT: Aborted) while the kernel ran; kernel output: cpu.mutant.ep_gather.block_min1024: assertion hidden % BLOCK_D == 0 failed (hidden 3584, BLOCK_D 1024)'
    r2='kernel process killed by signal 6 (SIGABRT: Aborted) while the kernel ran; kernel output: noisy: stdout T=16; noisy: stderr'
    for r in "$r1" "$r2"; do
        grep -qF "      reason: \"$r\"" run.tap || { grep reason: run.tap; fail "crash reason in the TAP: $r"; }
        grep -qF "\"reason\": \"$r\"" out/results.json || fail "crash reason in results.json: $r"
    done
    grep -qxF -- "- $what: 4 lines in \`kernels.log\` (next to this file)" out/summary.md || fail "summary.md line"
    prove -e cat run.tap > prove.log 2>&1 || { cat prove.log; fail "prove"; }
    # a quiet run in the same --out: the log is this run's (empty), stderr only the verdict line
    "$moects" run --out out --kernel cpu.ep_gather "$t16" > run2.tap 2> err.txt || fail "quiet run"
    [ "$(wc -l < err.txt)" = 1 ] && grep -q "^moects run: PASS: " err.txt || { cat err.txt; fail "quiet run's stderr"; }
    [ -e out/kernels.log ] && [ ! -s out/kernels.log ] || fail "kernels.log of a quiet run not empty"
    grep -qxF -- "- $what: empty, \`kernels.log\` (next to this file)" out/summary.md || fail "summary.md (quiet run)"
    # an interrupted run leaves the previous report whole, its kernels.log included, and no temp file
    "$moects" run --out out --kernel-lib ./noisy.so --kernel 'noisy.*' "$t16" > /dev/null 2>&1
    cp out/kernels.log before.log && cp out/summary.md before.md
    [ -s before.log ] || fail "no kernel log to keep"
    timeout -s INT 2 "$moects" run --out out --kernel-lib "$plugin" --kernel plugin.mutant.hang --timeout 60 \
        ep_gather/regression/block-divides-h/h3584/t64 > /dev/null 2> int.err
    [ $? -eq 124 ] || fail "the interrupted run did not run into timeout"
    grep -qx "moects run: interrupted: the results so far are in out/results.journal (--resume out continues the run); \
any other report there is an earlier run's" int.err || { cat int.err; fail "no line saying the run was interrupted"; }
    cmp -s before.log out/kernels.log || fail "an interrupted run changed kernels.log"
    cmp -s before.md out/summary.md || fail "an interrupted run changed summary.md"
    ls out | grep -q tmp && { ls out; fail "temp file left in --out"; }
    ;;
run_input)
    # a must-pass list without ids, and an --out that cannot be made: exit 2, one exact line,
    # nothing on stdout, nothing created
    printf '# only comments\n\n   \n# and blank lines\n' > empty.txt
    : > zero.txt
    : > regfile
    for c in "--cases empty.txt|moects run: --cases empty.txt: no case ids" \
             "--cases zero.txt|moects run: --cases zero.txt: no case ids" \
             "--cases empty.txt --cases zero.txt|moects run: --cases empty.txt: no case ids" \
             "--out regfile/sub|moects run: --out regfile/sub: cannot create directory: Not a directory" \
             "--out regfile/sub/x|moects run: --out regfile/sub/x: regfile/sub: cannot create directory: Not a directory"; do
        case ${c%%|*} in --out*) o= ;; *) o="--out out" ;; esac
        # shellcheck disable=SC2086
        "$moects" run $o ${c%%|*} > out.txt 2> err.txt
        rc=$?
        [ $rc -eq 2 ] || fail "${c%%|*}: exit $rc, want 2"
        [ "$(cat err.txt)" = "${c#*|}" ] || { cat err.txt; fail "${c%%|*}: message"; }
        [ -s out.txt ] && fail "${c%%|*}: wrote to stdout"
        [ -e out ] && fail "${c%%|*}: created the out directory"
        [ -e regfile ] && [ ! -s regfile ] || fail "${c%%|*}: regfile changed"
    done
    # --help says what the defaults are
    "$moects" run --help > help.txt || fail "run --help"
    grep -q "(default 120; 0: no limit)" help.txt || fail "--help: timeout default"
    grep -q "(default: one per visible GPU when a CUDA kernel has" help.txt &&
        grep -q "work, else one per CPU core)" help.txt || fail "--help: jobs default"
    grep -q "kernels.log there holds what the kernels printed" help.txt || fail "--help: kernels.log"
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
diag_planted)
    # one wrong element, D[M-1][N-1], in a 16 x 768 MXFP4 GEMM: coordinates (m 15, n 767) and a pattern
    # naming the last 128-column tile of N (5 * 128 = 640 .. 767); the dims are the Kimi K3 tp8 gemm1's
    id=fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16
    "$moects" list -v "$id" | grep -qF "D [M 16, N 768] bf16" || fail "list -v: not the 16 x 768 case"
    MOECTS_PLANTED=last_tile_elem "$moects" run --out out --kernel-lib "$planted" --kernel planted.fp4_gemm "$id" \
        > run.tap 2> err.txt && { cat run.tap; fail "a wrong element passed"; }
    grep -qF 'pattern: "one element: row 15 (the last), column 767 (in the last 128-column tile of N: 640..767)"' run.tap ||
        { cat run.tap; fail "pattern line"; }
    grep -qF 'at: "(m 15, n 767)"' run.tap || fail "coordinates"
    python3 - <<'PY' || fail "results.json diag"
import json
r = json.load(open("out/results.json"))["results"][0]
d = r["diag"]
assert d["axes"] == ["m", "n"], d
assert [e["at"] for e in d["first"]] == [[15, 767]], d
assert d["first"][0]["index"] == 15 * 768 + 767 and d["first"][0]["ulp"] == 1, d
PY
    prove -e cat run.tap > prove.log 2>&1; grep -q "Parse errors" prove.log && { cat prove.log; fail "prove parse"; }
    ;;
repro)
    # a repro line pasted as printed, from another folder: it calls this binary, reruns the case into
    # ./reports/repro/<id>, and leaves reports/latest (of the source tree and of that folder) alone
    id=fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16
    MOECTS_PLANTED=last_tile_elem "$moects" run --out out --kernel-lib "$planted" --kernel planted.fp4_gemm "$id" \
        > run.tap 2> /dev/null
    line=$(sed -n 's/^ *repro: "\(.*\)"$/\1/p' run.tap)
    [ -n "$line" ] || { cat run.tap; fail "no repro line"; }
    first=${line%% *}
    [ "$first" = "$(readlink -f "$moects")" ] || fail "repro calls $first, not the binary that ran"
    before=$(ls -l --time-style=full-iso "$root/reports/latest" 2> /dev/null | md5sum)
    mkdir -p elsewhere && cd elsewhere || fail "mkdir"
    MOECTS_PLANTED=last_tile_elem sh -c "$line" > repro.tap 2> repro.err
    rc=$?
    [ $rc -eq 1 ] || { cat repro.err; fail "repro exit $rc, want 1 (the planted element fails again)"; }
    grep -qF 'at: "(m 15, n 767)"' repro.tap || fail "repro did not reproduce the mismatch"
    [ -f reports/repro/fp4_gemm.mxfp4_kimi-k3_tp8_gemm1_m16/results.json ] || fail "no report in its own folder"
    [ ! -e reports/latest ] || fail "repro wrote reports/latest"
    after=$(ls -l --time-style=full-iso "$root/reports/latest" 2> /dev/null | md5sum)
    [ "$before" = "$after" ] || fail "repro touched $root/reports/latest"
    ;;
fail_fast)
    # a kernel that hangs on every case stops after its first 3 (--stop-dead-after's default), the
    # rest of its cases SKIP with one reason; --max-kernel-failures and --max-failures; the last
    # stderr line is the run's verdict
    "$moects" list -v --tier smoke 'fp4_gemm.mxfp4/*' | grep -F 'MXFP4, linear' | cut -f1 | head -n 6 > ids
    [ "$(wc -l < ids)" = 6 ] || fail "6 smoke MXFP4 cases with linear scales wanted"
    # shellcheck disable=SC2046
    MOECTS_PLANTED=hang "$moects" run --out h --jobs 1 --timeout 1 --kernel-lib "$planted" --kernel planted.fp4_gemm \
        $(cat ids) \
        > h.tap 2> h.err && fail "a hanging kernel passed"
    n=$(grep -c 'verdict: FAIL_TIMEOUT' h.tap)
    [ "$n" = 3 ] || { cat h.tap; fail "$n timeouts, want 3"; }
    n=$(grep -c "# SKIP not run: planted.fp4_gemm stopped: its first 3 cases crashed or timed out" h.tap)
    [ "$n" = 3 ] || { cat h.tap; fail "$n cases not run, want 3"; }
    grep -q "^moects run: planted.fp4_gemm: 3 cases not run: planted.fp4_gemm stopped: its first 3 cases" h.err ||
        { cat h.err; fail "stderr: the one reason"; }
    tail -n 1 h.err | grep -q "^moects run: FAIL: 1 of 1 honest kernel fail, 0 of 0 mutants escaped; 6 results: 0 passed, 3 failed, 3 skipped or unsupported; summary: h/summary.md$" ||
        { cat h.err; fail "last stderr line is not the verdict"; }
    # per kernel: 2 failures, then the kernel stops; the built-in honest kernel runs on
    # shellcheck disable=SC2046
    MOECTS_PLANTED=last_tile_elem "$moects" run --out k --jobs 1 --kernel-lib "$planted" --kernel planted.fp4_gemm \
        --kernel cpu.fp4_gemm.blockwise --max-kernel-failures 2 $(cat ids) > k.tap 2> k.err
    [ "$(grep -c 'verdict: FAIL_MISMATCH' k.tap)" = 2 ] || { cat k.tap; fail "--max-kernel-failures 2"; }
    grep -q "^ok 1 - cpu.fp4_gemm.blockwise: 6 of 6 cases pass" k.tap || { cat k.tap; fail "the other kernel stopped too"; }
    [ "$(grep -c 'SKIP not run: planted.fp4_gemm stopped: --max-kernel-failures 2 reached' k.tap)" = 4 ] ||
        fail "4 cases not run"
    # overall: the first failure stops the run (case-major: case 1's two kernels ran, nothing after)
    # shellcheck disable=SC2046
    MOECTS_PLANTED=last_tile_elem "$moects" run --out m --jobs 1 --kernel-lib "$planted" --kernel planted.fp4_gemm \
        --kernel cpu.fp4_gemm.blockwise --max-failures 1 $(cat ids) > m.tap 2> m.err
    [ "$(grep -c 'SKIP not run: the run stopped: --max-failures 1 reached' m.tap)" = 10 ] ||
        { cat m.tap; fail "--max-failures 1: 10 of 12 tasks not run"; }
    tail -n 1 m.err | grep -q "^moects run: FAIL: 1 of 2 honest kernels fail" || { cat m.err; fail "verdict line"; }
    "$moects" run --max-failures x 2> e.txt; [ $? = 2 ] || fail "bad count accepted"
    grep -qxF 'moects run: --max-failures: not a count 0..1000000000: "x"' e.txt || { cat e.txt; fail "bad count message"; }
    ;;
junit_native)
    # moects's own JUnit: one testcase per (kernel, case), valid against the Jenkins/Ant JUnit schema
    "$moects" list -v --tier smoke 'fp4_gemm.*' | grep -F 'MXFP4, linear' | cut -f1 | head -n 2 > ids
    "$moects" list --tier smoke 'fp4_gemm.nvfp4/*' | cut -f1 | head -n 1 >> ids
    # shellcheck disable=SC2046
    MOECTS_PLANTED=last_tile_elem "$moects" run --out o --junit j.xml --kernel-lib "$planted" \
        --kernel planted.fp4_gemm --kernel cpu.fp4_gemm.blockwise --kernel cpu.mutant.fp4_gemm.nibble_swap \
        $(cat ids) > o.tap 2> /dev/null
    cmp -s j.xml o/junit.xml || fail "--junit FILE and OUT/junit.xml differ"
    xmllint --noout --schema "$root/tests/data/junit/junit.xsd" j.xml 2> xsd.err || { cat xsd.err; fail "schema"; }
    n=$(xmllint --xpath 'count(//testcase)' j.xml)
    [ "$n" = 9 ] || fail "testcases: $n, want 9 (3 kernels x 3 cases)"
    # the planted kernel: 2 failures with (m, n) diagnostics, the NVFP4 case refused: skipped
    n=$(xmllint --xpath 'count(//testsuite[@name="planted.fp4_gemm"]/testcase/failure[@type="FAIL_MISMATCH"])' j.xml)
    [ "$n" = 2 ] || fail "planted failures: $n, want 2"
    xmllint --xpath 'string(//testsuite[@name="planted.fp4_gemm"]/testcase/skipped/@message)' j.xml |
        grep -qxF "UNSUPPORTED: MXFP4 with linear scales only" || fail "UNSUPPORTED as <skipped> with the reason"
    xmllint --xpath 'string(//testsuite[@name="planted.fp4_gemm"]/testcase/failure)' j.xml | grep -q 'at: "(m ' ||
        fail "failure text lacks the coordinates"
    # the mutant's caught cases pass; the honest kernel passes
    n=$(xmllint --xpath 'count(//failure) + count(//error)' j.xml)
    [ "$n" = 2 ] || fail "failures+errors: $n, want the planted kernel's 2"
    [ "$(xmllint --xpath 'string(/testsuites/@tests)' j.xml)" = 9 ] || fail "testsuites tests count"
    ;;
provenance)
    # the commit comes from git, with -dirty when a tracked file changed; a plugin's path and SHA-256
    mkdir r && cp -r "$root/cases" r/ && git -C r init -q && git -C r add -A &&
        git -C r -c user.name=t -c user.email=t@t commit -qm x || fail "git repo"
    id=ep_gather/regression/block-divides-h/h3584/t64
    env -u MOECTS_COMMIT -u MOECTS_ROOT "$moects" run --root r --out a --kernel cpu.ep_gather "$id" > /dev/null ||
        fail "clean run"
    want=$(git -C r rev-parse HEAD)
    python3 -c 'import json,sys; c=json.load(open("a/results.json"))["commit"]; assert c==sys.argv[1], c' "$want" ||
        fail "commit is not git's HEAD"
    echo >> r/cases/known-findings.txt
    env -u MOECTS_COMMIT -u MOECTS_ROOT "$moects" run --root r --out b --kernel cpu.ep_gather "$id" > /dev/null
    python3 -c 'import json,sys; c=json.load(open("b/results.json"))["commit"]; assert c==sys.argv[1]+"-dirty", c' \
        "$want" || fail "a changed tracked file is not -dirty"
    "$moects" run --out p --shard 0/1 --kernel-lib "$plugin" --kernel plugin.ep_gather "$id" > /dev/null ||
        fail "plugin run"
    sum=$(sha256sum "$plugin" | cut -c1-64)
    python3 - "$(readlink -f "$plugin")" "$sum" <<'PY' || fail "kernel_libs"
import json, sys
libs = json.load(open("p/results.json"))["kernel_libs"]
assert libs == [{"path": sys.argv[1], "sha256": sys.argv[2]}], libs
PY
    "$moects" merge m p/results.json > /dev/null 2>&1
    python3 -c 'import json; assert json.load(open("m/results.json"))["kernel_libs"]' || fail "merge drops kernel_libs"
    ;;
run_config)
    # a model no registry file holds, from a raw config.json (Qwen3-MoE field names), run at TP 8
    cat > new-moe.json <<'JSON'
{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
 "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
 "num_hidden_layers": 48}
JSON
    "$moects" run --config new-moe.json --tp 8 --tier smoke --out o --kernel cpu.ep_gather \
        --kernel cpu.fp4_gemm.blockwise > o.tap 2> o.err || { cat o.err o.tap; fail "run --config"; }
    n=$(grep -c '^    ok' o.tap)
    [ "$n" -gt 0 ] || fail "no case ran"
    grep -E '^    (not )?ok' o.tap | grep -v '/tp8/' && fail "a case of another layout ran"
    grep -q "fp4_gemm.mxfp4/.*/tp8/gemm1/" o.tap || fail "no gemm1 case"
    # the derivation's numbers, by hand: gemm1 N = 2 * 768 / 8 = 192, K = 2048; gemm2 N = 2048, K = 96
    "$moects" list -v --config new-moe.json --tp 8 'fp4_gemm.mxfp4/*/gemm1/*' | grep -qF ", N 192] bf16 = A [M, K 2048]" ||
        fail "gemm1 shape"
    "$moects" list -v --config new-moe.json --tp 8 'fp4_gemm.mxfp4/*/gemm2/*' | grep -qF ", N 2048] bf16 = A [M, K 96]" ||
        fail "gemm2 shape"
    "$moects" run --config new-moe.json --tp 3 2> e.txt; [ $? = 2 ] || fail "--tp 3 accepted"
    grep -q "^moects run: new-moe.json: --tp 3: " e.txt || { cat e.txt; fail "--tp 3 message"; }
    "$moects" run --tp 8 2> e.txt; [ $? = 2 ] || fail "--tp without --config accepted"
    # the pre-launch check takes the same kernel options: the planted kernel refuses NVFP4
    "$moects" coverage --config new-moe.json --tp 8 --kernel-lib "$planted" --kernel 'planted.*' > pre.md 2> pre.err
    [ $? = 1 ] || { cat pre.err; fail "coverage --config exit"; }
    grep -q "planted.fp4_gemm" pre.md && grep -q "MXFP4 with linear scales only" pre.md ||
        { cat pre.md; fail "the plugin kernel's refusals are not listed"; }
    grep -q "cpu.fp4_gemm.blockwise" pre.md && fail "--kernel 'planted.*' did not narrow the kernels"
    # --resume of a --config run: the case ids name the model after the file (new-moe), its bytes must be
    # the same (config_xxh64), its path need not. Killed at the 3rd call: plugin.ep_gather runs twice a
    # case, so the first case's result is journaled
    mkdir -p same edited && cp new-moe.json same/ && sed 's/"num_hidden_layers": 48/"num_hidden_layers": 47/' \
        new-moe.json > edited/new-moe.json
    kc="--tp 8 --jobs 1 --kernel-lib $plugin --kernel plugin.ep_gather ep_gather/*"
    # shellcheck disable=SC2086
    MOECTS_PLUGIN_EXAMPLE_CALLS=$work/calls MOECTS_PLUGIN_EXAMPLE_KILL_AT=3 setsid "$moects" run --config new-moe.json \
        $kc --out cut > /dev/null 2>&1 && fail "the killed --config run exited 0"
    # shellcheck disable=SC2086
    "$moects" run --config edited/new-moe.json $kc --resume cut > /dev/null 2> e.txt; [ $? = 2 ] || fail "edited config resumed"
    grep -q "^moects run: --resume cut/results.journal: header field config_xxh64: " e.txt || { cat e.txt; fail "config_xxh64"; }
    # shellcheck disable=SC2086
    "$moects" run --config same/new-moe.json $kc --resume cut > /dev/null 2> e.txt || { cat e.txt; fail "--config resume"; }
    grep -q "^moects run: --resume: 1 results kept from cut/results.journal" e.txt || { cat e.txt; fail "kept count"; }
    ;;
resume)
    # a run killed after its first results (the example plugin's MOECTS_PLUGIN_EXAMPLE_KILL_AT: SIGKILL to
    # the run's process group at the Nth call of its kernels) continues with --resume into the reports
    # of an uninterrupted run, without running a journaled (kernel, case) again.
    ids="ep_gather/regression/block-divides-h/kimi-k3-tp8/t1 ep_gather/regression/zero-tokens/no-local/h7168/ep8/t1
         ep_gather/regression/zero-tokens/no-local/h7168/ep64/t1 ep_gather/regression/block-divides-h/kimi-k3-tp8/t16
         ep_gather/regression/block-divides-h/h3584/t64"
    ks="--jobs 1 --kernel-lib $plugin --kernel cpu.ep_gather,cpu.mutant.ep_gather.block_min1024"
    ks="$ks --kernel plugin.ep_gather,plugin.mutant.segv"
    # shellcheck disable=SC2086
    MOECTS_PLUGIN_EXAMPLE_CALLS=$work/calls.full "$moects" run --out full $ks $ids > full.tap 2> full.err ||
        { cat full.err; fail "uninterrupted run"; }
    # 5 cases x (plugin.ep_gather twice, the mutant once) = 15 calls; 4 kernels x 5 cases = 20 results;
    # the segv mutant is caught by the 2 cases with T >= 2 (t16, t64) only
    [ "$(wc -c < calls.full)" = 15 ] || fail "uninterrupted: $(wc -c < calls.full) plugin calls, want 15"
    [ "$(jq '.results | length' full/results.json)" = 20 ] || fail "uninterrupted: not 20 results"
    grep -q "^ok 4 - plugin.mutant.segv: mutant caught by 2 of 5 cases" full.tap || { cat full.tap; fail "segv mutant"; }
    [ -e full/results.journal ] && fail "a finished run left its journal"
    # killed at the 5th call: each case runs its honest kernels first, then its mutants, each in kernel
    # order (cpu.*, then the library's), one after the other (--jobs 1): the first case's 4 results
    # (calls 1-3) and the second case's cpu.ep_gather are journaled; its plugin.ep_gather dies in its
    # second call
    # shellcheck disable=SC2086
    MOECTS_PLUGIN_EXAMPLE_CALLS=$work/calls.cut MOECTS_PLUGIN_EXAMPLE_KILL_AT=5 setsid "$moects" run --out cut $ks $ids \
        > cut.tap 2> cut.err && fail "the killed run exited 0"
    [ -e cut/results.json ] && fail "the killed run wrote results.json"
    [ "$(wc -l < cut/results.journal)" = 6 ] || { cat cut/results.journal; fail "journal: not a header and 5 results"; }
    [ "$(tail -n 1 cut/results.journal | jq -r '.kernel')" = cpu.ep_gather ] || fail "journal: last result not cpu.ep_gather"
    # another selection is refused, one line naming the journal and the field; the journal is kept as it was
    cp -r cut cut1 # (for format 1 below)
    cp cut/results.journal journal.before
    refused() { # refused DIR FIELD ARG...: `moects run ARG... --resume DIR` exits 2, one line naming DIR's journal and FIELD
        d=$1 f=$2; shift 2
        "$moects" run "$@" --resume "$d" > bad.tap 2> bad.err
        [ $? = 2 ] || { cat bad.err; fail "resume refused on $f: exit not 2"; }
        [ "$(wc -l < bad.err)" = 1 ] || { cat bad.err; fail "resume refused on $f: not one stderr line"; }
        grep -q "^moects run: --resume $d/results.journal: header field $f: " bad.err ||
            { cat bad.err; fail "resume refused on $f: journal or field $f not named"; }
    }
    # shellcheck disable=SC2086,SC2116
    idline=$(echo $ids) # the ids on one line, one space apart
    four=$(echo "$idline" | cut -d' ' -f1-4)
    # shellcheck disable=SC2086
    {
        refused cut seed $ks --seed 2 $ids
        refused cut shard $ks --shard 0/2 $ids
        # the selection is the cases and kernels selected: a case fewer, another case for the fifth, a kernel fewer
        refused cut cases $ks $four
        refused cut cases_xxh64 $ks $four ep_gather/regression/block-divides-h/h7168/t64
        refused cut kernels --jobs 1 --kernel-lib "$plugin" --kernel cpu.ep_gather,cpu.mutant.ep_gather.block_min1024 \
            --kernel plugin.ep_gather $ids
    }
    # the line says what the interrupted run was given (its filter: case globs, --kernel globs, --kernel-lib)
    k3='"cpu.ep_gather","cpu.mutant.ep_gather.block_min1024","plugin.ep_gather"'
    given="$idline --kernel cpu.ep_gather --kernel cpu.mutant.ep_gather.block_min1024 --kernel plugin.ep_gather"
    given="$given --kernel plugin.mutant.segv --kernel-lib $(realpath "$plugin")"
    grep -qxF "moects run: --resume cut/results.journal: header field kernels: the interrupted run had [$k3,\"plugin.mutant.segv\"], this run [$k3] (resume with its arguments; its selection: \"$given\")" bad.err ||
        { cat bad.err; fail "the kernels line"; }
    cmp -s journal.before cut/results.journal || fail "a refused resume changed the journal"
    # a journal of format 1 (before config_xxh64) is read by its rule: every field equal, the spelling too
    { head -n 1 cut1/results.journal | jq -c '.moects_journal = 1 | del(.config_xxh64)'; tail -n +2 cut1/results.journal; } \
        > j1 && mv j1 cut1/results.journal
    # shellcheck disable=SC2086
    refused cut1 filter $ks --tier all $ids
    # shellcheck disable=SC2086
    MOECTS_PLUGIN_EXAMPLE_CALLS=$work/calls.res1 "$moects" run $ks --resume cut1 $ids > res1.tap 2> res1.err ||
        { cat res1.err; fail "format 1: resumed run"; }
    [ "$(wc -c < calls.res1)" = 12 ] || fail "format 1 resumed: $(wc -c < calls.res1) plugin calls, want 12"
    cmp -s full.tap res1.tap || { diff full.tap res1.tap; fail "format 1: resumed TAP differs from the uninterrupted one"; }
    # ... and one of a later format is refused naming it
    sed '1s/"moects_journal": 2,/"moects_journal": 3,/' journal.before > cut1/results.journal
    # shellcheck disable=SC2086
    refused cut1 moects_journal $ks $ids
    grep -q "header field moects_journal: the interrupted run had 3, this moects reads formats 1 and 2 (resume with the moects that wrote it)$" bad.err ||
        { cat bad.err; fail "format 3 line"; }
    # shellcheck disable=SC2086
    "$moects" run $ks --out full --resume cut $ids 2> bad.err; [ $? = 2 ] || fail "--resume cut --out full accepted"
    # a whole last line (its newline written) that is not a result is not torn: refused like one in the
    # middle, one line naming the journal and the line (the header and 5 results are lines 1-6)
    echo '{"kernel": "plugin.ep_gather"}' >> cut/results.journal
    cp cut/results.journal journal.before
    # shellcheck disable=SC2086
    "$moects" run $ks --resume cut $ids > bad.tap 2> bad.err; [ $? = 2 ] || { cat bad.err; fail "a bad last line accepted"; }
    [ "$(cat bad.err)" = "moects run: --resume cut/results.journal: line 7 case: missing" ] ||
        { cat bad.err; fail "bad last line: not the one line naming the journal and line 7"; }
    cmp -s journal.before cut/results.journal || fail "a refused resume changed the journal"
    head -n 6 journal.before > cut/results.journal
    # a torn last line (a kill inside a write) is left out; the 15 - 3 calls of the other tasks run. The
    # selection spelled otherwise (kernel globs in another order and form, the ids reversed, --tier all:
    # exact ids run whatever their tier) is the same selection: resumed
    printf '{"kernel": "plugin.ep_gather", "case": "ep_gat' >> cut/results.journal
    ks2="--jobs 1 --kernel-lib $plugin --kernel plugin.ep_gather,plugin.mutant.segv --kernel cpu.mutant.ep_gather.block_min*"
    # shellcheck disable=SC2086,SC2046
    MOECTS_PLUGIN_EXAMPLE_CALLS=$work/calls.res "$moects" run $ks2 --kernel cpu.ep_gather --tier all --resume cut \
        $(printf '%s\n' $ids | tac) > res.tap 2> res.err || { cat res.err; fail "resumed run"; }
    [ "$(wc -c < calls.res)" = 12 ] || fail "resumed: $(wc -c < calls.res) plugin calls, want 12"
    grep -q "^moects run: --resume: 5 results kept from cut/results.journal" res.err || { cat res.err; fail "kept count"; }
    cmp -s full.tap res.tap || { diff full.tap res.tap; fail "resumed TAP differs from the uninterrupted one"; }
    python3 - <<'PY' || fail "resumed results.json differs from the uninterrupted one"
import json
a, b = (json.load(open(d + "/results.json")) for d in ("full", "cut"))
strip = lambda r: {k: v for k, v in r.items() if k not in ("timing", "kernel_ms")}
assert len(a["results"]) == len(b["results"]) == 20
for x, y in zip(a["results"], b["results"]):
    assert strip(x) == strip(y), (x, y)
    assert "input_xxh64" in x and "reference_xxh64" in x, x
# the 5 journaled results keep the timing of the run that made them
assert sum(1 for r in b["results"] if "timing" in r) == 20
PY
    [ -e cut/results.journal ] && fail "the resumed run left its journal"
    # the killed run's kernel-log temporary (no handler runs on SIGKILL) is gone with its process
    ls cut | grep -q '\.tmp\.' && { ls cut; fail "a killed run's temporary file is left in cut/"; }
    # shellcheck disable=SC2086
    "$moects" run $ks --resume cut $ids 2> bad.err; [ $? = 2 ] || fail "--resume of a finished run accepted"
    grep -q "^moects run: --resume cut: no results.journal there: that run finished" bad.err ||
        { cat bad.err; fail "finished-run message"; }
    # shellcheck disable=SC2086
    "$moects" run $ks --resume none $ids 2> bad.err; [ $? = 2 ] || fail "--resume of a missing directory accepted"
    grep -q "^moects run: --resume none: no results.journal there: No such file or directory" bad.err ||
        { cat bad.err; fail "missing-directory message"; }
    [ -e none ] && fail "--resume of a missing directory created it"
    ;;
help)
    # every command's --help: exit 0, options with their defaults on stdout, nothing on stderr
    for c in list run gate coverage merge; do
        "$moects" $c --help > h.txt 2> e.txt || fail "$c --help: exit $?"
        [ -s e.txt ] && { cat e.txt; fail "$c --help wrote to stderr"; }
        grep -q "^usage: moects $c" h.txt || fail "$c --help: no usage line"
        grep -q "default" h.txt || { cat h.txt; fail "$c --help names no default"; }
    done
    for o in --tier --seed --timeout --jobs --out --junit --max-failures --max-kernel-failures --stop-dead-after \
             --config --tap-version --known-findings --resume; do
        "$moects" run --help | grep -q -- "^ *$o" || fail "run --help lacks $o"
    done
    ;;
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
