"""Red team, result channel (issue 12, findings 3, 4 and 7): hostile candidates that steal
the channel key from worker memory and forge lines, plant links in the out dir, and raise
text aimed at the reader. Each runs through `evaluate` with the static screen bypassed
and must end as a record (the trusted process alive) with the expected category, the
canary untouched, and no process of the candidate's left running.
"""

from __future__ import annotations

import json
import secrets
import time

import pytest

from kernelloop.evaluate.trusted.channel.text import visible
from kernelloop.evaluate.trusted.run import evaluate
from tests.redteam.harness import SMALL, is_root, processes_with, write_candidate

pytestmark = pytest.mark.skipif(
    not is_root(), reason="the red-team suite runs as root (as CI does)"
)


def run(flagship, tmp_path, name: str, **subst):
    token = f"kl-redteam-{secrets.token_hex(6)}"
    path = write_candidate(tmp_path, name, TOKEN=token, **subst)
    rec = evaluate(flagship, path, screen=False, **SMALL)
    # A killed process takes a moment to go (the sandbox's pid namespace is torn down
    # after its init dies); one still there after a few seconds was left running.
    deadline = time.monotonic() + 5
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(token) == [], "a process the candidate started outlived the evaluation"
    return rec


def clean(text: str) -> bool:
    return all(visible(ch) or ch == "\n" for ch in text)


@pytest.mark.parametrize("target", ["absolute", "traversal"])
def test_a_forged_call_with_the_stolen_key_cannot_delete_a_file_outside(
    flagship, tmp_path, canary, target
):
    path = (
        str(canary.path) if target == "absolute" else "../../../../../../../.." + str(canary.path)
    )
    rec = run(flagship, tmp_path, "forge_unlink.py", TARGET=path)
    assert rec.verdict.category == "protocol", rec.verdict.reasons
    assert "names an output file other than" in rec.verdict.reasons[0]
    assert canary.intact()
    # The thief really had the key: the log says how it found it (all three ways).
    assert "thief: key found via ['frames', 'gc', 'module']" in rec.worker_log_tail
    # After the violation the out dir is cleared as lines arrive: the worker ran to its
    # end instead of waiting for room until its deadline.
    assert rec.wall_s < SMALL["timeout_s"] / 2


MALFORMED = {
    "type_is_a_list": '{"type": ["x"]}',
    "id_is_a_list": "dict(OK, id=[])",
    "launches_is_a_string": 'dict(OK, launches="x")',
    "ops_is_a_number": "dict(OK, ops=5)",
    "error_is_a_dict": '{"type": "call", "id": CALL["id"], "ok": False, "error": {}}',
    "kernels_is_a_string": '{"type": "compile", "kernels": "abc"}',
    "shape_of_strings": 'dict(OK, out_shape=["7", "129"])',
    "huge_number": "dict(OK, elapsed_s=10**400)",
    "infinity": '\'{"type": "timing_audit", "impl": "candidate", "calls": 1e400, '
    '"without_launch": 0, "key": "KEY"}\'',
    "nan": 'dict(OK, elapsed_s=float("nan"))',
    "second_hello": '{"type": "hello", "env": {}}',
    "bytes": 'b"\\xff\\xfe{\\x00"',
    "deep_nesting": '"[" * 300_000',
    "two_mib_line": '\'{"type": "done", "key": "KEY", "pad": "\' + "a" * (2 << 20) + \'"}\'',
    "forged_file": 'dict(OK, file="/etc/passwd")',
    # Shared output slots (trusted/channel/inbox.py): one that does not exist, one besides a
    # file, one of the wrong type.
    "slot_out_of_range": "dict(OK, slot=2)",
    "slot_beyond_any_count": "dict(OK, slot=64)",
    "slot_and_file": 'dict(OK, slot=0, file=CALL["id"] + ".bin")',
    "slot_is_a_string": 'dict(OK, slot="0")',
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_line_with_the_real_key_is_a_protocol_rejection(
    flagship, tmp_path, canary, case
):
    rec = run(flagship, tmp_path, "forge_malformed.py", CASE=MALFORMED[case])
    assert rec.verdict.category == "protocol", rec.verdict.reasons
    assert not rec.verdict.accepted
    assert all(len(r) < 600 and clean(r) for r in rec.verdict.reasons)
    assert canary.intact()


def test_a_symlink_where_an_output_belongs_is_never_followed(flagship, tmp_path, canary):
    rec = run(flagship, tmp_path, "symlink_output.py", TARGET=str(canary.path))
    assert rec.verdict.category == "protocol", rec.verdict.reasons
    assert "is a symbolic link, not a regular file" in rec.verdict.reasons[0]
    assert canary.intact()


@pytest.mark.parametrize("raise_at", ["1", "0"])
def test_text_aimed_at_the_reader_is_cut_cleaned_and_quoted(flagship, tmp_path, canary, raise_at):
    # raise_at 1: a megabyte raised on the first call; 0: a class name made of escapes
    rec = run(flagship, tmp_path, "hostile_text.py", RAISE_AT=raise_at)
    first = rec.verdict.reasons[0]
    if raise_at == "1":
        assert rec.verdict.category == "crash", rec.verdict.reasons
        assert "the candidate raised «" in first and len(first) < 450, first[:500]
    else:
        assert rec.verdict.category == "interface", rec.verdict.reasons
        assert "returned «" in first and "not exactly a torch.Tensor" in first, first[:500]
    texts = [*rec.verdict.reasons, *rec.warnings, *(c.reason for c in rec.checks)]
    assert all(clean(t) and "\n" not in t for t in texts)
    # The fake instruction only ever appears inside the candidate's quotes.
    for t in texts:
        for part in t.split("SYSTEM:")[1:]:
            assert "»" in part, t
    log = rec.worker_log_tail
    assert 0 < len(log) <= 3000 and clean(log) and "\x1b" not in log
    assert (
        len(json.dumps(rec.model_dump())) < 200_000
    )  # a megabyte raised, a record that stays small
    assert canary.intact()
