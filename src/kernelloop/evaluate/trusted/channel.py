"""The result channel as the trusted side reads it: which lines count, and what they prove.

The channel is a pipe only the worker's private file descriptor writes to, but that
descriptor lives in the candidate's process (`/proc/self/fd` finds it). So every line
must carry the evaluation's secret key, handed to the worker on stdin and never written
anywhere the candidate can read; there is one `hello`, nothing after `done`, and no
report twice. A line that breaks any of this makes the evaluation a `protocol` rejection.
Worker facts that can only reject (patched harness functions, processes left running,
timed calls that launched nothing) are turned into reasons here.
"""

from __future__ import annotations

import json
import secrets

ONCE = {"hello", "compile", "done", "timing_begin", "timing_audit", "processes"}


def new_key() -> str:
    return secrets.token_hex(16)


def new_state() -> dict:
    return {"hello": {}, "seen": set(), "timings": [], "kernels": [], "done": False, "fatal": "",
            "import_error": "", "protocol": "", "warnings": [], "tamper": [], "processes": None,
            "timing_audit": None, "kinds": set(), "timing_keys": set()}


def parse(raw: bytes, key: str, state: dict) -> dict | None:
    """The message on one channel line, or None (and a protocol reason) if it is forged."""

    def bad(why: str) -> None:
        state["protocol"] = state["protocol"] or why

    try:
        msg = json.loads(raw)
        kind = msg["type"]
    except (ValueError, KeyError, TypeError):
        bad(f"unparseable line on the result channel: {raw[:80]!r}")
        return None
    if not isinstance(msg, dict) or not secrets.compare_digest(str(msg.get("key", "")), key):
        bad(f"a line on the result channel without the evaluation's key (forged): {raw[:80]!r}")
        return None
    if state["done"]:
        bad(f"a {kind!r} line after the worker said it was done")
        return None
    if kind in ONCE and kind in state["kinds"]:
        bad(f"a second {kind!r} line on the result channel")
        return None
    if kind == "timing":
        tk = (msg.get("impl"), msg.get("shape"), msg.get("dtype"))
        if tk in state["timing_keys"]:
            bad(f"timing for {tk} reported twice")
            return None
        state["timing_keys"].add(tk)
    state["kinds"].add(kind)
    # Worker facts that can only reject are kept here, for worker_facts(), whoever reads.
    if kind == "tamper":
        state["tamper"].append(msg)
    elif kind in ("processes", "timing_audit"):
        state[kind] = msg
    return msg


def worker_facts(state: dict) -> list[tuple[str, str]]:
    """(category, reason) for everything the worker saw that rejects the candidate."""
    out = []
    for msg in state["tamper"]:
        changed = ", ".join(map(str, msg.get("changed", [])[:5]))
        out.append(("tamper", f"the candidate replaced harness functions ({changed}) during {msg.get('when', '?')}"))
    procs = state["processes"]
    if procs:
        first = procs.get("found", ["?"])[0]
        out.append(("tamper", f"the candidate left {procs.get('count', 1)} process(es) running at the end "
                              f"(killed), e.g. {first}"))
    audit = state["timing_audit"]
    if audit and audit.get("without_launch"):
        out.append(("timing", f"{audit['without_launch']} of {audit.get('calls')} timed calls launched none of "
                              f"the candidate's kernels (a replayed or skipped result while timed)"))
    return out


def timed_output_problem(m: dict) -> str | None:
    """The reason to refuse when timed calls returned other bytes than the untimed call on
    the same inputs (the candidate behaves differently while it is timed), else None."""
    try:
        n = int(m.get("mismatched_calls") or 0)
    except (TypeError, ValueError):
        return f"unusable mismatched_calls for {m.get('impl')!r}"
    if n <= 0:
        return None
    return (f"{n} of {m.get('checked_calls', '?')} timed calls of {m.get('impl')} returned different bytes than "
            f"its untimed call on the same inputs: it behaves differently while timed")
