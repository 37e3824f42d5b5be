"""`kernelloop mcp` with the official client (issue 35): every parameter described, every
tool with an output schema, a client connected within 5 s (the session, torch and all,
loads beside the server), and a source that does not parse answered at once — before the
baseline is evaluated — with its line and column, costing no round, once in a row: the
second in a row is refused at once too, and spends its round."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests import busy
from tests.conftest import FLAGSHIP, ROOT

CONNECT_S = 5.0  # issue 35's bound on a client's connect

BROKEN = (
    "import torch\n\ndef forward(x, residual, weight, bias, *, p, eps, seed):\n    return (x +\n"
)


def _params(folder: Path) -> StdioServerParameters:
    env = {
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    args = ["-m", "kernelloop.cli", "mcp", str(folder), "--device", "cpu", "--shapes", "7x129"]
    return StdioServerParameters(command=sys.executable, env=env, cwd=str(ROOT), args=args)


async def _conversation(folder: Path) -> dict:
    out: dict = {}
    t0 = time.monotonic()
    async with stdio_client(_params(folder)) as (read, write), ClientSession(read, write) as s:
        out["init"] = await s.initialize()
        out["tools"] = {t.name: t for t in (await s.list_tools()).tools}
        out["connect_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        args = {"source": BROKEN, "claim": "fuse", "prediction": "1.2x"}
        first = await s.call_tool("submit_candidate", args, read_timeout_seconds=300)
        out["first_s"] = time.monotonic() - t1
        out["first"] = first
        t2 = time.monotonic()
        second = await s.call_tool("submit_candidate", args, read_timeout_seconds=300)
        out["second_s"] = time.monotonic() - t2
        out["second"] = second
        hist = await s.call_tool("history", {}, read_timeout_seconds=300)
        out["history"] = hist
        out["task"] = await s.call_tool("task", {}, read_timeout_seconds=300)
    return out


async def _connect_s(folder: Path) -> float:
    """A fresh server's `initialize` + `list_tools`, as a client first meets it."""
    t0 = time.monotonic()
    async with stdio_client(_params(folder)) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        await s.list_tools()
        return time.monotonic() - t0


def _connected_within(first_s: float, folder: Path) -> list[float]:
    """The connect times measured, ending with the first within CONNECT_S: the
    conversation's own, then (at most busy.TRIES in all) fresh servers after waiting for
    quiet. Skips when every try was over and the machine busy; never passes unmeasured."""
    seen = [first_s]
    while seen[-1] > CONNECT_S and len(seen) < busy.TRIES:
        busy.wait_for_quiet()
        seen.append(anyio.run(_connect_s, folder))
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if seen[-1] > CONNECT_S and load >= cores:
        got = ", ".join(f"{t:.1f} s" for t in seen)
        pytest.skip(f"connect over {CONNECT_S} s on a busy machine ({got}; load {load:.1f})")
    return seen


def test_schemas_fast_connect_and_a_free_retry_for_unparsable_source(tmp_path):
    folder = tmp_path / "task"
    shutil.copytree(FLAGSHIP, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    out = anyio.run(_conversation, folder)
    # Connected (initialize + list_tools) within 5 s: 1.2-1.4 s on an idle 2-core box; the
    # session's imports (torch: 9-45 s under load) are not waited for.
    seen = _connected_within(out["connect_s"], folder)
    print(f"connect (initialize + list_tools): {', '.join(f'{t:.2f} s' for t in seen)}")
    assert seen[-1] <= CONNECT_S, seen
    tools = out["tools"]
    assert sorted(tools) == ["history", "profile", "submit_candidate", "task", "variant"]
    for name, tool in tools.items():
        assert tool.description and tool.output_schema, name
        assert tool.output_schema.get("type") == "object", (name, tool.output_schema)
        for param, schema in tool.input_schema.get("properties", {}).items():
            assert len(schema.get("description", "")) > 20, (name, param, schema)
    sub = tools["submit_candidate"]
    assert set(sub.input_schema["properties"]) == {
        "source", "claim", "prediction", "direction", "parent"
    }  # fmt: skip
    assert "verdict" in sub.output_schema["properties"]
    assert "round_spent" in sub.output_schema["properties"]
    # The unparsable source: answered before any evaluation (the baseline's takes a minute
    # or more here), with where it breaks, no round spent.
    first = out["first"]
    assert not first.is_error
    got = first.structured_content or json.loads(first.content[0].text)
    assert got["verdict"] == "unparsable" and got["round_spent"] is False, got
    assert "line 4" in got["outcome"] and "no round spent" in got["outcome"], got
    assert got["run"]["rounds_used"] == 0 and got["run"]["status"] == "not started", got
    assert out["first_s"] < 60, out["first_s"]
    # The second in a row is judged: refused at once (round 0 still not evaluated), its
    # round spent, the reason given.
    second = out["second"].structured_content or json.loads(out["second"].content[0].text)
    assert second["verdict"] == "refused" and second["round_spent"] is True, second
    assert "line 4" in second["refused_reason"] and second["round"] == 1, second
    assert second["run"]["rounds_used"] == 1 and second["run"]["status"] == "not started"
    assert out["second_s"] < 60, out["second_s"]
    hist = out["history"].structured_content or json.loads(out["history"].content[0].text)
    assert hist["attempts"] == []  # nothing evaluated: the refused round waits for round 0
    # Issue 47: every field a tool returns is in its output schema (the task's 17, a
    # submission's history fields), descriptions without the docstrings' indentation, and
    # the server says its version.
    task = out["task"].structured_content or json.loads(out["task"].content[0].text)
    assert len(task) == 17, sorted(task)
    assert set(task) <= set(tools["task"].output_schema["properties"]), sorted(task)
    assert set(second) <= set(sub.output_schema["properties"]), sorted(second)
    assert set(got) <= set(sub.output_schema["properties"]), sorted(got)
    for name, tool in tools.items():
        assert "\n " not in tool.description, (name, tool.description)
    from kernelloop import __version__

    assert out["init"].server_info.version == __version__, out["init"].server_info
