"""The loop wing: the driver of `kernelloop run` (driver.py), the round it shares with the
MCP server (round.py, evaluation.py), resume (resume.py), the external agent's session and
its MCP server (session.py, mcp_server.py), and the live view (view.py, a screen only)."""

from kernelloop.loop.driver import run_loop
from kernelloop.loop.state import Best, Evaluated, Options

__all__ = ["Best", "Evaluated", "Options", "run_loop"]
