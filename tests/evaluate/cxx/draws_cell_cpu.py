"""A C++ candidate of a task whose model draws random numbers (issue 14; the fixture
tests/task/fixtures/kernelbench_extra/draws_in_forward.py imported with `--language
cuda`): the host code draws what the model draws, in its order — h0 with `at::randn`, then
the dropout mask with `bernoulli_(0.75)` — from the generator the entry seeded with the
call's `draw_seed`, and computes the cell in its own loop. The build path of CUDA C++
candidates, on the CPU. Used by tests/task/test_draws.py."""

import torch
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor cell(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  const int64_t rows = x.size(0), n_in = x.size(1), n_h = w.size(0);
  auto f32 = x.options().dtype(at::kFloat);
  auto h0 = at::randn({rows, n_h}, f32);
  auto keep = at::empty({rows, n_h}, f32).bernoulli_(0.75);
  auto xc = x.contiguous().to(at::kFloat);
  auto wc = w.contiguous().to(at::kFloat);
  auto bc = b.contiguous().to(at::kFloat);
  auto out = at::empty({rows, n_h}, f32);
  const float* xp = xc.data_ptr<float>();
  const float* hp = h0.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  const float* bp = bc.data_ptr<float>();
  const float* kp = keep.data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n_h; ++j) {
      const float* wr = wp + j * (n_in + n_h);
      float v = bp[j];
      for (int64_t k = 0; k < n_in; ++k) v += wr[k] * xp[r * n_in + k];
      for (int64_t k = 0; k < n_h; ++k) v += wr[n_in + k] * hp[r * n_h + k];
      op[r * n_h + j] = std::tanh(v) * kp[r * n_h + j] / 0.75f;
    }
  }
  return out;
}
"""

_ext = load_inline(
    name="kl_draws_cell_cpu",
    cpp_sources=CPP,
    functions=["cell"],
    extra_cflags=["-O2"],
)


def forward(*, x, cell_weight, cell_bias, draw_seed):
    torch.manual_seed(draw_seed)
    return _ext.cell(x, cell_weight, cell_bias).to(x.dtype)
