"""The scripted agent: a folder of candidates replayed in order with their claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.agents.base import Agent, AgentContext
from kernelloop.agents.scripted import ScriptedAgent, ScriptError
from kernelloop.errors import KernelloopError

FIXTURES = Path(__file__).parent / "fixtures"
FUSED = (FIXTURES / "fused_rowwise.py").read_text()
SPLIT = (FIXTURES / "split_rowwise.py").read_text()
CTX = AgentContext(
    task_name="rowwise", task_description="", language="triton", entry="forward",
    best_source=SPLIT, best_id="b0", profile_summary="", history_digest="", rules_text="",
    round_index=0, rounds_left=8,
)  # fmt: skip


def write_script(folder: Path) -> Path:
    folder.mkdir()
    (folder / "01_fused.py").write_text(FUSED)
    (folder / "01_fused.toml").write_text(
        'hypothesis = "One launch instead of three: the intermediates stay in registers."\n'
        'predicted_effect = "about 3x less DRAM traffic"\ndirection = "fusion"\n'
    )
    header = (
        '"""Hypothesis: Eight warps per row keep more loads in flight\n'
        "    on rows of 8000 columns.\nPredicted effect: DRAM throughput up\n"
        "Direction: occupancy\n\n"
        'Free text after a blank line is not part of the claim.\n"""\n'
    )
    (folder / "02_more_warps.py").write_text(
        header + FUSED.replace("NUM_WARPS = 8", "NUM_WARPS = 16")
    )
    # A deliberately broken candidate (the gate must reject it) still carries its claim.
    (folder / "03_broken.py").write_text(
        '"""Hypothesis: this one does not compile."""\ndef forward(:\n'
    )
    (folder / "_helper.py").write_text("# not a candidate\n")
    return folder


def test_replays_candidates_in_order_with_their_claims(tmp_path):
    agent = ScriptedAgent(write_script(tmp_path / "script"))
    assert isinstance(agent, Agent) and agent.name == "scripted"
    (a,) = agent.propose(CTX)
    assert a.source == FUSED and a.direction == "fusion" and a.agent == "scripted"
    assert (
        a.hypothesis.startswith("One launch") and a.predicted_effect == "about 3x less DRAM traffic"
    )
    (b,) = agent.propose(CTX)
    assert b.hypothesis == "Eight warps per row keep more loads in flight on rows of 8000 columns."
    assert b.predicted_effect == "DRAM throughput up" and b.direction == "occupancy"
    assert "NUM_WARPS = 16" in b.source
    (c,) = agent.propose(CTX)
    assert c.hypothesis == "this one does not compile." and c.predicted_effect == ""
    assert agent.propose(CTX) == [] and agent.propose(CTX) == []
    agent.observe(a, "accepted: 2.9x")
    assert agent.outcomes == [(a, "accepted: 2.9x")]


def test_several_per_round(tmp_path):
    agent = ScriptedAgent(write_script(tmp_path / "s"), per_round=2)
    assert [len(agent.propose(CTX)) for _ in range(3)] == [2, 1, 0]


@pytest.mark.parametrize(
    "files,message",
    [
        ({"01_a.py": "x = 1\n"}, r"01_a.py \(docstring header\): field 'hypothesis'"),
        (
            {"01_a.py": "x = 1\n", "01_a.toml": 'hypothesis = "h"\nhypotesis = "typo"\n'},
            r"01_a.toml: field 'hypotesis'",
        ),
        ({"01_a.py": "x = 1\n", "01_a.toml": "hypothesis = \n"}, r"01_a.toml: not valid TOML"),
        ({"notes.txt": "no candidates"}, r"no candidate .py files"),
    ],
)
def test_unusable_scripts_are_refused_with_the_file_and_the_fix(tmp_path, files, message):
    folder = tmp_path / "s"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    with pytest.raises(ScriptError, match=message) as err:
        ScriptedAgent(folder)
    assert isinstance(err.value, KernelloopError)


def test_a_missing_folder_is_a_usage_error(tmp_path):
    with pytest.raises(ScriptError, match="no such folder"):
        ScriptedAgent(tmp_path / "nope")
