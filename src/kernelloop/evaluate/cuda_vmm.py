"""GPU memory shared between two processes by file descriptor (the CUDA driver's VMM API).

The trusted side allocates device memory with `cuMemCreate`, asking for a POSIX file
descriptor handle, maps it into its own address space, and exports the descriptor; the
worker inherits that descriptor, imports it (`cuMemImportFromShareableHandle`) and maps
the same physical memory into its own. Unlike the legacy CUDA IPC handles behind
`torch.multiprocessing` (`cudaIpcOpenMemHandle`), nothing here needs the two processes to
share a PID namespace or to reach each other's descriptors by pid (`pidfd_getfd`, which
the sandbox's seccomp filter denies): an inherited descriptor is all it takes.

Plain ctypes over `libcuda.so.1` (the driver every CUDA process loads): torch exposes no
binding for these calls, and the GPU image has no `cuda-python`. Both sides call this on
a thread whose torch device is the buffer's device (torch has made its primary context
current there); where none is current, the device's primary context is retained and
made current. Every failure raises `VmmError` with the driver's error name; the caller
falls back to output files.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

# Driver enums (cuda.h), stable since CUDA 10.2.
_ALLOCATION_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_HANDLE_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_LOCATION_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_ACCESS_READWRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_RECOMMENDED = 1  # CU_MEM_ALLOC_GRANULARITY_RECOMMENDED


class VmmError(Exception):
    """A driver call failed (the message names it and the driver's error)."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_lib: ctypes.CDLL | None = None


def _driver() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        try:
            _lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise VmmError(f"the CUDA driver library could not be loaded ({e})") from None
    return _lib


def _check(name: str, *args) -> None:
    lib = _driver()
    rc = getattr(lib, name)(*args)
    if rc != 0:
        text = ctypes.c_char_p()
        lib.cuGetErrorName(rc, ctypes.byref(text))
        what = text.value.decode() if text.value else f"error {rc}"
        raise VmmError(f"{name} failed: {what}")


def _ensure_context(device: int) -> None:
    ctx = ctypes.c_void_p()
    _check("cuInit", 0)
    _check("cuCtxGetCurrent", ctypes.byref(ctx))
    if ctx.value:
        return
    dev = ctypes.c_int()
    _check("cuDeviceGet", ctypes.byref(dev), device)
    _check("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    _check("cuCtxSetCurrent", ctx)


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = _ALLOCATION_PINNED
    prop.requestedHandleTypes = _HANDLE_POSIX_FD
    prop.location = _Location(_LOCATION_DEVICE, device)
    return prop


def granularity(device: int) -> int:
    _ensure_context(device)
    size = ctypes.c_size_t()
    prop = _prop(device)
    _check(
        "cuMemGetAllocationGranularity",
        ctypes.byref(size),
        ctypes.byref(prop),
        _GRANULARITY_RECOMMENDED,
    )
    return int(size.value)


@dataclass
class Mapping:
    """Device memory mapped into this process: `ptr` (a device address) for `size` bytes."""

    ptr: int
    size: int
    handle: int
    device: int
    closed: bool = False

    def close(self) -> None:
        """Unmap and drop this process's reference (the memory lives on while another
        process still maps it)."""
        if self.closed:
            return
        self.closed = True
        lib = _driver()
        lib.cuMemUnmap(ctypes.c_ulonglong(self.ptr), ctypes.c_size_t(self.size))
        lib.cuMemAddressFree(ctypes.c_ulonglong(self.ptr), ctypes.c_size_t(self.size))
        lib.cuMemRelease(ctypes.c_ulonglong(self.handle))


def _map(handle: int, size: int, device: int) -> Mapping:
    ptr = ctypes.c_ulonglong()
    _check(
        "cuMemAddressReserve",
        ctypes.byref(ptr),
        ctypes.c_size_t(size),
        ctypes.c_size_t(0),
        ctypes.c_ulonglong(0),
        ctypes.c_ulonglong(0),
    )
    try:
        _check(
            "cuMemMap",
            ctypes.c_ulonglong(ptr.value),
            ctypes.c_size_t(size),
            ctypes.c_size_t(0),
            ctypes.c_ulonglong(handle),
            ctypes.c_ulonglong(0),
        )
    except VmmError:
        _driver().cuMemAddressFree(ctypes.c_ulonglong(ptr.value), ctypes.c_size_t(size))
        raise
    access = _AccessDesc(_Location(_LOCATION_DEVICE, device), _ACCESS_READWRITE)
    try:
        _check(
            "cuMemSetAccess",
            ctypes.c_ulonglong(ptr.value),
            ctypes.c_size_t(size),
            ctypes.byref(access),
            ctypes.c_size_t(1),
        )
    except VmmError:
        _driver().cuMemUnmap(ctypes.c_ulonglong(ptr.value), ctypes.c_size_t(size))
        _driver().cuMemAddressFree(ctypes.c_ulonglong(ptr.value), ctypes.c_size_t(size))
        raise
    return Mapping(int(ptr.value), size, handle, device)


def allocate(size: int, device: int) -> tuple[Mapping, int]:
    """`size` bytes (rounded up to the driver's granularity) of fresh device memory on
    `device` (this process's ordinal), mapped here, and a new descriptor that exports it
    (close-on-exec: pass it to the child that imports it explicitly)."""
    step = granularity(device)  # makes a context current first
    size = -(-size // step) * step
    handle = ctypes.c_ulonglong()
    prop = _prop(device)
    _check(
        "cuMemCreate",
        ctypes.byref(handle),
        ctypes.c_size_t(size),
        ctypes.byref(prop),
        ctypes.c_ulonglong(0),
    )
    try:
        mapping = _map(handle.value, size, device)
    except VmmError:
        _driver().cuMemRelease(handle)
        raise
    fd = ctypes.c_int(-1)
    try:
        _check(
            "cuMemExportToShareableHandle",
            ctypes.byref(fd),
            ctypes.c_ulonglong(handle.value),
            _HANDLE_POSIX_FD,
            ctypes.c_ulonglong(0),
        )
    except VmmError:
        mapping.close()
        raise
    os.set_inheritable(fd.value, False)
    return mapping, fd.value


def import_fd(fd: int, size: int, device: int) -> Mapping:
    """Map the memory exported as descriptor `fd` (`size` bytes) into this process, on
    `device` (this process's ordinal)."""
    _ensure_context(device)
    handle = ctypes.c_ulonglong()
    _check(
        "cuMemImportFromShareableHandle",
        ctypes.byref(handle),
        ctypes.c_void_p(fd),
        _HANDLE_POSIX_FD,
    )
    try:
        return _map(handle.value, size, device)
    except VmmError:
        _driver().cuMemRelease(handle)
        raise


class DeviceArray:
    """A byte range of a mapping, in the form `torch.as_tensor` wraps without copying."""

    def __init__(self, mapping: Mapping, offset: int, nbytes: int) -> None:
        if offset < 0 or nbytes < 0 or offset + nbytes > mapping.size:
            raise ValueError("the range lies outside the mapping")
        self._mapping = mapping  # kept alive with every tensor that wraps this
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (mapping.ptr + offset, False),
            "version": 3,
            "strides": None,
        }
