"""vkasr: speech recognition with NVIDIA Parakeet models on any Vulkan GPU (or lavapipe on a CPU).

    import vkasr
    with vkasr.Model() as model:                 # the default model; or Model("model.gguf", device="cpu")
        t = model.transcribe("speech.wav")       # a path, bytes of a file, or samples with sample_rate=
        print(t.text)
        for w in t.words:
            print(f"{w.start:6.2f} {w.end:6.2f} {w.text}")

A thin layer over the C library libvkasr (found through $VKASR_LIBRARY, next to this package, or the
system's), through ctypes: calls run without holding the GIL, and Ctrl-C stops a transcription.
"""
from ._errors import (Aborted, AudioError, DeviceError, DeviceLostError, DeviceMemoryError, Error, FileError,
                      InternalError, InvalidArgumentError, ModelError, NoMemoryError, UnsupportedError,
                      VulkanError)
from ._model import Device, Model, ModelInfo, Progress, default_model_path, devices, library_version
from ._stream import Stream
from ._transcript import Event, Segment, Timings, Token, Transcript, Word

__version__ = "0.1.0"

__all__ = [
    "Aborted", "AudioError", "Device", "DeviceError", "DeviceLostError", "DeviceMemoryError", "Error", "Event",
    "FileError", "InternalError", "InvalidArgumentError", "Model", "ModelError", "ModelInfo", "NoMemoryError",
    "Progress", "Segment", "Stream", "Timings", "Token", "Transcript", "UnsupportedError", "VulkanError", "Word",
    "__version__", "default_model_path", "devices", "library_version",
]
