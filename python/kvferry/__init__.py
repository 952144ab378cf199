"""kvferry: register a PyTorch engine's KV cache and recurrent state with kvferryd and move
requests between context (prefill) and generation (decode) ranks. ctypes over libkvferry.so;
the library's ABI is checked at import (kvferry.AbiError on a mismatch).

    import kvferry
    from kvferry import layout as kl
    lay = kl.Layout("prefill0", "context", model_config, tokens_per_block=16, n_layers_total=N)
    kl.vllm_attention(lay, "attn", attn_layers, kv_caches)     # the engine's own tensors
    with kvferry.Client(name="prefill rank 0") as c:
        c.register(lay)
        c.send("req-42", {"attn": block_ids}, n_readers=0)
        c.wait("req-42")                                         # SENT: blocks may be reused
"""
from . import _lib
from .errors import (KvferryError, AbiError, TransferError, RegistrationError, ERROR_NAMES)

__version__ = "0.1.0"
ABI_VERSION = _lib.ABI_VERSION

try:
    _lib.lib()
except KvferryError as e:
    if "ABI" in str(e) or "kvf_abi_version" in str(e):
        raise AbiError(str(e)) from None
    raise

from .ids import request_id  # noqa: E402
from .memory import host_tensor, cuda_region, vmm_region  # noqa: E402
from .client import Client, Event  # noqa: E402
from . import layout  # noqa: E402
from . import stream  # noqa: E402


def library_version():
    """The loaded libkvferry's version string."""
    return _lib.lib().kvf_version().decode()


__all__ = ["Client", "Event", "KvferryError", "AbiError", "TransferError", "RegistrationError",
           "ERROR_NAMES", "request_id", "host_tensor", "cuda_region", "vmm_region", "layout",
           "stream", "library_version", "__version__", "ABI_VERSION"]
