#!/bin/sh
# test.sh — sets everything up (scripts/setup.sh) and runs the whole test suite with CTest.
# Vulkan tests run on lavapipe (Mesa's CPU Vulkan driver) with the Khronos validation layer.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
JOBS=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure --no-tests=error -j "$JOBS"
