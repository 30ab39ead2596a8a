#!/bin/sh
# setup.sh [--test] [--no-build] — installs the Debian 12 packages vkasr needs (when missing) and builds
# it in ./build. --test adds what the test scripts need beyond that (clang-14 and its sanitizer and
# libFuzzer run times: scripts/test.sh, scripts/fuzz.sh; curl, node and npm: the server tests; chromium: the
# server page's browser test); --no-build
# only installs.
# Run as root, or as a user with sudo. Idempotent: a second run only rebuilds what changed.
# The last line's packages are optional for the build: the GTK example application (examples/gtk) with
# microphone capture, and what its test needs (Xvfb); without them the library, CLI and tests build.
set -eu
cd "$(dirname "$0")/.."

PKGS="build-essential cmake pkg-config glslc spirv-tools libvulkan-dev mesa-vulkan-drivers \
vulkan-validationlayers libsndfile1-dev libsoxr-dev libcjson-dev libarchive-dev libyaml-dev libmicrohttpd-dev libwslay-dev \
libcurl4-openssl-dev libssl-dev libopenblas-dev \
libgtk-4-dev libasound2-dev xvfb xauth"
TEST_PKGS="clang-14 libclang-rt-14-dev python3-pytest python3-numpy curl chromium"
build=1
for a in "$@"; do
    case $a in
    --test)
        PKGS="$PKGS $TEST_PKGS"
        # node and npm from Debian unless some node with npm (e.g. NodeSource's nodejs) is there already
        command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
        ;;
    --no-build) build=0 ;;
    *)
        echo "usage: setup.sh [--test] [--no-build]" >&2
        exit 2
        ;;
    esac
done

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing:$missing"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

if [ "$build" -eq 1 ]; then
    JOBS=$(nproc 2>/dev/null || echo 2)
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    cmake --build build -j "$JOBS"
fi
