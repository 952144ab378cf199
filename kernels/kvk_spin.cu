/* kvk_spin.cu: a stand-in for a prefill layer's compute (tests and benchmarks of CUDA-event
 * readiness, issue 28): `blocks` blocks that each hold one SM busy until `ns` nanoseconds of the
 * GPU's global timer passed, asynchronously on the caller's stream. Work queued after it on the
 * stream (a layer's cache writes, an event record) runs only once it ended, so a reader that
 * copies before it ended reads the bytes of before. */
#include <errno.h>

#include "kvk_cuda.h"

__global__ void kvk_spin_kernel(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
}

int kvk_spin(uint64_t ns, uint32_t blocks, struct CUstream_st *stream)
{
    if (blocks == 0 || blocks > 65535)
        return kvk_fail(-EINVAL, "kvk_spin: %u blocks (1..65535)", blocks);
    kvk_spin_kernel<<<blocks, 32, 0, (cudaStream_t)stream>>>(ns);
    KVK_TRY(cudaGetLastError());
    return 0;
}
