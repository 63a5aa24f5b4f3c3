/* A whole course program, as students write one: host code (the runtime API, a launch, iostream and a vector)
 * beside the kernel. `kernel load` takes the file unchanged; the simulator runs the kernel and leaves `main` to
 * nvcc, as the GPU backend does (it compiles the file and launches the kernel by name). */
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#define N 1000
#define BLOCK 128

__global__ void scaleAdd(const float *x, float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(EXIT_FAILURE);
    }
}

int main()
{
    std::vector<float> hx(N, 1.0f), hy(N, 2.0f);
    float *dx, *dy;
    check(cudaMalloc(&dx, N * sizeof(float)), "cudaMalloc x");
    check(cudaMalloc(&dy, N * sizeof(float)), "cudaMalloc y");
    cudaMemcpy(dx, hx.data(), N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, hy.data(), N * sizeof(float), cudaMemcpyHostToDevice);
    scaleAdd<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(dx, dy, 3.0f, N);
    cudaMemcpy(hy.data(), dy, N * sizeof(float), cudaMemcpyDeviceToHost);
    std::cout << "y[0] = " << hy[0] << std::endl;
    cudaFree(dx);
    cudaFree(dy);
    return 0;
}
