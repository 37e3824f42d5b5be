"""Every candidate of a model's answer is accounted for (issue 47): a section naming a
parent it may not name, one more than asked for and a repeat of another in the same
answer each get a history row, a refusal with its reason and a line in the next prompt's
feedback, named by history id; the one retry asks only for the unusable sections; a long
prediction is shown cut at a word, never inside one.

Real parts: the openai SDK against a loopback model server on 127.0.0.1, the loop, the
sandboxed evaluation on the CPU, SQLite, git."""

from __future__ import annotations

import re

from kernelloop.agents.llm import make_llm_agent
from kernelloop.history import open_task_memory
from kernelloop.loop import Options, run_loop
from kernelloop.loop.view import RunView
from kernelloop.task import load_task
from tests.agents.llm_loopback import ModelServer, Reply
from tests.loop.test_run import FAST, _task_copy

# A prediction far longer than the feedback's room for it, its words easy to check.
PREDICTION = " ".join(
    f"register{i} pressure drops under the 64K registers limit" for i in range(40)
)


def _section(n: int, direction: str, source: str, parent: str = "", predicted: str = "-5%") -> str:
    parent_line = f"Parent: {parent}\n" if parent else ""
    return (
        f"### Candidate {n}\nDirection: {direction}\n{parent_line}"
        f"Hypothesis: {direction}, fewer passes over DRAM.\nPredicted effect: {predicted}\n\n"
        f"```python\n{source}```\n"
    )


def _multi_path(fused: str) -> str:
    """The fused kernel with a second path for wide rows: `_wide_kernel` (the same body)
    where cols > 1024, so its compile facts differ by shape (BLOCK up to 32768)."""
    start = fused.index("@triton.jit")
    end = fused.index("def forward(")
    wide = fused[start:end].replace("def _fused_kernel(", "def _wide_kernel(")
    out = fused[:end] + wide + fused[end:]
    call = "    _fused_kernel[(rows,)]("
    assert call in out
    return out.replace(
        call, "    kernel = _fused_kernel if cols <= 1024 else _wide_kernel\n    kernel[(rows,)]("
    )


def _rows(task) -> list[tuple]:
    store, _ = open_task_memory(task)
    return store._conn.execute(
        "SELECT id, round, status, refused_reason, direction FROM proposals WHERE round > 0 "
        "ORDER BY id"
    ).fetchall()


def test_every_candidate_of_an_answer_gets_a_row_a_verdict_and_feedback(tmp_path):
    folder = _task_copy(tmp_path)
    fused = (folder / "candidates" / "fused_naive.py").read_text()
    four = fused.replace("NUM_WARPS = 8", "NUM_WARPS = 4")
    two = fused.replace("NUM_WARPS = 8", "NUM_WARPS = 2")
    multi = _multi_path(fused)
    first = (
        _section(1, "fewer warps on a parent it may not name", four, parent="#99")
        + _section(2, "fuse the three kernels", multi, predicted=PREDICTION)
        + _section(3, "fuse again, same file", multi)
    )
    # The retry asks for the unusable section only; the model names a bad parent again.
    retry = _section(1, "two warps on another parent it may not name", two, parent="#98")
    # Round 2: the same file again (a repeat of an idea already judged: refused, no run).
    again = _section(1, "fuse the three kernels once more", multi)
    server = ModelServer("openai").start()
    try:
        server.script.extend([Reply(first), Reply(retry), Reply(again), Reply(again)])
        task = load_task(folder)
        agent = make_llm_agent(
            "openai:gpt-4.1",
            task=task,
            base_url=server.url,
            env={"OPENAI_API_KEY": "sk-loop-test"},
            per_round=3,
            backoff_base_s=0.001,
            timeout_s=10.0,
        )
        options = Options(device="cpu", rounds=3, **FAST)
        summary = run_loop(task, agent, options, RunView(live_enabled=False))
    finally:
        server.stop()
    assert summary["status"] == "finished", summary
    assert len(server.received) == 4, [r.prompt_text()[-300:] for r in server.received]

    # The retry quotes the parent problem with the ids that may be named, and asks for
    # the unusable one only.
    fix = server.received[1].body["messages"][-1]["content"]
    assert "candidate 1: Parent #99 is not an earlier candidate judged correct" in fix, fix
    assert re.search(r"choose one of #\d+", fix), fix
    assert "send only 1 candidate(s) in place of the unusable" in fix, fix

    rows = _rows(task)
    r1 = [r for r in rows if r[1] == 1]
    assert len(r1) == 3, rows
    judged, repeat, bad_parent = r1
    assert judged[2] == "evaluated", judged
    assert repeat[2] == "refused" and f"same source as candidate #{judged[0]}" in repeat[3]
    assert bad_parent[2] == "refused" and "Parent #98 is not an earlier candidate" in bad_parent[3]
    assert re.search(r"choose one of #\d+", bad_parent[3]), bad_parent

    # Round 2's prompt tells the model what became of each of them, by history id.
    prompt = server.received[2].prompt_text()
    told = prompt.split("## What became of your candidates last round")[1].split("\n## ")[0]
    assert f"#{judged[0]} (fuse the three kernels)" in told, told
    assert "correct, not timed" in told, told
    assert f"#{repeat[0]} (fuse again, same file)" in told, told
    assert f"same source as candidate #{judged[0]}" in told, told
    assert f"#{bad_parent[0]} (two warps on another parent" in told, told
    assert "Parent #98 is not an earlier candidate judged correct; choose one of #" in told
    assert not re.search(r"^\d+\. ", told, re.M), told  # not numbered "1." and "2."
    # The long prediction is shown, cut at a word and marked, never inside a word.
    assert "you predicted: register0 pressure drops" in told, told
    # Compile facts per shape where they differ (issue 47: they came from the heaviest
    # shape only): the wide path at the wide shapes, the tile path at 65536x1024, the
    # block with the most spills first.
    assert "Compile facts (Triton, sm_90) by shape, the most spills first" in told, told
    facts = told.split("the most spills first")[1]
    assert "`_wide_kernel`" in facts and "`_fused_kernel`" in facts, facts
    lines = re.findall(r"^- ([^:]+): (.*)$", facts, re.M)
    assert lines[0][0] == "1024x32768" and "BLOCK=32768" in lines[0][1], lines
    assert "occupancy" in lines[0][1] and "spills 0 B" not in lines[0][1], lines
    assert "65536x1024" in [shapes for shapes, _ in lines], lines
    # The digest of the same prompt does not say those reasons a second time.
    digest = prompt.split("## History")[1].split("\n## ")[0]
    assert "Parent #98 is not an earlier candidate" not in digest, digest
    assert "timings on this device do not count" not in digest, digest
    assert "see last round's feedback" in digest, digest
    words = set(PREDICTION.split())
    for m in re.finditer(r"(\S+)…", told):
        assert m.group(1) in words or m.group(1) == "[", (m.group(0), told)

    # Round 3: round 1's compile facts are still there, in the digest (issue 47: they
    # vanished after one round).
    later = server.received[3].prompt_text().split("## History")[1].split("\n## ")[0]
    assert f"#{judged[0]} r1" in later, later
    assert "compile facts (sm_90): 1024x32768: `_wide_kernel`" in later, later
