#!/bin/sh
# fail_on_validation.sh — runs a command with the Khronos validation layer on (VKASR_VALIDATION=1) and
# fails when vkasr reported a validation message or could not run the layer: vk_device.c logs both on
# stderr with the prefix "Vulkan validation".
#   fail_on_validation.sh CMD ARGS...           runs a test: its status, or 1 when a report was seen on
#                                               its stderr or recorded by a --record run inside it
#   fail_on_validation.sh --record CMD ARGS...  runs a vkasr program inside a test script that redirects
#                                               its stderr: stderr passes through, reports are appended to
#                                               $VKASR_VALIDATION_SEEN for the outer run to find
# stderr is passed on after CMD ends (a file keeps CMD's exit status without bash's pipefail).
set -u
PREFIX="Vulkan validation"
record=0
if [ "${1:-}" = "--record" ]; then
    record=1
    shift
    [ -n "${VKASR_VALIDATION_SEEN:-}" ] || { echo "fail_on_validation.sh: --record needs VKASR_VALIDATION_SEEN" >&2; exit 2; }
fi
[ $# -ge 1 ] || { echo "usage: fail_on_validation.sh [--record] CMD ARGS..." >&2; exit 2; }
# VKASR_TEST_NO_VALIDATION (the sanitizer builds' tests, tests/CMakeLists.txt): the layer stays off and
# the command's status alone decides
[ -n "${VKASR_TEST_NO_VALIDATION:-}" ] || export VKASR_VALIDATION=1
err=$(mktemp) || exit 2
if [ "$record" -eq 0 ]; then
    seen=$(mktemp) || exit 2
    export VKASR_VALIDATION_SEEN="$seen"
fi
"$@" 2>"$err"
status=$?
cat "$err" >&2
grep -F "$PREFIX" "$err" >>"$VKASR_VALIDATION_SEEN"
rm -f "$err"
[ "$record" -eq 1 ] && exit "$status"
n=$(wc -l <"$seen")
rm -f "$seen"
if [ "$n" -gt 0 ]; then
    echo "FAIL: $n Vulkan validation report(s) (see stderr)"
    exit 1
fi
exit "$status"
