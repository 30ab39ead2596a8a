# Source on the GPU machine from the repository root: Vulkan loader (.gl), runtime libraries and the
# Khronos validation layer (.deps) unpacked from Debian 12 packages, the NVIDIA ICD, and /work/main
# pointing here (the CTest files of build-gpu/ carry absolute paths of the build machine).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /tmp/deps
for f in .deps/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VK_LAYER_PATH=/tmp/deps/usr/share/vulkan/explicit_layer.d
if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
# build-gpu travels xz-compressed (the test executables share their embedded SPIR-V, so 43 MB become 1 MB)
[ -d build-gpu ] || [ ! -f .gpucarry/build-gpu.tar.xz ] || tar -xJf .gpucarry/build-gpu.tar.xz
