#!/bin/sh
# isolation.sh: end-to-end CLI checks: the memory contract and isolation: crashes, hangs, out-of-bounds writes, host OOM, kernel errors and logs.
# Usage: isolation.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: isolation, oob_write, host_oom, second_run, kernel_error, kernel_log)
. "$(dirname "$0")/lib.sh"

case $name in
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
    head -n 1 err.txt | grep -Eq "^moects run: 1 case, 2 kernels: 2 runs \(each kernel on the cases of its op\); (about |under a second)" ||
        { cat err.txt; fail "stderr: the first line"; }
    [ "$(sed -n 2p err.txt)" = "moects run: $what: 4 lines in out/kernels.log" ] || { cat err.txt; fail "stderr"; }
    [ "$(wc -l < err.txt)" = 3 ] && tail -n 1 err.txt | grep -q "^moects run: PASS: " ||
        { cat err.txt; fail "stderr: the first line, the kernel log line, then the verdict"; }
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
    # a quiet run in the same --out: the log is this run's (empty), stderr the first line and the verdict
    "$moects" run --out out --kernel cpu.ep_gather "$t16" > run2.tap 2> err.txt || fail "quiet run"
    [ "$(wc -l < err.txt)" = 2 ] && tail -n 1 err.txt | grep -q "^moects run: PASS: " || { cat err.txt; fail "quiet run's stderr"; }
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
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
