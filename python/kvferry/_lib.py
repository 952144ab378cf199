"""Loading libkvferry.so and declaring its C API (lib/kvferry.h) for ctypes.

The structs below are kvferry.h's at ABI 4; the library's kvf_abi_version() is compared with
ABI_VERSION at import, so a library with other structs is refused with a clear error instead of
being misread. Search order: $KVFERRY_LIB (a file); the library a wheel carries beside this
module (kvferry/libkvferry.so.0: `pip install ./python` builds and packs it, python/setup.py);
the install prefix this package sits under (PREFIX/lib/python3*/dist-packages/kvferry ->
PREFIX/lib[/<multiarch>]/libkvferry.so.0, as `make install` lays it out); the build tree of a
checkout (build/libkvferry.so); then the system loader (libkvferry.so.0 through ld.so's cache
and paths: Debian's libkvferry0, which python3-kvferry depends on)."""
import ctypes as C
import glob
import os

from .errors import KvferryError

ABI_VERSION = 4
EVENTS_MAX = 256  # KVF_EVENTS_MAX: CUDA events one rank passes
# Calls added without an ABI bump (no struct changed): absent from an older library of the same ABI
LATER = ("kvf_register_events", "kvf_send_ready_event")
SONAME = "libkvferry.so.0"
MESSAGE_MAX = 512

POOL_HOST = 0
POOL_CUDA = 1
POOL_CUDA_VMM = 2

EV_SENT, EV_DONE, EV_FAILED, EV_DISCONNECTED, EV_RECONNECTED, EV_RELEASED = 1, 2, 3, 4, 5, 6
EVF_HELD = 1


class Event(C.Structure):
    _fields_ = [("req_id", C.c_uint64), ("kind", C.c_int32), ("error", C.c_int32),
                ("bytes", C.c_uint64), ("message", C.c_char * MESSAGE_MAX),
                ("flags", C.c_uint32)]


class Pool(C.Structure):
    _fields_ = [("kind", C.c_int32), ("device", C.c_int32), ("bytes", C.c_uint64),
                ("fd", C.c_int32), ("offset", C.c_uint64), ("ipc_handle", C.c_uint8 * 64),
                ("fds", C.POINTER(C.c_int32)), ("n_fds", C.c_uint32),
                ("chunk_bytes", C.c_uint64)]


class Options(C.Structure):
    # err/errlen: optional, why kvf_connect failed as the daemon said it (read by libraries that
    # have it; at ABI 2 every library has the fields, older ones simply leave err empty).
    _fields_ = [("connect_timeout_ms", C.c_uint32), ("reconnect_min_ms", C.c_uint32),
                ("reconnect_max_ms", C.c_uint32), ("no_reconnect", C.c_int32),
                ("name", C.c_char_p), ("home", C.c_char_p),
                ("err", C.c_char_p), ("errlen", C.c_size_t), ("held_events", C.c_int32)]


class RecvArgs(C.Structure):
    _fields_ = [("req_id", C.c_uint64), ("ctx_instance", C.c_char_p), ("ctx_dp_rank", C.c_int32),
                ("deadline_ms", C.c_uint32), ("ctx_home", C.c_char_p), ("n_groups", C.c_uint32),
                ("counts", C.POINTER(C.c_uint32)), ("ids", C.POINTER(C.c_uint32)),
                ("tokens", C.c_uint64)]


def _candidates():
    env = os.environ.get("KVFERRY_LIB")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "libkvferry.so.0")]
    # PREFIX/lib/python3/dist-packages/kvferry or PREFIX/lib/pythonX.Y/site-packages/kvferry
    prefix_lib = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    out += [os.path.join(prefix_lib, "libkvferry.so.0"), os.path.join(prefix_lib, "libkvferry.so")]
    # Debian multiarch: PREFIX/lib/<triplet>/libkvferry.so.0
    out += sorted(glob.glob(os.path.join(prefix_lib, "*-linux-gnu*", "libkvferry.so.0")))
    # a checkout: python/kvferry -> build/libkvferry.so
    root = os.path.dirname(os.path.dirname(here))
    out.append(os.path.join(root, os.environ.get("BUILD", "build"), "libkvferry.so"))
    return out, False


def _declare(lib):
    p = C.c_void_p
    u32, i32 = C.c_uint32, C.c_int
    sig = {
        "kvf_abi_version": ([], u32),
        "kvf_version": ([], C.c_char_p),
        "kvf_error_to_string": ([i32], C.c_char_p),
        "kvf_error_from_string": ([C.c_char_p], i32),
        "kvf_connect": ([C.c_char_p, C.POINTER(Options), C.POINTER(p)], i32),
        "kvf_register": ([p, C.c_char_p, C.POINTER(Pool), u32, C.c_char_p, C.c_size_t], i32),
        "kvf_send": ([p, C.c_uint64, u32, C.POINTER(u32), C.POINTER(u32), u32], i32),
        "kvf_send_begin": ([p, C.c_uint64, u32, C.POINTER(u32), C.POINTER(u32), u32], i32),
        "kvf_send_ready": ([p, C.c_uint64, u32], i32),
        "kvf_register_events": ([p, C.c_char_p, u32, C.c_char_p, C.c_size_t], i32),
        "kvf_send_ready_event": ([p, C.c_uint64, u32, u32], i32),
        "kvf_recv": ([p, C.POINTER(RecvArgs)], i32),
        "kvf_cancel": ([p, C.c_uint64], i32),
        "kvf_poll": ([p, C.POINTER(Event), i32], i32),
        "kvf_fd": ([p], i32),
        "kvf_inflight": ([p], u32),
        "kvf_close": ([p], p),
    }
    for name, (args, res) in sig.items():
        f = getattr(lib, name, None)
        if f is None and name in LATER:
            continue  # an older library: the call that needs it says so (Client.register_events)
        if f is None:
            f = getattr(lib, name)  # the library's own AttributeError
        f.argtypes = args
        f.restype = res


def load(path=None):
    """Loads and checks the library: a kvferry.KvferryError that says what to do otherwise."""
    if path:
        paths, explicit = [path], True
    else:
        paths, explicit = _candidates()
    tried = []
    lib = None
    for cand in paths:
        if not explicit and not os.path.exists(cand):
            tried.append(cand)
            continue
        try:
            lib = C.CDLL(cand)
            break
        except OSError as e:
            tried.append("%s (%s)" % (cand, e))
            if explicit:
                break
    if lib is None and not explicit:
        try:
            lib = C.CDLL(SONAME)
        except OSError as e:
            tried.append("%s (%s)" % (SONAME, e))
    if lib is None:
        raise KvferryError("libkvferry not found: tried %s; install it (Debian: libkvferry0; "
                           "or make install; or pip install ./python from a checkout, whose "
                           "wheel carries it), or set KVFERRY_LIB to the library "
                           "(build/libkvferry.so in a checkout)" % ", ".join(tried))
    if not hasattr(lib, "kvf_abi_version"):
        raise KvferryError("%s has no kvf_abi_version(): a library older than ABI %d; rebuild "
                           "kvferry or point KVFERRY_LIB at a current build" % (lib._name, ABI_VERSION))
    lib.kvf_abi_version.restype = C.c_uint32
    got = lib.kvf_abi_version()
    if got != ABI_VERSION:
        raise KvferryError("%s has ABI %d, this kvferry package speaks ABI %d: install the "
                           "package and the library of the same kvferry version"
                           % (lib._name, got, ABI_VERSION))
    _declare(lib)
    return lib


_lib = None


def lib():
    """The process's library, loaded on first use."""
    global _lib
    if _lib is None:
        _lib = load()
    return _lib
