/* kvferry.h: the public client API of libkvferry (kvf_*), and the typed errors every part of
 * kvferry reports. Plain C types only, so it binds from Python with ctypes.
 * Thread-safety and ownership are stated per function below. */
#ifndef KVFERRY_H
#define KVFERRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Typed errors (DESIGN.md §7). Values are stable: they travel on the wire. */
typedef enum {
    KVF_OK = 0,
    KVF_E_PEER_INCOMPATIBLE = 1,
    KVF_E_NO_ROUTE = 2,
    KVF_E_UNKNOWN_INSTANCE = 3,
    KVF_E_PEER_UNREACHABLE = 4,
    KVF_E_PEER_LOST = 5,
    KVF_E_TIMEOUT = 6,
    KVF_E_BOUND_VIOLATION = 7,
    KVF_E_CANCELLED = 8,
    KVF_E_BAD_REQUEST = 9,
    KVF_E_INTERNAL = 10,
    KVF_E__COUNT
} kvf_error_t;

/* "PEER_INCOMPATIBLE", ...; "UNKNOWN" for values out of range. Never NULL. Thread-safe. */
const char *kvf_error_to_string(kvf_error_t e);
/* Inverse of kvf_error_to_string; returns -1 for an unknown name. */
int kvf_error_from_string(const char *name);

#ifdef __cplusplus
}
#endif
#endif
