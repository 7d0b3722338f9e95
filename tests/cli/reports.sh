#!/bin/sh
# reports.sh: end-to-end CLI checks: JUnit, TAP 14, provenance, repro lines and diagnostics in the reports.
# Usage: reports.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: junit, tap14, junit_native, provenance, repro,
# diag_planted, repro_kernels, no_device)
. "$(dirname "$0")/lib.sh"

case $name in
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
    # and a failing point: the planted kernel's last-tile bug fails an MXFP4 case with linear scales,
    # so its one top-level point is "not ok": 1 failure (an escaped mutant would be a TODO point here:
    # the cases are narrowed)
    id=$("$moects" list -v --tier smoke 'fp4_gemm.*' | grep -F 'MXFP4, linear' | cut -f1 | head -n 1)
    MOECTS_PLANTED=last_tile_elem "$moects" run --out out2 --kernel-lib "$planted" "$id" > esc.tap 2> /dev/null
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
junit_native)
    # moects's own JUnit: one testcase per (kernel, case), valid against the Jenkins/Ant JUnit schema
    "$moects" list -v --tier smoke 'fp4_gemm.*' | grep -F 'MXFP4, linear' | cut -f1 | head -n 2 > ids
    "$moects" list --tier smoke 'fp4_gemm.nvfp4/*' | cut -f1 | head -n 1 >> ids
    # shellcheck disable=SC2046
    MOECTS_PLANTED=last_tile_elem "$moects" run --out o --junit j.xml --kernel-lib "$planted" \
        --kernel planted.fp4_gemm --kernel cpu.fp4_gemm.blockwise --kernel cpu.mutant.fp4_gemm.nibble_swap \
        $(cat ids) > o.tap 2> /dev/null
    cmp -s j.xml o/junit.xml || fail "--junit FILE and OUT/junit.xml differ"
    xmllint --noout --schema "$root/tests/fixtures/data/junit/junit.xsd" j.xml 2> xsd.err || { cat xsd.err; fail "schema"; }
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
repro_kernels)
    # Repro lines of kernels from outside, --kernel-lib (the planted C library) and --kernel-py (a
    # numpy ep_gather with the last output element's lowest bit flipped, written here): each line is
    # taken from run.tap and run from another folder, and must fail the same case with the same
    # verdict (exit 1). Files outside the run's folder are named by absolute path; files inside it
    # relative to it, and then the line runs where it was printed, and no report names a path of
    # this machine (docs/usage.md "Debugging a failure from its report").
    py=${MOECTS_PYTHON:-}
    for p in "$py" /usr/bin/python3 python3; do [ -n "$p" ] && "$p" -c 'import numpy' 2> /dev/null && { py=$p; break; }; done
    "$py" -c 'import numpy' 2> /dev/null || fail "no python3 with numpy (set MOECTS_PYTHON)"
    export MOECTS_PYTHON="$py" PYTHONPATH="$root/python"
    mkdir -p py run elsewhere here
    {
        echo 'import sys'
        echo "sys.path.insert(0, '$root/examples')"
        echo 'import numpy_ep_gather'
        echo 'def run(shape, args):'
        echo '    numpy_ep_gather.ep_gather(shape, args)'
        echo '    out = args["out"].reshape(-1)'
        echo '    out.view("u2" if out.dtype.itemsize == 2 else "u4")[-1] ^= 1'
        echo 'kernel = {"name": "py.buggy.ep_gather", "op": "ep_gather", "device": "cpu", "recipe": "ep_gather.fma_v1", "run": run}'
    } > py/buggy.py
    eg=$(pick 'ep_gather/kimi-k3/tp8/*' 1)
    fg=fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16
    cd run || fail "cd run"
    MOECTS_PLANTED=last_tile_elem "$moects" run --out out --kernel-lib "$planted" --kernel-py ../py/buggy.py:kernel \
        --kernel planted.fp4_gemm --kernel py.buggy.ep_gather "$fg" "$eg" > run.tap 2> run.err
    [ $? -eq 1 ] || { cat run.err; fail "a run of two failing kernels: exit not 1"; }
    for k in planted.fp4_gemm py.buggy.ep_gather; do
        if [ "$k" = planted.fp4_gemm ]; then id=$fg; else id=$eg; fi
        grep -q "^    not ok 1 - $id\$" run.tap || { cat run.tap; fail "$k: $id not failing"; }
        line=$(sed -n "s/^ *repro: \"\(.*--kernel '$k'.*\)\"\$/\1/p" run.tap)
        [ -n "$line" ] || fail "$k: no repro line"
        case $line in "$(readlink -f "$moects") "*) ;; *) fail "$k: repro calls ${line%% *}, not $moects" ;; esac
        case $line in *"--kernel-py '$(readlink -f "$work")/py/buggy.py:kernel'"*) ;; *) fail "$k: --kernel-py not absolute: $line" ;; esac
        case $line in *"--kernel-lib '$(readlink -f "$planted")'"*) ;; *) fail "$k: --kernel-lib not absolute: $line" ;; esac
        (cd ../elsewhere && MOECTS_PLANTED=last_tile_elem sh -c "$line" > r.tap 2> r.err)
        rc=$?
        [ $rc -eq 1 ] || { cat ../elsewhere/r.err; fail "$k: repro from another folder: exit $rc, want 1"; }
        grep -q "^    not ok 1 - $id\$" ../elsewhere/r.tap || { cat ../elsewhere/r.tap; fail "$k: repro: $id not failing"; }
        grep -q "^      verdict: FAIL_MISMATCH\$" ../elsewhere/r.tap || fail "$k: repro: verdict not FAIL_MISMATCH"
        dir=reports/repro/$(echo "$id" | tr '/' '_')
        [ -f "../elsewhere/$dir/results.json" ] || fail "$k: repro wrote no $dir/results.json"
    done
    # files inside the run's folder, moects on PATH: the lines are relative and run where printed
    cd ../here || fail "cd here"
    cp "$planted" planted.so && cp ../py/buggy.py buggy.py || fail "cp"
    bindir=$(dirname "$(readlink -f "$moects")")
    PATH="$bindir:$PATH" MOECTS_PLANTED=last_tile_elem moects run --out out --kernel-lib planted.so \
        --kernel-py buggy.py:kernel --kernel planted.fp4_gemm --kernel py.buggy.ep_gather "$fg" "$eg" > run.tap 2> run.err
    [ $? -eq 1 ] || { cat run.err; fail "inside: exit not 1"; }
    PATH="$bindir:$PATH" moects coverage out/results.json > /dev/null 2>&1 || fail "coverage"
    PATH="$bindir:$PATH" moects gate out/results.json > out/gate.md 2> /dev/null
    grep -q "^      repro: \"moects run --kernel 'planted.fp4_gemm' .* --kernel-lib './planted.so' --kernel-py './buggy.py:kernel'" \
        run.tap || { grep repro: run.tap; fail "inside: repro line not relative"; }
    # no path of this machine in any report (TAP, summary, JUnit, results.json, coverage, gate)
    for d in "$root" "$work" "$(readlink -f "$root")" "$(readlink -f "$work")"; do
        grep -rlF "$d" run.tap out && fail "a report names $d"
    done
    line=$(sed -n "s/^ *repro: \"\(.*--kernel 'py.buggy.ep_gather'.*\)\"\$/\1/p" run.tap)
    PATH="$bindir:$PATH" sh -c "$line" > r.tap 2> r.err
    [ $? -eq 1 ] && grep -q "^    not ok 1 - $eg\$" r.tap || { cat r.err; fail "inside: repro where printed"; }
    # the gate names the first mismatch as the TAP does: (m 15, n 767), the planted last element
    grep -qF "first at (m 15, n 767)" out/gate.md || { cat out/gate.md; fail "gate: first mismatch not in (m, n)"; }
    if git -C "$root" rev-parse 2> /dev/null; then
        git -C "$root" check-ignore -q reports/repro/x || fail "reports/repro/ is not ignored by git"
    fi
    ;;
no_device)
    # a CUDA kernel on a host without a usable device (this build or this host): SKIP "no CUDA device
    # (...)" on every case, the one its supports() refuses included, never UNSUPPORTED
    [ "$(nvidia-smi -L 2> /dev/null | wc -l)" -eq 0 ] || { echo "a GPU here: nothing to check"; exit 0; }
    {
        echo '#include <string.h>'
        echo '#include "moects_kernel.h"'
        echo 'static int sup(const void *s, char *w, size_t n) { (void)s; strncpy(w, "refuses every shape", n); return 0; }'
        echo 'static int run(const void *s, const void *a, void *st) { (void)s, (void)a, (void)st; return 0; }'
        echo 'static const moects_kernel k = {.abi_version = MOECTS_KERNEL_ABI_VERSION, .name = "t.cuda",'
        echo '    .op = MOECTS_OP_EP_GATHER, .device = MOECTS_DEVICE_CUDA, .recipe = "ep_gather.fma_v1", .supports = sup, .run = run};'
        echo 'static const moects_kernel *const v[] = {&k};'
        echo 'const moects_kernel *const *moects_plugin_kernels(size_t *n) { *n = 1; return v; }'
    } > cudak.c
    ${CC:-cc} -shared -fPIC -I"$root/include/moects" -o cudak.so cudak.c || fail "cannot build cudak.so"
    # shellcheck disable=SC2046
    "$moects" run --out out --kernel-lib ./cudak.so --kernel t.cuda $(pick 'ep_gather/*' 2) > run.tap 2> /dev/null
    [ "$(grep -c '^    ok [12] - .* # SKIP no CUDA device (' run.tap)" -eq 2 ] || { cat run.tap; fail "not SKIP no CUDA device"; }
    grep -q UNSUPPORTED out/results.json && fail "UNSUPPORTED on a host without a device"
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
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
