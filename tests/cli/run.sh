#!/bin/sh
# run.sh: end-to-end CLI checks: --dump, fail fast, --resume, the TAP streamed while the run goes,
# batch invariance, and the stage a layer kernel's exposed intermediates locate (CPU kernels, and the
# CUDA ones' stages compiled for the host).
# Usage: run.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: dump, fail_fast, resume, stream,
# batch_invariance, stages, stages_cuda)
. "$(dirname "$0")/lib.sh"

case $name in
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
    tail -n 1 h.err | grep -q "^moects run: FAIL: honest kernels 0 of 1 passed, 1 failed; runs: honest 0 passed, 3 failed; 3 not run (3 skipped); summary: h/summary.md$" ||
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
    tail -n 1 m.err | grep -q "^moects run: FAIL: honest kernels 1 of 2 passed, 1 failed;" || { cat m.err; fail "verdict line"; }
    "$moects" run --max-failures x 2> e.txt; [ $? = 2 ] || fail "bad count accepted"
    grep -qxF 'moects run: --max-failures: not a count 0..1000000000: "x"' e.txt || { cat e.txt; fail "bad count message"; }
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
stream)
    # The TAP on stdout comes as the run goes (harness/report/tap_stream.c: the head at once, each
    # kernel's subtest once its cases are done, in the TAP's order) and is byte for byte the run.tap
    # the finished run writes: with 2 jobs, 1 job and a shard. Cases of the three ops, every built-in
    # kernel (some take none of them: not in the TAP). The first stderr line (cases, kernels, runs)
    # comes before the first test point: stdout and stderr into one file, in the order written.
    ids="ep_gather/kimi-k3/tp8/t16 ep_gather/regression/block-divides-h/kimi-k3-tp8/t1
         fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16 fp4_gemm.mxfp4/kimi-k3/tp8/gemm2/m16
         moe_gemm.w4a8/kimi-k3/ep64/offsets/gemm2/t16 moe_gemm.mxfp4/dbrx/tp16/masked/gemm2/t16"
    # shellcheck disable=SC2086
    "$moects" run --out both --jobs 2 $ids > both.txt 2>&1 || { cat both.txt; fail "run (2 jobs)"; }
    first=$(grep -n -E "^moects run: 6 cases, [0-9]* kernels: [0-9]* runs \(each kernel on the cases of its op\); (about |under a second)" both.txt |
        head -n 1 | cut -d: -f1)
    point=$(grep -n -E "^ *(not )?ok [0-9]" both.txt | head -n 1 | cut -d: -f1)
    [ -n "$first" ] && [ -n "$point" ] && [ "$first" -lt "$point" ] ||
        { cat both.txt; fail "the first stderr line (line ${first:-none}) is not before the first point (line ${point:-none})"; }
    grep -v "^moects run: " both.txt > both.tap
    cmp -s both.tap both/run.tap || { diff both.tap both/run.tap | head; fail "stdout (2 jobs) is not run.tap"; }
    prove -e cat both.tap > prove.log 2>&1 || { cat prove.log; fail "prove on the streamed TAP"; }
    # shellcheck disable=SC2086
    "$moects" run --out one --jobs 1 $ids > one.tap 2> one.err || { cat one.err; fail "run (1 job)"; }
    cmp -s one.tap one/run.tap || { diff one.tap one/run.tap | head; fail "stdout (1 job) is not run.tap"; }
    cmp -s one.tap both.tap || fail "1 job and 2 jobs: another TAP"
    # shellcheck disable=SC2086
    "$moects" run --out sh --shard 1/2 $ids > sh.tap 2> sh.err || { cat sh.err; fail "run (shard 1/2)"; }
    cmp -s sh.tap sh/run.tap || { diff sh.tap sh/run.tap | head; fail "stdout (shard) is not run.tap"; }
    ;;
batch_invariance)
    # Kernels that declare batch invariance run again on the case's rows inside a larger batch
    # (DESIGN.md "Batch invariance"). The two split-K mutants are exact on these cases alone (T <= 4
    # tokens; experts of at most 130 rows), so only FAIL_BATCH_VARIANT catches them: their batches of
    # 2T + 3 tokens and 2c + 3 rows an expert cross their split thresholds (4 tokens, 256 rows). The
    # honest kernels keep their bits and pass.
    fm1=fused_moe.bf16/qwen3-30b-a3b/tp16/t4/smoke fm2=fused_moe.mxfp4/qwen3-next-80b-a3b/tp16/t4/smoke
    mg1=moe_gemm.nvfp4/regression/moe-nan-leak/e2/m128/n128/k256/masked
    mg2=moe_gemm.nvfp4/regression/moe-layouts/e5/n256/k384/no-padding/masked
    "$moects" run --out out --kernel 'cpu.fused_moe.vllm' --kernel 'cpu.moe_gemm.blockwise' \
        --kernel 'cpu.mutant.*.split_k_*' "$fm1" "$fm2" "$mg1" "$mg2" > run.tap 2> err.txt
    rc=$?
    [ $rc -eq 0 ] || { cat run.tap err.txt; fail "exit status $rc (mutants caught, honest passing: want 0)"; }
    v() { jq -r --arg k "$1" --arg c "$2" '.results[] | select(.kernel == $k and .case == $c) | .verdict' out/results.json; }
    for c in "$fm1" "$fm2"; do
        [ "$(v cpu.fused_moe.vllm "$c")" = PASS_EXACT ] || fail "cpu.fused_moe.vllm on $c: $(v cpu.fused_moe.vllm "$c")"
        [ "$(v cpu.mutant.fused_moe.split_k_batch "$c")" = FAIL_BATCH_VARIANT ] || fail "split_k_batch on $c"
    done
    for c in "$mg1" "$mg2"; do
        [ "$(v cpu.moe_gemm.blockwise "$c")" = PASS_EXACT ] || fail "cpu.moe_gemm.blockwise on $c"
        [ "$(v cpu.mutant.moe_gemm.split_k_rows "$c")" = FAIL_BATCH_VARIANT ] || fail "split_k_rows on $c"
    done
    jq -r --arg c "$fm1" '.results[] | select(.kernel == "cpu.mutant.fused_moe.split_k_batch" and .case == $c) | .reason' \
        out/results.json | grep -q "^batch of 4 tokens vs 11: [0-9]* elements of the case's rows differ; first (t [0-3], d [0-9]*) (row [1357] of the batch)" ||
        fail "the reason names both batch sizes, the element and its batch row"
    grep -q 'verdict: FAIL_BATCH_VARIANT' run.tap || fail "TAP: no FAIL_BATCH_VARIANT"
    grep -q 'FAIL_BATCH_VARIANT' out/summary.md || fail "summary.md: no FAIL_BATCH_VARIANT column"
    ;;
stages)
    # Under MOECTS_STAGES=1, a layer mutant that exposes its intermediates (MOECTS_KERNEL_INTERMEDIATES)
    # and fails its exact claim is named by the first stage that left the exact reference (docs/fused_moe.md "Exposed
    # intermediates"). Expected from each bug's definition: reading the gate and up halves swapped, or
    # gpt-oss's activation without the + 1, leaves GEMM1's output exact and moves the activation's;
    # FP8 block scales read per row move GEMM1's own output; the router weight applied twice (GEMM2's
    # epilogue applies it once, as declared, the combine again) and a BF16 combine act after GEMM2's
    # per-slot output, which stays exact. Bounded claims (every case, whatever MOECTS_STAGES): a GEMM2
    # summed in BF16 leaves GEMM1, the activation and the intermediate to the honest code, so gemm2 is
    # the first stage outside its enclosure, and the accumulation check of that stage fails; a BF16
    # combine leaves every exposed stage inside its enclosure.
    g=fused_moe.bf16/gpt-oss-20b/tp16/t4/smoke f=fused_moe.fp8_128/deepseek-v3/tp16/t1/smoke-adversarial
    MOECTS_STAGES=1 "$moects" run --out out --kernel 'cpu.mutant.fused_moe.*' --kernel cpu.fused_moe.gpt_oss \
        --kernel cpu.fused_moe.fast "$g" "$f" > run.tap 2> err.txt
    rc=$?
    [ $rc -eq 0 ] || { cat run.tap err.txt; fail "exit status $rc (mutants caught, honest passing: want 0)"; }
    why() { jq -r --arg k "$1" --arg c "$2" '.results[] | select(.kernel == $k and .case == $c) | .reason' out/results.json; }
    m=cpu.mutant.fused_moe
    for b in gate_up_swapped gpt_oss_no_plus1 act_on_up; do
        why $m.$b "$g" | grep -q "first stage off: act, slot (t [0-3], j [0-3]), column [0-9]*: got " || fail "$b: $(why $m.$b "$g")"
    done
    why $m.fp8_scale_per_row "$f" | grep -q "first stage off: gemm1, slot (t 0, j [0-7]), column" ||
        fail "fp8_scale_per_row: $(why $m.fp8_scale_per_row "$f")"
    for b in weight_twice combine_bf16; do
        why $m.$b "$g" | grep -q "first stage off: none of the exposed stages (gemm1, act, mid, gemm2)" || fail "$b: $(why $m.$b "$g")"
    done
    why $m.gemm2_bf16_acc "$g" | grep -q "first stage outside its enclosure: gemm2, slot (t [0-3], j [0-3]), column [0-9]*: got [-0-9.e]*, enclosure \[" ||
        fail "gemm2_bf16_acc: $(why $m.gemm2_bf16_acc "$g")"
    why $m.gemm2_bf16_acc "$g" | grep -q "the accumulation check of stage gemm2 (a GEMM's output, exposed) fails" ||
        fail "gemm2_bf16_acc, accumulation check: $(why $m.gemm2_bf16_acc "$g")"
    why $m.fast_combine_bf16 "$g" | grep -q "first stage outside its enclosure: none of the exposed stages (gemm1, act, mid, gemm2)" ||
        fail "fast_combine_bf16: $(why $m.fast_combine_bf16 "$g")"
    jq -r '.results[] | select(.kernel == "cpu.fused_moe.gpt_oss" or .kernel == "cpu.fused_moe.fast") | .reason' out/results.json |
        grep -q "first stage" && fail "a passing kernel's reason names a stage"
    why cpu.fused_moe.fast "$g" | grep -q "accumulation check of the stages (RMS): gemm1 [0-9.e-]* sigma over [0-9]*, gemm2 " ||
        fail "the honest bounded kernel's reason: $(why cpu.fused_moe.fast "$g")"
    ;;
stages_cuda)
    # The CUDA layer kernels' exposed intermediates (gpu/cuda/fused_moe_stages.cuh), judged through their
    # host build (emu.cuda.*: the same stage source; a --kernel-lib, so the stage run goes through a child
    # process and shared buffers, as any kernel from outside the tree). By each bug's definition: gate and
    # up read swapped leave GEMM1's rows exact and move the activation; the weight applied again in the
    # combine (weight=gemm2 declared: GEMM2's epilogue applies it once) leaves every stage exact; under
    # fp8_atomic's weight=combine the same bug puts the weight into GEMM2's epilogue, so gemm2 is the first
    # stage outside its enclosure. The honest bounded kernel passes with its stages' accumulation RMS.
    g=fused_moe.bf16/qwen3-30b-a3b/tp16/t4/smoke
    MOECTS_STAGES=1 "$moects" run --out out --kernel-lib "$emu" --kernel 'emu.*' "$g" > run.tap 2> err.txt
    rc=$?
    [ $rc -eq 0 ] || { cat run.tap err.txt; fail "exit status $rc (mutants caught, honest passing: want 0)"; }
    why() { jq -r --arg k "emu.cuda.$1" '.results[] | select(.kernel == $k) | .reason' out/results.json; }
    why mutant.fused_moe.gate_up_swapped | grep -q "^first stage off: act, slot (t [0-3], j [0-7]), column [0-9]*: got " ||
        fail "gate_up_swapped: $(why mutant.fused_moe.gate_up_swapped)"
    why mutant.fused_moe.weight_twice | grep -q "^first stage off: none of the exposed stages (gemm1, act, mid, gemm2)" ||
        fail "weight_twice: $(why mutant.fused_moe.weight_twice)"
    why mutant.fused_moe.fp8_atomic_weight_twice | grep -q "first stage outside its enclosure: gemm2, slot (t [0-3], j [0-7])" ||
        fail "fp8_atomic_weight_twice: $(why mutant.fused_moe.fp8_atomic_weight_twice)"
    why fused_moe.fp8_atomic | grep -q "accumulation check of the stages (RMS): gemm1 [0-9.e-]* sigma over [1-9][0-9]*, gemm2 " ||
        fail "fp8_atomic: $(why fused_moe.fp8_atomic)"
    ;;
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
