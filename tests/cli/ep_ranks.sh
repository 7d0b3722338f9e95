#!/bin/sh
# ep_ranks.sh: end-to-end CLI checks of ep_dispatch_combine's ranks (docs/ep_dispatch_combine.md "Ranks
# and the transport", "The GPU transport"): the exec'd ranks a CUDA kernel gets, tried with the CPU
# kernels on a host without a GPU, and the CUDA kernels' SKIP there.
# Usage: ep_ranks.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: ep_ranks_exec, ep_rank_usage,
# ep_ranks_cuda_skip)
. "$(dirname "$0")/lib.sh"

verdicts() { jq -r '.results[] | [.kernel, .case, .verdict] | @tsv' "$1/results.json" | sort; }

case $name in
ep_ranks_exec)
    # The same CPU kernels on the same cases, ranks forked and ranks exec'd (`moects __ep-rank`, the
    # path of a CUDA kernel's ranks, MOECTS_EP_EXEC=1): one verdict each, the same both ways; the honest
    # kernels pass every case and each mutant is caught (exit 0).
    pick 'ep_dispatch_combine/*' 6 > ids
    [ "$(wc -l < ids)" -eq 6 ] || fail "fewer than 6 smoke ep_dispatch_combine cases"
    # shellcheck disable=SC2046
    "$moects" run --out forked --kernel 'cpu.*' $(cat ids) > forked.tap 2> forked.err || { cat forked.tap; fail "forked run"; }
    # shellcheck disable=SC2046
    MOECTS_EP_EXEC=1 "$moects" run --out exec --kernel 'cpu.*' $(cat ids) > exec.tap 2> exec.err ||
        { cat exec.tap exec/kernels.log; fail "exec'd run"; }
    verdicts forked > forked.txt
    verdicts exec > exec.txt
    [ "$(wc -l < exec.txt)" -eq 36 ] || fail "$(wc -l < exec.txt) results, want 6 cases x 6 CPU kernels"
    cmp -s forked.txt exec.txt || { diff forked.txt exec.txt; fail "exec'd ranks give other verdicts"; }
    n=$(grep -c "^cpu\.ep_dispatch_combine\.[a-z]*	.*	PASS_EXACT$" exec.txt)
    [ "$n" -eq 12 ] || fail "honest kernels: $n of 12 PASS_EXACT"
    # the knob takes the exec'd path: a rank program that cannot start fails every case there, the
    # ranks named in the kernel log, and leaves the forked path alone
    MOECTS_EXE=/nonexistent MOECTS_EP_EXEC=1 "$moects" run --out noexe --kernel cpu.ep_dispatch_combine.ll \
        "$(head -n 1 ids)" > noexe.tap 2> /dev/null && fail "a rank program that cannot start: exit 0"
    [ "$(verdicts noexe | cut -f3)" = FAIL_CRASH ] || fail "no FAIL_CRASH without a rank program"
    grep -q "^ep_dispatch_combine: rank 0: cannot start /nonexistent __ep-rank$" noexe/kernels.log ||
        { cat noexe/kernels.log; fail "kernel log: the rank that could not start"; }
    MOECTS_EXE=/nonexistent "$moects" run --out forked2 --kernel cpu.ep_dispatch_combine.ll "$(head -n 1 ids)" \
        > forked2.tap 2> /dev/null || fail "forked ranks looked at MOECTS_EXE"
    ;;
ep_rank_usage)
    # `moects __ep-rank` outside a launch: exit 2 and its usage, for a missing argument and for a file
    # descriptor that holds no launch region (stdin: /dev/null)
    "$moects" __ep-rank 0 > out.txt 2> err.txt < /dev/null
    [ $? -eq 2 ] || fail "missing RANK: want exit 2"
    grep -q "^usage: moects __ep-rank FD RANK" err.txt || fail "usage line"
    "$moects" __ep-rank 0 0 > out.txt 2> err.txt < /dev/null
    [ $? -eq 2 ] || fail "fd 0 without a region: want exit 2"
    grep -q "^ep_dispatch_combine: fd 0 holds no launch region of this moects build" err.txt || { cat err.txt; fail "region line"; }
    ;;
ep_ranks_cuda_skip)
    # a build with the CUDA kernels, on a host without a GPU: each CUDA kernel of the op SKIP "no CUDA
    # device (...)" on every case (the launcher is never reached), the CPU kernels unaffected
    "$moects" list --kernels | grep -q '^cuda\.ep_dispatch_combine\.ipc	' || { echo "built without CUDA: nothing to check"; exit 0; }
    [ "$(nvidia-smi -L 2> /dev/null | wc -l)" -eq 0 ] || { echo "a GPU here: nothing to check"; exit 0; }
    id=$(pick 'ep_dispatch_combine/*' 1)
    "$moects" run --out out --kernel 'cuda.*ep_dispatch_combine*' "$id" > run.tap 2> err.txt
    [ "$(verdicts out | cut -f3 | sort -u)" = SKIP ] || { verdicts out; fail "not SKIP"; }
    [ "$(verdicts out | wc -l)" -eq 5 ] || fail "$(verdicts out | wc -l) results, want the 5 CUDA kernels of the op"
    jq -r '.results[].reason' out/results.json | grep -qv '^no CUDA device (' && fail "a reason without 'no CUDA device ('"
    true
    ;;
*) fail "unknown check $name" ;;
esac
