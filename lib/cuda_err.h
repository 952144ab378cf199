/* cuda_err.h: converts CUDA runtime errors, once, where they arise, into a negative errno and a
 * message naming the call ("cudaIpcOpenMemHandle: invalid argument (device 1)"). Shared by
 * lib/cuda_pool.c and the daemon's gpu module (daemon/gpu/gpu_priv.h wraps it as GPU_TRY).
 * Builds without CUDA too: there every status means "this build has no CUDA" (-ENOTSUP).
 * Thread-safe (no shared state); the caller owns the message buffer. */
#ifndef KVF_CUDA_ERR_H
#define KVF_CUDA_ERR_H

#include <stddef.h>

/* The message every CUDA-less code path gives. */
#define CUDA_ERR_NO_CUDA "this build has no CUDA; use host pools"

/* -errno for a cudaError_t value: 0 for cudaSuccess, -EINVAL, -ENOMEM, -ENODEV, -ENOTSUP,
 * -EALREADY, -EEXIST, -ENOENT, -EPERM, -EBUSY, -EBADF, else -EIO. Always -ENOTSUP without CUDA. */
int cuda_err_to_errno(int status);

/* On a failed status: writes "<call name>: <CUDA's reason> (device N)" into err (the call name is
 * `what` cut at its first '(' so a stringified call reads as its function name; device < 0 leaves
 * the device out), clears CUDA's sticky-less last error so it does not leak into later calls, and
 * returns cuda_err_to_errno(status). On cudaSuccess returns 0 and leaves err alone. err may be
 * NULL when errlen is 0. */
int cuda_err_check(int status, const char *what, int device, char *err, size_t errlen);

/* CUDA_ERR_TRY(call): evaluates to 0 or -errno; needs `dev` (int), `err` and `errlen` in scope.
 * Usage: if ((rc = CUDA_ERR_TRY(cudaSetDevice(dev))) < 0) goto err_x; */
#define CUDA_ERR_TRY(call) cuda_err_check((int)(call), #call, dev, err, errlen)

#endif
