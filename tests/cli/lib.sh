# lib.sh: what the end-to-end CLI checks of tests/cli/*.sh share; sourced by each with its arguments
# NAME MOECTS_BIN PLUGIN_SO SOURCE_ROOT WORK_DIR (tests/CMakeLists.txt registers one CTest test
# moects_cli_NAME per check): a fresh WORK_DIR/NAME to work in, fail, the environment, pick.
set -u
name=$1 moects=$2 plugin=$3 root=$4 work=$5/$1
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail() { echo "FAIL [$name]: $*" >&2; exit 1; }
export MOECTS_ROOT="$root" MOECTS_COMMIT=cli-test
unset TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
planted=$(dirname "$plugin")/libmoects_plugin_planted.so # tests/fixtures/plugins/plugin_planted.c
emu=$(dirname "$plugin")/libmoects_fused_moe_cuda_emu.so # tests/fixtures/plugins/fused_moe_cuda_emu.cpp
# a few cheap smoke cases, whatever the registry holds
pick() { "$moects" list --tier smoke "$1" | cut -f1 | head -n "$2"; }
