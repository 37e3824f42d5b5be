"""The CUDA C++ twin of draws_cell_cpu.py (issue 14): for the draws fixture imported with
`--language cuda`, the host code draws h0 and the dropout mask on the call's device from
the generator the entry seeded with `draw_seed`, in the model's order, and one kernel
computes the cell (a thread per output element). Used by tests/task/test_draws.py on a GPU."""

import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__global__ void cell_kernel(const float* __restrict__ x, const float* __restrict__ h,
                            const float* __restrict__ w, const float* __restrict__ b,
                            const float* __restrict__ keep, float* __restrict__ out,
                            int64_t rows, int64_t n_in, int64_t n_h) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * n_h) return;
  const int64_t r = i / n_h, j = i % n_h;
  const float* wr = w + j * (n_in + n_h);
  float v = b[j];
  for (int64_t k = 0; k < n_in; ++k) v += wr[k] * x[r * n_in + k];
  for (int64_t k = 0; k < n_h; ++k) v += wr[n_in + k] * h[r * n_h + k];
  out[i] = tanhf(v) * keep[i] * (1.0f / 0.75f);
}

torch::Tensor cell(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "x: a float32 CUDA tensor");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  const int64_t rows = x.size(0), n_in = x.size(1), n_h = w.size(0);
  auto f32 = x.options();
  auto h0 = at::randn({rows, n_h}, f32);
  auto keep = at::empty({rows, n_h}, f32).bernoulli_(0.75);
  auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  auto out = at::empty({rows, n_h}, f32);
  const int64_t n = rows * n_h;
  if (n == 0) return out;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cell_kernel<<<static_cast<int>((n + 127) / 128), 128, 0, stream>>>(
      xc.data_ptr<float>(), h0.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
      keep.data_ptr<float>(), out.data_ptr<float>(), rows, n_in, n_h);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

_ext = load_inline(
    name="kl_draws_cell_cuda",
    cpp_sources="torch::Tensor cell(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=CUDA,
    functions=["cell"],
    extra_cuda_cflags=["-O3"],
)


def forward(*, x, cell_weight, cell_bias, draw_seed):
    torch.manual_seed(draw_seed)
    return _ext.cell(x, cell_weight, cell_bias)
