"""What a timing worker may answer, as schemas: anything else is a protocol problem.

Every answer is one JSON line on the worker's result channel carrying the benchmark's
secret key and the sequence number of the command it answers. A line without the key is
forged (a candidate writing to the channel's descriptor); a line of the wrong type, with
the wrong number, unparseable, or failing its schema means the worker's numbers cannot be
read — the candidate is rejected and the trusted process never raises on it.
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError


def _finite(x: float) -> float:
    if not math.isfinite(x) or x < 0:
        raise ValueError("not a finite non-negative number")
    return x


Ms = Annotated[float, AfterValidator(_finite)]
Pair = tuple[Ms, Ms]
Text = Annotated[str, Field(max_length=4000)]
Names = Annotated[list[Annotated[str, Field(max_length=300)]], Field(max_length=20)]
MAX_SAMPLES = 20_000


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Hello(_Reply):
    env: dict[str, Any] = Field(default_factory=dict)


class Calibrated(_Reply):
    probes: Annotated[list[Pair], Field(max_length=1000)]


class Loaded(_Reply):
    kernels: int = 0
    tampered: Names = Field(default_factory=list)


class Prepared(_Reply):
    rough_ms: Ms
    input_bytes: Annotated[int, Field(ge=0)] = 0
    l2_bytes: Annotated[int, Field(ge=0)] = 0
    warmup_calls: Annotated[int, Field(ge=0)] = 0


class Rough(_Reply):
    ms: Ms


class Probed(_Reply):
    calls: Annotated[list[Pair], Field(max_length=100)]
    cals: Annotated[list[Pair], Field(max_length=100)]


class MethodSet(_Reply):
    ok: bool
    error: Text = ""
    text: Text = ""


class Through(_Reply):
    """A run-through batch (worker/gpu_timer.GpuSlot.through): commitments only; and what
    every batch answers besides its calls."""

    # One commitment per timed unit (kernelloop.evaluate.commitment); "" for a non-tensor.
    commits: Annotated[
        list[Annotated[str, Field(max_length=120)]], Field(min_length=1, max_length=MAX_SAMPLES)
    ]
    no_launch: Annotated[int, Field(ge=0)] = 0
    pre: Annotated[list[list[Pair]], Field(max_length=10)] = Field(default_factory=list)
    post: Annotated[list[list[Pair]], Field(max_length=10)] = Field(default_factory=list)
    tampered: Names = Field(default_factory=list)
    # The worker's own phase times (run-through: inputs made, units run): diagnostics for
    # benchmarks, never trusted — nothing is checked against them.
    phases_ms: Annotated[list[Ms], Field(max_length=4)] = Field(default_factory=list)


class Made(_Reply):
    """A run-through batch's interim line: the worker's inputs are made (its clock's split)."""


class Idle(_Reply):
    """The idle probe's tries around a run-through batch (empty for an uncalibrated worker)."""

    tries: Annotated[list[list[Pair]], Field(max_length=10)] = Field(default_factory=list)


class Batch(Through):
    calls: Annotated[
        list[Annotated[list[Ms], Field(min_length=1, max_length=2)]],
        Field(min_length=1, max_length=MAX_SAMPLES),
    ]
    cals: Annotated[list[Pair], Field(max_length=MAX_SAMPLES)] = Field(default_factory=list)


class Ended(_Reply):
    cals: Annotated[list[Pair], Field(max_length=100)] = Field(default_factory=list)


class Output(_Reply):
    file: Annotated[str, Field(max_length=200)]
    nbytes: Annotated[int, Field(ge=0)]
    # Instead of a file: the shared output slot the bytes were copied into (inbox.py)
    slot: Annotated[int, Field(ge=0)] | None = None


class Profiled(_Reply):
    ms: Ms | None = None


class Stopped(_Reply):
    tampered: Names = Field(default_factory=list)
    strays: Names = Field(default_factory=list)
    stray_count: Annotated[int, Field(ge=0)] = 0
    audit_calls: Annotated[int, Field(ge=0)] = 0
    without_launch: Annotated[int, Field(ge=0)] = 0


class ImportError_(_Reply):
    error: Text = ""


class Error(_Reply):
    error: Text = ""
    fatal: bool = False


SCHEMAS: dict[str, type[_Reply]] = {
    "hello": Hello,
    "calibrated": Calibrated,
    "loaded": Loaded,
    "prepared": Prepared,
    "rough": Rough,
    "probed": Probed,
    "method": MethodSet,
    "batch": Batch,
    "through": Through,
    "made": Made,
    "idle": Idle,
    "ended": Ended,
    "output": Output,
    "profiled": Profiled,
    "stopped": Stopped,
    "import_error": ImportError_,
    "error": Error,
}


class WireError(Exception):
    """A line that breaks the protocol; its message is the reason (one sentence)."""


def parse(raw: bytes, key: str, seq: int, expected: str) -> tuple[str, _Reply]:
    """(type, validated reply) for the answer to command `seq` of kind `expected`; an
    `error`/`import_error` answer is returned as such. Raises WireError otherwise."""
    try:
        msg = json.loads(raw)
    except ValueError:
        raise WireError(f"unparseable line on the result channel: {raw[:80]!r}") from None
    if not isinstance(msg, dict) or not secrets.compare_digest(str(msg.get("key", "")), key):
        raise WireError(
            f"a line on the result channel without the benchmark's key (forged): {raw[:80]!r}"
        )
    kind = msg.get("type")
    if msg.get("seq") != seq:
        raise WireError(
            f"an answer numbered {msg.get('seq')!r} where {seq} was due (a replayed or injected "
            "line)"
        )
    if kind not in (expected, "error", "import_error"):
        raise WireError(f"a {kind!r} line where {expected!r} was due")
    try:
        return kind, SCHEMAS[kind].model_validate(msg)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first.get("loc", ())))
        raise WireError(f"a malformed {kind!r} answer ({where}: {first.get('msg')})") from None
