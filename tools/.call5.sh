set -u
C=375b2e9; export MOECTS_COMMIT=$C
tar -xJf build-pkg/n.tar.xz -C build-pkg
MOECTS_BUDGET_S=150 tools/h200_check.sh build-pkg $OUT/check/$C > $OUT/check.log 2>&1; echo check rc=$?; tail -40 $OUT/check.log
B=build-pkg/bin/moects; G=$OUT/gpuref/$C; mkdir -p $G
( time timeout 60 $B run --tier smoke 'fused_moe*' 'moe_gemm*' --kernel 'cpu.fused_moe.*,cpu.moe_gemm.dequant_sgemm' --reference gpu --reference-seed 1 --perf-phases --jobs 16 --out $G/run > $G/run.tap 2> $G/run.err ) 2> $G/run.time; echo gpuref rc=$?
tail -12 $G/run.err; grep -o '"reference": "[a-z]*"' $G/run/results.json | sort | uniq -c | tee $G/reference-counts.txt
cd $OUT && tar -czf all.tar.gz check gpuref check.log && rm -rf check gpuref && ls -la
