#!/bin/sh
# install_test.sh BUILD SRC WORK: `cmake --install` into a temporary prefix, then what a user does
# with it: moects on PATH, a kernel plugin and a libmoects program built out of tree with pkg-config
# and with find_package(moects), the plugin run by the installed moects, the program run.
set -eu
build=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
export PATH="$prefix/bin:$PATH" PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
test "$(command -v moects)" = "$prefix/bin/moects"
for h in moects.h moects_kernel.h moects_types.h; do test -f "$prefix/include/moects/$h"; done
# only moects_ names exported
bad=$(nm -D --defined-only "$prefix/lib/libmoects.so" | awk '$3 !~ /^moects_/ && $3 != "MOECTS_0" {print $3}')
[ -z "$bad" ] || { echo "libmoects exports non-moects names: $bad"; exit 1; }

echo "# pkg-config"
cc -shared -fPIC -ffp-contract=off $(pkg-config --cflags moects) "$src/examples/c_plugin/plugin_example.c" -o "$work/plugin.so" -lm
cc $(pkg-config --cflags moects) "$src/tests/fixtures/install_consumer/api_demo.c" -o "$work/api_demo" $(pkg-config --libs moects)
"$work/api_demo" 'ep_gather/kimi-k3/tp8/*' | tee "$work/demo1.txt"
grep -q ' PASS_EXACT$' "$work/demo1.txt"
moects run --kernel-lib "$work/plugin.so" --kernel plugin.ep_gather --out "$work/run1" 'ep_gather/kimi-k3/tp8/t1' \
  >"$work/run1.tap"
grep -q '^ok 1 - plugin.ep_gather' "$work/run1.tap"

echo "# find_package"
cmake -S "$src/tests/fixtures/install_consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DPLUGIN_SOURCE="$src/examples/c_plugin/plugin_example.c" >"$work/consumer.log"
cmake --build "$work/consumer" >>"$work/consumer.log"
"$work/consumer/api_demo" 'ep_gather/deepseek-v3/*' | tee "$work/demo2.txt"
grep -q ' PASS_EXACT$' "$work/demo2.txt"
moects run --kernel-lib "$work/consumer/libconsumer_plugin.so" --kernel plugin.ep_gather --out "$work/run2" \
  'ep_gather/kimi-k3/tp8/t1' >"$work/run2.tap"
grep -q '^ok 1 - plugin.ep_gather' "$work/run2.tap"
echo "install test: ok"
