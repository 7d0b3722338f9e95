#!/bin/sh
# localcase.sh: end-to-end checks of local cases (issue 32: `moects case add`, tier local).
# Usage: localcase.sh NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (NAME: local_roundtrip, local_scale,
# local_malformed, local_budget). Expected values come from the registry: a registry case exported and
# re-added must give the registry run's own verdicts and input and reference hashes (every op: ep_gather,
# fp4_gemm, moe_route, fused_moe, moe_gemm in its three row layouts); a malformed file is refused with the
# rule its tensor breaks, which the mutation list spells out by hand.
. "$(dirname "$0")/lib.sh"
mutate() { python3 "$root/tests/cli/st_mutate.py" "$@" || fail "st_mutate $*"; }
export MOECTS_CASES_DIR="$work/local"
f() { echo "x/$(echo "$1" | sed 's|/|__|g').safetensors"; } # export's file of a case id
# fused_moe: MXFP4, a gated layer, NaN data, no map; MXFP4 relu2 under EP 8 (an expert_map), adversarial.
# moe_gemm: the three row layouts, NaN data
fq=fused_moe.mxfp4/qwen3-next-80b-a3b/tp16/t4/smoke-nan fm=fused_moe.mxfp4/nemotron-3-nano-30b-a3b/ep8/t1/smoke-adversarial
mc=moe_gemm.mxfp4/regression/moe-layouts/e5/n256/k384/contiguous/bf16
origin() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["case"]["id"])' "$1"; }

case $name in
local_roundtrip)
    ids="ep_gather/kimi-k3/ep8/t16 ep_gather/regression/stale-ids/ep64/t16/int32
         ep_gather/regression/block-divides-h/h896/t16/nan fp4_gemm.mxfp4/kimi-k3/tp8/gemm2/m16/swizzled
         fp4_gemm.nvfp4/kimi-k3/tp8/gemm1/m16 moe_route/deepseek-v3/t16 moe_route/deepseek-v3/t40/smoke-adversarial
         $fq $fm $mc moe_gemm.mxfp4/regression/moe-layouts/e5/n256/k384/masked/bf16
         moe_gemm.nvfp4/regression/moe-layouts/e5/n256/k384/offsets/f32 moe_gemm.nvfp4/regression/moe-nan-leak/e2/m128/n128/k256/masked"
    # shellcheck disable=SC2086
    "$moects" export $ids --out x 2> err.txt || { cat err.txt; fail "export"; }
    : > pairs
    for id in $ids; do
        "$moects" case add "$(f "$id")" > id.txt 2> err.txt || { cat err.txt; fail "case add $id"; }
        lid=$(cat id.txt)
        echo "$lid" | grep -Eq "^${id%%/*}/local/[0-9a-f]{16}$" || fail "$id: id $lid"
        [ -f "local/$(echo "$lid" | sed 's|/|__|g').json" ] || fail "$lid: no manifest"
        "$moects" case add "$(f "$id")" > again.txt 2> err.txt || fail "second add of $id"
        cmp -s id.txt again.txt || fail "$id: a second add gave another id"
        grep -q "was there already" err.txt || fail "$id: second add: $(cat err.txt)"
        echo "$id $lid" >> pairs
    done
    [ "$("$moects" list --tier local | wc -l)" -eq 13 ] || fail "list --tier local: $("$moects" list --tier local)"
    "$moects" list 'ep_gather/*' | grep -q /local/ && fail "a local case in the smoke tier's list"
    "$moects" list -l "$(cut -d' ' -f2 pairs | head -1)" | grep -q "	local$" || fail "list -l: tier local"
    # every kernel of the default run but the FP8, NVFP4, W4A8 and situ layer kernels, which refuse every
    # case here (none of those formats or activations: an FP8 export is refused under the default
    # layer recipe) and so fail a run
    ks=$("$moects" list --kernels | cut -f1 | grep -v -E "vllm_fp8|deepgemm|fp8_scale|fused_moe\.(.*nvfp4|.*w4a8|vllm_triton_fp8|situ_native)" | paste -sd, -)
    # shellcheck disable=SC2046
    "$moects" run $(cut -d' ' -f1 pairs) --kernel "$ks" --out reg > /dev/null 2> reg.err || { tail -1 reg.err; fail "registry run"; }
    # shellcheck disable=SC2046
    "$moects" run $(cut -d' ' -f2 pairs) --kernel "$ks" --out loc > /dev/null 2> loc.err || { tail -1 loc.err; fail "local run"; }
    python3 - reg/results.json loc/results.json pairs <<'PY' || fail "local run differs from the registry run"
import json, sys
pairs = dict(l.split() for l in open(sys.argv[3]))
reg = {(r["kernel"], pairs[r["case"]]): r for r in json.load(open(sys.argv[1]))["results"]}
loc = {(r["kernel"], r["case"]): r for r in json.load(open(sys.argv[2]))["results"]}
assert reg.keys() == loc.keys() and len(reg) >= 20, (len(reg), len(loc))
ops = {c.split("/")[0].split(".")[0] for _, c in reg}
assert {"fused_moe", "moe_gemm"} <= ops, ops
for k, r in reg.items():
    for f in ("verdict", "reference_xxh64", "input_xxh64", "mismatches"):
        assert r.get(f) == loc[k].get(f), (k, f, r.get(f), loc[k].get(f))
assert sum(1 for r in loc.values() if r.get("reference_xxh64")) >= 10
PY
    "$moects" gate loc/results.json --baseline loc/results.json --summary '' > /dev/null 2> g.err || { cat g.err; fail "gate"; }
    "$moects" coverage loc/results.json --out cov > /dev/null 2> c.err || { cat c.err; fail "coverage"; }
    grep -q "local" cov/coverage.md || fail "coverage.md names no local case"
    ;;
local_scale)
    id=fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16
    "$moects" export "$id" --out x 2> err.txt || fail export
    mutate "$(f "$id")" flipped.safetensors flip_scale
    a=$("$moects" case add "$(f "$id")" 2> err.txt) || { cat err.txt; fail "add"; }
    b=$("$moects" case add flipped.safetensors 2> err.txt) || { cat err.txt; fail "add flipped"; }
    [ "$a" != "$b" ] || fail "a flipped scale byte kept the id $a"
    "$moects" run "$a" "$b" --kernel cpu.fp4_gemm.blockwise --out r > /dev/null 2> r.err || { tail -1 r.err; fail run; }
    python3 - r/results.json "$a" "$b" <<'PY' || fail "the flipped scale byte did not change the reference"
import json, sys
h = {r["case"]: r["reference_xxh64"] for r in json.load(open(sys.argv[1]))["results"]}
assert h[sys.argv[2]] and h[sys.argv[3]] and h[sys.argv[2]] != h[sys.argv[3]], h
PY
    ;;
local_malformed)
    eg=ep_gather/kimi-k3/ep8/t16 fg=fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16
    "$moects" export "$eg" "$fg" "$fq" "$fm" "$mc" --out x 2> err.txt || fail export
    n=0
    cat > mutations <<'LIST'
truncated|eg|data_offsets
dtype|eg|x: dtype F16
id_range|eg|topk_ids\[0\]
idx_range|eg|input_index\[[0-9]*\] = [0-9]*: not a row of x
map_range|eg|expert_map\[0\]
scale_nan|fg|sa\[0, block 0\] = 0xff: a NaN
shape|eg|x: shape
case_shape|eg|x: shape
duplicate|eg|header: duplicate
offsets|eg|data_offsets
missing|eg|topk_weights: missing
extra|eg|bogus: not an input
header_len|eg|header length
id_range|fm|topk_ids\[0, 0\] = 133: not in \[0, E_global 128)
map_range|fm|expert_map\[0\] = 1000: not in \[-1, E 16)
w13_scale_nan|fm|w13_scale\[0\] = 0xff: a NaN scale
w13_rows|fq|w13: 32 rows per expert, the layer wants 2\*I = 64
m_index_range|mc|m_indices\[0\] = 8: not in \[-1, E 5)
sb_nan|mc|sb\[expert 0, row 0, block 0\] = 0xff: a NaN scale
LIST
    while IFS='|' read -r mut which want; do
        src=$(f "$(eval echo \$$which)")
        mutate "$src" "bad_$mut.safetensors" "$mut"
        "$moects" case add "bad_$mut.safetensors" > out.txt 2> err.txt
        rc=$?
        [ $rc -eq 2 ] || { cat err.txt; fail "$mut: exit $rc, want 2"; }
        [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "$mut: want one stderr line"; }
        grep -q "bad_$mut.safetensors" err.txt || { cat err.txt; fail "$mut: the file is not named"; }
        grep -q "$want" err.txt || { cat err.txt; fail "$mut: want \"$want\""; }
        [ -s out.txt ] && fail "$mut: printed an id"
        [ -e local ] && fail "$mut: wrote into the case folder"
        echo "$mut" >> refused
    done < mutations
    n=$(wc -l < refused)
    [ $n -ge 19 ] || fail "only $n malformed files"
    ;;
local_budget)
    id=fp4_gemm.mxfp4/kimi-k3/tp8/gemm1/m16
    "$moects" export "$id" --out x 2> err.txt || fail export
    MOECTS_HOST_MEM_BUDGET=4096 "$moects" case add "$(f "$id")" > /dev/null 2> err.txt
    [ $? -eq 2 ] || fail "over the budget: not exit 2"
    grep -q "the case needs [0-9]* bytes" err.txt || { cat err.txt; fail "the size it needs is not said"; }
    [ -e local ] && fail "over the budget: wrote into the case folder"
    # blobs are shared: two cases over the same weights store them once
    "$moects" case add "$(f "$id")" > a.txt 2> err.txt || { cat err.txt; fail add; }
    mutate "$(f "$id")" flipped.safetensors flip_scale
    "$moects" case add flipped.safetensors > b.txt 2> err.txt || { cat err.txt; fail "add flipped"; }
    [ "$(ls local/blobs | wc -l)" -eq 5 ] || fail "want 5 blobs (a, b, sb shared; sa twice): $(ls local/blobs)"
    ;;
*) fail "unknown check" ;;
esac
exit 0
