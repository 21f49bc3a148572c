#!/usr/bin/env bash
# check_install.sh BUILD_DIR SOURCE_DIR - installs nnroute from BUILD_DIR into a
# temporary prefix, builds tests/install/use_api.c with nothing but the installed
# header and `pkg-config nnroute`, and runs it on the bundled example model.
set -euo pipefail
build=$1 src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc_dir=$(dirname "$(find "$prefix" -name nnroute.pc | head -n 1)")
export PKG_CONFIG_PATH=$pc_dir
cc -std=c17 -o "$prefix/use_api" "$src/tests/install/use_api.c" \
  $(pkg-config --cflags nnroute) $(pkg-config --libs --static nnroute)
LD_LIBRARY_PATH=$(pkg-config --variable=libdir nnroute) \
  "$prefix/use_api" "$src/examples/tiny_cnn/model.onnx"
