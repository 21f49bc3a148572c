#!/usr/bin/env bash
# make_seeds.sh - the seed corpora of the libFuzzer harnesses, generated (never
# committed: they are megabytes, and engines are only valid on the machine and with
# the compiler that built them).
#
#   tests/fuzz/make_seeds.sh FUZZ_BUILD NODE_DIR OUT
#
# FUZZ_BUILD holds the harnesses (build-fuzz), NODE_DIR the unpacked ONNX node tests
# (build-cpu/node after `ctest -R conformance_unpack`), OUT receives one folder per
# harness:
#   onnx    every node test's model.onnx and examples/tiny_cnn
#   engine  engines built by fuzz_engine itself (so the environment check passes) from
#           every 25th node test and tiny_cnn
#   npy     tiny_cnn's input and .npy files of every dtype and format version
#           (python3 with numpy; skipped without it)
#   pb      every 8th node test's input_0.pb
#   route   routes and route expressions over tiny_cnn's knobs (first byte: parser)
#   db      a tuning database written by fuzz_db through the database API
set -euo pipefail
fb=$1 node=$2 out=$3
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ -d $node ]] || { echo "make_seeds: no node tests at $node" >&2; exit 1; }
mkdir -p "$out"/{onnx,engine,npy,pb,route,db}

mapfile -t models < <(find "$node" -name model.onnx | sort)
((${#models[@]} > 0)) || { echo "make_seeds: no model.onnx under $node" >&2; exit 1; }
for m in "${models[@]}"; do
  cp "$m" "$out/onnx/$(basename "$(dirname "$m")").onnx"
done
cp "$repo/examples/tiny_cnn/model.onnx" "$out/onnx/tiny_cnn.onnx"

picks=("$repo/examples/tiny_cnn/model.onnx")
for ((i = 0; i < ${#models[@]}; i += 25)); do picks+=("${models[i]}"); done
NR_FUZZ_ENGINE_SEEDS=$out/engine ASAN_OPTIONS=detect_leaks=0 "$fb/tests/fuzz/fuzz_engine" \
  "${picks[@]}"

mapfile -t pbs < <(find "$node" -name input_0.pb | sort)
for ((i = 0; i < ${#pbs[@]}; i += 8)); do
  cp "${pbs[i]}" "$out/pb/$(basename "$(dirname "$(dirname "${pbs[i]}")")").pb"
done

cp "$repo/examples/tiny_cnn/input.npy" "$out/npy/tiny_cnn_input.npy"
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  /usr/bin/python3 - "$out/npy" <<'PY'
import io, sys, numpy as np
from numpy.lib import format as npf
out = sys.argv[1]
arrays = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3), "f16": np.ones(4, np.float16),
          "f64": np.array(2.5), "i8": np.arange(-3, 3, dtype=np.int8),
          "u16": np.arange(5, dtype=np.uint16), "i64": np.arange(8, dtype=np.int64).reshape(2, 2, 2),
          "bool": np.array([True, False]), "be_i32": np.arange(3, dtype=">i4"),
          "empty": np.zeros((0, 3), np.float32), "u64": np.arange(2, dtype=np.uint64)}
for name, a in arrays.items():
    for version in ((1, 0), (2, 0), (3, 0)):
        buf = io.BytesIO()
        npf.write_array(buf, a, version=version)
        open(f"{out}/{name}_v{version[0]}.npy", "wb").write(buf.getvalue())
PY
fi

i=0
while IFS= read -r line; do
  [[ -z $line ]] && continue
  printf "\\x$(printf %02x "${line%% *}")%s" "${line#* }" >"$out/route/r$i"
  i=$((i + 1))
done <<'ROUTES'
0 -conv.algo=direct
0 -memory.plan=naive -memory.align=4096
0 -conv.algo@/0/Conv=winograd23 -precision@/4/Conv=fp16 -pool.tactic@*=ref
0 -gemm.tactic@/13/Gemm=openblas_sgemm -conv.layout@Conv=nhwc
4 -memory.views=off -quant.chain=off
1 -conv.algo@*=[direct|im2col] -memory.plan=*
1 -precision@*=[fp32|int8] -quant.calibration=[minmax|entropy]
1 -gemm.tactic@/13/Gemm=* -conv.layout=[auto|nchw8c]
5 -reduce.reassoc=[off|on] -eltwise.math=*
2 -conv.threads@/8/Conv=1  -memory.plan=greedy_first_use
2 -fuse.conv_act@/0/Conv=none -conv.algo@/0/Conv=auto
6 -compile.tactic_selection=profile
ROUTES

NR_FUZZ_DB_SEED=$out/db/tune.sqlite ASAN_OPTIONS=detect_leaks=0 "$fb/tests/fuzz/fuzz_db"
for h in onnx engine npy pb route db; do
  echo "make_seeds: $h $(find "$out/$h" -type f | wc -l) files"
done
