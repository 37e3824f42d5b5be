"""What both sides of the trust boundary agree on, and nothing else.

The worker (`evaluate/worker/`, inside the sandbox) and the judge (`evaluate/trusted/`)
never import each other; the few definitions they must share live here: which aten ops
are allocation or views (not compute), how a slot's samples are summarised, and how the
A/A slot is named. No torch import: the trusted side reads these without pulling in
anything the worker runs.
"""

from __future__ import annotations

import math
import statistics

# Aten ops that only allocate, view or describe tensors. Anything else called during a
# candidate's forward is PyTorch doing compute, which the trusted side reports.
ALLOC_VIEW_OPS = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "view",
    "_unsafe_view",
    "reshape",
    "as_strided",
    "t",
    "transpose",
    "permute",
    "expand",
    "unsqueeze",
    "squeeze",
    "select",
    "slice",
    "detach",
    "alias",
    "lift_fresh",
    "unbind",
    "split",
    "chunk",
    "contiguous",
    "flatten",
    "stride",
    "size",
    "numel",
    "dim",
    "is_contiguous",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "_local_scalar_dense",
    "is_same_size",
    # Filling is not the op's compute (an accumulator for atomics starts at zero); an
    # output that is only a fill is caught by the trivial-output checks.
    "zeros",
    "zeros_like",
    "zero_",
    "fill_",
    "full",
    "full_like",
    "new_zeros",
    "new_full",
}


# Random fills a candidate of a task whose model draws random numbers may call (an imported
# KernelBench problem with `"draws": true`: level3/35's LSTM draws its initial states), by
# aten overload: scalar moments, probabilities and bounds only. The overloads that take a
# tensor of moments or probabilities are left out: `bernoulli_(p)` with p in {0, 1} is a
# comparison's result, compute. The worker records these packets with their overload.
RNG_PACKETS = {
    "randn",
    "rand",
    "randn_like",
    "rand_like",
    "randint",
    "randint_like",
    "normal",
    "normal_",
    "uniform_",
    "bernoulli",
    "bernoulli_",
    "exponential_",
    "random_",
}
RNG_FILL_OPS = {
    "randn.default",
    "randn.generator",
    "rand.default",
    "rand.generator",
    "randn_like.default",
    "rand_like.default",
    "randint.default",
    "randint.low",
    "randint.generator",
    "randint.low_generator",
    "randint_like.default",
    "randint_like.low_dtype",
    "normal.float_float",
    "normal_.default",
    "uniform_.default",
    "bernoulli.p",
    "bernoulli_.float",
    "exponential_.default",
    "random_.default",
    "random_.from",
    "random_.to",
}


def quantiles(xs: list[float]) -> tuple[float, float, float]:
    """Median, p20 and p80 (used by both sides, so they agree on the definition)."""
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=10, method="inclusive")
    return statistics.median(xs), q[1], q[7]


def aa_slot(impl: str) -> str:
    return f"{impl}#aa"


# The slot that times the task's reference under torch.compile (default mode,
# dynamic=False): evidence for the record, never the candidate's and never the gate's.
COMPILED = "compiled"


def call_seed(batch_seed: int, j: int) -> int:
    """The input seed of timed call `j` of a batch: every timed call gets inputs of its
    own, so a kept output cannot stand in for a skipped call (kernelloop.evaluate.commitment)."""
    return (int(batch_seed) + 104_729 * (int(j) + 1)) % 2**31


# ---- Timing -------------------------------------------------------------------------
# A timing worker reports raw intervals; the trusted side turns them into samples with
# these functions (the in-process comparison timer in worker/timing.py uses them too, so
# both layouts read events the same way).

HIDDEN_SLACK = (1.02, 0.005)  # device-synced time may exceed stream time by 2% + 5 µs
JITTER_CAP_MS = 0.05  # the calibration's jitter widens the hidden-work slack by at most this
GRAPH_BELOW_MS = 0.015  # per-call events are too coarse below this (launch ~5 µs, event ~0.5 µs)
GRAPH_MIN_RATIO = 0.25  # a replayed call this much faster than the call timed alone lost work
GRAPH_MIN_CALLS = 20  # calls captured per graph, at least
ESCAPE_PROBES = 5  # calls per implementation probed from an idle GPU …
ESCAPE_MIN_HIDDEN = 3  # … of which this many showing hidden work make the shape device-wide
# Idle probe (a fixed copy kernel run by a non-candidate worker before and after its
# batches) against that worker's own calibration: busy when the median host latency or
# the median event time exceeds factor × calibrated p90 + absolute margin.
IDLE_HOST = (2.0, 0.3)
IDLE_EVENT = (3.0, 0.1)  # 1.5x + 0.02 ms flagged an honest run on the H200 (2026-11-30): 1 of 2
IDLE_TRIES = 3  # a probe that looks busy is repeated; busy only if every try is


def pick(tight: float, synced: float, overhead: float, jitter: float = 0.0) -> tuple[float, bool]:
    """The stream-timed interval, unless the device-synced one shows hidden work.

    `synced - overhead` is the interval to the moment the whole device went idle; an
    honest call differs from `tight` only by jitter (`jitter`: the calibration's own
    p90 - median). More than the slack means work ran outside the calling stream, and
    then the longer, device-wide number is the truth.
    """
    wide = synced - overhead
    if wide > tight * HIDDEN_SLACK[0] + HIDDEN_SLACK[1] + jitter:
        return wide, True
    return tight, False


def sync_latency(cal_e_to_d: list[float]) -> tuple[float, float]:
    """(median, jitter) of the host's sync-and-record latency from matched calibration
    calls (their stream-end to device-synced-end intervals): jitter is p90 - median,
    capped at JITTER_CAP_MS."""
    over = sorted(cal_e_to_d)
    if not over:
        return 0.0, 0.0
    med = statistics.median(over)
    p90 = over[min(len(over) - 1, math.ceil(0.9 * len(over)) - 1)]
    return med, min(JITTER_CAP_MS, max(0.0, p90 - med))


def gpu_samples(
    calls: list[tuple[float, float]],
    cals: list[tuple[float, float]],
    per_replay: int,
    device_wide: bool,
) -> tuple[list[float], int, float]:
    """Per-call samples (ms), the number of calls with hidden work, and the total timed ms,
    from raw (stream interval, device-synced interval) pairs and matched calibrations."""
    med, jitter = sync_latency([s - t for t, s in cals])
    samples, hidden, total = [], 0, 0.0
    for tight, synced in calls:
        x, h = pick(tight, synced, med, jitter)
        if device_wide:
            x = max(synced - med, tight)
        samples.append(x / per_replay)
        hidden += h
        total += x
    return samples, hidden, total


def escapes(calls: list[tuple[float, float]], cals: list[tuple[float, float]]) -> bool:
    """Whether an idle-GPU probe shows work outside the calling stream in most calls."""
    med, jitter = sync_latency([s - t for t, s in cals])
    return sum(pick(t, s, med, jitter)[1] for t, s in calls) >= ESCAPE_MIN_HIDDEN


def graph_plan(input_bytes: int, l2_bytes: int, max_sets: int = 256) -> tuple[int, int]:
    """(input sets, calls per graph): rotating sets ≥ 3× L2 in total, so each captured
    call reads from DRAM; calls a multiple of the sets so the last call uses set 0 (the
    benchmark's inputs, whose output the trusted side checks)."""
    sets = max(1, min(max_sets, math.ceil(3 * max(l2_bytes, 1 << 20) / max(input_bytes, 1))))
    return sets, sets * math.ceil(GRAPH_MIN_CALLS / sets)


def idle_stats(probes: list[tuple[float, float]]) -> dict[str, float]:
    """Calibration of the idle probe: p90 of host latency and of event time (ms)."""

    def p90(xs: list[float]) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)] if xs else 0.0

    return {"host_p90": p90([h for h, _ in probes]), "event_p90": p90([e for _, e in probes])}


def idle_busy(probes: list[tuple[float, float]], cal: dict[str, float]) -> bool:
    """Whether one probe (a few (host ms, event ms) runs) shows foreign GPU work."""
    if not probes:
        return False
    host = statistics.median(h for h, _ in probes)
    event = statistics.median(e for _, e in probes)
    return (
        host > IDLE_HOST[0] * cal["host_p90"] + IDLE_HOST[1]
        or event > IDLE_EVENT[0] * cal["event_p90"] + IDLE_EVENT[1]
    )


def method_text(method: str, interpreter: bool = False, cpu_threads: int = 1) -> str:
    """How a shape was timed, in words (the record's `method`)."""
    if method == "cpu":
        if interpreter:
            return "interpreter wall-clock (does not count)"
        return (
            f"cpu wall-clock, {cpu_threads} thread(s), one worker per implementation, interleaved"
        )
    if method == "device-wide":
        return (
            "device-wide per call (work seen outside the calling stream): L2 flushed, idle GPU at "
            "the start "
            "event, end after a device synchronize, host launch included, one worker per "
            "implementation, "
            "interleaved"
        )
    if method.startswith("graph:"):
        return (
            f"cuda-graph replay of {method.split(':')[1]} calls over rotating input sets > 3x L2, "
            "one worker per implementation, interleaved"
        )
    return (
        "cuda-events, L2 flushed + spin before each call, device-synced, one worker per "
        "implementation, "
        "interleaved"
    )
