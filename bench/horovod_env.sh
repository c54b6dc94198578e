#!/usr/bin/env bash
# Build Horovod 0.28.1 from its PyPI sdist into a cached venv outside the repo, for the bench's
# optional `horovod` group (never CI). Idempotent: a finished venv is left as it is.
#   bash bench/horovod_env.sh            build (or check) the venv; prints its path
#   bash bench/horovod_env.sh --path     print the venv's path only
# The venv: $RINGSCOPE_HOROVOD_VENV, default ~/.cache/ringscope/horovod-0.28.1/venv. The build takes
# ~10 minutes on 2 cores; run it under `nice` in the background and read the log:
#   nice -n 15 bash bench/horovod_env.sh > ~/.cache/ringscope/horovod-0.28.1/build.log 2>&1 &
# Horovod's horovodrun does not recognise MPICH 5, so the bench launches it with the venv's mpiexec.
set -euo pipefail
version=0.28.1
home="${RINGSCOPE_HOROVOD_HOME:-$HOME/.cache/ringscope/horovod-$version}"
venv="${RINGSCOPE_HOROVOD_VENV:-$home/venv}"
if [ "${1:-}" = "--path" ]; then echo "$venv"; exit 0; fi
stamp="$venv/.horovod-$version-built"
if [ -f "$stamp" ]; then echo "$venv"; exit 0; fi

py="${PYTHON:-python3}"
mkdir -p "$home"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q)
# torch 2.13 (the CPU wheel, as ringscope's own venv), MPI, and the sdist's build requirements.
"${pip[@]}" --upgrade pip
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" mpich mpi4py numpy "cmake<4" setuptools wheel packaging psutil pyyaml cloudpickle

src="$home/src"
if [ ! -f "$src/horovod-$version/setup.py" ]; then
  rm -rf "$src"; mkdir -p "$src"
  "$venv/bin/python" -m pip download -q --no-deps --no-binary :all: -d "$src" "horovod==$version"
  tar -xzf "$src/horovod-$version.tar.gz" -C "$src"
fi
cd "$src/horovod-$version"
# torch 2.13's headers need C++17; Horovod 0.28.1 asks for 14.
sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' CMakeLists.txt horovod/torch/CMakeLists.txt
grep -q 'CMAKE_CXX_STANDARD 17' CMakeLists.txt
grep -q 'CMAKE_CXX_STANDARD 17' horovod/torch/CMakeLists.txt

export PATH="$venv/bin:$PATH"   # the mpich wheel's mpicc/mpicxx and the pip cmake come first
export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1
export HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
export MAKEFLAGS="-j${HOROVOD_BUILD_JOBS:-2}"
"$venv/bin/python" -m pip install -v --no-build-isolation --no-deps --no-cache-dir .
cd "$venv"
"$venv/bin/python" -c "import horovod.torch as hvd; assert hvd.mpi_built() and hvd.gloo_built()"
touch "$stamp"
echo "$venv"
