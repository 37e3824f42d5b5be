"""The static screen on C++ and CUDA C++ sources (issue 14, `language = "cuda"`): a policy
over the strings a candidate builds an extension from. The C++ candidate of
test_cxx_candidate.py is clean; each rule's breach is found on its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.screen.static import screen_source

CAND = Path(__file__).parent / "cxx" / "rmsnorm_residual_cpu.py"
CUDA_KERNEL = '''
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float v;
    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(x + i));
    y[i] = v > 0.f ? v : 0.f;
  }
}

torch::Tensor relu(torch::Tensor x) {
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);  // at::relu would be compute, but this is a comment
  const int64_t n = x.numel();
  auto stream = at::cuda::getCurrentCUDAStream();
  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  TORCH_CHECK(x.scalar_type() == at::kFloat);
  return y;
}
"""
CPP = "torch::Tensor relu(torch::Tensor x);"
_ext = load_inline(name="relu_ext", cpp_sources=CPP, cuda_sources=CUDA, functions=["relu"])


def forward(x):
    return _ext.relu(x)
'''


def test_the_candidates_cpp_and_a_cuda_kernel_with_inline_ptx_are_clean():
    assert screen_source(CAND.read_text(), "cuda") == []
    assert screen_source(CUDA_KERNEL, "cuda") == []


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("#include <cuda_bf16.h>", "#include <unistd.h>", "includes <unistd.h>"),
        ("#include <cuda_bf16.h>", "#include <sys/mman.h>", "includes <sys/mman.h>"),
        (
            "auto y = torch::empty_like(x);",
            'std::system("id"); auto y = x;',
            "system(), which runs",
        ),
        ("auto y = torch::empty_like(x);", "auto y = at::relu(x);", "at::relu, PyTorch compute"),
        (
            "auto y = torch::empty_like(x);",
            "auto y = torch::matmul(x, x);",
            "torch::matmul, PyTorch compute",
        ),
        (
            "auto stream = at::cuda::getCurrentCUDAStream();",
            "auto stream = at::cuda::getStreamFromPool();",
            "getStreamFromPool(), which takes a side stream",
        ),
        (
            "const int64_t n = x.numel();",
            "const int64_t n = x.numel(); cudaDeviceSetLimit(cudaLimitStackSize, 1 << 20);",
            "cudaDeviceSetLimit(), which changes device limits",
        ),
        (
            "const int64_t n = x.numel();",
            'const int64_t n = x.numel(); void* h = dlopen("libc.so.6", 2);',
            "dlopen(), which loads a library",
        ),
    ],
)
def test_each_cpp_rule_is_found_on_its_line(old, new, says):
    assert old in CUDA_KERNEL
    src = CUDA_KERNEL.replace(old, new)
    found = screen_source(src, "cuda")
    hits = [f for f in found if says in f.message]
    assert hits, [f.render() for f in found]
    line = next(i for i, text in enumerate(src.splitlines(), 1) if new.split(";")[0] in text)
    assert hits[0].line == line and hits[0].rule == "cpp"


def test_cpp_rules_apply_to_cuda_candidates_only():
    src = CUDA_KERNEL.replace("auto y = torch::empty_like(x);", "auto y = at::relu(x);")
    assert not any(f.rule == "cpp" for f in screen_source(src, "triton"))
