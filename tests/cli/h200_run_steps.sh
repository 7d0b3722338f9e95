#!/usr/bin/env bash
# h200_run_steps.sh SRC WORK: tools/h200_run.sh's shard steps over several device calls, with a stub
# moects that logs its arguments: call 1 is cut (its run leaves a 340 KB journal, exit 124), call 2
# resumes that shard with --resume and runs the other with --out, call 3 runs neither (both finished)
# and merges again; the smoke step likewise: cut, resumed (its pack split in 1 KiB parts), then not run again. After each call the pack goes back into the tree with tools/h200_unpack.sh, as
# between device calls (the journal kept as .gz, restored by the next call; removed once its step is
# done). The expected command lines are written out here by hand.
set -u
src=${1:?usage: h200_run_steps.sh SRC WORK} work=${2:?}
rm -rf "$work" && mkdir -p "$work/bin"
cat > "$work/bin/moects" <<'STUB'
#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
cmd=$1; shift
if [ "$cmd" = merge ]; then mkdir -p "$1"; echo "ok 1" > "$1/run.tap"; exit 0; fi
d=; while [ $# -gt 0 ]; do case $1 in --out | --resume) d=$2; shift ;; esac; shift; done
mkdir -p "$d"
if [ -n "${STUB_CUT:-}" ]; then yes 0123456789abcdef | head -n 20000 > "$d/results.journal"; exit 124; fi
rm -f "$d/results.journal"; echo '{}' > "$d/results.json"
STUB
chmod +x "$work/bin/moects"
export STUB_LOG=$work/calls.txt MOECTS_MOE_SHARDS=2 MOECTS_JOBS=4 MOECTS_PACK=$work/pack.tar.gz
out=$work/out
cd "$src" || exit 1
unpack() { bash tools/h200_unpack.sh "$work/pack.tar.gz" "$out" > "$work/unpack$1.txt" || exit 1; }
STUB_CUT=1 bash tools/h200_run.sh "$work/bin/moects" "$out" moefull0 > /dev/null 2>&1
unpack 1
[ -e "$out/moefull0/results.journal.gz" ] && [ ! -e "$out/moefull0/results.journal" ] ||
  { echo "h200_run_steps: the cut journal is not kept as results.journal.gz"; exit 1; }
bash tools/h200_run.sh "$work/bin/moects" "$out" moefull0,moefull1 > /dev/null 2>&1
unpack 2
[ ! -e "$out/moefull0/results.journal.gz" ] || { echo "h200_run_steps: a finished step's journal.gz stayed"; exit 1; }
bash tools/h200_run.sh "$work/bin/moects" "$out" moefull0,moefull1 > /dev/null 2>&1
# the smoke step the same way: cut, continued, then done earlier (each call merges the shards again)
STUB_CUT=1 bash tools/h200_run.sh "$work/bin/moects" "$out" smoke > /dev/null 2>&1
unpack 3
MOECTS_PACK_PART=1024 bash tools/h200_run.sh "$work/bin/moects" "$out" smoke > /dev/null 2>&1
# a pack over MOECTS_PACK_PART bytes comes in parts, which h200_unpack.sh joins
[ ! -e "$work/pack.tar.gz" ] && [ -e "$work/pack.tar.gz.00" ] && [ -e "$work/pack.tar.gz.01" ] ||
  { echo "h200_run_steps: a pack over MOECTS_PACK_PART was not split into parts"; exit 1; }
unpack 4
bash tools/h200_run.sh "$work/bin/moects" "$out" smoke > /dev/null 2>&1
k="--tier full --jobs 4 --kernel cuda.moe_gemm.*"
cat > "$work/want.txt" <<WANT
run $k --shard 0/2 --out $out/moefull0 moe_gemm*
run $k --shard 0/2 --resume $out/moefull0 moe_gemm*
run $k --shard 1/2 --out $out/moefull1 moe_gemm*
merge $out/moefull $out/moefull0/results.json $out/moefull1/results.json
merge $out/moefull $out/moefull0/results.json $out/moefull1/results.json
run --tier smoke --jobs 4 --out $out/smoke
merge $out/moefull $out/moefull0/results.json $out/moefull1/results.json
run --tier smoke --jobs 4 --resume $out/smoke
merge $out/moefull $out/moefull0/results.json $out/moefull1/results.json
merge $out/moefull $out/moefull0/results.json $out/moefull1/results.json
WANT
if ! diff -u "$work/want.txt" "$work/calls.txt"; then echo "h200_run_steps: the calls differ (above)"; exit 1; fi
for f in moefull0/results.json moefull1/results.json moefull/run.tap status.txt; do
  tar -tzf "$work/pack.tar.gz" | grep -qx "out/$f" || { echo "h200_run_steps: $f not in the pack"; exit 1; }
done
printf 'moefull0: cut, 20000 journal lines\n' | diff - "$work/unpack1.txt" || { echo "h200_run_steps: unpack 1 says otherwise"; exit 1; }
grep -qx "moefull1 done earlier" "$out/status.txt" || { echo "h200_run_steps: no 'moefull1 done earlier'"; exit 1; }
printf 'moefull0: done\nmoefull1: done\nsmoke: cut, 20000 journal lines\n' | diff - "$work/unpack3.txt" ||
  { echo "h200_run_steps: unpack 3 says otherwise"; exit 1; }
printf 'moefull0: done\nmoefull1: done\nsmoke: done\n' | diff - "$work/unpack4.txt" ||
  { echo "h200_run_steps: unpack 4 (from parts) says otherwise"; exit 1; }
[ ! -e "$work/pack.tar.gz.00" ] || { echo "h200_run_steps: a whole pack left the parts of the last one"; exit 1; }
grep -qx "smoke done earlier" "$out/status.txt" || { echo "h200_run_steps: no 'smoke done earlier'"; exit 1; }
echo "h200_run_steps: ok"
