#!/bin/sh
# demo.sh — sets everything up (scripts/setup.sh: Debian packages, build) and transcribes the shipped
# sample with the default model on the best Vulkan device (lavapipe, Mesa's CPU driver, when there is
# no GPU). Prints the device, the transcript, then the reference text for comparison.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
./build/tools/vkasr devices | sed -n 1p
echo "--- vkasr transcribe samples/sample.wav"
./build/tools/vkasr transcribe -v samples/sample.wav
echo "--- reference (samples/sample.txt)"
cat samples/sample.txt
