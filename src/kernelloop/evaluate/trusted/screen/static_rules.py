"""The static screen's policy tables: which modules, attributes, builtins, dunders and
paths a candidate may name, per language (static.py applies them; every rule, with why,
is in docs/evaluate.md, "Static screen")."""

from __future__ import annotations

COMMON_MODULES = ("__future__", "math", "functools", "typing", "itertools", "operator")
LANG_MODULES = {
    # torch.nn: a KernelBench-style solution is an nn.Module holding its weights (its
    # PyTorch compute, if any, is the op audit's to find, as everywhere).
    "triton": ("torch", "torch.cuda", "torch.nn", "triton", "triton.language"),
    "cuda": ("torch", "torch.cuda", "torch.nn", "torch.utils.cpp_extension"),
    "torch": ("torch", "torch.cuda", "torch.nn", "torch.nn.functional"),
}
DTYPES = {
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "half",
    "float",
    "double",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "long",
    "int",
    "short",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
}
# What a kernel-language candidate may take from torch: allocation (never compute; the
# runtime audit rejects compute anyway), types, and device queries.
TORCH_ALLOWED = DTYPES | {
    "Tensor",
    "Size",
    "dtype",
    "device",
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "full",
    "full_like",
    "finfo",
    "iinfo",
    "is_tensor",
    "is_floating_point",
    "no_grad",
    "inference_mode",
    "cuda",
    "version",
    "__version__",
}
# Also allowed where the task's model draws random numbers (Task.draws: the candidate gets
# a `draw_seed` input): seeding torch's generator and its random factories. What they run
# is still audited (protocol.RNG_FILL_OPS: scalar moments only).
TORCH_RNG = {"manual_seed", "randn", "rand", "randn_like", "rand_like", "randint", "randint_like"}
CUDA_ALLOWED = {
    "is_available",
    "current_device",
    "device_count",
    "get_device_properties",
    "get_device_capability",
    "get_device_name",
    "device",
    "synchronize",
}
# For language = "torch" candidates, torch compute is the point; these stay forbidden
# because they hide work from the timer, reach the dispatcher or compile behind our back.
TORCH_DENIED = {
    "Stream",
    "Event",
    "cuda.Stream",
    "cuda.Event",
    "cuda.stream",
    "cuda.set_stream",
    "cuda.ExternalStream",
    "cuda.current_stream",
    "cuda.default_stream",
    "cuda.graph",
    "cuda.graphs",
    "cuda.CUDAGraph",
    "cuda.memory",
    "cuda.caching_allocator_alloc",
    "cuda.caching_allocator_delete",
    "cuda.set_per_process_memory_fraction",
    "ops",
    "library",
    "utils",
    "jit",
    "compile",
    "fx",
    "export",
    "autograd",
    "overrides",
    "backends",
    "multiprocessing",
    "distributed",
    "hub",
    "load",
    "save",
    "from_file",
    "from_numpy",
    "classes",
    "storage",
    "UntypedStorage",
    "TypedStorage",
    "testing",
    "random",
    "manual_seed",
    "set_default_dtype",
    "set_default_device",
    "set_default_tensor_type",
    "set_grad_enabled",
    "use_deterministic_algorithms",
}
TRITON_ALLOWED = {
    "jit",
    "autotune",
    "heuristics",
    "Config",
    "cdiv",
    "next_power_of_2",
    "language",
    "__version__",
}
CPP_EXTENSION_ALLOWED = {"load_inline", "load"}

FORBIDDEN_BUILTINS = {
    "eval",
    "exec",
    "compile",
    "open",
    "__import__",
    "getattr",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "dir",
    "breakpoint",
    "input",
    "exit",
    "quit",
    "memoryview",
    "help",
}
ALLOWED_DUNDERS = {"__name__", "__version__", "__doc__", "__init__", "__future__", "__all__"}
# Strings that may spell a dunder: `if __name__ == "__main__":`.
ALLOWED_DUNDER_STRINGS = ALLOWED_DUNDERS | {"__main__"}
FRAME_ATTRS = {
    "f_back",
    "f_locals",
    "f_globals",
    "f_builtins",
    "f_code",
    "f_lasti",
    "f_trace",
    "gi_frame",
    "gi_code",
    "cr_frame",
    "cr_code",
    "ag_frame",
    "ag_code",
    "tb_frame",
    "tb_next",
    "co_consts",
    "co_code",
}
# Tensor methods whose work the aten-op audit cannot see (numpy) or that hand out raw
# storage (aliasing an input behind the aliasing check's back).
HIDDEN_WORK_ATTRS = {
    "numpy",
    "tolist",
    "untyped_storage",
    "storage",
    "set_",
    "share_memory_",
    "pin_memory",
}


# Functions of allowed modules that turn a string into attribute access or code: the
# route around the attribute rules the red team used (issue 12: `operator.attrgetter(
# "__globals__")` and `typing.get_type_hints` on a string annotation reached `__import__`).
REFUSED_PATHS = {
    "operator.attrgetter": "turns a string into attribute access",
    "operator.methodcaller": "turns a string into a method call",
    "typing.get_type_hints": "evaluates string annotations as code",
    "typing.ForwardRef": "evaluates a string as code",
    "typing.evaluate_forward_ref": "evaluates a string as code",
    # `register(f)` reads f's annotations with typing.get_type_hints, which evaluates a
    # string annotation as code; one built at run time (`def f(x: NAME)` with NAME a
    # joined string) is no literal the screen can read (issue 33 finding 8).
    "functools.singledispatch": "evaluates annotations as code (typing.get_type_hints)",
    "functools.singledispatchmethod": "evaluates annotations as code (typing.get_type_hints)",
}
# Torch factories a KernelBench-style solution may call in the `__init__` of an nn.Module
# (its `ModelNew` and the modules it holds), as most published solutions build their
# parameters (`nn.Parameter(torch.randn(...))`, `nn.init.kaiming_uniform_`): what they
# make is replaced by the task's weights on every call (kernelbench_inputs.model_entry
# runs the module with the task's parameters and buffers swapped in by name), and a plain
# tensor attribute starts from the reference's seed. `__init__` sees no input. Anywhere
# else — forward above all — they stay refused, and the op audit still sees everything
# the call runs. Also `torch.nn.init.<public>` there.
INIT_FACTORIES = {
    "randn",
    "rand",
    "randint",
    "randperm",
    "randn_like",
    "rand_like",
    "normal",
    "ones",
    "ones_like",
    "tensor",
    "as_tensor",
    "arange",
    "linspace",
    "eye",
    # A causal mask registered as a buffer, as minGPT-style attention builds it
    # (`torch.tril(torch.ones(n, n))`, KernelBench level3/43): replaced by the task's
    # buffer like any parameter (issue 46).
    "tril",
    "triu",
}
# Paths that are modules: naming one as a value hands the module to code the screen cannot
# follow (`c = torch.cuda; c.Stream()` passed every attribute rule before).
MODULE_PATHS = {
    "torch",
    "torch.cuda",
    "torch.nn",
    "torch.nn.functional",
    "torch.utils",
    "torch.utils.cpp_extension",
    "triton",
    "triton.language",
    "triton.language.math",
    "triton.language.extra",
    "triton.language.extra.libdevice",
    "triton.language.extra.cuda",
    "triton.language.extra.cuda.libdevice",
    "triton.language.core",
    "triton.language.standard",
    "triton.language.random",
    *COMMON_MODULES,
}
