"""The loop wing: the driver of `kernelloop run` (driver.py), the round it shares with the
MCP server (round.py, evaluation.py), resume (resume.py), the external agent's session and
its MCP server (session.py, mcp_server.py), and the live view (view.py, a screen only).

The names below load on first use (PEP 562): `kernelloop mcp` imports its server from this
package and must answer a client before the driver (torch and all) is imported."""

from __future__ import annotations

from typing import Any

__all__ = ["Best", "Evaluated", "Options", "run_loop"]


def __getattr__(name: str) -> Any:
    if name == "run_loop":
        from kernelloop.loop.driver import run_loop

        return run_loop
    if name in ("Best", "Evaluated", "Options"):
        from kernelloop.loop import state

        return getattr(state, name)
    raise AttributeError(f"module 'kernelloop.loop' has no attribute {name!r}")
