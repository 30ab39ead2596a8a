#!/usr/bin/env bash
# Prepares a copy of espeak-ng that travels to the GPU machine (which has no espeak-ng and no network):
# downloads Debian 12's packages with `apt-get download` into .espeak/ at the repository root and
# builds .espeak/stub/libpcaudio.so.0 (tools/train/pcaudio_stub.c). Run it HERE (the build machine),
# once; .espeak/ is ignored (.gitignore): copy it to the GPU machine along with the tree.
# tools/train/espeak_env.sh unpacks it there.
#
# Why a stub for libpcaudio0: libespeak-ng1 needs libpcaudio.so.0, libsonic.so.0, libm and libc.
# libpcaudio0 in turn needs libasound2, libpulse0 (and through it libdbus, libsndfile1 with its codecs,
# libX11/xcb, libsystemd, libasyncns ...), which a bare image may lack. espeak-ng writing to memory or
# a file never opens an audio device, so a library that only says "no device" is all it needs.
# The real libpcaudio0 .deb is downloaded too, for reference, but not used.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dst="$root/.espeak"
pkgs=(espeak-ng libespeak-ng1 espeak-ng-data libsonic0 libpcaudio0)

command -v apt-get >/dev/null || { echo "fetch_espeak.sh: needs apt-get (Debian 12 build machine)" >&2; exit 1; }
command -v cc >/dev/null || { echo "fetch_espeak.sh: needs a C compiler (cc)" >&2; exit 1; }
mkdir -p "$dst/stub"
rm -f "$dst"/*.deb
# apt-get download as root warns that it runs unsandboxed; harmless
(cd "$dst" && apt-get download "${pkgs[@]}" 2>&1 | grep -v "unsandboxed" || true)
for p in "${pkgs[@]}"; do
    ls "$dst/${p}"_*.deb >/dev/null 2>&1 || { echo "fetch_espeak.sh: download of $p failed (apt-get update first?)" >&2; exit 1; }
done
cc -O2 -shared -fPIC -Wall -Wextra -Werror -Wl,-soname,libpcaudio.so.0 -o "$dst/stub/libpcaudio.so.0" "$here/pcaudio_stub.c"

du -sh "$dst"
ls -l "$dst" "$dst/stub"
