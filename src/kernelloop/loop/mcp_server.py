"""`kernelloop mcp TASK`: the loop's gate, history and versioning for external coding
agents (Claude Code, Codex, …) over MCP on stdio, built on the official `mcp` SDK.

Every tool is a thin layer over `ExternalSession`, which drives the same round function as
`kernelloop run`. Long operations run in a worker thread and report each status line as
an MCP progress notification. stdout is the protocol channel: the SDK's stdio transport
serves it from a private descriptor and points fd 1 at stderr (and fd 0 at /dev/null), so
a stray print — ours, a library's or a sandboxed child's — cannot corrupt it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from kernelloop.errors import KernelloopError
from kernelloop.loop.session import ExternalSession

INSTRUCTIONS = """kernelloop: optimize one GPU kernel under a verification gate.
Read `task` first (its `contract`: reference, input cases, shapes, tolerances, randomness
checks, floors; then rules, entry signature, baseline and current best), then
`history` (what was tried and measured; near-duplicates of tried ideas are refused).
`submit_candidate` sends one full source file with your claim and prediction; it is one
round of the loop: edit points counted from the diff against the current best, fusion and
interface locks, duplicate refusal, a git commit, a sandboxed correctness evaluation, a
benchmark and gate where timings count, a history record. The verdict comes back with
reasons and numbers. Rounds are budgeted; flat rounds stop the run for human review."""


def _progress(ctx: Context) -> Callable[[str], None]:
    """A status callback for the worker thread: each line becomes a progress notification."""
    count = 0

    def say(message: str) -> None:
        nonlocal count
        count += 1
        anyio.from_thread.run(ctx.report_progress, count, None, message)

    return say


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking session operation in a thread; a user-facing error becomes a tool error
    (is_error with its one sentence), anything else is a bug and keeps its traceback."""
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except KernelloopError as e:
        raise ToolError(str(e)) from e


def build_server(session: ExternalSession) -> MCPServer:
    server = MCPServer(name="kernelloop", instructions=INSTRUCTIONS)

    @server.tool(name="task")
    async def task_tool() -> dict:
        """The task: `contract` (the text the loop's LLM agents read: the reference source,
        the input generator and the extreme cases judged, shapes with weights and floor
        times, dtypes and tolerances, exactly what the randomness checks demand, the
        roofline formula, the best's per-shape time and % of floor, the judged device and
        whether its timings count), then the same facts as fields: description, entry
        function and its signature, params, shapes, dtypes, tolerances, tunables, the rules
        in words, the baseline's source, the current best (id, source, speedup over the
        baseline, % of the roofline floor, per-shape numbers) and the rounds used and left."""
        return await _call(session.describe)

    @server.tool(name="history")
    async def history_tool(limit: int = 20) -> dict:
        """What the loop's agents get each round: the history digest (what changed, the
        measured effect, the attribution and the verdict of every earlier attempt, tried
        ideas first so you do not repeat them) plus the latest `limit` rows with their
        reasons, commit and branch."""
        return await _call(session.history, limit)

    @server.tool(name="profile")
    async def profile_tool(ctx: Context, source: str | None = None) -> dict:
        """The profile summary the loop's agents see: of the current best (no source), or of
        a candidate source file with before/after deltas against the best (Nsight Compute on
        a GPU; compile facts and timings on a CPU). The candidate goes through the static screen
        and runs in the sandbox; this is a look, not a submission: it costs no round, but each
        profile of a source counts against the run's profile budget (`run.profiles_left`)."""
        return await _call(session.profile, source, _progress(ctx))

    @server.tool(name="submit_candidate")
    async def submit_tool(
        source: str, claim: str, prediction: str, ctx: Context, direction: str = ""
    ) -> dict:
        """Submit one candidate (the full Python source defining the task's entry function
        with the baseline's signature; in a cuda task, or a C++/CUDA source binding the entry
        with PYBIND11_MODULE, its arguments in the baseline's order) as one round of the
        loop. `claim`: what you changed and why it should help; `prediction`: the effect
        you expect (e.g. "1.3x on 16384x8192"); `direction`: a short tag such as fusion,
        rng, tiling. Returns the
        verdict (accepted | rejected | refused | correct, unmeasured) with its category,
        reasons, speedups, proposal id, commit and branch, the best after this round and the
        run's budget."""
        return await _call(session.submit, source, claim, prediction, direction, _progress(ctx))

    @server.tool(name="variant")
    async def variant_tool(ref: str = "best") -> dict:
        """The source of any recorded generation (a proposal id from `history`, 'best', or
        a git revision) with its commit, to read or build on. Making an older generation the
        best again is a person's call: `kernelloop rollback TASK --to ID`."""
        return await _call(session.variant, ref)

    return server


def serve(session: ExternalSession) -> None:
    """Serve over stdio until the client closes the connection, then close the run."""
    server = build_server(session)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        session.close()
