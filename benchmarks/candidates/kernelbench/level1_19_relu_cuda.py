"""KernelBench level1/19 (ReLU) as a CUDA C++ solution (issue 14): `ModelNew` calls a kernel
built with load_inline. The problem's 4096 x 393216 float32 input is 6.4 GB: a
grid-stride loop over float4 vectors (the row length keeps every row 16-byte aligned; a
scalar loop takes any tail), read once and written once — the memory floor. Import the
problem with `kernelloop import kernelbench … --language cuda`. Not yet run on a GPU."""

import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += stride) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.f);
    v.y = fmaxf(v.y, 0.f);
    v.z = fmaxf(v.z, 0.f);
    v.w = fmaxf(v.w, 0.f);
    y[i] = v;
  }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t from,
                          int64_t n) {
  const int64_t i = from + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "x: a float32 CUDA tensor");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) &&
                       (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
  const int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    const int blocks = static_cast<int>(std::min<int64_t>((n4 + 255) / 256, 132 * 32));
    relu_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(xp),
                                          reinterpret_cast<float4*>(yp), n4);
  }
  const int64_t rest = n - 4 * n4;
  if (rest > 0) {
    relu_tail<<<static_cast<int>((rest + 255) / 256), 256, 0, stream>>>(xp, yp, 4 * n4, n);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="kl_kb_relu",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources=CUDA,
    functions=["relu"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu(x)
