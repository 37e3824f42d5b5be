"""The trusted side's timing parts on their own: how raw intervals become samples, what a
worker may answer, the per-batch and per-shape cross-checks, reading an output file, and
stopping a real process tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch

from kernelloop.evaluate import commitment, protocol
from kernelloop.evaluate.protocol import call_seed
from kernelloop.evaluate.trusted.channel import wire
from kernelloop.evaluate.trusted.clock import through_checks
from kernelloop.evaluate.trusted.clock import timing_checks as checks
from kernelloop.evaluate.trusted.clock.bench_record import ImplTiming, paired_log_ratio
from kernelloop.evaluate.trusted.launch import freeze
from kernelloop.evaluate.trusted.launch.freeze import Freezer, tree

KEY = "k" * 32


# ---- raw intervals -> samples (protocol.py, shared with the worker) -----------------
def test_samples_keep_stream_time_unless_work_escaped():
    cals = [(1.0, 1.02)] * 5  # the host's sync latency after a 1 ms wait: 20 µs
    honest = [(1.0, 1.021), (1.1, 1.122)]
    samples, hidden, total = protocol.gpu_samples(honest, cals, 1, device_wide=False)
    assert samples == [1.0, 1.1] and hidden == 0 and total == pytest.approx(2.1)
    hiding = [(0.01, 1.02)]  # tiny on its stream, the device busy for 1 ms
    samples, hidden, _ = protocol.gpu_samples(hiding, cals, 1, device_wide=False)
    assert hidden == 1 and samples[0] == pytest.approx(1.0)
    samples, _, _ = protocol.gpu_samples([(0.5, 0.6)], cals, 10, device_wide=True)
    assert samples == [pytest.approx(0.058)]  # (0.6 - 0.02) / 10 calls per replay


def test_escape_probe_needs_most_calls_to_show_hidden_work():
    cals = [(0.01, 0.03)] * 5
    three = [(0.01, 0.5)] * 3 + [(0.01, 0.03)] * 2
    two = [(0.01, 0.5)] * 2 + [(0.01, 0.03)] * 3
    assert protocol.escapes(three, cals) and not protocol.escapes(two, cals)


def test_graph_plan_ends_on_the_benchmark_inputs():
    for input_bytes in (1, 3 << 20, 50 << 20, 10 << 30):
        sets, calls = protocol.graph_plan(input_bytes, 60 << 20)
        assert 1 <= sets <= 256 and calls >= protocol.GRAPH_MIN_CALLS and calls % sets == 0


def test_idle_probe_flags_a_busy_gpu_not_host_jitter():
    cal = protocol.idle_stats([(0.04, 0.015)] * 27 + [(0.06, 0.016)] * 3)
    assert not protocol.idle_busy(
        [(0.05, 0.015), (0.2, 0.015), (0.045, 0.016)], cal
    )  # one slow wake-up
    assert protocol.idle_busy(
        [(2.1, 0.015), (1.8, 0.016), (2.5, 0.015)], cal
    )  # time-sliced with another context
    assert protocol.idle_busy(
        [(0.05, 0.3), (0.05, 0.25), (0.05, 0.4)], cal
    )  # bandwidth shared (MPS)
    assert not protocol.idle_busy(
        [(0.2, 0.1), (0.19, 0.09), (0.2, 0.1)], cal
    )  # an honest H200 probe that 1.5x flagged


# ---- what a worker may answer ---------------------------------------------------------
def _line(**msg) -> bytes:
    return json.dumps({"key": KEY, **msg}).encode()


def test_wire_accepts_a_valid_batch_and_refuses_forged_stale_or_malformed_lines():
    kind, body = wire.parse(
        _line(type="batch", seq=4, calls=[[1.0, 1.1]], cals=[[1.0, 1.02]], commits=["a:1"]),
        KEY,
        4,
        "batch",
    )
    assert kind == "batch" and body.calls == [[1.0, 1.1]]
    cases = {
        "forged": json.dumps(
            {"key": "x" * 32, "type": "batch", "seq": 4, "calls": [[1.0]]}
        ).encode(),
        "numbered": _line(type="batch", seq=3, calls=[[1.0]], commits=["a"]),
        "was due": _line(type="prepared", seq=4, rough_ms=1.0),
        "malformed": _line(type="batch", seq=4, calls=[[-1.0]], commits=["a"]),
        "commits": _line(type="batch", seq=4, calls=[[1.0]]),  # a batch without commitments
        "unparseable": b"{not json",
    }
    for phrase, raw in cases.items():
        with pytest.raises(wire.WireError, match=phrase):
            wire.parse(raw, KEY, 4, "batch")
    with pytest.raises(wire.WireError, match="malformed"):
        wire.parse(
            b'{"key": "' + KEY.encode() + b'", "type": "batch", "seq": 4, "calls": [[NaN]]}',
            KEY,
            4,
            "batch",
        )
    kind, body = wire.parse(_line(type="error", seq=4, error="boom"), KEY, 4, "batch")
    assert kind == "error" and body.error == "boom"


def test_wire_a_run_through_batch_must_mark_its_inputs_made_before_it_answers():
    # The trusted clock splits a run-through batch at the worker's `made` line: a worker that
    # answers without it (or marks twice) cannot be timed and is refused.
    kind, _ = wire.parse(_line(type="made", seq=7), KEY, 7, "made")
    assert kind == "made"
    through = _line(type="through", seq=7, commits=["a:1"])
    with pytest.raises(wire.WireError, match="'through' line where 'made' was due"):
        wire.parse(through, KEY, 7, "made")
    with pytest.raises(wire.WireError, match="'made' line where 'through' was due"):
        wire.parse(_line(type="made", seq=7), KEY, 7, "through")
    kind, body = wire.parse(_line(type="idle", seq=8, tries=[[[0.1, 0.02]]]), KEY, 8, "idle")
    assert kind == "idle" and body.tries == [[(0.1, 0.02)]]


# ---- cross-checks ---------------------------------------------------------------------
def _answer(calls, wall_s, cals=(), pre=(), post=()):
    body = SimpleNamespace(
        calls=[list(c) for c in calls],
        cals=list(cals),
        pre=list(pre),
        post=list(post),
        no_launch=0,
        commits=["c"] * len(calls),
    )
    return SimpleNamespace(body=body, wall_s=wall_s, sent=0.0, received=wall_s)


def test_a_batch_cannot_claim_more_time_than_elapsed():
    assert checks.batch_clock_problem("s", "best", _answer([[2.0]] * 10, 0.025)) is None
    bad = checks.batch_clock_problem("s", "best", _answer([[50.0]] * 10, 0.025))
    assert bad and "not real" in bad


def _acc(
    per_call_ms: float, reported_ms: float, overhead_ms: float, batches: int = 8, n: int = 10
) -> checks.Acc:
    acc = checks.Acc()
    for _ in range(batches):
        acc.add(_answer([[reported_ms]] * n, n * (per_call_ms + overhead_ms) / 1e3))
    return acc


def test_a_claimed_saving_must_be_one_the_trusted_clock_saw():
    honest = {
        "candidate": _acc(0.5, 0.5, 0.1),
        "best": _acc(1.0, 1.0, 0.1),
        "baseline": _acc(3.0, 3.0, 0.12),
    }
    assert checks.saving_check("s", honest, "candidate", "cpu") == (0.0, None)
    lying = dict(honest, candidate=_acc(1.0, 0.01, 0.1))  # as slow as the best, reports 1/100
    added, bad = checks.saving_check("s", lying, "candidate", "cpu")
    assert bad and "did not see" in bad


def test_time_spilling_outside_the_calls_is_added_back_not_rejected():
    # 250 ms calls that leave 12 ms of their own work (garbage collection) outside the
    # measured interval: judged by the trusted clock's view, not accused of lying.
    accs = {
        "candidate": _acc(262.0, 250.0, 0.5, n=1),
        "best": _acc(7.0, 7.0, 0.5, n=1),
        "best#aa": _acc(7.0, 7.0, 0.55, n=1),
    }
    added, bad = checks.saving_check("s", accs, "candidate", "cpu")
    assert bad is None and added == pytest.approx(12.0, abs=0.1)


def _through(rows: list[tuple[float, float]], n: int = 7, waited_s: float = 0.0) -> checks.Acc:
    """An Acc with one counted run-through batch per (inputs' ms per unit, units' ms per
    unit), rounds 1, 2, ... in order, as the trusted clock would see them."""
    acc = _acc(1, 1, 0)
    for r, (make, run) in enumerate(rows, start=1):
        body = SimpleNamespace(commits=["c"] * n, pre=[], post=[], no_launch=0, phases_ms=[])
        marked = 10.0 + make * n / 1e3
        ans = SimpleNamespace(
            body=body,
            sent=10.0,
            marked=marked,
            received=marked + run * n / 1e3,
            wall_s=(make + run) * n / 1e3,
            waited_s=waited_s,
        )
        acc.add_through(ans, r)
    return acc


# The H200's flagship at 16384x8192 (2026-12-02, benchmarks/results/2026-12-02-h200-
# session16): per unit ~1.06 ms of inputs' window, and a units' window alternating between
# ~1.232 and ~1.310 ms from round to round in every worker (0.918 ms kernel, the best).
MAKE = [1.06, 1.05, 1.07, 1.06, 1.05, 1.06]
RUN = [1.232, 1.310, 1.233, 1.311, 1.232, 1.309]


def _rows(make=MAKE, run=RUN, d_make=0.0, d_run=0.0):
    return [(m + d_make, u + d_run) for m, u in zip(make, run, strict=True)]


def _accs(cand_rows, **more) -> dict[str, checks.Acc]:
    return {"candidate": _through(cand_rows), "best": _through(_rows()), **more}


CLAIMED = {"best": 0.918, "best#aa": 0.918, "baseline": 1.213}


def test_run_through_batches_hold_the_events_to_the_trusted_clock():
    # An honest copy of the best: its units take what the best's do, its events agree.
    honest = _accs(_rows(d_run=0.004))
    assert through_checks.through_check(
        "s", honest, {**CLAIMED, "candidate": 0.918}, "candidate"
    ) == (
        0.0,
        None,
    )
    # The same kernel reporting 80% of its time (the red team's lying worker at 0.8): the
    # whole excess goes back on its samples, so it gains nothing.
    added, bad = through_checks.through_check(
        "s", honest, {**CLAIMED, "candidate": 0.7344}, "candidate"
    )
    assert bad is None and added == pytest.approx(0.1876, abs=0.002)
    # Reporting half: its numbers are not real.
    added, bad = through_checks.through_check(
        "s", honest, {**CLAIMED, "candidate": 0.459}, "candidate"
    )
    assert bad and "did not see" in bad and "run back to back" in bad
    # Really faster (0.7 ms, its units 0.218 ms shorter too): no excess, nothing added.
    faster = _accs(_rows(d_run=-0.218))
    assert through_checks.through_check(
        "s", faster, {**CLAIMED, "candidate": 0.70}, "candidate"
    ) == (
        0.0,
        None,
    )


def test_run_through_compares_round_by_round():
    # A lie of 6% (0.055 ms) under units' windows that move by 0.078 ms from round to round.
    liar = _accs(_rows(d_run=0.001))
    added, bad = through_checks.through_check(
        "s", liar, {**CLAIMED, "candidate": 0.863}, "candidate"
    )
    assert bad is None and added == pytest.approx(0.056, abs=0.002)
    # The best waited for a CPU in its fast rounds (1, 3, 5): those are left out. Its
    # remaining batches are all slow ones; read against the median of all the liar's
    # (0.039 ms faster), the lie would shrink to 0.017 ms, inside the slack. Paired with the
    # best's batch of the same round it stands out whole.
    for i in (0, 2, 4):
        r = liar["best"].through[i]
        liar["best"].through[i] = checks.ThroughRow(r.round, r.make_ms, r.run_ms, 7, False)
    added, _ = through_checks.through_check("s", liar, {**CLAIMED, "candidate": 0.863}, "candidate")
    assert added == pytest.approx(0.056, abs=0.002)


def test_work_moved_ahead_of_the_made_line_counts_as_the_units():
    # A worker that computes a fifth of its outputs while "making inputs" shortens its units'
    # window by as much as it lengthens the inputs' window; the inputs' window is held to
    # the best's (slack: 5% of it + 0.003 ms), and what lies beyond goes back on the units.
    moved = _accs(_rows(d_make=0.18, d_run=-0.18))
    added, bad = through_checks.through_check(
        "s", moved, {**CLAIMED, "candidate": 0.7344}, "candidate"
    )
    make_slack = through_checks.THROUGH_FLOOR_MS + through_checks.THROUGH_MAKE_REL * 1.06
    assert bad is None and added == pytest.approx(0.18 - make_slack + 0.0036, abs=0.003)
    # ... which leaves a cheater at most that slack (~6% of this kernel): docs/security.md.
    assert 0.05 < make_slack < 0.06
    # An honest candidate whose inputs' window runs a little long (3% of it) is not raised.
    slow_inputs = _accs(_rows(d_make=0.03))
    assert through_checks.through_check(
        "s", slow_inputs, {**CLAIMED, "candidate": 0.918}, "candidate"
    ) == (
        0.0,
        None,
    )


def test_run_through_reads_the_best_and_its_copy_not_a_different_kernel():
    # H200, 2026-12-02: the baseline's median claim came out 0.077 ms high in one run (1.291
    # against 1.213 in the others), which read against it would have raised an honest
    # candidate by 0.077 ms; the best and its A/A copy (the same bytes) are the reference.
    base = _through(_rows(run=[u + 0.295 - 0.077 for u in RUN]))
    accs = _accs(_rows(d_run=0.004), baseline=base, **{"best#aa": _through(_rows(d_run=0.006))})
    claimed = {**CLAIMED, "baseline": 1.291, "candidate": 0.918}
    assert through_checks.through_refs(accs, "candidate") == ["best", "best#aa"]
    assert through_checks.through_check("s", accs, claimed, "candidate") == (0.0, None)
    # Without a best, the baseline is the reference (the first round of an optimization).
    del accs["best"], accs["best#aa"]
    assert through_checks.through_refs(accs, "candidate") == ["baseline"]


def test_a_unit_shorter_than_its_launch_path_is_held_to_the_clock_not_called_a_liar():
    # H200, 2026-12-01, GEMM task at 16x8192x8192: the honest tiled GEMM claims 0.0457 ms
    # per call; the trusted clock saw its units take 0.0499 ms more than the best's harness
    # work beside its claim — its Triton launch and commitment (~0.1 ms of host work)
    # outlasting its kernel, not a lie.
    accs = {
        "candidate": _through([(0.3, 0.1457 + 0.0499)] * 6),
        "best": _through([(0.3, 0.1557)] * 6),
    }
    claimed = {"candidate": 0.0457, "best": 0.0557}
    added, bad = through_checks.through_check("s", accs, claimed, "candidate")
    # Not rejected: held to what the trusted clock saw (its samples raised by the excess).
    assert bad is None and added == pytest.approx(0.0499, abs=1e-3)
    # A unit past the host allowance beyond the harness (and past half its claim): a lie.
    accs["candidate"] = _through([(0.3, 0.1457 + through_checks.THROUGH_HOST_MS + 0.01)] * 6)
    added, bad = through_checks.through_check("s", accs, claimed, "candidate")
    assert bad and "did not see" in bad


def test_run_through_check_needs_data_on_both_sides():
    accs = {"candidate": _acc(1, 1, 0), "best": _acc(1, 1, 0)}  # CPU: no run-through batches
    assert through_checks.through_check(
        "s", accs, {"candidate": 0.1, "best": 1.0}, "candidate"
    ) == (
        0.0,
        None,
    )


def test_harness_overhead_noise_does_not_accuse_but_a_lie_under_it_is_still_caught():
    # CI's 2-core runner, 1 MB outputs: ~3 ms of input loading and output commitment per
    # call for everyone, the honest fast candidate's 1 ms above the others' (its memory
    # layout), against a 0.6 ms call: not a lie.
    others = {"best": _acc(2.9, 2.9, 3.0), "best#aa": _acc(2.8, 2.8, 3.05)}
    honest = dict(others, candidate=_acc(0.6, 0.6, 3.6))
    assert checks.saving_check("s", honest, "candidate", "cpu")[1] is None
    # The same overhead, a candidate as slow as the best claiming a fifth of it.
    lying = dict(others, candidate=_acc(2.9, 0.58, 3.0))
    added, bad = checks.saving_check("s", lying, "candidate", "cpu")
    assert bad and "did not see" in bad


def test_contended_batches_are_left_out_and_too_few_quiet_ones_refuse_the_measurement():
    # A lying worker (a 3 ms call reported at 0.03 ms) whose honest rivals' batches were
    # stretched by the machine's load: read whole, their unaccounted time (8 ms) would hide
    # the lie. Batches in which a worker waited for a CPU are left out.
    def acc(per_call, reported, overhead, quiet, busy):
        a = checks.Acc()
        for _ in range(quiet):
            a.add(_answer([[reported]] * 10, 10 * (per_call + overhead) / 1e3))
        for _ in range(busy):
            ans = _answer([[reported]] * 10, 10 * (per_call + overhead + 8.0) / 1e3)
            ans.waited_s = 10 * 8.0 / 1e3
            a.add(ans)
        return a

    accs = {
        "candidate": acc(3.0, 0.03, 1.0, 3, 0),
        "best": acc(1.0, 1.0, 1.0, 2, 8),
        "best#aa": acc(1.0, 1.0, 1.0, 2, 8),
    }
    assert accs["best"].contended == 8 and len(accs["best"].batches) == 2
    assert checks.busy_problem("s", accs, "candidate") is None
    added, bad = checks.saving_check("s", accs, "candidate", "cpu")
    assert bad and "did not see" in bad
    # With one quiet batch of the best's left, nothing can be checked: refused, not guessed.
    accs["best"] = acc(1.0, 1.0, 1.0, 1, 7)
    busy = checks.busy_problem("s", accs, "candidate")
    assert busy and "too busy" in busy and "best 7 of 8" in busy
    # Only the candidate short, but the others waited in most of their batches too (8 of
    # 10): the machine's load, which left the candidate short by chance — not its doing
    # (two busy processes on the 2-core box, 2026-12-03: a thread-free candidate short in 6
    # of 6 batches, waiting 13.9 ms per batch against the others' 14.4 ms).
    accs["best"] = acc(1.0, 1.0, 1.0, 2, 8)
    accs["candidate"] = acc(3.0, 0.03, 1.0, 1, 9)
    busy = checks.busy_problem("s", accs, "candidate")
    assert busy and checks.BUSY in busy and "crowd" not in busy
    # Only the candidate short while the others, in the same shuffled rounds, were mostly
    # uncontended (2 of 10 batches): it crowded its own worker — its doing.
    accs["best"] = acc(1.0, 1.0, 1.0, 8, 2)
    accs["best#aa"] = acc(1.0, 1.0, 1.0, 8, 2)
    crowded = checks.busy_problem("s", accs, "candidate")
    assert crowded and "too busy" not in crowded and "9 of 10" in crowded
    assert "crowd" in crowded
    # The candidate and one other short, waiting alike: the machine, refused as such.
    accs["best#aa"] = acc(1.0, 1.0, 1.0, 0, 10)
    assert "too busy" in checks.busy_problem("s", accs, "candidate")
    # ... but where the candidate's waits are ten times everyone else's, it is the cause
    # (CI: the busy candidate waited 100-1500 ms per batch, the best a few ms).
    for a in accs.values():
        a.waits_ms = [3.0] * len(a.waits_ms)
    accs["candidate"].waits_ms = [150.0] * 10
    crowded = checks.busy_problem("s", accs, "candidate")
    assert "crowd" in crowded and "150.0 ms" in crowded and "3.0 ms" in crowded


def test_a_candidate_short_alone_with_small_waits_is_bad_luck_not_crowding():
    # CI, 2026-12-01: an honest candidate (identical code to the best) left short alone on a
    # busy 2-core runner, waiting 1.6 ms per ~20 ms batch against 0.3 ms for the others.
    def acc(waits):
        a = checks.Acc()
        for w in waits:
            ans = _answer([[0.1]] * 10, 20.0 / 1e3)
            ans.waited_s = w / 1e3
            a.add(ans)
        return a

    accs = {
        "candidate": acc([1.6, 1.7, 1.5, 1.6, 0.3]),
        "best": acc([0.3, 0.2, 1.5, 0.3, 0.4]),
        "baseline": acc([0.3, 0.3, 0.2, 1.2, 0.3]),
    }
    assert len(accs["candidate"].batches) == 1 and len(accs["best"].batches) == 4
    busy = checks.busy_problem("s", accs, "candidate")
    assert busy and checks.BUSY in busy and "crowd" not in busy
    # The same rounds with waits filling most of each of its batches: its own doing.
    accs["candidate"] = acc([15.0, 14.0, 16.0, 15.0, 0.3])
    crowded = checks.busy_problem("s", accs, "candidate")
    assert crowded and "crowd" in crowded and checks.BUSY not in crowded


def test_run_queue_wait_is_read_from_the_kernel_for_a_crowded_process():
    spin = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.5: pass\n"
    procs = [
        subprocess.Popen([sys.executable, "-c", spin]) for _ in range((os.cpu_count() or 1) + 2)
    ]
    try:
        time.sleep(1.0)
        crowded = freeze.run_queue_wait_ns([p.pid for p in procs])
    finally:
        for p in procs:
            p.wait()
    assert crowded > 50e6  # more runnable processes than CPUs: each waited for one
    assert freeze.run_queue_wait_ns([2**22 + 12345]) == 0  # no such process: nothing


def test_the_saving_check_reads_the_low_quartile_so_load_spikes_do_not_accuse():
    cand = _acc(0.5, 0.5, 0.1)
    for _ in range(2):  # two batches delayed 40 ms by the machine's other load
        cand.add(_answer([[0.5]] * 10, (10 * 0.6 + 40) / 1e3))
    accs = {"candidate": cand, "best": _acc(1.0, 1.0, 0.1), "best#aa": _acc(1.0, 1.0, 0.1)}
    assert checks.saving_check("s", accs, "candidate", "cpu") == (0.0, None)


def test_noise_counts_rounds_not_calls():
    # Ten rounds of ten calls; each round's calls share a state that moves the ratio by ±20%.
    num, den = [], []
    for r in range(10):
        shift = 1.2 if r % 2 else 0.8
        num += [shift * (1 + 0.001 * k) for k in range(10)]
        den += [1.0] * 10
    per_call = paired_log_ratio(_timing(num, 1), _timing(den, 1))
    per_round = paired_log_ratio(_timing(num, 10), _timing(den, 10))
    assert per_round[1] > 2 * per_call[1]  # the clustered noise is not hidden by the call count
    assert (
        paired_log_ratio(_timing(num[:40], 10), _timing(den[:40], 10)) is None
    )  # four rounds say nothing


def _timing(samples: list[float], round_size: int) -> ImplTiming:
    return ImplTiming(
        impl="x",
        median_ms=1.0,
        p20_ms=1.0,
        p80_ms=1.0,
        n=len(samples),
        method="-",
        samples_ms=samples,
        round_size=round_size,
    )


def test_output_files_are_read_by_name_never_through_a_link(tmp_path):
    real = tmp_path / "real.bin"
    real.write_bytes(b"\x01" * 16)
    assert checks.read_output(real, 16) == b"\x01" * 16 and not real.exists()
    target = tmp_path / "secret.bin"
    target.write_bytes(b"\x02" * 16)
    (tmp_path / "link.bin").symlink_to(target)
    with pytest.raises(OSError):
        checks.read_output(tmp_path / "link.bin", 16)
    assert target.read_bytes() == b"\x02" * 16
    (tmp_path / "short.bin").write_bytes(b"\x00" * 8)
    with pytest.raises(ValueError, match="expected 16"):
        checks.read_output(tmp_path / "short.bin", 16)
    os.mkfifo(tmp_path / "fifo.bin")
    with pytest.raises(ValueError, match="not a regular file"):
        checks.read_output(tmp_path / "fifo.bin", 16)


def test_every_timed_call_gets_inputs_of_its_own():
    seeds = {call_seed(12345, j) for j in range(1000)}
    assert len(seeds) == 1000 and all(0 <= x < 2**31 for x in seeds)
    assert call_seed(12345, 0) != call_seed(12346, 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int64])
def test_a_commitment_binds_every_byte_and_the_batch_key(dtype):
    t = (torch.randn(33, 65) * 100).to(dtype)
    for d in (commitment.digest_cpu, commitment.digest_torch):
        c = d(t, 7)
        assert c == d(t.clone(), 7)
        assert c != d(t, 8)  # a fresh key per batch: no digest carries over
        flipped = t.clone()
        flipped.reshape(-1).view(torch.uint8)[-1] ^= 1  # the last byte's lowest bit
        assert d(flipped, 7) != c
    assert commitment.check_digest(t, 7, "cpu") == commitment.digest(t, 7)


def test_the_trusted_digest_in_chunks_equals_the_digest_whole():
    """The trusted side digests a large output a chunk of words at a time; the lane sums
    must be the same as over the whole (an odd chunk: the index offsets must carry)."""
    t = (torch.randn(1001, 37) * 1e3).to(torch.bfloat16)
    whole = commitment.digest_torch(t, 5, chunk=1 << 30)
    assert commitment.digest_torch(t, 5, chunk=997) == whole
    assert commitment.digest_torch(t, 5, chunk=4096) == whole
    assert commitment.digest_torch(t, 6, chunk=997) != whole


def test_the_triton_digest_equals_the_trusted_sides_torch_digest():
    """The worker's one-pass kernel and the trusted side's torch ops must agree exactly
    (exact integer arithmetic): checked here in Triton's interpreter, in a subprocess."""
    code = (
        "import torch\n"
        "from kernelloop.evaluate import commitment as c\n"
        "for dt in (torch.float16, torch.float32, torch.bfloat16, torch.bool):\n"
        "    for n in (1, 3, 1000, 4099):\n"
        "        t = (torch.randn(n) * 1e3).to(dt)\n"
        "        assert c.digest_triton(t, 99) == c.digest_torch(t, 99), (dt, n)\n"
        "outs = [torch.randn(n) for n in (5, 2049, 1)]\n"
        "run = c.Commits(41, 4, 'cpu')\n"
        "for j in (0, 1, 3):\n"
        "    run.launch(j, outs[min(j, 2)])\n"
        "want = [c.digest_torch(o, 41) for o in outs]\n"
        "assert run.texts() == [want[0], want[1], '', want[2]], run.texts()\n"
        "print('same')\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and "same" in out.stdout, out.stderr[-2000:]


# ---- stopping a real process tree ---------------------------------------------------------
SPAWNER = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True: pass
    os._exit(0)
while True: time.sleep(0.01)
"""


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


STOPPED = ("T", "t", "Z", "X", "gone")  # stopped, or a zombie / already reaped


@pytest.mark.skipif(os.geteuid() != 0, reason="a private pid namespace needs root here (as in CI)")
def test_the_freezer_stops_and_resumes_a_whole_tree_including_new_sessions():
    # As in the sandbox: a private pid namespace, where even a double-forked daemon in a
    # new session is re-parented to the namespace's first process, inside the tree.
    root = subprocess.Popen(
        [
            "unshare",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount",
            "--mount-proc",
            sys.executable,
            "-c",
            SPAWNER,
        ]
    )
    fz = Freezer(root.pid)
    try:
        deadline = time.monotonic() + 20
        busy = []
        while (
            len(busy) < 2 and time.monotonic() < deadline
        ):  # the setsid child and the daemon, spinning
            time.sleep(0.05)
            busy = [p for p in tree(root.pid) if _state(p) == "R"]
        assert len(busy) >= 2, [(p, _state(p)) for p in tree(root.pid)]
        members = tree(root.pid)
        assert fz.stop()
        assert all(_state(p) in STOPPED for p in members), [(p, _state(p)) for p in members]
        cpu = {p: open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[11] for p in busy}
        time.sleep(0.3)
        assert {
            p: open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[11] for p in busy
        } == cpu  # no CPU time
        fz.cont()
        deadline = time.monotonic() + 5  # a loaded box may take a while to schedule them
        while any(_state(p) in STOPPED for p in busy) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_state(p) in STOPPED for p in busy), [(p, _state(p)) for p in busy]
    finally:
        fz.kill()
        root.wait(timeout=10)
