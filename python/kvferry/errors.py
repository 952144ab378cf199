"""kvferry's exceptions. TransferError carries a kvf_error_t by name (lib/kvferry.h: the typed
errors every part of kvferry reports) and the daemon's message."""

# kvf_error_t values, stable (they travel on the wire).
ERROR_NAMES = ("OK", "PEER_INCOMPATIBLE", "NO_ROUTE", "UNKNOWN_INSTANCE", "PEER_UNREACHABLE",
               "PEER_LOST", "TIMEOUT", "BOUND_VIOLATION", "CANCELLED", "BAD_REQUEST", "INTERNAL")


class KvferryError(Exception):
    """Anything kvferry refuses outside a transfer: library not found, bad arguments."""


class AbiError(KvferryError, ImportError):
    """The library's kvf_abi_version() is not the one this package declares its structs for."""


class TransferError(KvferryError):
    """A typed failure: .error is the kvf_error_t name ("TIMEOUT", ...), .code its value,
    .message what the daemon said, .req_id the request (0 for a registration), .key the id the
    caller used (a str id stays a str)."""

    def __init__(self, error, message, req_id=0, key=None):
        if isinstance(error, int):
            code = error
            error = ERROR_NAMES[code] if 0 <= code < len(ERROR_NAMES) else "UNKNOWN"
        else:
            code = ERROR_NAMES.index(error) if error in ERROR_NAMES else -1
        self.error, self.code, self.message = error, code, message
        self.req_id, self.key = req_id, key if key is not None else req_id
        where = " (request %r)" % (self.key,) if req_id else ""
        super().__init__("%s%s: %s" % (error, where, message))


class RegistrationError(TransferError):
    """The daemon (or the library) refused a REGISTER; .error/.message as it said."""


def from_text(text, cls=TransferError, req_id=0, key=None):
    """'NAME: message' (the form kvf_register and the daemon's refusals use) -> exception."""
    name, sep, msg = text.partition(": ")
    if sep and name in ERROR_NAMES:
        return cls(name, msg, req_id, key)
    return cls("BAD_REQUEST", text, req_id, key)
