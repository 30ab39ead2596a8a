#!/bin/sh
# test.sh — sets everything up (scripts/setup.sh) and runs the whole test suite with CTest.
# Vulkan tests run on lavapipe (Mesa's CPU Vulkan driver) with the Khronos validation layer.
# Where the CUDA toolkit is installed (nvcc on PATH or in /usr/local/cuda), a second tree (build-cuda)
# is configured with -DVKASR_CUDA=ON and compiled and linked, quietly: its tests need an NVIDIA GPU
# (tools/gpu/cuda_check.sh runs them there).
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
JOBS=$(nproc 2>/dev/null || echo 2)
NVCC=$(command -v nvcc 2>/dev/null || true)
[ -n "$NVCC" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || NVCC=/usr/local/cuda/bin/nvcc
if [ -n "$NVCC" ]; then
    echo "test: building the CUDA backend with $NVCC (build-cuda; compile and link only)"
    mkdir -p build-cuda
    if ! { cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKASR_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" &&
           cmake --build build-cuda -j "$JOBS"; } >build-cuda/build.log 2>&1; then
        tail -n 40 build-cuda/build.log
        echo "test: the -DVKASR_CUDA=ON build failed (whole log: build-cuda/build.log)"
        exit 1
    fi
fi
ctest --test-dir build --output-on-failure --no-tests=error -j "$JOBS"
