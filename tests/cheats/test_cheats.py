"""Every CPU-reachable exploit class: a cheating candidate, rejected for the right reason.

Cheats that pass the static screen run as they are: the runtime gate is their only
defence. Cheats the screen refuses also run with `screen=False` (the `slow` group) to
prove the runtime defence behind the screen. One evaluation each on 7x129 float32.
"""

import os
from pathlib import Path

import pytest

from tests.cheats.runner import CANDIDATES, evaluate_all

# cheat -> (exploit class, category, phrase in the first reason)
RUNTIME = {
    # the worker's poison, drawn per call (NaN bytes, zeros, stale floats, random bytes):
    # never a stale result, whichever the first failing call drew
    "stale_empty.py": (
        1,
        ("wrong", "trivial", "nonfinite", "stochastic"),
        ("max abs err", "the output is zeros", "non-finite", "neither a kept nor a dropped"),
    ),
    "trivial_residual.py": (2, "trivial", "pass-through of residual"),
    "trivial_zeros.py": (2, "trivial", "the output is zeros"),
    "nan_wildcard.py": (3, "nonfinite", "non-finite output"),
    "alias_residual.py": (4, "aliasing", "shares memory with input(s) ['residual']"),
    "mutate_input.py": (4, "mutation", "['x'] were modified in place"),
    "honest_once.py": (5, "no_kernel", "calls PyTorch compute ops"),
    # an undeclared shape sees it first: its lanes past the tested sizes are garbage
    "tested_shapes_only.py": (6, ("wrong", "nonfinite"), "random/random"),
    "one_pass_variance.py": (7, "wrong", "extreme/large_offset"),
    "no_max_softmax.py": (7, "nonfinite", "extreme/large_weight"),
    # eps + 1e-7 every other call: a drawn eps of 1e-12 on a row of small variance (issue 45)
    # shows it wrong before determinism shows it unstable
    "hidden_state.py": (
        8,
        ("nondeterministic", "wrong"),
        ("same inputs and seed gave different bytes", "elements outside", "are wrong values"),
    ),
    # an extreme call at p = 0 or at p > 0, or the determinism refill, sees it first (which,
    # the plan draws per evaluation)
    "cache_by_shape.py": (
        9,
        ("wrong", "stateful"),
        ("outside atol", "neither a kept nor a dropped value", "returned the output of an"),
    ),
    # another seed, unrelated or related (+1, a bit, +2^16), must give another mask
    "cache_ignores_seed.py": (
        9,
        "stochastic",
        ("a different seed must give an independent mask", "must be independent"),
    ),
    "persistent_buffer.py": (9, "aliasing", "returned the storage it returned for an earlier call"),
    "detect_timing.py": (14, "timing", "timed calls launched none of the candidate's kernels"),
    "crash_on_extreme.py": (16, "crash", "the candidate raised"),
}
BEHIND_SCREEN = {
    "torch_compute.py": (5, "no_kernel", "calls PyTorch compute ops"),
    "lazy_subclass.py": (10, "interface", "not exactly a torch.Tensor"),
    "lazy_thread.py": (10, "deferred", "Python thread(s) running after it returned"),
    "patch_timers.py": (12, "tamper", "torch.cuda.synchronize, time.perf_counter"),
    "patch_checker.py": (12, "tamper", "calls.aliased_inputs"),
    "read_harness.py": (13, "no_kernel", "calls PyTorch compute ops"),
    "read_secrets.py": (13, "crash", "found:"),
    "forge_channel.py": (15, "protocol", "without the evaluation's key"),
    "escape_setsid.py": (17, "tamper", "process(es) running at the end"),
    # a failed import is the candidate's crash, never a compiler's finding (issue 45)
    "helper_import.py": (18, "crash", "No module named 'kl_helper'"),
}
ESCAPE_MARKER = b"kl-escape-marker-5f1c"
POISON_MARKER = "kl-poison-marker-9d2e"
SECRET = "sk-test-SECRET-cheats-must-not-see"


TIMED = {"detect_timing.py", "cheaper_when_timed.py"}  # these cheat only in the timed loop


@pytest.fixture(scope="module")
def runtime_records(flagship):
    jobs = {n: {"path": CANDIDATES / n, "timing": n in TIMED} for n in RUNTIME}
    jobs["shadow"] = {"path": CANDIDATES / "shadow" / "candidate.py"}
    jobs["cheaper_when_timed.py"] = {"path": CANDIDATES / "cheaper_when_timed.py", "timing": True}
    return evaluate_all(flagship, jobs)


@pytest.fixture(scope="module")
def screened_records(flagship):
    jobs = {n: {"path": CANDIDATES / n, "screen": False} for n in BEHIND_SCREEN}
    jobs["write_cache.py"] = {"path": CANDIDATES / "write_cache.py", "screen": False}
    # A secret in the trusted process's environment, as an API key would be.
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = SECRET
    try:
        return evaluate_all(flagship, jobs)
    finally:
        if old is None:
            del os.environ["OPENAI_API_KEY"]
        else:
            os.environ["OPENAI_API_KEY"] = old


def _assert_rejected(rec, category, phrase):
    assert not rec.verdict.accepted
    categories = (category,) if isinstance(category, str) else category
    assert rec.verdict.category in categories, rec.verdict.reasons
    phrases = (phrase,) if isinstance(phrase, str) else phrase
    assert any(p in rec.verdict.reasons[0] for p in phrases), rec.verdict.reasons


@pytest.mark.parametrize("name", sorted(RUNTIME))
def test_cheat_rejected_at_runtime(runtime_records, name):
    _assert_rejected(runtime_records[name], *RUNTIME[name][1:])


def test_only_tested_shapes_fails_on_the_unseen_shape(runtime_records, flagship):
    rec = runtime_records["tested_shapes_only.py"]
    listed = {s.label for s in [*flagship.spec.shapes, *flagship.spec.cpu_shapes]}
    failed = {c.shape for c in rec.failed_checks()}
    assert failed and not failed & listed  # every listed shape passed; the drawn one did not


def test_a_cheat_waiting_for_repeated_timed_inputs_never_sees_them(runtime_records):
    """Class 14's subtle form turns cheap and wrong on the third call with the same inputs.
    Every timed call now gets inputs of its own, so its trigger never comes: it is timed on
    its honest path (tests/redteam/test_timing.py (e), (f) cover a candidate that replays
    or skips without waiting for a repeat)."""
    rec = runtime_records["cheaper_when_timed.py"]
    assert rec.verdict.accepted, rec.verdict.reasons
    assert rec.timings, "it must have been timed"


def test_shadow_modules_next_to_the_candidate_are_never_imported(runtime_records):
    rec = runtime_records["shadow"]
    assert rec.verdict.accepted, rec.verdict.reasons
    assert "kl-shadow-marker" not in rec.worker_log_tail


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BEHIND_SCREEN))
def test_screened_cheat_also_rejected_at_runtime(screened_records, name):
    _assert_rejected(screened_records[name], *BEHIND_SCREEN[name][1:])


@pytest.mark.slow
def test_escaped_session_does_not_outlive_the_evaluation(screened_records):
    assert screened_records["escape_setsid.py"].verdict.category == "tamper"
    alive = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and ESCAPE_MARKER in (proc / "cmdline").read_bytes():
                alive.append(int(proc.name))
        except OSError:
            continue
    assert alive == []


@pytest.mark.slow
def test_secrets_and_caches_stay_out_of_reach(screened_records):
    rec = screened_records["read_secrets.py"]
    assert SECRET not in rec.model_dump_json()
    assert "stdin: ''" in rec.verdict.reasons[0]  # the job was consumed before the candidate ran
    # write_cache: its writes landed in the evaluation's private home/tmp, gone with it.
    home_cache = Path(os.path.expanduser("~/.triton/cache"))
    assert not (home_cache / f"{POISON_MARKER}.json").exists()
    assert not list(Path.cwd().glob("numpy.py"))
