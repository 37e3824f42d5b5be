"""Valid worker messages for the flagship task, and hypothesis strategies that break them.

Whether a mutation is invalid is decided here by construction (a JSON kind the field does
not take, a number out of every field's range, a string longer than any limit, an extra
or missing key, a message out of place), never by asking the models under test.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field

from hypothesis import strategies as st

KINDS = ("str", "int", "float", "bool", "list", "dict", "null")
FLOATS = {
    "elapsed_s",
    "median_ms",
    "p20_ms",
    "p80_ms",
    "timed_ms_total",
    "profiler_ms",
    "shape_wall_s",
}
NAMES = {"impl", "shape", "dtype", "torch", "python", "method", "name", "out_dtype", "out_device"}
LITERALS = {"type", "ok", "device", "when"}
TYPES = {
    "hello",
    "call",
    "timing",
    "timing_begin",
    "timing_error",
    "timing_audit",
    "tamper",
    "compile",
    "processes",
    "import_error",
    "fatal",
    "done",
}
ONCE = [
    "hello",
    "compile",
    "done",
    "timing_begin",
    "timing_audit",
    "processes",
    "import_error",
    "fatal",
    "timing_error",
]


def hello(device: str = "cpu") -> dict:
    return {
        "type": "hello",
        "env": {
            "device": device,
            "torch": "2.11.0",
            "python": "3.12.3",
            "interpreter": True,
            "triton": "3.6.0",
            "device_name": "x86_64",
            "compute_capability": None,
            "cuda": None,
            "argv0": "/usr/bin/python3",
        },
    }


def call_failed(cid: str, error: str = "Traceback …\nRuntimeError: no") -> dict:
    return {"type": "call", "id": cid, "ok": False, "error": error}


def call_tensor(cid: str, shape=(7, 129), dtype: str = "float32", file: bool = True) -> dict:
    msg = {
        "type": "call",
        "id": cid,
        "ok": True,
        "elapsed_s": 0.01,
        "launches": {"candidate:_fused": 1},
        "ops": {"empty_like": 1},
        "traced_ops": {"empty_like": 1},
        "trace_error": "",
        "tampered": [],
        "threads": 0,
        "out_type": "torch.Tensor",
        "out_shape": list(shape),
        "out_dtype": dtype,
        "out_device": "cpu",
        "out_contiguous": True,
        "aliases": [],
        "mutated": [],
        "reuses_output": False,
        "changed_after_return": False,
    }
    if file:
        msg["file"] = f"{cid}.bin"
    return msg


def others() -> dict[str, dict]:
    """One valid message of every other type (in a valid order after hello)."""
    return {
        "timing_begin": {"type": "timing_begin"},
        "timing": {
            "type": "timing",
            "impl": "candidate",
            "shape": "7x129",
            "dtype": "float32",
            "median_ms": 1.5,
            "p20_ms": 1.4,
            "p80_ms": 1.6,
            "n": 3,
            "method": "interpreter wall-clock (does not count)",
            "samples_ms": [1.4, 1.5, 1.6],
            "timed_ms_total": 4.5,
            "hidden_calls": 0,
            "mismatched_calls": 0,
            "checked_calls": 3,
            "profiler_ms": None,
            "shape_wall_s": 0.01,
        },
        "timing_error": {"type": "timing_error", "error": "Traceback\nValueError: x"},
        "timing_audit": {
            "type": "timing_audit",
            "impl": "candidate",
            "calls": 3,
            "without_launch": 0,
        },
        "tamper": {"type": "tamper", "when": "import", "changed": ["torch.cuda.synchronize"]},
        "compile": {
            "type": "compile",
            "kernels": [
                {
                    "impl": "candidate",
                    "name": "_fused",
                    "n_regs": 32,
                    "n_spills": 0,
                    "shared_bytes": 0,
                    "num_warps": 4,
                }
            ],
        },
        "processes": {"type": "processes", "found": ["pid 12: sleep 100"], "count": 1},
        "import_error": {
            "type": "import_error",
            "impl": "candidate",
            "error": "ModuleNotFoundError: x",
        },
        "fatal": {"type": "fatal", "error": "sticky CUDA error"},
        "done": {"type": "done"},
    }


def kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    return {int: "int", float: "float", str: "str", list: "list", dict: "dict"}[type(v)]


TYPED_NULLABLE = {
    "triton": {"str"},
    "device_name": {"str"},
    "compute_capability": {"str"},
    "cuda": {"str"},
    "argv0": {"str"},
    "file": {"str"},
    "sm_count": {"int"},
    "n_regs": {"int"},
    "n_spills": {"int"},
    "shared_bytes": {"int"},
    "num_warps": {"int"},
    "profiler_ms": {"int", "float"},
}


def allowed(field: str, value) -> set[str]:
    """The JSON kinds a field takes (a float field takes ints too)."""
    if field in TYPED_NULLABLE:
        return TYPED_NULLABLE[field] | {"null"}
    k = kind(value)
    return {"int", "float"} if field in FLOATS or k == "float" else {k}


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_any = st.recursive(
    json_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)


# Built once: hypothesis validates a strategy the first time it is used, which costs more
# than drawing from it.
_OF_KIND = {
    "str": st.text(max_size=20),
    "int": st.integers(-(2**70), 2**70),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "bool": st.booleans(),
    "list": st.lists(json_leaf, max_size=3),
    "dict": st.dictionaries(st.text(max_size=5), json_leaf, max_size=3),
    "null": st.none(),
}
_KINDS = {k: st.sampled_from([x for x in KINDS if x != k]) for k in KINDS}
_OUT_OF_RANGE = st.one_of(
    st.integers(-(2**60), -1),
    st.integers(10**13, 10**30),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e13, 1e300, -0.5]),
)
_HOW = st.sampled_from(["kind", "range", "long", "extra", "missing", "control", "literal"])
_CONTROL = st.sampled_from(["\x1b", "\x00", "\n", "\u202e", "\u200b", "\x7f", "\x9b"])
_OK = st.sampled_from([0, 1, "true", "false", None])
_WORD = st.text(min_size=1, max_size=12)
_KEY = st.text(min_size=1, max_size=10)


def value_of_kind(k: str):
    return _OF_KIND[k]


@dataclass
class Case:
    """A line sequence whose line `bad` (1-based) is the first invalid one."""

    lines: list[bytes]
    bad: int
    what: str
    files: dict[str, bytes] = field(default_factory=dict)  # written into the out dir first


def encode(msg, key: str | None) -> bytes:
    if isinstance(msg, dict) and key is not None and "key" not in msg:
        msg = {**msg, "key": key}
    return (json.dumps(msg) + "\n").encode("utf-8", errors="surrogatepass")


def _fields(msg: dict, prefix=()) -> list[tuple]:
    """Paths to every mutable field: top-level fields, hello's env, compile's kernel."""
    out = []
    for k, v in msg.items():
        if k in ("key",):
            continue
        out.append((*prefix, k))
        if k == "env" or k == "kernels":
            inner = v if isinstance(v, dict) else v[0]
            base = (*prefix, k) if isinstance(v, dict) else (*prefix, k, 0)
            out += [(*base, kk) for kk in inner]
    return out


def _get(msg, path):
    for p in path:
        msg = msg[p]
    return msg


def _set(msg, path, value):
    for p in path[:-1]:
        msg = msg[p]
    msg[path[-1]] = value


def _del(msg, path):
    for p in path[:-1]:
        msg = msg[p]
    del msg[path[-1]]


_TEMPLATE = st.sampled_from(sorted(["hello", "call_failed", "call_tensor", *others()]))


@st.composite
def broken_message(draw, cids: list[str]) -> tuple[str, dict, str]:
    """(template name, a message made invalid in one way, what was done); the caller
    places it where a valid message of its template would be valid."""
    templates = {
        "hello": hello(),
        "call_failed": call_failed(cids[0]),
        "call_tensor": call_tensor(cids[0]),
        **others(),
    }
    name = draw(_TEMPLATE)
    msg = copy.deepcopy(templates[name])
    paths = [p for p in _fields(msg) if not (name == "hello" and p == ("type",))]
    path = draw(st.sampled_from(paths))
    field = path[-1]
    value = _get(msg, path)
    how = draw(_HOW)
    if (
        how == "kind"
        or (how == "range" and kind(value) not in ("int", "float"))
        or (how == "control" and field not in NAMES)
        or (how == "literal" and field not in LITERALS)
    ):
        wrong = [k for k in KINDS if k not in allowed(field, value)]
        if not wrong:
            how = "extra"
        else:
            k = draw(st.sampled_from(wrong))
            new = draw(_OF_KIND[k])
            if field == "id" and isinstance(new, str):
                new = "x" + new  # never a planned id either
            _set(msg, path, new)
            return name, msg, f"{name}.{'.'.join(map(str, path))} := {k}"
    if how == "range":
        bad = draw(_OUT_OF_RANGE)
        _set(msg, path, bad)
        return name, msg, f"{name}.{field} := {bad!r}"
    if how == "long":
        if kind(value) == "str":
            _set(msg, path, "a" * draw(st.integers(20_001, 30_000)))
            return name, msg, f"{name}.{field} := long string"
        if kind(value) == "list":
            item = value[0] if value else "x"
            _set(msg, path, [item] * draw(st.integers(4097, 5000)))
            if field == "found":  # at most 16 processes listed
                _set(msg, path, [item] * draw(st.integers(17, 40)))
            if field == "out_shape":
                _set(msg, path, [1] * draw(st.integers(17, 40)))
            if field == "samples_ms":
                return _extra(draw, msg, name)
            return name, msg, f"{name}.{field} := long list"
        return _extra(draw, msg, name)
    if how == "extra":
        return _extra(draw, msg, name)
    if how == "missing":
        if field in TYPED_NULLABLE or field == "type":  # optional: leaving it out is valid
            return _extra(draw, msg, name)
        _del(msg, path)
        return name, msg, f"{name} without {field}"
    if how == "control":
        ch = draw(_CONTROL)
        _set(msg, path, f"{value}{ch}")
        return name, msg, f"{name}.{field} with {ch!r}"
    # literal: a value of the right kind that is not one the field allows
    if field == "ok":
        new = draw(_OK)
    else:
        new = draw(_WORD)
        if new in TYPES or new in ("cpu", "cuda", "import", "timing"):
            new += "!"
    _set(msg, path, new)
    return name, msg, f"{name}.{field} := literal {new!r}"


def _extra(draw, msg: dict, name: str):
    key = draw(_KEY)
    while key in msg:
        key += "_"
    msg[key] = draw(json_leaf)
    return name, msg, f"{name} with extra field {key!r}"
