#!/bin/sh
# gate.sh: end-to-end CLI checks: the gate on a kernel PR, must-pass lists through prove, known findings.
# Usage: gate.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: gate_pr, prove_mustpass, known_findings)
. "$(dirname "$0")/lib.sh"

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
known_findings)
    # cases/known-findings.txt: dequant_sgemm's FP32 overflow on MXFP4 adversarial data is a TODO point
    adv=fp4_gemm.mxfp4/regression/k-tail/n256/k48/m16/adversarial
    "$moects" run --out out --kernel cpu.fp4_gemm.dequant_sgemm "$adv" > run.tap 2> run.err
    rc=$?
    [ $rc -eq 0 ] || { cat run.tap; fail "a known finding made the run exit $rc (want 0)"; }
    tail -n 1 run.err | grep -q "; runs: honest 0 passed, 0 failed, 1 known finding; summary:" ||
        { tail -n 1 run.err; fail "the verdict line does not count the known finding"; }
    # the verdict line counts the kernels that had a case: an ep_gather kernel and mutant more, which take
    # no fp4_gemm case, change nothing
    "$moects" run --out out2 --kernel cpu.fp4_gemm.dequant_sgemm,cpu.ep_gather,cpu.mutant.ep_gather.int32_offset "$adv" \
        > /dev/null 2> run2.err || { cat run2.err; fail "kernels without a case: exit $?"; }
    [ "$(tail -n 1 run2.err)" = "moects run: PASS: honest kernels 1 of 1 passed; runs: honest 0 passed, 0 failed, 1 known finding; summary: out2/summary.md" ] ||
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
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
