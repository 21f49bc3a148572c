#!/usr/bin/env bash
# bootstrap.sh - installs what building and testing nnroute needs, and nothing twice.
#
#   scripts/bootstrap.sh              Debian packages + the Python venv (.venv)
#   NR_BOOTSTRAP_MODELS=0 scripts/bootstrap.sh
#                                     the same without python3-torch/torchvision (about
#                                     1 GB) and dataset-fashion-mnist, which only
#                                     bench/models/export_models.py and fashion_mnist.py use
#
# Targets Debian 12. Debian packages are installed with apt-get (as root, or through
# sudo) only when some are missing, so a second run does no network access at all.
# The venv is made with Debian's own /usr/bin/python3 (never whatever python3 is first
# on PATH) and gets pinned onnx / onnxruntime / numpy from PyPI, only when they are not
# already there at those versions. Torch stays a Debian package used from /usr/bin/python3:
# the model exports run there, ONNX Runtime runs in the venv. After installing, the
# script runs the build's own dependency search (scripts/depcheck) and, when it would
# fail, names every missing file with the package that provides it, and exits 1.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$repo/.venv
sys_python=/usr/bin/python3
models=${NR_BOOTSTRAP_MODELS:-1}

# PyPI pins: onnx 1.23 reads and checks models up to opset 23; onnxruntime 1.23.2 is the
# matching runtime release with CPython 3.11 wheels (Debian 12's python).
pins=(onnx==1.23.2 onnxruntime==1.23.2 numpy==2.3.5)

# libdnnl-dev only recommends ocl-icd-opencl-dev, but oneDNN's CMake package calls
# find_package(OpenCL) and fails without it: with --no-install-recommends it must be named.
# zlib1g-dev and gfortran (for libgfortran's link): sqlite3's and openblas's static
# link lines (pkg-config --static, used by the install check and by static programs)
# name -lz and -lgfortran. clang: the libFuzzer harnesses (tests/fuzz, the fuzz stage of
# scripts/test.sh); Debian 12's clang 14 has -fsanitize=fuzzer.
packages=(build-essential cmake pkg-config git ca-certificates libprotobuf-c-dev
          protobuf-c-compiler libsqlite3-dev zlib1g-dev libcjson-dev libssl-dev
          libopenblas-dev gfortran libdnnl-dev ocl-icd-opencl-dev xz-utils python3
          python3-venv python3-numpy clang)
[[ $models != 0 ]] && packages+=(python3-torch python3-torchvision)
# The Fashion-MNIST images (30 MB) for bench/models/fashion_mnist.py, issue 6's top-1 model.
[[ $models != 0 ]] && packages+=(dataset-fashion-mnist)

say() { echo "bootstrap: $*"; }

install_packages() {
  if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    say "not a Debian system: install the equivalents of ${packages[*]} by hand"
    return 0
  fi
  local missing=() p
  for p in "${packages[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] ||
      missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    say "all ${#packages[@]} Debian packages present"
    return 0
  fi
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { say "need root (or sudo) to install: ${missing[*]}"; return 1; }
    sudo=(sudo)
  fi
  say "installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
}

# True when the venv exists and holds exactly the pinned versions.
venv_current() {
  [[ -x $venv/bin/python ]] || return 1
  "$venv/bin/python" - "${pins[@]}" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
try:
    ok = all(version(p.split("==")[0]) == p.split("==")[1] for p in sys.argv[1:])
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
EOF
}

make_venv() {
  if venv_current; then
    say "venv $venv up to date (${pins[*]})"
    return 0
  fi
  if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$venv"
    say "creating $venv with $sys_python"
    "$sys_python" -m venv "$venv"
  fi
  say "pip installing ${pins[*]}"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q "${pins[@]}"
  venv_current || { say "venv still lacks ${pins[*]} after pip install"; return 1; }
}

# What the configure step looks for, and the Debian package that provides it: named
# in the message when the dependency probe fails, so a user on another system knows
# what to install.
build_needs=("pkg-config:pkg-config:pkg-config" "cmake:cmake:cmake" "cc:cc:build-essential"
             "clang:clang:clang"
             "protoc-c:protoc-c:protobuf-c-compiler"
             "pc:libprotobuf-c:libprotobuf-c-dev" "pc:libcjson:libcjson-dev"
             "pc:libcrypto:libssl-dev" "pc:sqlite3:libsqlite3-dev"
             "pc:openblas:libopenblas-dev"
             "file:/usr/lib/*/cmake/dnnl/dnnl-config.cmake:libdnnl-dev"
             "file:/usr/include/CL/cl.h:ocl-icd-opencl-dev"
             "file:/usr/lib/*/libOpenCL.so:ocl-icd-opencl-dev"
             "file:/usr/lib/*/libz.so:zlib1g-dev"
             "file:/usr/lib/gcc/*/*/libgfortran.so:gfortran")

# Runs the real dependency search (scripts/depcheck, the same cmake/nnroute_deps.cmake
# the build includes) and, when it fails, names each missing piece and its package.
# Each listed piece must be there (the static link lines need some that configure does
# not look for), and the probe must pass.
check_build_deps() {
  local need kind what pkg rc=0
  for need in "${build_needs[@]}"; do
    IFS=: read -r kind what pkg <<<"$need"
    case $kind in
      pc) command -v pkg-config >/dev/null && pkg-config --exists "$what" && continue ;;
      file) compgen -G "$what" >/dev/null && continue ;;
      *) command -v "$what" >/dev/null && continue ;;
    esac
    say "missing $what: install the Debian package $pkg (apt-get install $pkg)"
    rc=1
  done
  local tmp log
  tmp=$(mktemp -d) && log=$tmp/depcheck.log
  if command -v cmake >/dev/null &&
      cmake -S "$repo/scripts/depcheck" -B "$tmp/build" >"$log" 2>&1; then
    ((rc)) || say "configure check passed: every build dependency found"
  else
    say "configure check FAILED: the build would stop at cmake's configure step; cmake said:"
    sed 's/^/    /' "$log" | tail -n 25
    rc=1
  fi
  rm -rf "$tmp"
  return $rc
}

install_packages
check_build_deps
[[ -x $sys_python ]] || { say "$sys_python is missing"; exit 1; }
make_venv
if [[ $models != 0 ]]; then
  "$sys_python" -c "import torch, torchvision" 2>/dev/null ||
    { say "$sys_python cannot import torch/torchvision"; exit 1; }
fi
say "done"
