# Source from the repository root on a GPU machine that received a build tree made elsewhere
# (build-gpu, or .gpucarry/build-gpu.tar.xz) and, where the machine lacks them, Debian 12's Vulkan
# loader (.gl/*.deb), vkasr's runtime libraries and the Khronos validation layer (.deps/*.deb).
# Works from any checkout location: the build tree's test files are pointed at this checkout.
if ls .gl/*.deb >/dev/null 2>&1 && ! ldconfig -p | grep -q libvulkan.so.1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
# (or the same packages unpacked and packed as one .gpucarry/deps.tar.xz, smaller: tools/gpu/README.md)
if ls .deps/*.deb >/dev/null 2>&1 || [ -f .gpucarry/deps.tar.xz ]; then
    mkdir -p /tmp/vkasr-deps
    for f in .deps/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/vkasr-deps; done
    [ ! -f .gpucarry/deps.tar.xz ] || tar -xJf .gpucarry/deps.tar.xz -C /tmp/vkasr-deps
    export LD_LIBRARY_PATH=/tmp/vkasr-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export VK_LAYER_PATH=/tmp/vkasr-deps/usr/share/vulkan/explicit_layer.d
fi
if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1 &&
    [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# The build tree travels xz-compressed (the test executables share their embedded SPIR-V and CUDA code).
for _vk_tree in build-gpu; do
    [ -d $_vk_tree ] || [ ! -f .gpucarry/$_vk_tree.tar.xz ] || tar -xJf .gpucarry/$_vk_tree.tar.xz
    # CTest files name the checkout the tree was configured in: rewrite them to this one.
    if [ -f $_vk_tree/CMakeCache.txt ]; then
        _vk_old=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' $_vk_tree/CMakeCache.txt)
        if [ -n "$_vk_old" ] && [ "$_vk_old" != "$PWD" ]; then
            find $_vk_tree \( -name CTestTestfile.cmake -o -name vkasr_validated \) -exec sed -i "s#$_vk_old#$PWD#g" {} +
            sed -i "s#^CMAKE_HOME_DIRECTORY:INTERNAL=.*#CMAKE_HOME_DIRECTORY:INTERNAL=$PWD#" $_vk_tree/CMakeCache.txt
        fi
    fi
done
# The CUDA backend needs cuBLASLt at run time (cudart is linked statically): the toolkit's, else PyTorch's.
if ! ldconfig -p | grep -q libcublasLt.so.13; then
    for _vk_dir in /usr/local/cuda/lib64 /usr/local/cuda/lib \
        "$(python3 -c 'import nvidia.cublas, os; print(os.path.join(nvidia.cublas.__path__[0], "lib"))' 2>/dev/null)"; do
        if [ -n "$_vk_dir" ] && [ -f "$_vk_dir/libcublasLt.so.13" ]; then
            export LD_LIBRARY_PATH=$_vk_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
            break
        fi
    done
fi
# The CLI's compiled-in default model path is the configuring checkout's: name this one's.
export VKASR_MODEL="$PWD/models/vkasr-tdt-tiny-en.gguf"
# wait_health PORT: until a server on this host answers GET /health with 200 (at most 60 s). Python, not
# curl: the system's curl would load the carried libcurl of LD_LIBRARY_PATH above and fail.
wait_health() {
    python3 - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(600):
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1).status == 200:
            break
    except OSError:
        time.sleep(0.1)
PY
}
