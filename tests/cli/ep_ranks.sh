#!/bin/sh
# ep_ranks.sh: end-to-end CLI checks of ep_dispatch_combine's ranks (docs/ep_dispatch_combine.md "Ranks
# and the transport"): the exec'd ranks a CUDA kernel gets, tried with the CPU kernels on a host
# without a GPU.
# Usage: ep_ranks.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: ep_ranks_exec, ep_rank_usage)
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
*) fail "unknown check $name" ;;
esac
