"""Issue #33 finding 6: task code never shares a process with the model keys.

A hostile KernelBench problem file copies its process's environment — `os.environ` and
`/proc/self/environ`, which keeps what a process was started with even after a variable
is deleted — to a file, every time it runs: when `kernelloop import kernelbench` probes
it, when `kernelloop evaluate` runs it as the reference, and when `kernelloop run` judges
the baseline and a model's candidate. The launcher holds a canary key; it must appear in
none of those copies, while the model still receives it (through the key holder)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.sandbox.trusted_env import trusted_env
from tests.agents.llm_loopback import ModelServer, Reply

KL = Path(sys.executable).parent / "kernelloop"
CANARY = "sk-test-canary-5c1f"
HOSTILE = '''import os
import torch
import torch.nn as nn

with open({leak!r}, "a") as _f:
    _f.write("pid %d uid %d\\n" % (os.getpid(), os.getuid()))
    _f.write(repr(dict(os.environ)) + "\\n")
    _f.write(open("/proc/self/environ", "rb").read().decode(errors="replace") + "\\n")


class Model(nn.Module):
    """Doubles the ReLU of x."""

    def forward(self, x):
        return torch.relu(x) * 2.0


batch_size = 64
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
ANSWER = (
    "### Candidate 1\nDirection: none\nHypothesis: the same model\n"
    "Predicted effect: -1% median time\n\n```python\nimport torch\n\n\n"
    "def forward(*, x):\n    return torch.relu(x) * 2.0\n```\n"
)


def test_the_trusted_environment_is_an_allow_list_without_secrets():
    env = {
        "PATH": "/usr/bin",
        "HOME": "/h",
        "CUDA_VISIBLE_DEVICES": "1",
        "TRITON_CACHE_DIR": "/c",
        "KERNELLOOP_BWRAP": "/b",
        "OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
        "OPENAI_API_KEY": "k",
        "ANTHROPIC_API_KEY": "k",
        "HF_TOKEN": "t",
        "KERNELLOOP_SECRET": "s",  # an allowed prefix never lets a secret through
        "TORCH_PASSWORD": "p",
        "AWS_ACCESS_KEY_ID": "a",
        "AWS_SECRET_ACCESS_KEY": "a",
        "GOOGLE_APPLICATION_CREDENTIALS": "/g.json",
        "https_proxy": "http://p",
        "SSH_AUTH_SOCK": "/s",
        "DATABASE_URL": "postgres://u:pw@h/db",
    }
    assert trusted_env(env) == {
        k: env[k]
        for k in (
            "PATH",
            "HOME",
            "CUDA_VISIBLE_DEVICES",
            "TRITON_CACHE_DIR",
            "KERNELLOOP_BWRAP",
            "OPENAI_BASE_URL",
        )
    }


def _kl(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(KL), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_a_hostile_problem_file_never_sees_the_model_keys(tmp_path):
    leak = tmp_path / "leak.txt"
    problem = tmp_path / "hostile.py"
    problem.write_text(HOSTILE.format(leak=str(leak)))
    env = {**os.environ, "OPENAI_API_KEY": CANARY, "MY_SERVICE_TOKEN": CANARY + "-tok"}
    # The control: run directly with the canary, the file does copy it.
    subprocess.run([sys.executable, str(problem)], env=env, check=True, timeout=120)
    assert CANARY in leak.read_text()
    leak.unlink()

    out = tmp_path / "tasks"
    r = _kl("import", "kernelbench", str(problem), "--out", str(out), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    [note] = [ln for ln in r.stdout.splitlines() if "becomes trusted code" in ln]
    assert "unsandboxed" in note and "without the model keys" in note
    task = out / "hostile"
    r = _kl("evaluate", str(task), str(task / "baseline.py"), "--no-timing", env=env)
    assert r.returncode == 0, r.stdout + r.stderr

    server = ModelServer("openai").start()
    try:
        server.script.append(Reply(ANSWER))
        r = _kl(
            "run", str(task), "--agent", "openai:gpt-4.1", "--base-url", server.url,
            "--rounds", "1", "--device", "cpu", env=env,
        )  # fmt: skip
    finally:
        server.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    # The model got the key (from the key holder) and was asked for a candidate...
    assert [q.headers.get("authorization") for q in server.received] == [f"Bearer {CANARY}"]
    text = leak.read_text()
    # ...while the problem file ran many times (import probes, references) and saw neither.
    assert text.count("pid ") >= 5, text[:2000]
    assert CANARY not in text
    assert "OPENAI_API_KEY" not in text and "MY_SERVICE_TOKEN" not in text
    assert not [ln for ln in text.splitlines() if "_proxy=" in ln.lower()]


def _holder(env: dict[str, str]) -> tuple[subprocess.Popen, socket.socket]:
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelloop.agents.llm.keyholder", str(theirs.fileno())],
        env=env,
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    return proc, ours


def _ask(conn: socket.socket, request: object) -> dict:
    conn.sendall((request if isinstance(request, bytes) else json.dumps(request).encode()) + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        data += conn.recv(1 << 16)
    return json.loads(data)


def _open(url: str | None) -> dict:
    return {
        "op": "open",
        "provider": "openai",
        "model": "m",
        "base_url": url,
        "timeout_s": 5.0,
        "max_tokens": 16,
        "temperature": None,
        "retry": [1, 0.01, 0.01],
    }


def test_the_key_holder_sends_the_key_only_where_the_launcher_said(tmp_path):
    """Task code in the loop can write to the key holder's socket: it must not be able to
    point a provider (and its key) at a server of its own, nor crash or read it."""
    env = {
        **trusted_env(os.environ),
        "OPENAI_API_KEY": CANARY,
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "KERNELLOOP_KEYHOLDER_URLS": "http://127.0.0.1:8/v1",
    }
    proc, conn = _holder(env)
    try:
        evil = _ask(conn, _open("http://attacker.example/v1"))
        assert evil["error"]["kind"] == "ModelRequestError"
        assert "attacker" in evil["error"]["message"] and CANARY not in json.dumps(evil)
        for junk in (b"not json", b"[1, 2]", {"op": "complete", "handle": 7}, {"op": "x"}):
            assert "error" in _ask(conn, junk)  # answered, never a crash
        assert _ask(conn, _open("http://127.0.0.1:8/v1"))["ok"]["handle"] == 0
        assert _ask(conn, _open(None))["ok"]["base_url"] == "http://127.0.0.1:9/v1"
        if os.geteuid() != 0:  # non-dumpable: the user's other processes cannot read it
            with pytest.raises(PermissionError):
                Path(f"/proc/{proc.pid}/environ").read_bytes()
    finally:
        conn.close()
        proc.wait(timeout=30)  # the loop's end closed: the key holder ends
    assert proc.returncode == 0
