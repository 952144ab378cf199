// d2d_ceiling.cu: cudaMemcpy device-to-device of one size in one process, the ceiling that the
// GPU bounce between two daemons over a device arena is measured against (issue 30). Built by
// scripts/ucx-cuda-probe and scripts/bench-gpu-direct with nvcc (not part of `make`).
//   d2d_ceiling SIZE_BYTES ITERATIONS   -> "cudaMemcpy D2D N bytes x I: G GB/s ..." (1e9 B/s)
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], 0, 0) : (32u << 20);
    int it = argc > 2 ? atoi(argv[2]) : 100;
    void *a, *b;
    cudaEvent_t e0, e1;
    float ms;
    if (n == 0 || it < 1 || cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess) {
        printf("d2d_ceiling: no device memory (or bad arguments)\n");
        return 1;
    }
    cudaMemset(a, 1, n);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int i = 0; i < 5; i++)
        cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0);
    for (int i = 0; i < it; i++)
        cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&ms, e0, e1);
    printf("cudaMemcpy D2D %zu bytes x %d: %.2f GB/s (bytes moved; x2 for read+write)\n", n, it,
           (double)n * it / (ms * 1e6));
    return 0;
}
