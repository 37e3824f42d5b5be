"""`kernelloop mcp TASK`: the loop's gate, history and versioning for external coding
agents (Claude Code, Codex, …) over MCP on stdio, built on the official `mcp` SDK.

Every tool is a thin layer over `ExternalSession`, which drives the same round function as
`kernelloop run`. Long operations run in a worker thread and report each status line as
an MCP progress notification. stdout is the protocol channel: the SDK's stdio transport
serves it from a private descriptor and points fd 1 at stderr (and fd 0 at /dev/null), so
a stray print — ours, a library's or a sandboxed child's — cannot corrupt it.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from kernelloop import __version__
from kernelloop.errors import KernelloopError
from kernelloop.loop import mcp_schemas as S

if TYPE_CHECKING:
    from kernelloop.loop.session import ExternalSession

INSTRUCTIONS = """kernelloop: optimize one GPU kernel under a verification gate.
Read `task` first (its `contract`: reference, input cases, shapes, tolerances, randomness
checks, floors; then rules, entry signature, baseline and current best), then
`history` (what was tried and measured; near-duplicates of tried ideas are refused).
`submit_candidate` sends one full source file with your claim and prediction; it is one
round of the loop: the static screen (what a candidate may name), edit points counted
from the diff against the current best, fusion and interface locks, duplicate refusal,
a git commit, a sandboxed correctness evaluation, a benchmark and gate where timings
count, a history record. The verdict comes back with reasons and numbers. Rounds are
budgeted; flat rounds stop the run for human review."""


def _progress(ctx: Context) -> Callable[[str], None]:
    """A status callback for the worker thread: each line becomes a progress notification."""
    count = 0

    def say(message: str) -> None:
        nonlocal count
        count += 1
        anyio.from_thread.run(ctx.report_progress, count, None, message)

    return say


class LazySession:
    """The session, built in a thread started with the server: importing it (torch, the
    judge) takes seconds, and a client's `initialize` must not wait for that (issue 35:
    13-16 s to connect). The first tool call waits for it instead."""

    def __init__(self, make: Callable[[], ExternalSession]) -> None:
        self._make, self._session, self._error = make, None, None
        self._done = threading.Event()
        threading.Thread(target=self._build, name="kernelloop-session", daemon=True).start()

    def _build(self) -> None:
        try:
            self._session = self._make()
        except BaseException as e:  # noqa: BLE001 - reported on the first call
            self._error = e
        finally:
            self._done.set()

    def get(self) -> ExternalSession:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._session is not None
        return self._session

    def close(self) -> None:
        self._done.wait()
        if self._session is not None:
            self._session.close()


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking session operation in a thread; a user-facing error becomes a tool error
    (is_error with its one sentence), anything else is a bug and keeps its traceback."""
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except KernelloopError as e:
        raise ToolError(str(e)) from e


async def _op(lazy: LazySession, name: str, *args: Any) -> Any:
    """Call the session's operation `name` (waiting, in a thread, for the session)."""
    return await _call(lambda: getattr(lazy.get(), name)(*args))


def build_server(lazy: LazySession) -> MCPServer:
    server = MCPServer(name="kernelloop", instructions=INSTRUCTIONS, version=__version__)

    def tool(name: str) -> Callable[[Callable[..., Any]], Any]:
        """`server.tool`, with the docstring dedented as the tool's description (a client
        shows it as written: the source's indentation is noise)."""
        return lambda fn: server.tool(name=name, description=inspect.cleandoc(fn.__doc__ or ""))(fn)

    @tool("task")
    async def task_tool() -> S.TaskInfo:
        """The task: `contract` (the text the loop's LLM agents read: the judged device and
        the torch/triton versions, the reference source, the input generator and the cases
        judged, the drawn extra shape's ranges, shapes with weights and floor times, dtypes,
        tolerances and the fp32 precision contract, what the randomness checks demand and
        how tight they are at each shape, the roofline, the best's per-shape numbers), then
        the same facts as fields: description, entry function and its signature, params,
        shapes, dtypes, tolerances, tunables, the rules in words, the baseline's source, the
        current best and the rounds used and left."""
        return S.TaskInfo.model_validate(await _op(lazy, "describe"))

    @tool("history")
    async def history_tool(
        limit: Annotated[int, Field(description=S.LIMIT, ge=1)] = 20,
    ) -> S.History:
        """What the loop's agents get each round: the history digest (what changed, the
        measured effect, the attribution and the outcome of every earlier attempt, tried
        ideas first so you do not repeat them) plus the latest `limit` rows with their
        reasons, commit and branch. Ids of correct candidates can be a submission's `parent`."""
        return S.History.model_validate(await _op(lazy, "history", limit))

    @tool("profile")
    async def profile_tool(
        ctx: Context,
        source: Annotated[str | None, Field(description=S.PROFILE_SOURCE)] = None,
    ) -> S.Profile:
        """The profile summary the loop's agents see: of the current best (no source), or of
        a candidate source file with before/after deltas against the best (Nsight Compute on
        a GPU; compile facts — registers, spills, occupancy for sm_90 — on a CPU). The
        candidate goes through the static screen and runs in the sandbox; this is a look,
        not a submission: it costs no round, but each profile of a source counts against
        the run's profile budget (`run.profiles_left`)."""
        return S.Profile.model_validate(await _op(lazy, "profile", source, _progress(ctx)))

    @tool("submit_candidate")
    async def submit_tool(
        source: Annotated[str, Field(description=S.SOURCE)],
        claim: Annotated[str, Field(description=S.CLAIM)],
        prediction: Annotated[str, Field(description=S.PREDICTION)],
        ctx: Context,
        direction: Annotated[str, Field(description=S.DIRECTION)] = "",
        parent: Annotated[int | None, Field(description=S.PARENT)] = None,
    ) -> S.Submission:
        """Submit one candidate as one round of the loop: the same policy checks, duplicate
        check, git commit, sandboxed correctness evaluation, benchmark and gate where
        timings count, and history record as `kernelloop run`. The source is parsed and
        screened first, before anything is evaluated: one that does not parse (or defines
        no entry) is answered at once with the line and column, costing no round, once in
        a row; one the static screen refuses is `refused` at once with the screen's
        findings, and spends its round like any refusal. Returns the verdict (the outcome
        word of docs/loop.md), the feedback the loop's agents get (first failing check,
        crash line in your kernel, compile facts), speedups, proposal id, commit and
        branch, the best after this round and the run's budget."""
        out = await _op(
            lazy, "submit", source, claim, prediction, direction, _progress(ctx), parent
        )
        return S.Submission.model_validate(out)

    @tool("variant")
    async def variant_tool(ref: Annotated[str, Field(description=S.REF)] = "best") -> S.Variant:
        """The source of any recorded generation (a proposal id from `history`, 'best', or
        a git revision) with its commit, to read or build on. Making an older generation the
        best again is a person's call: `kernelloop rollback TASK --to ID`."""
        return S.Variant.model_validate(await _op(lazy, "variant", ref))

    return server


def serve(make: Callable[[], ExternalSession]) -> None:
    """Serve over stdio until the client closes the connection, then close the run. The
    session is built (`make`) beside the server, so connecting does not wait for it."""
    lazy = LazySession(make)
    server = build_server(lazy)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        lazy.close()
