"""CUDA memory from every allocator kvferry registers, as int8 torch tensors of n bytes:
  caching     PyTorch's caching allocator, each buffer at a nonzero offset inside its segment
              (legacy IPC handle + storage offset, the 'c' sharing handle)
  expandable  the same under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set by the caller
              before CUDA starts): VMM chunks, the 'e' sharing handle, POSIX fds
  cudamalloc  raw cudaMalloc (libcudart, else cuMemAlloc) via kvferry.cuda_region, at an offset
  cupy        CuPy's runtime malloc and IPC handle (kvferry.cuda_region)
  cumem       cuMemCreate chunks mapped back to back by hand (kvferry.vmm_region)"""
import ctypes as C
import os

import torch

import kvferry

KEEP = []


class _Cai:
    """A __cuda_array_interface__ over raw device memory, for torch.as_tensor."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|i1", "data": (ptr, False),
                                         "version": 2, "strides": None}


def _wrap(ptr, n):
    t = torch.as_tensor(_Cai(ptr, n), device="cuda")
    t.zero_()
    return t


def caching():
    pad = torch.empty((1 << 20) + 4096, dtype=torch.int8, device="cuda")  # 1-10 MB: split blocks
    KEEP.append(pad)

    def alloc(n):
        t = torch.zeros(max(n, (1 << 20) + 1), dtype=torch.int8, device="cuda")[:n]
        KEEP.append(t)
        return t
    return alloc


def expandable():
    assert "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")

    def alloc(n):
        t = torch.zeros(n, dtype=torch.int8, device="cuda")
        KEEP.append(t)
        return t
    return alloc


def _cudart():
    """libcudart if one can be loaded (cudaMalloc), else None."""
    import glob
    names = ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    names += glob.glob("/usr/local/cuda*/lib64/libcudart.so*")
    for base in __import__("sys").path:
        names += glob.glob(os.path.join(base, "nvidia", "cuda_runtime", "lib", "libcudart.so*"))
    for name in names:
        try:
            return C.CDLL(name)
        except OSError:
            pass
    return None


def cudamalloc():
    """Raw cudaMalloc (libcudart), or the driver's cuMemAlloc it calls when no libcudart loads."""
    rt = _cudart()
    cu = C.CDLL("libcuda.so.1")
    dev = torch.cuda.current_device()

    def alloc(n):
        if rt is not None:
            ptr = C.c_void_p()
            assert rt.cudaMalloc(C.byref(ptr), C.c_size_t(n + 65536)) == 0
            base = ptr.value
        else:
            ptr = C.c_uint64()
            assert cu.cuMemAlloc_v2(C.byref(ptr), C.c_size_t(n + 65536)) == 0
            base = ptr.value
        KEEP.append(ptr)
        kvferry.cuda_region(base + 65536, n, dev)  # handle and base asked from CUDA
        return _wrap(base + 65536, n)
    return alloc


def cupy_alloc():
    import cupy
    dev = torch.cuda.current_device()

    def alloc(n):
        ptr = cupy.cuda.runtime.malloc(n)
        KEEP.append(ptr)
        kvferry.cuda_region(ptr, n, dev, ipc_handle=cupy.cuda.runtime.ipcGetMemHandle(ptr),
                            base=ptr)
        return _wrap(ptr, n)
    return alloc


class _Prop(C.Structure):  # CUmemAllocationProp
    _fields_ = [("type", C.c_int), ("requestedHandleTypes", C.c_int), ("loc_type", C.c_int),
                ("loc_id", C.c_int), ("win32HandleMetaData", C.c_void_p),
                ("compressionType", C.c_ubyte), ("gpuDirectRDMACapable", C.c_ubyte),
                ("usage", C.c_ushort), ("reserved", C.c_ubyte * 4)]


class _Access(C.Structure):  # CUmemAccessDesc
    _fields_ = [("loc_type", C.c_int), ("loc_id", C.c_int), ("flags", C.c_int)]


def cumem(chunks_per_buffer=3):
    cu = C.CDLL("libcuda.so.1")
    dev = torch.cuda.current_device()
    prop = _Prop(type=1, requestedHandleTypes=1, loc_type=1, loc_id=dev)  # PINNED, POSIX_FD
    gran = C.c_size_t()
    assert cu.cuMemGetAllocationGranularity(C.byref(gran), C.byref(prop), 0) == 0

    def alloc(n):
        chunk = -(-n // chunks_per_buffer)
        chunk = -(-chunk // gran.value) * gran.value
        va = C.c_uint64()
        assert cu.cuMemAddressReserve(C.byref(va), C.c_size_t(chunk * chunks_per_buffer),
                                      C.c_size_t(0), C.c_uint64(0), C.c_uint64(0)) == 0
        fds = []
        for k in range(chunks_per_buffer):
            h = C.c_uint64()
            assert cu.cuMemCreate(C.byref(h), C.c_size_t(chunk), C.byref(prop), C.c_uint64(0)) == 0
            assert cu.cuMemMap(C.c_uint64(va.value + k * chunk), C.c_size_t(chunk), C.c_size_t(0),
                               h, C.c_uint64(0)) == 0
            fd = C.c_int()
            assert cu.cuMemExportToShareableHandle(C.byref(fd), h, 1, C.c_uint64(0)) == 0
            fds.append(fd.value)
        acc = _Access(loc_type=1, loc_id=dev, flags=3)
        assert cu.cuMemSetAccess(C.c_uint64(va.value), C.c_size_t(chunk * chunks_per_buffer),
                                 C.byref(acc), C.c_size_t(1)) == 0
        kvferry.vmm_region(va.value, n, dev, fds, chunk, va.value)
        for fd in fds:
            os.close(fd)
        return _wrap(va.value, n)
    return alloc


ALLOCATORS = {"caching": caching, "expandable": expandable, "cudamalloc": cudamalloc,
              "cupy": cupy_alloc, "cumem": cumem}
