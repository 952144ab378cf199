#!/usr/bin/env python3
"""kvf_ctypes.py LIBKVFERRY_SO WORKER_SOCKET: binds libkvferry with ctypes (no C glue) and
speaks to a running kvferryd: connect, poll, a registration the daemon refuses (its typed
message comes back), an argument the library refuses, close. Exit 0 when all behave."""
import ctypes as C
import sys

lib = C.CDLL(sys.argv[1])
lib.kvf_abi_version.restype = C.c_uint32
assert lib.kvf_abi_version() == 4, "this script declares the structs of ABI 4"


class Event(C.Structure):
    _fields_ = [("req_id", C.c_uint64), ("kind", C.c_int32), ("error", C.c_int32),
                ("bytes", C.c_uint64), ("message", C.c_char * 512), ("flags", C.c_uint32)]


class Pool(C.Structure):
    _fields_ = [("kind", C.c_int32), ("device", C.c_int32), ("bytes", C.c_uint64),
                ("fd", C.c_int32), ("offset", C.c_uint64), ("ipc_handle", C.c_uint8 * 64),
                ("fds", C.POINTER(C.c_int32)), ("n_fds", C.c_uint32), ("chunk_bytes", C.c_uint64)]


lib.kvf_connect.argtypes = [C.c_char_p, C.c_void_p, C.POINTER(C.c_void_p)]
lib.kvf_register.argtypes = [C.c_void_p, C.c_char_p, C.POINTER(Pool), C.c_uint32, C.c_char_p,
                             C.c_size_t]
lib.kvf_send.argtypes = [C.c_void_p, C.c_uint64, C.c_uint32, C.POINTER(C.c_uint32),
                         C.POINTER(C.c_uint32), C.c_uint32]
lib.kvf_poll.argtypes = [C.c_void_p, C.POINTER(Event), C.c_int]
lib.kvf_fd.argtypes = [C.c_void_p]
lib.kvf_close.argtypes = [C.c_void_p]
lib.kvf_close.restype = C.c_void_p

c = C.c_void_p()
assert lib.kvf_connect(sys.argv[2].encode(), None, C.byref(c)) == 0, "connect"
assert lib.kvf_fd(c) >= 0
ev = Event()
assert lib.kvf_poll(c, C.byref(ev), 0) == 0, "no event yet"
memfd = __import__("os").memfd_create("py-pool")
__import__("os").ftruncate(memfd, 4096)
pools = (Pool * 1)(Pool(0, -1, 4096, memfd, 0))
err = C.create_string_buffer(512)
rc = lib.kvf_register(c, b'{"instance": 7}', pools, 1, err, 512)
assert rc == -22 and err.value.startswith(b"BAD_REQUEST: layout"), (rc, err.value)
counts = (C.c_uint32 * 1)(1)
ids = (C.c_uint32 * 1)(0)
assert lib.kvf_send(c, 0, 1, counts, ids, 1) == -22, "request id 0 is refused"
lib.kvf_close(c)
print("ctypes binding OK")
