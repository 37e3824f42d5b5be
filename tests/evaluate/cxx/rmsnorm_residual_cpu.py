"""A C++ candidate (issue 14): the CPU-native RMSNorm + residual task's op as a torch C++
extension built with `load_inline` inside the sandbox — the build path CUDA C++
candidates take, on the CPU (no nvcc needed). Used by tests/evaluate/test_cxx_candidate.py."""

from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor rmsnorm_residual(torch::Tensor x, torch::Tensor residual, torch::Tensor weight,
                               double eps) {
  auto xc = x.contiguous(); auto rc = residual.contiguous(); auto wc = weight.contiguous();
  auto out = torch::empty_like(xc);
  const int64_t rows = xc.size(0), cols = xc.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "rmsnorm", [&] {
    const scalar_t* xp = xc.data_ptr<scalar_t>();
    const scalar_t* rp = rc.data_ptr<scalar_t>();
    const scalar_t* wp = wc.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        double v = static_cast<double>(xp[r * cols + c]);
        ss += v * v;
      }
      const double inv = 1.0 / std::sqrt(ss / cols + eps);
      for (int64_t c = 0; c < cols; ++c) {
        double y = static_cast<double>(xp[r * cols + c]) * inv * static_cast<double>(wp[c]);
        op[r * cols + c] = static_cast<scalar_t>(static_cast<double>(rp[r * cols + c]) + y);
      }
    }
  });
  return out;
}
"""

_ext = load_inline(name="kl_rmsnorm_cpu", cpp_sources=[CPP], functions=["rmsnorm_residual"])


def forward(x, residual, weight, *, eps):
    return _ext.rmsnorm_residual(x, residual, weight, float(eps))
