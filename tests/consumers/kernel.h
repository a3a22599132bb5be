/* The kernel every consumer compiles. */
static const char kConsumerKernel[] =
    "template <typename T> __global__ void fill(T *x, T v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = v;\n"
    "}\n";
