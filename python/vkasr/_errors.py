"""Exceptions: vkasr.Error and one subclass per vkasr_status, carrying the C library's message."""
from __future__ import annotations

from typing import Any, Optional


class Error(Exception):
    """A vkasr call failed. `status` is the C vkasr_status code, `message` the library's message."""

    status: int = -11

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class Aborted(Error):
    """The call was stopped through its `abort` event; `transcript` holds what was decoded (partial)."""

    status = 1
    transcript: Any = None


class InvalidArgumentError(Error, ValueError):
    """A bad argument or an out-of-range parameter (VKASR_ERR_INVALID_ARG)."""

    status = -1


class NoMemoryError(Error, MemoryError):
    """Host memory ran out (VKASR_ERR_NO_MEMORY)."""

    status = -2


class FileError(Error, OSError):
    """A file could not be opened, read or written (VKASR_ERR_IO)."""

    status = -3


class ModelError(Error):
    """A model file or directory is missing, malformed or unsupported (VKASR_ERR_MODEL)."""

    status = -4


class AudioError(Error):
    """Audio could not be decoded or is unusable (VKASR_ERR_AUDIO)."""

    status = -5


class DeviceError(Error):
    """No usable device, or none with the required features (VKASR_ERR_NO_DEVICE); base of device errors."""

    status = -6


class VulkanError(DeviceError):
    """A Vulkan call failed (VKASR_ERR_VULKAN)."""

    status = -7


class DeviceMemoryError(DeviceError):
    """Device memory exhausted or too small for the input (VKASR_ERR_DEVICE_MEMORY)."""

    status = -8


class DeviceLostError(DeviceError):
    """The device was lost (VKASR_ERR_DEVICE_LOST): close the model."""

    status = -9


class UnsupportedError(Error):
    """A valid request this build or device cannot serve (VKASR_ERR_UNSUPPORTED), e.g. device="cuda"
    in a library built without the CUDA backend."""

    status = -10


class InternalError(Error):
    """A bug in vkasr (VKASR_ERR_INTERNAL); the message says where."""

    status = -11


_BY_STATUS = {cls.status: cls for cls in (Aborted, InvalidArgumentError, NoMemoryError, FileError, ModelError,
                                          AudioError, DeviceError, VulkanError, DeviceMemoryError,
                                          DeviceLostError, UnsupportedError, InternalError)}


def error_for(status: int, message: str) -> Error:
    """The exception for a C status code (Error itself for a code this package does not know)."""
    cls = _BY_STATUS.get(status, Error)
    return cls(message or f"vkasr status {status}", status)
