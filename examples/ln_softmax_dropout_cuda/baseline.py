"""CUDA C++ baseline of the flagship op: out = residual + dropout(softmax(layer_norm(x)·w + b), p).

Three kernels, as a first port would write them (issue 14's `language = "cuda"` example):
1. layer_norm_kernel: one block per row, two passes over the row in fp32 (mean, then the
   variance of x - mean), writes the normalised, scaled and shifted row to an fp32 buffer;
2. softmax_kernel: one block per row over that buffer (max, sum of exp, scale), in place;
3. dropout_residual_kernel: one thread per element: keep with probability 1-p from a
   counter-based hash of (seed, element index), scale by 1/(1-p), add the residual and
   round once to the output dtype.
The fp32 buffer is a full extra write and two extra reads of the row per element: the
fusion a candidate is asked to find. Built with torch.utils.cpp_extension.load_inline.
"""

from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdint>

constexpr int THREADS = 256;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Every thread of the block gets the block's sum (or max). `scratch`: 32 floats.
template <bool MAX>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = MAX ? warp_max(v) : warp_sum(v);
  __syncthreads();  // the previous reduction's result has been read by every thread
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < warps ? scratch[threadIdx.x] : (MAX ? -INFINITY : 0.f);
  if (warp == 0) v = MAX ? warp_max(v) : warp_sum(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  return scratch[0];
}

template <typename T>
__global__ void layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                  const T* __restrict__ b, float* __restrict__ y,
                                  int64_t cols, float eps) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * cols;
  float* yr = y + blockIdx.x * cols;
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += static_cast<float>(xr[c]);
  const float mean = block_reduce<false>(s, scratch) / static_cast<float>(cols);
  float q = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = static_cast<float>(xr[c]) - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(block_reduce<false>(q, scratch) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = (static_cast<float>(xr[c]) - mean) * rstd * static_cast<float>(w[c]) +
            static_cast<float>(b[c]);
  }
}

__global__ void softmax_kernel(float* __restrict__ y, int64_t cols) {
  __shared__ float scratch[32];
  float* yr = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, yr[c]);
  m = block_reduce<true>(m, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = expf(yr[c] - m);
    yr[c] = e;
    s += e;
  }
  const float inv = 1.f / block_reduce<false>(s, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] *= inv;
}

// splitmix64's finaliser: a counter-based hash, independent across indices and seeds.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void dropout_residual_kernel(const float* __restrict__ s, const T* __restrict__ r,
                                        T* __restrict__ out, int64_t n, float p, float scale,
                                        uint64_t seed) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float v = s[i];
  if (p > 0.f) {
    const uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 bits in [0, 1)
    v = u >= p ? v * scale : 0.f;
  }
  out[i] = static_cast<T>(static_cast<float>(r[i]) + v);
}

torch::Tensor ln_softmax_dropout(torch::Tensor x, torch::Tensor residual, torch::Tensor weight,
                                 torch::Tensor bias, double p, double eps, int64_t seed) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2, "x must be a 2-D CUDA tensor");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto rc = residual.contiguous();
  auto wc = weight.contiguous();
  auto bc = bias.contiguous();
  const int64_t rows = xc.size(0), cols = xc.size(1), n = rows * cols;
  auto y = torch::empty({rows, cols}, xc.options().dtype(torch::kFloat));
  auto out = torch::empty_like(xc);
  if (n == 0) return out;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.f;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "ln_sm_do", [&] {
    layer_norm_kernel<scalar_t><<<rows, THREADS, 0, stream>>>(
        xc.data_ptr<scalar_t>(), wc.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(),
        y.data_ptr<float>(), cols, static_cast<float>(eps));
    softmax_kernel<<<rows, THREADS, 0, stream>>>(y.data_ptr<float>(), cols);
    dropout_residual_kernel<scalar_t><<<(n + THREADS - 1) / THREADS, THREADS, 0, stream>>>(
        y.data_ptr<float>(), rc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n,
        static_cast<float>(p), scale, static_cast<uint64_t>(seed));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP = (
    "torch::Tensor ln_softmax_dropout(torch::Tensor x, torch::Tensor residual, "
    "torch::Tensor weight, torch::Tensor bias, double p, double eps, int64_t seed);"
)

_ext = load_inline(
    name="kl_ln_softmax_dropout_baseline",
    cpp_sources=CPP,
    cuda_sources=CUDA,
    functions=["ln_softmax_dropout"],
    extra_cuda_cflags=["-O3"],
)


def forward(x, residual, weight, bias, *, p, eps, seed):
    return _ext.ln_softmax_dropout(x, residual, weight, bias, float(p), float(eps), int(seed))
