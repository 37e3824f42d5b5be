"""The result channel as the trusted side reads it: which lines count, and what they prove.

The channel is a pipe only the worker's private file descriptor writes to, but that
descriptor, and the evaluation's key the worker puts on every line, live in the
candidate's process: a candidate can find both and write any line it likes. So the key
only keeps out stray writers (a child printing to an inherited descriptor), and the real
defence is that every line is validated before anything uses it:
- a line is at most `MAX_LINE` bytes and an evaluation at most `max_messages` lines
  (and `MAX_BYTES` in all);
- it is one JSON object (no NaN, no duplicate keys) carrying the key;
- its `type` is known, and its fields fit that type's model (`messages.py`: types,
  lengths, ranges, finite numbers, nothing extra);
- `hello` comes first, nothing comes after `done`, one-off messages come once, and a
  `call` names a call id the trusted side planned and has not seen yet.
A line that breaks any of this makes the evaluation a `protocol` rejection; `parse`
never raises. Worker facts that can only reject (patched harness functions, processes
left running, timed calls that launched nothing) are turned into reasons here.
"""

from __future__ import annotations

import json
import secrets
import sys
import traceback
from collections.abc import Callable, Iterable

from pydantic import ValidationError

from kernelloop.evaluate.trusted.channel import messages
from kernelloop.evaluate.trusted.channel.text import candidate_text

MAX_LINE = 1 << 20  # bytes in one line (the largest honest one, a timing message, is ~10 KiB)
MAX_BYTES = 64 << 20  # bytes in one evaluation's channel
MAX_MESSAGES = 10_000  # default bound on lines when the caller does not compute one
ONCE = {
    "hello",
    "compile",
    "done",
    "timing_begin",
    "timing_audit",
    "processes",
    "import_error",
    "fatal",
    "timing_error",
}


def new_key() -> str:
    return secrets.token_hex(16)


def new_state(
    calls: Iterable[str] = (), max_messages: int | None = None, max_bytes: int = MAX_BYTES
) -> dict:
    """Per-evaluation bookkeeping. `calls`: the planned call ids (a `call` line for any
    other id is a violation). `max_messages`, `max_bytes`: lines and bytes allowed in all."""
    planned = set(calls)
    bad = sorted(c for c in planned if not messages.CALL_ID.fullmatch(c))
    if bad:
        raise ValueError(f"planned call ids must be plain file names, got {bad[:3]}")
    return {
        "hello": {},
        "seen": set(),
        "timings": [],
        "kernels": [],
        "done": False,
        "fatal": "",
        "import_error": "",
        "protocol": "",
        "warnings": [],
        "tamper": [],
        "processes": None,
        "timing_audit": None,
        "kinds": set(),
        "timing_keys": set(),
        "planned": planned,
        "lines": 0,
        "bytes": 0,
        "max_messages": max_messages or MAX_MESSAGES + len(planned),
        "max_bytes": max_bytes,
        "violation_line": None,
    }


def violation(state: dict, why: str) -> None:
    """Record a protocol violation (the first one is the reason shown, with its line number)."""
    if not state["protocol"]:
        state["protocol"], state["violation_line"] = why, state["lines"]


def parse(raw: bytes, key: str, state: dict) -> dict | None:
    """The validated message on one channel line as a plain dict, or None (and a
    protocol reason in `state`) if the line is malformed, oversized, forged or out of
    place. Total: whatever `raw` holds, this returns."""
    try:
        return _parse(raw, key, state)
    except Exception as e:  # noqa: BLE001 - a line must never raise in the trusted process
        violation(
            state, f"a result-channel line the trusted side could not read ({type(e).__name__})"
        )
        return None


def _show(raw: bytes, key: str) -> str:
    """The start of an offending line for a reason, without the evaluation's key."""
    return candidate_text(raw[:4096].decode("utf-8", errors="replace").replace(key, "<key>"), 80)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number the channel allows")


def _no_duplicates(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a key appears twice")
    return out


def _parse(raw: bytes, key: str, state: dict) -> dict | None:
    state["lines"] += 1
    state["bytes"] += len(raw) if isinstance(raw, bytes | bytearray) else 0
    if state["lines"] > state["max_messages"]:
        violation(state, f"more than {state['max_messages']} lines on the result channel")
        return None
    if state["bytes"] > state["max_bytes"]:
        violation(state, f"more than {state['max_bytes']} bytes on the result channel")
        return None
    if not isinstance(raw, bytes | bytearray):
        violation(state, "a result-channel line that is not bytes")
        return None
    if len(raw) > MAX_LINE + 1:  # + the newline
        violation(state, f"a result-channel line of {len(raw)} bytes (the limit is {MAX_LINE})")
        return None
    try:
        msg = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        violation(state, f"unparseable line on the result channel: {_show(raw, key)}")
        return None
    got = msg.get("key") if isinstance(msg, dict) else None
    if not (isinstance(got, str) and got.isascii() and secrets.compare_digest(got, key)):
        violation(
            state,
            "a line on the result channel without the evaluation's key (forged): "
            f"{_show(raw, key)}",
        )
        return None
    kind = msg.get("type")
    if not isinstance(kind, str) or kind not in messages.TYPES:
        violation(state, f"a result-channel message of unknown type: {_show(raw, key)}")
        return None
    if state["done"]:
        violation(state, f"a {kind!r} line after the worker said it was done")
        return None
    if not state["kinds"] and kind != "hello":
        violation(state, f"a {kind!r} line before the worker's hello")
        return None
    if kind in ONCE and kind in state["kinds"]:
        violation(state, f"a second {kind!r} line on the result channel")
        return None
    try:
        msg = messages.validate(msg)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(message)"
        violation(
            state,
            f"a malformed {kind!r} message on the result channel: "
            f"{candidate_text(where, 80)}: {candidate_text(err['msg'], 120)}",
        )
        return None
    if not _in_order(msg, state):
        return None
    state["kinds"].add(kind)
    # Worker facts that can only reject are kept here, for worker_facts(), whoever reads.
    if kind == "tamper":
        state["tamper"].append(msg)
    elif kind in ("processes", "timing_audit"):
        state[kind] = msg
    elif kind == "done":
        state["done"] = True
    return msg


def _in_order(msg: dict, state: dict) -> bool:
    """Checks that need what came before: call ids, repeated timings and tamper reports."""
    kind = msg["type"]
    if kind == "call":
        cid = msg["id"]
        if cid not in state["planned"] or cid in state["seen"]:
            violation(
                state, f"result for an unknown or repeated call id {candidate_text(cid, 130)}"
            )
            return False
        state["seen"].add(cid)
    elif kind == "timing":
        tk = (msg["impl"], msg["shape"], msg["dtype"])
        if tk in state["timing_keys"]:
            violation(state, f"timing for {candidate_text(' '.join(tk), 200)} reported twice")
            return False
        state["timing_keys"].add(tk)
    elif kind == "tamper" and any(t["when"] == msg["when"] for t in state["tamper"]):
        violation(state, f"a second tamper report for {msg['when']!r}")
        return False
    return True


class Reader:
    """One worker's channel, read to the end. Every line goes through `parse`; every
    valid message goes to `handle`, and an exception there (a message the trusted side
    could not use) becomes a protocol violation instead of propagating. Once the
    channel is violated, messages are no longer handled: `on_violation` runs after each
    further line instead (the evaluation uses it to clear the out dir, so the worker is
    never left waiting for room and finishes quickly)."""

    def __init__(
        self, key: str, *, calls: Iterable[str] = (), max_messages: int | None = None
    ) -> None:
        self.key = key
        self.state = new_state(calls, max_messages)

    @property
    def violated(self) -> bool:
        return bool(self.state["protocol"])

    def read(
        self,
        lines: Iterable[bytes],
        handle: Callable[[dict], None],
        on_violation: Callable[[], None] | None = None,
    ) -> dict:
        for raw in lines:
            self.feed(raw, handle, on_violation)
        return self.state

    def feed(
        self,
        raw: bytes,
        handle: Callable[[dict], None],
        on_violation: Callable[[], None] | None = None,
    ) -> None:
        """One line, as `read` takes each (for a caller that reads several channels)."""
        msg = parse(raw, self.key, self.state)
        if msg is not None and not self.violated:
            try:
                handle(msg)
            except Exception as e:  # noqa: BLE001 - see the class docstring
                # The trusted side's own failure: its traceback goes to this process's
                # stderr (never to the candidate), so a user can report where it broke.
                print(
                    f"kernelloop: the trusted side failed on a {msg['type']!r} message:",
                    file=sys.stderr,
                )
                traceback.print_exc(limit=12, file=sys.stderr)
                if type(e).__name__ == "OutOfMemoryError":  # torch's, on this side's GPU
                    why = (
                        f"the trusted side ran out of GPU memory judging a {msg['type']!r} "
                        "message (this machine's limit, not a finding about the candidate's "
                        "values): judge smaller shapes (--shapes), or on a GPU with more "
                        f"free memory ({candidate_text(str(e), 160)})"
                    )
                else:
                    why = (
                        f"the trusted side could not use a {msg['type']!r} message "
                        f"({type(e).__name__}: {candidate_text(str(e), 200)})"
                    )
                violation(self.state, why)
        if self.violated and on_violation is not None:
            try:
                on_violation()
            except Exception:  # noqa: BLE001, S110 - clearing up is best effort
                pass


def worker_facts(state: dict) -> list[tuple[str, str]]:
    """(category, reason) for everything the worker saw that rejects the candidate."""
    out = []
    for msg in state["tamper"]:
        changed = ", ".join(msg.get("changed", [])[:5])
        out.append(
            (
                "tamper",
                f"the candidate replaced harness functions ({changed}) during "
                f"{msg.get('when', '?')}",
            )
        )
    procs = state["processes"]
    if procs:
        first = candidate_text(procs["found"][0], 160)
        out.append(
            (
                "tamper",
                f"the candidate left {procs['count']} process(es) running at the end "
                f"(killed), e.g. {first}",
            )
        )
    audit = state["timing_audit"]
    if audit and audit.get("without_launch"):
        out.append(
            (
                "timing",
                f"{audit['without_launch']} of {audit.get('calls')} timed calls launched none of "
                f"the candidate's kernels (a replayed or skipped result while timed)",
            )
        )
    return out
