set -u
C=bfff2df; export MOECTS_COMMIT=$C
tar -xJf build-pkg/n.tar.xz -C build-pkg
MOECTS_LAYER_STEPS=racecheck,synccheck,perf MOECTS_BUDGET_S=200 MOECTS_RACECHECK_EVERY=2 MOECTS_SYNCCHECK_EVERY=4 \
  MOECTS_LAYER_PERF_ARGS="--models deepseek-v3,kimi-k3,gpt-oss-120b,qwen3-235b-a22b --cell-ms 1500" \
  tools/h200_layer.sh build-pkg $OUT/layer/$C > $OUT/layer.log 2>&1; echo layer rc=$?; tail -12 $OUT/layer.log
MOECTS_BUDGET_S=90 tools/h200_triton_layer.sh build-pkg $OUT/triton_layer/$C > $OUT/triton.log 2>&1; echo triton rc=$?; tail -4 $OUT/triton.log
cd $OUT && tar -czf all.tar.gz layer triton_layer layer.log triton.log && rm -rf layer triton_layer && ls -la
