"""The task specification: what `task.toml` may say, validated on load.

Every model forbids unknown keys, so a typo in a task file is an error that names the
field instead of a silently ignored setting.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelloop.task.domain import ParamDomain, check_domain
from kernelloop.task.generic_cases import CASES as GENERIC_CASES

DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64")
# The dtypes a peak compute rate is given for (task/peaks.toml); float8 only through
# `[roofline] flops_dtype`, since no task dtype is float8. `tfloat32` is the TF32
# tensor-core rate: the rate of float32 flops where the task's `[precision] tf32` allows it.
PEAK_DTYPES = (*DTYPE_NAMES, "tfloat32", "float8")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskInfo(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    language: Literal["triton", "cuda", "torch"] = "triton"
    entry: str = Field(default="forward", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    baseline: str = "baseline.py"
    reference: str = "reference.py:reference"
    inputs: str = "inputs.py:make_inputs"
    output_like: str = Field(
        default="x",
        description="the input tensor whose shape, dtype and device the output has; empty: "
        "the reference's output says (its shape; the dtype judged when floating point, its "
        "own dtype otherwise — indices and masks are compared exactly)",
    )
    baseline_language: Literal["triton", "cuda", "torch"] | None = Field(
        default=None,
        description="the baseline's language when it differs from the candidates' (an "
        "imported KernelBench task: a PyTorch baseline, Triton candidates); the baseline's "
        "own bytes are screened and audited under it",
    )
    kernelbench: str = Field(
        default="",
        description="an imported KernelBench task's contract file (kernelbench.json): a "
        "candidate may define the solution class (ModelNew) instead of the entry function",
    )
    tunables: list[str] = Field(
        default_factory=list,
        description="module-level constants in the kernel source that a tuner may change",
    )
    closed_shapes: bool = Field(
        default=False,
        description="the op is defined only at the declared shapes (an imported KernelBench "
        "problem's fixed sizes): no undeclared shape is drawn, and the verdict says it was "
        "judged on the declared shapes only",
    )

    @field_validator("reference", "inputs")
    @classmethod
    def _file_colon_function(cls, v: str) -> str:
        if ":" not in v or not v.split(":", 1)[0].endswith(".py"):
            raise ValueError("must be 'FILE.py:FUNCTION', e.g. 'reference.py:reference'")
        return v


class Shape(_Strict):
    dims: dict[str, int]
    weight: float = Field(default=1.0, gt=0)
    tag: str = "common"

    @field_validator("dims")
    @classmethod
    def _positive(cls, v: dict[str, int]) -> dict[str, int]:
        if not v:
            raise ValueError("needs at least one dimension, e.g. { rows = 4096, cols = 8000 }")
        for k, n in v.items():
            if n <= 0:
                raise ValueError(f"dimension {k!r} must be positive, got {n}")
        return v

    @property
    def label(self) -> str:
        return "x".join(str(n) for n in self.dims.values())

    @property
    def numel(self) -> int:
        """Elements of one tensor of this shape (the product of its dims)."""
        return math.prod(self.dims.values())


class Tolerance(_Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    model_margin: float | None = Field(
        default=None,
        ge=1,
        description="where the task's own model (its reference run in the judged dtype, on "
        "the call's inputs, where the judging happens) uses q of atol/rtol, a candidate is "
        "held to max(1, model_margin * q) of them: never asked to beat PyTorch's own "
        "rounding by more than this margin (evaluate/trusted/values/own_error.py)",
    )


class Stochastic(_Strict):
    """How the task's randomness is parameterised and checked.

    The reference must accept `mask_param` (a boolean keep-mask shaped like the output);
    the trusted side then knows what a kept and a dropped element must be without
    needing the candidate's RNG.
    """

    rate_param: str = "p"
    seed_param: str = "seed"
    mask_param: str = "keep_mask"
    case: str = Field(
        default="random",
        description=(
            "ignored, kept so that older task files load: the randomness checks run on the "
            "`random` inputs the timed calls use, so no check can be told from a timed call "
            "(a residual-free case was a tell a kernel could test for; issue 33)"
        ),
    )
    rates: list[float] = Field(default_factory=lambda: [0.1, 0.5])
    confidence_sigmas: float = Field(default=6.0, gt=0)
    contract: str = Field(
        default="",
        description="the operation's randomness in words, for agents (e.g. how kept values "
        "are scaled); what the judge checks is stated by kernelloop itself",
    )


class Suites(_Strict):
    extreme: list[str] | None = Field(
        default=None,
        description=(
            "the extreme cases the task's make_inputs knows; left out, kernelloop's generic "
            "ones (task/generic_cases.py) run instead; [] for none"
        ),
    )
    random_repeats: int = Field(default=2, ge=1)
    extreme_shrink: list[str] = Field(
        default_factory=list,
        description=(
            "dimensions the extreme cases' numerics do not depend on (a row count): the "
            "extreme suite runs once per distinct value of the other dimensions, with these "
            "set to the smallest value any selected shape has"
        ),
    )

    at_params: list[str] = Field(
        default_factory=list,
        description=(
            "extreme cases that run at the task's [params] values instead of drawing them "
            "from [domain]: cases ill-conditioned elsewhere in the domain (a constant row at "
            "eps = 1e-12)"
        ),
    )

    @property
    def extreme_cases(self) -> list[str]:
        """The extreme cases that run: the task's own, or the generic ones when it lists
        none (`extreme = []` runs none)."""
        return list(self.extreme) if self.extreme is not None else list(GENERIC_CASES)


class Rules(_Strict):
    max_rounds: int = Field(default=8, ge=1)
    max_edit_points: int = Field(default=3, ge=1)
    allow_fusion_change: bool = False
    interface_lock: bool = True
    min_gain: float = Field(default=0.005, ge=0)
    noise_k: float = Field(default=3.0, ge=0)
    max_shape_regression: float = Field(default=0.05, ge=0)
    long_tail_floor: float = Field(
        default=0.95, gt=0, description="min speedup vs baseline allowed on long-tail shapes"
    )
    stall_rounds: int = Field(default=3, ge=1)
    stall_gain: float = Field(default=0.005, ge=0)
    bound_fraction: float = Field(default=0.95, gt=0, le=1.5)
    approvals_for_new_arch: int = Field(default=1, ge=0)
    eval_timeout_s: float = Field(default=600.0, gt=0)
    compile_budget_s: float = Field(
        default=300.0,
        gt=0,
        description="seconds an evaluation's compile stage (a CUDA C++ build, the first call "
        "of every dtype) may take before the candidate is rejected as `compile`",
    )
    max_cost_usd: float | None = None
    max_wall_s: float | None = None
    candidates: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="proposals asked for per round (default: 2 for model agents and the "
        "tuner, 1 for a scripted agent); all are judged in the round",
    )
    max_profiles: int | None = Field(
        default=None,
        ge=0,
        description="profiles of candidate sources per MCP run (default: 2 x rounds)",
    )


class E2E(_Strict):
    """The end-to-end check (`[e2e]`): a small trusted model that calls the entry several
    times, run with the float64 reference op on the trusted side and with the candidate in
    the worker, on the same seeded inputs; the final outputs are compared under the
    tolerances given here (docs/task.md, "End-to-end equivalence")."""

    model: str = Field(
        description="FILE.py:NAME, a function model(op, **inputs) -> Tensor (or an "
        "nn.Module class built as NAME(op)) in the task folder; `op` is the entry with the "
        "task's [params] bound"
    )
    inputs: str = Field(
        description="FILE.py:FUNCTION(dims, dtype, device, generator) -> dict[str, Tensor], "
        "the model's inputs (weights too), drawn only from `generator`"
    )
    params: dict[str, float | int | bool | str] = Field(
        default_factory=dict,
        description="keyword arguments of the op that override [params] in the model "
        "(dropout's rate is always 0 here: a task's [stochastic] rate_param is set to 0)",
    )
    dtypes: list[str] | None = Field(
        default=None, description="dtypes the model runs in (default: the task's)"
    )
    tolerances: dict[str, Tolerance]
    shapes: list[Shape] = Field(min_length=1, description="the model's dims on a GPU")
    cpu_shapes: list[Shape] = Field(
        min_length=1, description="the model's dims on the CPU (Triton interpreter: tiny)"
    )

    @field_validator("model", "inputs")
    @classmethod
    def _file_colon_name(cls, v: str) -> str:
        if ":" not in v or not v.split(":", 1)[0].endswith(".py"):
            raise ValueError("must be 'FILE.py:NAME', e.g. 'e2e.py:model'")
        return v


class PeakOverride(_Strict):
    """Rates that replace (or, for a GPU the built-in table lacks, supply) the peak table's
    for GPUs whose name contains the entry's key."""

    dram_tb_s: float | None = Field(default=None, gt=0, description="DRAM bandwidth, TB/s")
    tflops: dict[str, float] = Field(
        default_factory=dict, description="dense peak TFLOP/s by dtype name"
    )

    @field_validator("tflops")
    @classmethod
    def _known_rates(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [d for d in v if d not in PEAK_DTYPES]
        if bad:
            raise ValueError(f"unknown dtype(s) {bad}; use names from {list(PEAK_DTYPES)}")
        low = [d for d, r in v.items() if not r > 0]
        if low:
            raise ValueError(f"rates must be positive TFLOP/s; {low} are not")
        return v


class Roofline(_Strict):
    bytes: str = Field(
        description="minimal DRAM bytes as an expression of the shape's dims and elem_size"
    )
    flops: str = Field(
        default="0",
        description="minimal floating-point operations per call as an expression of the "
        "shape's dims (a multiply-add counts 2); 0: the floor is the memory floor",
    )
    flops_dtype: str | None = Field(
        default=None,
        description="the peak rate the flops run at (default: the dtype being judged), e.g. "
        "float8 for a kernel that computes in fp8",
    )
    peaks: dict[str, PeakOverride] = Field(
        default_factory=dict,
        description="per GPU (a substring of its name), rates that override the peak table",
    )

    @field_validator("flops_dtype")
    @classmethod
    def _known_flops_dtype(cls, v: str | None) -> str | None:
        if v is not None and v not in PEAK_DTYPES:
            raise ValueError(f"unknown dtype {v!r}; use one of {list(PEAK_DTYPES)}")
        return v

    @field_validator("peaks")
    @classmethod
    def _named_gpus(cls, v: dict[str, PeakOverride]) -> dict[str, PeakOverride]:
        if any(not k.strip() for k in v):
            raise ValueError('name the GPU, e.g. [roofline.peaks."H100 PCIe"]')
        return v


class Precision(_Strict):
    """The task's precision contract: what reduced precision a float32 computation may use.
    PyTorch's own default for float32 matmuls is full precision
    (`torch.backends.cuda.matmul.allow_tf32 = False`) but TF32 for cuDNN convolutions;
    Triton's `tl.dot` on float32 inputs rounds them to TF32 unless told
    `input_precision="ieee"`. A task says which it accepts, and its tolerances, floors and
    PyTorch's own code follow: with `tf32 = false` a float32 floor is at the float32-accurate
    rate, and the baseline, the compiled slot and the judge's own-model run compute at full
    float32, convolutions included (task/torch_precision.py)."""

    tf32: bool = Field(
        default=False,
        description="float32 matmuls and convolutions may round their inputs to TF32 (10-bit "
        "mantissa) and run on tensor cores; false: full float32 (PyTorch's and KernelBench's "
        "default)",
    )


class TaskSpec(_Strict):
    task: TaskInfo
    params: dict[str, float | int | bool | str] = Field(default_factory=dict)
    # Each scalar parameter's real-use domain (task/domain.py): judged calls draw from it.
    domain: dict[str, ParamDomain] = Field(default_factory=dict)
    dtypes: list[str]
    tolerances: dict[str, Tolerance]
    shapes: list[Shape]
    cpu_shapes: list[Shape]
    stochastic: Stochastic | None = None
    suites: Suites = Suites()
    e2e: E2E | None = None
    rules: Rules = Rules()
    roofline: Roofline
    precision: Precision = Precision()

    @field_validator("dtypes")
    @classmethod
    def _known_dtypes(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError('list at least one dtype, e.g. ["bfloat16"]')
        bad = [d for d in v if d not in DTYPE_NAMES]
        if bad:
            raise ValueError(f"unknown dtype(s) {bad}; use names from {list(DTYPE_NAMES)}")
        return v

    @model_validator(mode="after")
    def _tolerance_per_dtype(self) -> TaskSpec:
        missing = [d for d in self.dtypes if d not in self.tolerances]
        if missing:
            raise ValueError(
                f"tolerances missing for {missing}; add e.g. "
                f"[tolerances.{missing[0]}] atol = 1e-3, rtol = 1e-2"
            )
        if not self.shapes:
            raise ValueError("shapes: list at least one [[shapes]] entry")
        if not self.cpu_shapes:
            raise ValueError(
                "cpu_shapes: list at least one small [[cpu_shapes]] entry for machines without a "
                "GPU"
            )
        if self.stochastic is not None and not self.task.output_like:
            raise ValueError(
                "a [stochastic] task must name its output_like input (the keep-mask is shaped "
                "like it)"
            )
        dims = {d for s in [*self.shapes, *self.cpu_shapes] for d in s.dims}
        unknown = [d for d in self.suites.extreme_shrink if d not in dims]
        if unknown:
            raise ValueError(
                f"suites.extreme_shrink names {unknown}, which no shape has; "
                f"use dimension names from {sorted(dims)}"
            )
        if self.e2e is not None:
            self._check_e2e(self.e2e)
        self._check_domain()
        unknown = [c for c in self.suites.at_params if c not in self.suites.extreme_cases]
        if unknown:
            raise ValueError(
                f"suites.at_params names {unknown}, which are not extreme cases of this task; "
                f"use names from {self.suites.extreme_cases}"
            )
        return self

    def _check_domain(self) -> None:
        st = self.stochastic
        check_domain(self.domain, self.params, (st.rate_param, st.seed_param) if st else ())

    def _check_e2e(self, e2e: E2E) -> None:
        dtypes = e2e.dtypes if e2e.dtypes is not None else self.dtypes
        bad = [d for d in dtypes if d not in self.dtypes]
        if bad or not dtypes:
            raise ValueError(f"e2e.dtypes {dtypes} must be some of the task's dtypes {self.dtypes}")
        missing = [d for d in dtypes if d not in e2e.tolerances]
        if missing:
            raise ValueError(
                f"e2e tolerances missing for {missing}; add e.g. "
                f"[e2e.tolerances.{missing[0]}] atol = 1e-3, rtol = 1e-2"
            )
