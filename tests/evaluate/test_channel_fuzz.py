"""Property-based fuzzing of the result channel through the real consume path.

Every example runs `run._consume` (channel.Reader + messages + the real `Judge` on the
flagship task + a real out dir read through `OutputDir`) on a line sequence whose first
invalid line is known by construction. Properties: nothing raises; the violation is
recorded at exactly that line (so no valid line before it was refused, and the invalid
one was not accepted); every reason is short and free of control characters; no file
outside the out dir changes (a canary beside it). The number of examples per test is
in EXAMPLES; they run in a few seconds in all.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelloop.evaluate.trusted.channel import channel
from kernelloop.evaluate.trusted.channel.outputs import OutputDir
from kernelloop.evaluate.trusted.channel.text import visible
from kernelloop.evaluate.trusted.run import _consume
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import plan_calls
from kernelloop.task import load_task
from tests.conftest import FLAGSHIP
from tests.evaluate import channel_cases as cc
from tests.redteam.harness import Canary

EXAMPLES = {"message": 2000, "sequence": 1200, "valid": 200}
FUZZ = {"deadline": None, "database": None, "suppress_health_check": list(HealthCheck)}
KEY = channel.new_key()
TASK = load_task(FLAGSHIP)
PLAN = plan_calls(TASK, [TASK.find_shape("7x129")], ["float32"])
IDS = [c.id for c in PLAN.calls]

# Strategies built once (hypothesis validates each on first use, which costs more than a draw).
_PREFIX_KINDS = st.lists(
    st.sampled_from(
        [
            "call",
            "timing",
            "timing_begin",
            "timing_audit",
            "tamper",
            "compile",
            "processes",
            "timing_error",
            "import_error",
        ]
    ),
    max_size=5,
    unique=True,
)
_PREFIX_IDS = st.lists(st.sampled_from(IDS[1:]), max_size=3, unique=True)
_SHORT = st.text(max_size=60)
_SEQ = st.sampled_from(
    [
        "key",
        "type",
        "unknown_id",
        "repeat_id",
        "before_hello",
        "second_once",
        "after_done",
        "raw",
        "forged_file",
        "second_tamper",
        "repeat_timing",
    ]
)
_BAD_KEY = st.one_of(
    st.text(max_size=40),
    st.integers(),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
    st.just(KEY.upper()),
    st.just(KEY + " "),
    st.just("é" * 32),
)
_BAD_TYPE = st.one_of(
    st.text(max_size=20), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=2)
)
_BAD_ID = st.one_of(
    st.text(max_size=70),
    st.sampled_from(
        [
            "../../etc/passwd",
            "/tmp/x",
            ".",
            "..",
            "a/b",
            IDS[0] + "x",
            IDS[0].upper(),
            IDS[0] + "\x00",
        ]
    ),
)
_FORGED_FILE = st.sampled_from(
    [
        "../outside/canary.txt",
        "/etc/passwd",
        f"../{IDS[0]}.bin",
        f"{IDS[1]}.bin",
        "canary.txt",
        f"{IDS[0]}.bin/..",
        f"./{IDS[0]}.bin",
        "",
    ]
)
_BEFORE_HELLO = st.sampled_from([cc.call_failed(IDS[0]), *cc.others().values()])
_AFTER_DONE = st.sampled_from([cc.call_failed(IDS[0]), cc.others()["timing"]])
_ONCE = st.sampled_from(cc.ONCE)
_RAW = st.sampled_from(["bytes", "non_object", "nested", "huge", "nan", "dupkey", "bigint", "utf8"])
_NON_OBJECT = cc.json_any.filter(lambda v: not isinstance(v, dict))
_BAD_UTF8 = st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80"])
_NAN = st.sampled_from([b"NaN", b"Infinity", b"-Infinity"])
_TEXT = st.text(max_size=300) | st.text(alphabet="\x1b[0123m;\n\r\t\u202eSYSTEM: ", max_size=200)
_VALID_IDS = st.lists(st.sampled_from(IDS), max_size=6, unique=True)
_VALID_KINDS = st.lists(st.sampled_from(sorted(cc.others())), max_size=8, unique=True)


class Lines:
    """Stands in for SandboxProcess: only `lines()` is used by _consume."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    def lines(self):
        yield from self._lines


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    canary = Canary.plant(root / "outside")
    (root / "out").mkdir()
    return {
        "task": TASK,
        "plan": PLAN,
        "ids": IDS,
        "root": root,
        "canary": canary,
        "out": root / "out",
        "judge": Judge(TASK, "cpu"),
    }


def run(
    world, lines: list[bytes], max_messages: int | None = None, files: dict | None = None
) -> dict:
    """_consume on `lines` with the module's judge and out dir; checks what must hold
    whatever the lines were."""
    out, judge = world["out"], world["judge"]
    for name, data in (files or {}).items():
        (out / name).write_bytes(data)
    judge.failures.clear()
    judge.checks.clear()
    limit = max_messages or len(world["plan"].calls) + 40
    try:
        with OutputDir(out) as outputs:
            state = _consume(
                Lines(lines), world["plan"], judge, outputs, lambda _m: None, KEY, limit
            )
        texts = [state["protocol"], *state["warnings"], *(f.reason for f in judge.failures)]
        for t in texts:
            assert len(t) <= 1200, t[:200]
            assert all(visible(ch) for ch in t), repr(t[:300])
        if state["protocol"]:
            assert not [p for p in out.iterdir() if not p.is_dir()], (
                "the out dir was not cleared after the violation"
            )
        return state
    finally:
        for p in out.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        assert world["canary"].intact()


def _prefix(draw, ids: list[str]) -> list[dict]:
    """Valid messages that may come after hello (each type at most once, distinct call ids)."""
    pool = cc.others()
    out: list[dict] = []
    for k in draw(_PREFIX_KINDS):
        if k == "call":
            for cid in draw(_PREFIX_IDS):
                out.append(cc.call_failed(cid, draw(_SHORT)))
        else:
            out.append(pool[k])
    return out


@st.composite
def broken_line_case(draw, ids: list[str]) -> cc.Case:
    """A single-field mutation of a valid message, in a place where the valid one fits."""
    name, msg, what = draw(cc.broken_message(ids))
    if name == "hello":
        lines = [cc.encode(msg, KEY)]
        return cc.Case(lines, 1, what)
    lines = [cc.encode(cc.hello(), KEY), *(cc.encode(m, KEY) for m in _prefix(draw, ids))]
    lines.append(cc.encode(msg, KEY))
    return cc.Case(lines, len(lines), what)


def _raw_bad(draw) -> tuple[bytes, str]:
    choice = draw(_RAW)
    if choice == "bytes":
        raw = draw(st.binary(min_size=0, max_size=200))
        try:
            if isinstance(json.loads(raw), dict):
                raw = b"!" + raw
        except ValueError:
            pass
        return raw + b"\n", "raw bytes"
    if choice == "non_object":
        v = draw(_NON_OBJECT)
        return (json.dumps(v) + "\n").encode(), "non-object JSON"
    if choice == "nested":
        depth = draw(st.integers(2_000, 200_000))
        return b"[" * depth + b"]" * depth + b"\n", "deep nesting"
    if choice == "huge":
        return b'{"type": "done", "pad": "' + b"a" * (
            (1 << 20) + draw(st.integers(0, 100))
        ) + b'"}\n', "oversized line"
    if choice == "nan":
        lit = draw(_NAN)
        return (
            b'{"type": "timing_audit", "impl": "candidate", "calls": '
            + lit
            + b', "without_launch": 0, "key": "'
            + KEY.encode()
            + b'"}\n'
        ), "NaN literal"
    if choice == "dupkey":
        return (
            b'{"type": "call", "type": "done", "key": "' + KEY.encode() + b'"}\n'
        ), "duplicate key"
    if choice == "bigint":
        return (
            b'{"type": "timing_audit", "impl": "candidate", "calls": '
            + b"9" * draw(st.integers(4_400, 6_000))
            + b', "without_launch": 0, "key": "'
            + KEY.encode()
            + b'"}\n'
        ), "5000-digit integer"
    bad = draw(_BAD_UTF8)  # invalid UTF-8 inside a string
    return (
        b'{"type": "done", "key": "' + KEY.encode() + b'", "x": "' + bad + b'"}\n',
        "invalid utf-8",
    )


@st.composite
def broken_sequence_case(draw, ids: list[str]) -> cc.Case:
    """Lines that are bad where they stand: forged keys, unknown types and ids, order, raw bytes."""
    head = [cc.encode(cc.hello(), KEY), *(cc.encode(m, KEY) for m in _prefix(draw, ids))]
    seen_calls = [json.loads(h)["id"] for h in head if b'"call"' in h]
    choice = draw(_SEQ)
    files: dict[str, bytes] = {}
    if choice == "key":
        msg = cc.call_failed(ids[0])
        msg["key"] = draw(_BAD_KEY)
        if msg["key"] == KEY:
            msg["key"] += "!"
        if draw(st.booleans()):
            del msg["key"]
        line = cc.encode(msg, None)
    elif choice == "type":
        t = draw(_BAD_TYPE)
        if isinstance(t, str) and t in cc.TYPES:
            t += "!"
        line = cc.encode({"type": t}, KEY)
    elif choice == "unknown_id":
        cid = draw(_BAD_ID)
        if cid in ids:
            cid += "!"
        line = cc.encode(cc.call_failed(cid), KEY)
    elif choice == "repeat_id":
        cid = seen_calls[0] if seen_calls else ids[1]
        if not seen_calls:
            head.append(cc.encode(cc.call_failed(cid), KEY))
        line = cc.encode(
            draw(st.sampled_from([cc.call_failed(cid), cc.call_tensor(cid, file=False)])), KEY
        )
    elif choice == "before_hello":
        head = []
        line = cc.encode(draw(_BEFORE_HELLO), KEY)
    elif choice == "second_once":
        kind = draw(_ONCE)
        first = cc.hello() if kind == "hello" else cc.others()[kind]
        if kind != "hello" and kind not in [json.loads(h)["type"] for h in head]:
            head.append(cc.encode(first, KEY))
        if kind == "done":
            line = cc.encode(cc.call_failed(ids[0]), KEY)  # anything after done
        else:
            line = cc.encode(first, KEY)
    elif choice == "after_done":
        head.append(cc.encode(cc.others()["done"], KEY))
        line = cc.encode(draw(_AFTER_DONE), KEY)
    elif choice == "forged_file":
        f = draw(_FORGED_FILE)
        msg = cc.call_tensor(ids[0])
        msg["file"] = f
        line = cc.encode(msg, KEY)
        # The output it should name is there: only the forged name makes the line bad.
        files = {f"{ids[0]}.bin": bytes(7 * 129 * 4)}
    elif choice in ("second_tamper", "repeat_timing"):
        t = cc.others()["tamper" if choice == "second_tamper" else "timing"]
        if t["type"] not in [json.loads(h)["type"] for h in head]:
            head.append(cc.encode(t, KEY))
        line = cc.encode(t, KEY)
    else:
        line, choice = _raw_bad(draw)
    tail = [cc.encode(cc.others()["done"], KEY)] if draw(st.booleans()) else []
    return cc.Case([*head, line, *tail], len(head) + 1, choice, files)


@settings(max_examples=EXAMPLES["message"], **FUZZ)
@given(case=broken_line_case(IDS))
def test_a_malformed_message_of_any_type_is_a_protocol_violation_at_its_line(world, case):
    state = run(world, case.lines)
    assert state["protocol"], f"accepted: {case.what}: {case.lines[-1][:300]!r}"
    assert state["violation_line"] == case.bad, (case.what, state["protocol"])


@settings(max_examples=EXAMPLES["sequence"], **FUZZ)
@given(case=broken_sequence_case(IDS))
def test_a_forged_or_misplaced_line_is_a_protocol_violation_at_its_line(world, case):
    state = run(world, case.lines, files=case.files)
    assert state["protocol"], f"accepted: {case.what}"
    assert state["violation_line"] == case.bad, (
        case.what,
        state["protocol"],
        case.lines[case.bad - 1][:200],
    )


@settings(max_examples=EXAMPLES["valid"], **FUZZ)
@given(data=st.data())
def test_valid_messages_with_any_text_are_accepted_and_their_text_cleaned(world, data):
    """The other side of the property: what the worker honestly sends is never refused,
    whatever the candidate's exception text holds (control characters, escapes, 20k chars)."""
    text = _TEXT
    lines = [cc.encode(cc.hello(), KEY)]
    for cid in data.draw(_VALID_IDS):
        lines.append(cc.encode(cc.call_failed(cid, data.draw(text)), KEY))
    extra = cc.others()
    extra["timing_error"]["error"] = data.draw(text)
    extra["processes"]["found"] = [data.draw(text)]
    extra["import_error"]["error"] = data.draw(text)
    extra["fatal"]["error"] = "x" * data.draw(st.integers(0, 20_000))
    for k in data.draw(_VALID_KINDS):
        if k != "done":
            lines.append(cc.encode(extra[k], KEY))
    lines.append(cc.encode(extra["done"], KEY))
    state = run(world, lines)
    assert not state["protocol"], state["protocol"]
    assert state["done"]


def test_message_count_and_total_bytes_are_bounded(world):
    lines = [cc.encode(cc.hello(), KEY)] + [
        cc.encode(cc.call_failed(c), KEY) for c in world["ids"][:5]
    ]
    state = run(world, lines, max_messages=3)
    assert state["violation_line"] == 4 and "more than 3 lines" in state["protocol"]
    state = channel.new_state(IDS, max_bytes=50_000)
    lines = [cc.encode(cc.hello(), KEY)] + [
        cc.encode(cc.call_failed(c, "e" * 19_000), KEY) for c in IDS[:4]
    ]
    got = [channel.parse(raw, KEY, state) for raw in lines]
    assert [g is not None for g in got] == [True, True, True, False, False]
    assert state["violation_line"] == 4 and "more than 50000 bytes" in state["protocol"]
    assert channel.new_state()["max_bytes"] == channel.MAX_BYTES == 64 << 20


def test_an_exception_while_handling_a_message_is_a_protocol_violation(world, monkeypatch):
    def explode(self, call, msg, outputs):
        raise ZeroDivisionError("boom \x1b[31m")

    monkeypatch.setattr(world["judge"], "judge", explode.__get__(world["judge"]))
    ids = world["ids"]
    state = run(
        world,
        [
            cc.encode(cc.hello(), KEY),
            cc.encode(cc.call_failed(ids[0]), KEY),
            cc.encode(cc.call_failed(ids[1]), KEY),
        ],
    )
    assert state["violation_line"] == 2
    assert "could not use a 'call' message (ZeroDivisionError" in state["protocol"]


def test_reading_stops_judging_after_a_violation_and_clears_the_out_dir(world):
    ids = world["ids"]
    scratch = Path(tempfile.mkdtemp(dir=world["root"]))
    out = scratch / "out"
    out.mkdir()
    (out / f"{ids[1]}.bin").write_bytes(b"\0" * 7 * 129 * 4)
    (out / "junk").mkdir()
    os.symlink(world["canary"].path, out / "link")
    judge = world["judge"]
    judge.failures.clear()
    judge.checks.clear()
    with OutputDir(out) as outputs:
        state = _consume(
            Lines(
                [cc.encode(cc.hello(), KEY), b"garbage\n", cc.encode(cc.call_tensor(ids[1]), KEY)]
            ),
            world["plan"],
            judge,
            outputs,
            lambda _m: None,
            KEY,
            100,
        )
    assert state["violation_line"] == 2
    assert judge.failures == [] and judge.checks == []  # the later call was never judged
    assert sorted(p.name for p in out.iterdir()) == ["junk"]
    assert world["canary"].intact()
    shutil.rmtree(scratch)
