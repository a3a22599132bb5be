// Example kernels for progcache: templates instantiated through NVRTC name expressions.
//   progcache compile examples/kernels.cu --arch sm_90 -- --std=c++17

template <typename T>
struct Axpy {
  T a;
  __device__ T operator()(T x, T y) const { return a * x + y; }
};

// y[i] = a * x[i] + y[i] over a grid-stride loop.
template <typename T>
__global__ void scale_add(T *y, const T *x, T a, int n) {
  const Axpy<T> op{a};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = op(x[i], y[i]);
}

// Sums each block's slice of x into out[blockIdx.x] with a shared-memory tree reduction.
template <typename T, int BLOCK>
__global__ void block_sum(const T *x, T *out, int n) {
  __shared__ T partial[BLOCK];
  T acc = T(0);
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc += x[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
#pragma unroll
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
