// The CPU-native RMSNorm + residual op as a C++ source file (issue 14): judged as a
// candidate with `kernelloop evaluate TASK rmsnorm_residual_cpu.cpp` in a `cuda` task
// (evaluate/trusted/native_source.py). Used by tests/evaluate/test_cxx_candidate.py.
#include <torch/extension.h>
#include <cmath>

torch::Tensor forward(torch::Tensor x, torch::Tensor residual, torch::Tensor weight,
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

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }
