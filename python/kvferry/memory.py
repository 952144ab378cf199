"""Memory kvferry can hand to the daemon, and how a tensor's bytes are found in it.

Host: host_tensor() allocates from a memfd sealed against shrinking (the daemon maps it; a pool
that could shrink under the daemon is refused) and returns a torch tensor over the mapping: zero
copy, the engine writes its KV cache there and the daemon reads the same pages.

CUDA, PyTorch's caching allocator: the storage's own sharing handle (untyped_storage()
._share_cuda_(), what torch.multiprocessing sends). Its bytes are a version byte, a type byte and
the payload (c10/cuda/CUDACachingAllocator.cpp shareIpcHandle):
  'c' (cudaMalloc segment): the 64-byte cudaIpcMemHandle of the segment's base; the storage sits
      at storage_offset_bytes inside the segment (a cached block split from a bigger one);
  'e' (expandable segment, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): a header
      {int32 pid, 4 bytes padding, uint64 segment_size, uint64 num_handles} then one int32 POSIX
      fd per segment_size chunk, fds of *this* process (cuMemExportToShareableHandle); the storage
      sits at storage_offset_bytes from the first chunk. kvferry dups those fds and passes them to
      the daemon with SCM_RIGHTS (KVF_POOL_CUDA_VMM). A 64-byte-per-chunk payload is a fabric
      handle, which kvferry does not import (see _vmm_pool).
  64 bytes with no prefix: a raw cudaIpcMemHandle (old PyTorch).
CUDA, other allocators (CuPy, raw cudaMalloc, cuMemCreate): cuda_region()."""
import ctypes as C
import mmap
import os
import struct
import threading

from . import _lib
from .errors import KvferryError

F_ADD_SEALS = 1033
F_SEAL_SHRINK = 0x0002
F_SEAL_GROW = 0x0004

_lock = threading.Lock()
_regions = []  # Region, registered ranges that tensors may live in


class Region:
    """A range of memory kvferry can register as one pool: [ptr, ptr + nbytes)."""

    def __init__(self, ptr, nbytes, device, pool):
        self.ptr, self.nbytes, self.device = ptr, nbytes, device
        self.pool = pool  # a _lib.Pool, its bytes == nbytes
        self.keep = []    # what must stay alive with it (mmap, fd arrays, storages)

    def contains(self, ptr, nbytes):
        return self.ptr <= ptr and ptr + nbytes <= self.ptr + self.nbytes

    def close(self):
        for k in self.keep:
            if isinstance(k, int):
                try:
                    os.close(k)
                except OSError:
                    pass
        self.keep = []


def _torch():
    import torch
    return torch


def host_tensor(shape, dtype, name="kvferry"):
    """A zeroed CPU tensor of `shape`/`dtype` over a sealed memfd: register it (or views of it) in
    a layout and the daemon reads and writes these very pages."""
    torch = _torch()
    numel = 1
    for s in shape:
        numel *= int(s)
    esize = torch.empty((), dtype=dtype).element_size()
    nbytes = max(numel * esize, 1)
    page = mmap.PAGESIZE
    mapped = (nbytes + page - 1) // page * page
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, mapped)
        import fcntl
        fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)
        mm = mmap.mmap(fd, mapped, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        raise
    t = torch.frombuffer(mm, dtype=torch.uint8)
    ptr = t.data_ptr()
    out = t[:numel * esize].view(dtype).view(*shape) if numel else t[:0].view(dtype).view(*shape)
    pool = _lib.Pool(kind=_lib.POOL_HOST, device=-1, bytes=mapped, fd=fd)
    r = Region(ptr, mapped, -1, pool)
    r.keep = [fd, mm, t]
    with _lock:
        _regions.append(r)
    return out


def cuda_region(ptr, nbytes, device, ipc_handle=None, base=None):
    """Declares CUDA memory from outside PyTorch's caching allocator: [ptr, ptr + nbytes) of a
    cudaMalloc allocation starting at `base` (CuPy: arr.data.mem.ptr; default: asked from the
    driver), with its 64-byte cudaIpcMemHandle (CuPy: cupy.cuda.runtime.ipcGetMemHandle(base);
    default: asked from the driver). Tensors inside it then register through it."""
    if base is None:
        base = _cu_base(ptr)
    if ipc_handle is None:
        ipc_handle = _cudart_ipc_handle(base)
    ipc_handle = bytes(ipc_handle)
    if len(ipc_handle) != 64:
        raise KvferryError("cuda_region: an IPC handle is 64 bytes, got %d" % len(ipc_handle))
    pool = _lib.Pool(kind=_lib.POOL_CUDA, device=device, bytes=nbytes, fd=-1, offset=ptr - base)
    C.memmove(pool.ipc_handle, ipc_handle, 64)
    r = Region(ptr, nbytes, device, pool)
    with _lock:
        _regions.append(r)
    return r


def vmm_region(ptr, nbytes, device, fds, chunk_bytes, base):
    """Declares CUDA VMM memory (cuMemCreate chunks of chunk_bytes mapped back to back from
    `base`, exported as POSIX fds, one per chunk): [ptr, ptr + nbytes) registers as a
    KVF_POOL_CUDA_VMM pool. The fds are dup'd (the caller keeps its own)."""
    mine = [os.dup(f) for f in fds]
    arr = (C.c_int32 * len(mine))(*mine)
    pool = _lib.Pool(kind=_lib.POOL_CUDA_VMM, device=device, bytes=nbytes, fd=-1,
                     offset=ptr - base, fds=C.cast(arr, C.POINTER(C.c_int32)), n_fds=len(mine),
                     chunk_bytes=chunk_bytes)
    r = Region(ptr, nbytes, device, pool)
    r.keep = mine + [arr]
    with _lock:
        _regions.append(r)
    return r


def release(region):
    with _lock:
        if region in _regions:
            _regions.remove(region)
    region.close()


def find_region(ptr, nbytes):
    with _lock:
        for r in _regions:
            if r.contains(ptr, nbytes):
                return r
    return None


def _storage(t):
    us = getattr(t, "untyped_storage", None)
    return us() if us else t.storage().untyped()


def region_of(t):
    """The registered Region holding tensor t's storage, made on first use for CUDA tensors of
    PyTorch's caching allocator (from the storage's sharing handle)."""
    st = _storage(t)
    ptr, nbytes = st.data_ptr(), st.nbytes()
    r = find_region(ptr, nbytes)
    if r is not None:
        return r
    if t.device.type == "cpu":
        raise KvferryError("a CPU tensor (%s) outside kvferry memory: allocate it with "
                           "kvferry.host_tensor() so the daemon can map it" % (tuple(t.shape),))
    if t.device.type != "cuda":
        raise KvferryError("tensor on %s: kvferry registers CPU and CUDA memory" % t.device)
    return _torch_cuda_region(st, t.device.index)


def _torch_cuda_region(st, device):
    share = st._share_cuda_()
    handle, size, offset = bytes(share[1]), int(share[2]), int(share[3])
    ptr = st.data_ptr()
    if len(handle) == 64:  # a raw cudaIpcMemHandle (PyTorch before the version byte)
        kind = "c"
        payload = handle
    elif len(handle) >= 2:
        kind, payload = chr(handle[1]), handle[2:]
    else:
        raise KvferryError("PyTorch returned a %d-byte sharing handle" % len(handle))
    if kind == "c":
        if len(payload) != 64:
            raise KvferryError("PyTorch cudaMalloc sharing handle of %d bytes, expected 66"
                               % len(handle))
        pool = _lib.Pool(kind=_lib.POOL_CUDA, device=device, bytes=size, fd=-1, offset=offset)
        C.memmove(pool.ipc_handle, payload, 64)
        r = Region(ptr, size, device, pool)
        r.keep = [st]
    elif kind == "e":
        r = _vmm_pool(payload, ptr, size, offset, device)
        r.keep.append(st)
    else:
        raise KvferryError("PyTorch sharing handle of type %r: kvferry knows 'c' (cudaMalloc) "
                           "and 'e' (expandable segments)" % kind)
    with _lock:
        _regions.append(r)
    return r


def _vmm_pool(payload, ptr, size, offset, device):
    hdr = struct.calcsize("=i4xQQ")
    if len(payload) < hdr:
        raise KvferryError("expandable-segment handle of %d bytes: too short" % len(payload))
    pid, seg, n = struct.unpack_from("=i4xQQ", payload)
    rest = payload[hdr:]
    if len(rest) != 4 * n:
        raise KvferryError(
            "this expandable segment is shared by fabric handle (%d bytes per chunk), which "
            "kvferryd does not import: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False, or "
            "make PyTorch export POSIX fds (no IMEX fabric on this node)" % (len(rest) // max(n, 1)))
    if pid != os.getpid():
        raise KvferryError("expandable-segment handle of pid %d, not this process" % pid)
    fds = list(struct.unpack_from("=%di" % n, rest))
    base = ptr - offset
    return vmm_region(ptr, size, device, fds, seg, base)


# ---- driver / runtime look-ups for memory from outside PyTorch ----

_cuda = None


def _cu():
    global _cuda
    if _cuda is None:
        _cuda = C.CDLL("libcuda.so.1")
        _cuda.cuMemGetAddressRange_v2.argtypes = [C.POINTER(C.c_uint64), C.POINTER(C.c_size_t),
                                                  C.c_uint64]
    return _cuda


def _cu_base(ptr):
    base, size = C.c_uint64(), C.c_size_t()
    rc = _cu().cuMemGetAddressRange_v2(C.byref(base), C.byref(size), C.c_uint64(ptr))
    if rc != 0:
        raise KvferryError("cuMemGetAddressRange(0x%x): CUDA driver error %d (is it device "
                           "memory? is a context current?)" % (ptr, rc))
    return base.value


def _cudart_ipc_handle(base):
    """The legacy IPC handle of the cudaMalloc allocation at base (cuIpcGetMemHandle: the
    driver's, so it does not matter which CUDA runtime allocated it)."""
    cu = _cu()
    h = (C.c_uint8 * 64)()
    rc = cu.cuIpcGetMemHandle(h, C.c_uint64(base))
    if rc != 0:
        raise KvferryError("cuIpcGetMemHandle(0x%x): CUDA driver error %d (memory from "
                           "cuMemCreate or a VMM allocator has no legacy IPC handle: use "
                           "vmm_region)" % (base, rc))
    return bytes(h)
