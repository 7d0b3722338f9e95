#!/bin/sh
# input.sh: end-to-end CLI checks: bad input, early errors, exit statuses, --help, run inputs and --config.
# Usage: input.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: bad_input, early_errors, exit_status, help, run_input, run_config)
. "$(dirname "$0")/lib.sh"

case $name in
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
    # a well-formed model file with an activation outside the enum: the same, naming the field
    rm badroot/cases/models/broken.json
    sed 's/"activation": "silu"/"activation": "swish"/' "$root/cases/models/qwen3-30b-a3b.json" \
        > badroot/cases/models/swish.json
    grep -q '"swish"' badroot/cases/models/swish.json || fail "swish model: not planted"
    "$moects" list --root badroot > out.txt 2> err.txt
    [ $? -eq 2 ] || fail "swish model: exit status"
    [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "swish model: want one stderr line"; }
    grep -q 'swish.json: activation: unknown value "swish"' err.txt || { cat err.txt; fail "swish model: message"; }
    [ -s out.txt ] && fail "swish model: wrote to stdout"
    "$moects" list 'no/such/*' > /dev/null 2>&1
    [ $? -eq 2 ] || fail "list: glob matching nothing must exit 2"
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
exit_status)
    id=$(pick 'ep_gather/regression/block-divides-h/*' 1)
    "$moects" run --out out --kernel cpu.ep_gather "$id" > /dev/null || fail "honest pass must exit 0"
    # a mutant that the selected case does not catch: the cases were narrowed (a case id), so it
    # escaped this selection: a TODO point, exit 0; the whole tier's run judges it
    "$moects" run --out out --kernel cpu.mutant.ep_gather.int32_offset "$id" > esc.tap 2> esc.err ||
        { cat esc.err; fail "a mutant escaping a narrowed selection must exit 0"; }
    grep -q "^ok 1 - cpu.mutant.ep_gather.int32_offset: mutant escaped in this selection, .* # TODO" esc.tap ||
        { cat esc.tap; fail "escaped point (narrowed)"; }
    tail -n 1 esc.err | grep -q "^moects run: PASS: mutants 0 of 1 caught, 1 escaped this selection (TODO); " ||
        { cat esc.err; fail "verdict line (narrowed)"; }
    # not narrowed (a model's cases, no case glob): int32 offsets only show past 2^31 elements, which
    # no smoke case of this model has: escaped -> exit 1
    cat > m.json <<'JSON'
{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
 "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
 "num_hidden_layers": 48}
JSON
    "$moects" run --out out --config m.json --tp 8 --tier smoke --kernel cpu.mutant.ep_gather.int32_offset > esc.tap 2> esc.err
    [ $? -eq 1 ] || { cat esc.err; fail "escaped mutant must exit 1"; }
    grep -q "^not ok 1 - cpu.mutant.ep_gather.int32_offset: mutant escaped, passed all" esc.tap || fail "escaped point"
    tail -n 1 esc.err | grep -q "^moects run: FAIL: mutants 0 of 1 caught, 1 escaped; " || { cat esc.err; fail "verdict line"; }
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
    [ "$(cat err.txt)" = "moects list: 1 case match but none is in tier smoke (use --tier full|large|local|all)" ] ||
        { cat err.txt; fail "list --tier smoke of a full-tier id: message"; }
    "$moects" list --help | grep -q -- "--tier T .*(default: smoke, as moects run" || fail "list --help: default tier"
    # without --kernel a narrow selection (one W4A16 case) fails the kernels made for other formats; the
    # line before the verdict names them (CUDA builds add their own) and says how to leave them out
    w16=moe_gemm.w4a16/regression/moe-k-tail-scales/e8/n256/k208/linear
    "$moects" run --out out "$w16" > /dev/null 2> hint.err; [ $? = 1 ] || fail "W4A16 alone with every kernel: exit"
    grep -q "^moects run: [0-9]* kernels\{0,1\} refused every selected case (cpu.moe_gemm.blockwise[,)].*: --kernel GLOB names the kernels to judge$" hint.err ||
        { cat hint.err; fail "no hint naming cpu.moe_gemm.blockwise"; }
    "$moects" run --out out --kernel cpu.moe_gemm.dequant_sgemm "$w16" > /dev/null 2> hint.err || fail "dequant_sgemm on W4A16"
    grep -q "refused every selected case" hint.err && fail "a hint though --kernel was given"
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
    grep -q "(default: one per GPU when a CUDA kernel has work, else" help.txt &&
        grep -q "one per CPU core and at least one per GPU of a --gpus list)" help.txt || fail "--help: jobs default"
    grep -q "^  --gpus LIST|all .*one worker set per GPU" help.txt && grep -q "Default all; MOECTS_FAKE_GPUS=N" help.txt ||
        fail "--help: --gpus and its default"
    grep -q "kernels.log there holds what the kernels printed" help.txt || fail "--help: kernels.log"
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
*)
    fail "unknown test"
    ;;
esac
echo "ok [$name]"
