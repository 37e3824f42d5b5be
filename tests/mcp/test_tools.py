"""`kernelloop mcp` with the official client (issue 35): every parameter described, every
tool with an output schema, a client connected within 5 s (the session, torch and all,
loads beside the server), and a source that does not parse answered at once — before the
baseline is evaluated — with its line and column, costing no round, once in a row."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import FLAGSHIP, ROOT

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
        await s.initialize()
        out["connect_s"] = time.monotonic() - t0
        out["tools"] = {t.name: t for t in (await s.list_tools()).tools}
        t1 = time.monotonic()
        args = {"source": BROKEN, "claim": "fuse", "prediction": "1.2x"}
        first = await s.call_tool("submit_candidate", args, read_timeout_seconds=300)
        out["first_s"] = time.monotonic() - t1
        out["first"] = first
        hist = await s.call_tool("history", {}, read_timeout_seconds=300)
        out["history"] = hist
    return out


def _bare_import_s() -> float:
    """How long this machine takes to import the MCP SDK's server alone (what a connect
    cannot avoid), measured now: a busy CI box is slower at both."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], check=True)
    return time.monotonic() - t0


def test_schemas_fast_connect_and_a_free_retry_for_unparsable_source(tmp_path):
    folder = tmp_path / "task"
    shutil.copytree(FLAGSHIP, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    bare = _bare_import_s()
    out = anyio.run(_conversation, folder)
    # Connected within 5 s (an idle machine: ~2 s), or, on a loaded one, within the SDK's
    # own import time plus 3 s: the session's imports (torch: 9-45 s under load) are not
    # waited for.
    print(f"connect {out['connect_s']:.1f} s; bare SDK import {bare:.1f} s")
    assert out["connect_s"] <= max(5.0, bare + 3.0), (out["connect_s"], bare)
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
    hist = out["history"].structured_content or json.loads(out["history"].content[0].text)
    assert hist["attempts"] == []  # nothing recorded, nothing evaluated
