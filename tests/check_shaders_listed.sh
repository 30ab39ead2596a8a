#!/bin/sh
# check_shaders_listed.sh SHADERS_DIR — every shaders/*.comp is compiled: named by at least one
# vkasr_shader(...) (library) or vkasr_lab_shader(...) (test-only lab table) line of shaders/shaders.cmake
# (a kernel that is not listed is silently absent), and every name listed there exists as a file. Variant
# names may use CMake variables (gemm_${ql}: a foreach over the quantized types).
set -u
dir=$1
list="$dir/shaders.cmake"
[ -f "$list" ] || { echo "FAIL: $list not found"; exit 1; }
bad=0
n=0
for f in "$dir"/*.comp; do
    n=$((n + 1))
    name=$(basename "$f")
    if ! grep -Eq "^[[:space:]]*vkasr_(lab_)?shader\([A-Za-z0-9_\$\{\}]+[[:space:]]+$name([[:space:]]|\))" "$list"; then
        echo "FAIL: shaders/$name is not compiled: no vkasr_shader(NAME $name ...) or vkasr_lab_shader(...) in shaders/shaders.cmake"
        bad=$((bad + 1))
    fi
done
for name in $(sed -n 's/^[[:space:]]*vkasr_\(lab_\)\{0,1\}shader([A-Za-z0-9_${}]*[[:space:]]*\([^[:space:])]*\).*/\2/p' "$list" | sort -u); do
    [ -f "$dir/$name" ] || { echo "FAIL: shaders.cmake lists $name, which does not exist"; bad=$((bad + 1)); }
done
[ "$n" -gt 0 ] || { echo "FAIL: no .comp files in $dir"; exit 1; }
echo "$n shader sources, $bad problem(s)"
[ "$bad" -eq 0 ]
