"""Request ids: the C API takes a uint64 (never 0); engines name requests with strings.

A str id is hashed to 64 bits as BLAKE2b with an 8-byte digest (no key, no salt, no person) of
its UTF-8 bytes, read little-endian; a hash of 0 becomes 1. The same function in C is libsodium's
crypto_generichash(out, 8, id, strlen(id), NULL, 0) followed by le64toh; every process of both
instances computes the same id for the same string. An int id is used as it is (1 .. 2^64-1).
Collisions: two live request names colliding has probability ~n^2 / 2^65 (n requests in flight);
the daemon refuses a second SEND/RECV with an id in flight (-EEXIST), so a collision is loud."""
import hashlib

U64_MAX = (1 << 64) - 1


def request_id(key):
    """int or str (or bytes) -> the uint64 the daemon sees."""
    if isinstance(key, bool):
        raise TypeError("request id: a bool is not an id")
    if isinstance(key, int):
        if not 0 < key <= U64_MAX:
            raise ValueError("request id %d: must be 1 .. 2^64-1" % key)
        return key
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError("request id: int or str, not %s" % type(key).__name__)
    if not key:
        raise ValueError("request id: empty string")
    v = int.from_bytes(hashlib.blake2b(bytes(key), digest_size=8).digest(), "little")
    return v or 1
