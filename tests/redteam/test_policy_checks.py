"""Red team, issue 12: the policy checks (static screen, op audit, profiling) against a
hostile candidate. Each test asserts the verdict's category, that the canary outside the
scratch dirs is intact, and that no process the candidate started is left. The screen and
the op audit are policy, not boundaries: where a route gets past them, the test shows the
sandbox containing what the candidate then does."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.screen.static import screen_source
from kernelloop.profile import collect as profile_collect
from kernelloop.profile.collect import Collected, _job, _run_ncu
from kernelloop.profile.render import prompt_text
from kernelloop.profile.run import ScreenRefused, default_shape, profile_candidate
from kernelloop.profile.summary import summarize
from kernelloop.sandbox import SandboxConfig
from tests.conftest import FLAGSHIP, ROOT
from tests.redteam.harness import SMALL, processes_with, write_candidate


def _token() -> str:
    return f"kl-redteam-{secrets.token_hex(6)}"


# ---- class 1: strings reach __import__ ------------------------------------------------


def test_string_routes_to_import_are_refused_by_the_screen(tmp_path, canary):
    token = _token()
    cand = write_candidate(tmp_path, "string_attr_import.py", CANARY=str(canary.path), TOKEN=token)
    messages = [f.message for f in screen_source(cand.read_text())]
    assert any("`operator.attrgetter`" in m for m in messages), messages
    assert any("names `__globals__`" in m for m in messages), messages
    assert any("`typing.get_type_hints`" in m for m in messages), messages
    assert any("uses `__import__`" in m for m in messages), messages  # inside the string annotation
    rec = evaluate(_flagship(), cand, **SMALL)
    assert rec.verdict.category == "static" and rec.environment.sandbox == "not started"
    assert canary.intact() and processes_with(token) == []


@pytest.mark.slow
def test_behind_the_screen_the_string_routes_import_os_and_the_sandbox_contains_it(
    tmp_path, canary
):
    token = _token()
    cand = write_candidate(tmp_path, "string_attr_import.py", CANARY=str(canary.path), TOKEN=token)
    rec = evaluate(_flagship(), cand, screen=False, **SMALL)
    # It got `os` and `subprocess`: it could not reach the canary (hidden by the sandbox),
    # and the process it left is what rejects it; the kernel itself is correct.
    assert rec.environment.sandbox in ("bwrap", "unshare"), rec.environment.sandbox
    assert rec.verdict.category == "tamper", rec.verdict.reasons
    assert any("process" in r for r in rec.verdict.reasons), rec.verdict.reasons
    assert canary.intact() and processes_with(token) == []


def test_singledispatch_route_to_import_is_refused_by_the_screen(tmp_path, canary):
    """Issue 33 finding 8: `functools.singledispatch` evaluated a string annotation joined
    at run time (no literal for the screen to read) and reached `__import__`."""
    token = _token()
    cand = write_candidate(
        tmp_path, "singledispatch_import.py", CANARY=str(canary.path), TOKEN=token
    )
    messages = [f.message for f in screen_source(cand.read_text())]
    assert messages == [
        "uses `functools.singledispatch`, which evaluates annotations as code "
        "(typing.get_type_hints); candidates may not"
    ], messages
    rec = evaluate(_flagship(), cand, **SMALL)
    assert rec.verdict.category == "static" and rec.environment.sandbox == "not started"
    assert canary.intact() and processes_with(token) == []


@pytest.mark.slow
def test_behind_the_screen_singledispatch_imports_os_and_the_sandbox_contains_it(tmp_path, canary):
    """The route was real: with the screen off the candidate gets `os` (the process it
    leaves is what rejects it) and cannot reach the canary outside the sandbox."""
    token = _token()
    cand = write_candidate(
        tmp_path, "singledispatch_import.py", CANARY=str(canary.path), TOKEN=token
    )
    rec = evaluate(_flagship(), cand, screen=False, **SMALL)
    assert rec.environment.sandbox in ("bwrap", "unshare"), rec.environment.sandbox
    assert rec.verdict.category == "tamper", rec.verdict.reasons
    assert any("process" in r for r in rec.verdict.reasons), rec.verdict.reasons
    assert canary.intact() and processes_with(token) == []


# ---- class 2: PyTorch compute hidden from the dispatch-mode audit -----------------------


@pytest.mark.slow
def test_pytorch_compute_under_disabled_dispatch_modes_is_no_kernel(tmp_path, canary):
    token = _token()
    cand = write_candidate(tmp_path, "torch_under_disabled_modes.py")
    rec = evaluate(_flagship(), cand, screen=False, **SMALL)
    assert rec.verdict.category == "no_kernel", rec.verdict.reasons
    first = rec.verdict.reasons[0]
    # The trace saw the compute the dispatch mode could not, and the copy kernel's launch
    # does not excuse it.
    assert (
        "layer_norm" in first and "_softmax" in first and "launch(es) of its own kernels" in first
    ), first
    # Every correctness check passed: only the op audit tells it apart from a kernel.
    assert all(c.passed for c in rec.checks if c.suite not in ("interface", "sensitivity")), [
        c.reason for c in rec.checks if not c.passed and c.suite != "interface"
    ]
    assert canary.intact() and processes_with(token) == []


# ---- class 8: profiling -----------------------------------------------------------------


def test_a_statically_refused_candidate_is_not_profiled(tmp_path, canary, monkeypatch):
    token = _token()
    cand = write_candidate(tmp_path, "string_attr_import.py", CANARY=str(canary.path), TOKEN=token)
    started = []
    monkeypatch.setattr(
        profile_collect, "run_sandboxed", lambda *a, **k: started.append(a) or pytest.fail("ran")
    )
    with pytest.raises(
        ScreenRefused, match=r"REJECTED at the static screen \(policy\).*not profiled"
    ) as e:
        profile_candidate(_flagship(), cand, device="cpu", timeout_s=60)
    assert e.value.role == "candidate" and e.value.findings and started == []
    assert canary.intact() and processes_with(token) == []


@pytest.mark.slow
def test_the_profile_command_labels_a_static_rejection(tmp_path, canary):
    token = _token()
    cand = write_candidate(tmp_path, "string_attr_import.py", CANARY=str(canary.path), TOKEN=token)
    base = [
        sys.executable,
        "-m",
        "kernelloop.cli",
        "profile",
        str(FLAGSHIP),
        str(cand),
        "--device",
        "cpu",
    ]
    r = subprocess.run(base, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1, r.stderr[-2000:]
    assert (
        "REJECTED at the static screen (policy) (not profiled)" in r.stdout
        and "operator.attrgetter" in r.stdout
    )
    r = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["profiled"] is False and out["stage"] == "static screen"
    assert canary.intact() and processes_with(token) == []


def _fake_ncu(tmp_path):
    """Stands in for ncu (no GPU here): runs the profile worker exactly as ncu would, in the
    sandbox, and writes no report of its own."""
    exe = tmp_path / "ncu"
    exe.write_text(
        f"#!{sys.executable}\nimport subprocess, sys\na = sys.argv[1:]\n"
        "sys.exit(subprocess.call(a[a.index('--log-file') + 2:]))\n"
    )
    exe.chmod(0o755)
    return exe


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind, target",
    [("link", "secret-report"), ("link", "/proc/self/environ"), ("fifo", ""), ("huge", "")],
)
def test_a_planted_profile_report_is_not_followed_and_nothing_leaks(
    tmp_path, canary, monkeypatch, kind, target
):
    secret = f"SECRET{secrets.token_hex(8)}"
    monkeypatch.setenv("KERNELLOOP_REDTEAM_SECRET", secret)  # what /proc/self/environ would leak
    if target == "secret-report":  # outside the sandbox, shaped so that a follower parses it
        report = tmp_path / "outside" / "report.csv"
        report.parent.mkdir()
        report.write_text(
            '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'
            f'"0","{secret}","GPU Speed Of Light Throughput","Duration","nsecond","1000"\n'
        )
        target = str(report)
    cand = write_candidate(tmp_path, "profile_link_csv.py", KIND=kind, TARGET=target)
    flagship = _flagship()
    job = {**_job(flagship, cand, default_shape(flagship), "float32", "cpu"), "name": cand.name}
    got = Collected()
    _run_ncu(
        got,
        job,
        SandboxConfig(timeout_s=120, rw_paths=[tmp_path]),
        _fake_ncu(tmp_path),
        cand.read_bytes(),
    )
    assert got.kernels == [], [k.name for k in got.kernels]
    assert got.missing and (
        "not a regular file" in got.missing[-1] or "bytes" in got.missing[-1]
    ), got.missing
    text = prompt_text(summarize(got.kernels, missing=got.missing, min_bytes=1.0))
    blob = text + json.dumps(got.missing)
    assert secret not in blob and not _environ_in(blob), blob
    assert canary.intact() and processes_with(secret) == []


def _environ_in(text: str) -> list[str]:
    """Entries of this process's /proc/self/environ (what a followed link would read: the
    environment the process started with, not later setenv calls) found in `text`."""
    env = open("/proc/self/environ", "rb").read().decode(errors="replace")
    return [e for e in env.split("\0") if len(e) > 20 and " ".join(e.split()) in text]


def _flagship():
    from kernelloop.task import load_task

    return load_task(FLAGSHIP)


@pytest.mark.slow
def test_the_worker_log_is_not_read_through_a_planted_symlink(tmp_path, canary):
    cand = write_candidate(tmp_path, "stderr_link.py")
    rec = evaluate(_flagship(), cand, screen=False, **SMALL)
    assert not rec.verdict.accepted
    assert canary.intact()
    assert "compile" != rec.verdict.category, rec.verdict.reasons  # the plant itself succeeded
    # The trusted process's own environment (API keys live there) must not reach the record.
    assert _environ_in(rec.worker_log_tail) == []
