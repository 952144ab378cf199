/* cuda_err.c: CUDA runtime status -> -errno and a message naming the call (see cuda_err.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cuda_err.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

int cuda_err_to_errno(int status)
{
    switch ((cudaError_t)status) {
    case cudaSuccess:
        return 0;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidHostPointer:
        return -EINVAL;
    case cudaErrorMemoryAllocation:
        return -ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
        return -ENODEV;
    case cudaErrorNotSupported:
    case cudaErrorPeerAccessUnsupported:
        return -ENOTSUP;
    case cudaErrorPeerAccessAlreadyEnabled:
        return -EALREADY;
    case cudaErrorHostMemoryAlreadyRegistered:
        return -EEXIST;
    case cudaErrorHostMemoryNotRegistered:
    case cudaErrorPeerAccessNotEnabled:
        return -ENOENT;
    case cudaErrorNotPermitted:
    case cudaErrorOperatingSystem:
        return -EPERM;
    case cudaErrorNotReady:
        return -EBUSY;
    case cudaErrorMapBufferObjectFailed:
    case cudaErrorDeviceUninitialized: /* the driver's invalid context */
        return -EBADF;
    default:
        return -EIO;
    }
}

static const char *reason(int status)
{
    return cudaGetErrorString((cudaError_t)status);
}

static void clear_last(void)
{
    (void)cudaGetLastError();
}

#else /* !KVF_HAVE_CUDA */

int cuda_err_to_errno(int status)
{
    return status == 0 ? 0 : -ENOTSUP;
}

static const char *reason(int status)
{
    (void)status;
    return CUDA_ERR_NO_CUDA;
}

static void clear_last(void) {}

#endif

int cuda_err_check(int status, const char *what, int device, char *err, size_t errlen)
{
    if (status == 0)
        return 0;
    clear_last();
    if (err && errlen > 0) {
        size_t n = what ? strcspn(what, "( \t") : 0;
        if (device >= 0)
            snprintf(err, errlen, "%.*s: %s (device %d)", (int)n, what ? what : "", reason(status),
                     device);
        else
            snprintf(err, errlen, "%.*s: %s", (int)n, what ? what : "", reason(status));
    }
    return cuda_err_to_errno(status);
}
