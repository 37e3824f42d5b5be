"""The tuner: rule-driven single-literal edits that pass the policy, never repeated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.agents.base import Agent, AgentContext
from kernelloop.agents.tuner import TunerAgent, find_tunables
from kernelloop.agents.tuner_table import DEFAULT_TABLE, Rule, TunerRulesError, load_table
from kernelloop.errors import KernelloopError
from kernelloop.policy import check_proposal, refusals
from kernelloop.task.load import Task, load_task
from kernelloop.task.spec import Rules

FIXTURES = Path(__file__).parent / "fixtures"
FUSED = (FIXTURES / "fused_rowwise.py").read_text()
TUNABLES = ["ROWS_PER_PROGRAM", "NUM_WARPS", "NUM_STAGES"]
REGISTER_BOUND = {
    "occupancy_limiter": "registers",
    "registers_per_thread": 168,
    "achieved_occupancy_pct": 18.5,
}


def make_task(folder: Path, tunables: list[str] = TUNABLES, baseline: str = FUSED) -> Task:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "baseline.py").write_text(baseline)
    (folder / "reference.py").write_text(
        "def reference(x, residual, weight, bias, *, p, eps, seed, keep_mask):\n    ...\n"
    )
    (folder / "inputs.py").write_text("def make_inputs(shape, dtype, device, gen):\n    ...\n")
    (folder / "task.toml").write_text(
        f"""dtypes = ["float32"]
[task]
name = "rowwise"
tunables = {tunables!r}
[tolerances]
float32 = {{ atol = 1e-6, rtol = 1e-5 }}
[[shapes]]
dims = {{ rows = 4096, cols = 8000 }}
[[cpu_shapes]]
dims = {{ rows = 6, cols = 100 }}
[roofline]
bytes = "3 * rows * cols * elem_size"
"""
    )
    return load_task(folder)


def context(best: str, metrics: dict | None = None) -> AgentContext:
    return AgentContext(
        task_name="rowwise", task_description="", language="triton", entry="forward",
        best_source=best, best_id="b0", profile_summary="", history_digest="", rules_text="",
        round_index=0, rounds_left=8, profile_metrics=metrics or {},
    )  # fmt: skip


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path / "task")


def test_register_bound_profile_fires_the_rule_and_edits_one_literal(task):
    agent = TunerAgent(task, per_round=2)
    assert isinstance(agent, Agent) and agent.name == "tuner"
    first, second = agent.propose(context(FUSED, REGISTER_BOUND))
    assert (
        "NUM_WARPS = 4\n" in first.source
        and first.direction == "register-limited occupancy: NUM_WARPS down"
    )
    assert "168 per thread" in first.hypothesis and "NUM_WARPS 8 -> 4" in first.hypothesis
    assert first.predicted_effect and first.agent == "tuner"
    # Every other byte is the parent's: the diff is exactly the one literal.
    assert first.source == FUSED.replace("NUM_WARPS = 8", "NUM_WARPS = 4", 1)
    # No role "block" among the tunables, so the rule's second move does not apply;
    # the next proposal is the neighbourhood search.
    assert second.direction.startswith("neighbourhood search")


def test_without_metrics_it_steps_then_sweeps_until_exhausted(task):
    agent = TunerAgent(task, per_round=1)
    sources, hypotheses = [], []
    while batch := agent.propose(context(FUSED)):
        assert len(batch) == 1
        agent.observe(batch[0], "rejected (slower): 0.97x")
        sources.append(batch[0].source)
        hypotheses.append(batch[0].hypothesis)
    # First the six single-notch neighbours (ROWS_PER_PROGRAM 4 -> 8, 2; NUM_WARPS 8 -> 16,
    # 4; NUM_STAGES 2 -> 3, 1), each with no metrics to go on or reversing the one just
    # measured slower ...
    for h in hypotheses[:6]:
        assert "no profile metrics" in h or "measured slower" in h, h
    # ... then the sweep: every value within two notches (ROWS 1..16, WARPS 2..32, STAGES
    # 1..4), at most two tunables at a time (4+4+3 single changes, 4*4+4*3+4*3 pairs = 51
    # configs, 48 three-way ones pruned), minus the six already sent.
    assert all(h.startswith("Sweep config") for h in hypotheses[6:])
    assert "48 more than 2 tunables changed" in hypotheses[6]
    assert len(sources) == len(set(sources)) == 51
    assert FUSED not in sources
    assert agent.propose(context(FUSED)) == []


def test_every_proposal_passes_the_policy_with_the_locks_on(task):
    agent = TunerAgent(task, per_round=10)
    proposals = agent.propose(context(FUSED, {"waves_per_sm": 0.6, "dram_throughput_pct": 41.0}))
    assert proposals
    for p in proposals:
        assert refusals(check_proposal(Rules(max_edit_points=1), FUSED, p.source, "forward")) == []


def test_an_accepted_direction_is_continued_and_a_failed_one_tried_last(task):
    agent = TunerAgent(task, per_round=1)
    (up,) = agent.propose(context(FUSED))
    assert up.direction == "neighbourhood search: ROWS_PER_PROGRAM up"
    agent.observe(up, "promoted: 1.06x over the best")
    (again,) = agent.propose(context(up.source))
    assert "ROWS_PER_PROGRAM = 16" in again.source and "just gained" in again.hypothesis
    agent.observe(again, "rejected (slower)")
    # From the same best, ROWS_PER_PROGRAM up has now failed: other tunables come first.
    (nxt,) = agent.propose(context(up.source))
    assert not nxt.direction.endswith("ROWS_PER_PROGRAM up")


def test_a_move_measured_slower_is_followed_by_the_opposite_one(task):
    agent = TunerAgent(task, per_round=1)
    (first,) = agent.propose(context(FUSED))
    tunable, step = first.direction.split(": ")[1].split()
    agent.observe(
        first,
        "rejected: weighted geomean speedup 0.9532x over the best does not beat the required "
        "1.0050x",
    )
    (nxt,) = agent.propose(context(FUSED))
    assert nxt.direction.endswith(f"{tunable} {'up' if step == 'down' else 'down'}"), nxt.direction
    assert "measured slower" in nxt.hypothesis
    # A correctness rejection says nothing about speed: no reversal.
    agent2 = TunerAgent(task, per_round=1)
    (first2,) = agent2.propose(context(FUSED))
    agent2.observe(
        first2, "rejected: extreme/large_offset 7x129 float32: 3 of 903 elements outside atol"
    )
    (nxt2,) = agent2.propose(context(FUSED))
    assert "measured slower" not in nxt2.hypothesis
    # Nor does a correct candidate whose timings do not count (the interpreter on a CPU).
    agent3 = TunerAgent(task, per_round=1)
    (first3,) = agent3.propose(context(FUSED))
    agent3.observe(
        first3,
        "judged correct, not timed: timings on this device do not count (interpreter): "
        "a speedup can only be accepted from GPU measurements",
    )
    (nxt3,) = agent3.propose(context(FUSED))
    assert "measured slower" not in nxt3.hypothesis


def test_it_never_proposes_a_previous_best(task):
    agent = TunerAgent(task, per_round=1)
    (up,) = agent.propose(context(FUSED))
    agent.observe(up, "promoted")
    seen: list[str] = []
    while batch := agent.propose(context(up.source)):
        seen += [p.source for p in batch]
    assert FUSED not in seen  # going back down to ROWS_PER_PROGRAM = 4 is the old best


def test_same_inputs_give_the_same_proposals(task):
    runs = []
    for _ in range(2):
        agent = TunerAgent(task, per_round=3)
        runs.append(
            [(p.source, p.hypothesis) for p in agent.propose(context(FUSED, REGISTER_BOUND))]
        )
    assert runs[0] == runs[1] and len(runs[0]) == 3


def test_literal_edits_survive_crlf_and_non_ascii(tmp_path):
    src = (
        "# é kernel ✓\r\nNUM_WARPS = 8  # ❤ tuned\r\nNUM_STAGES: int = 2\r\n\r\n"
        "def forward(x):\r\n    return x\r\n"
    )
    task = make_task(tmp_path / "t", ["NUM_WARPS", "NUM_STAGES", "MISSING"], baseline=src)
    lits = find_tunables(src, task.spec.task.tunables)
    assert (
        list(lits) == ["NUM_WARPS", "NUM_STAGES"]
        and src[lits["NUM_WARPS"].start : lits["NUM_WARPS"].end] == "8"
    )
    props = TunerAgent(task, per_round=9).propose(context(src))
    assert {p.source for p in props} >= {
        src.replace("= 8  #", "= 16  #"),
        src.replace("int = 2", "int = 3"),
    }
    for p in props:
        assert p.source.count("\r\n") == src.count("\r\n") and "❤ tuned" in p.source


def test_a_task_rule_table_overrides_the_default_and_bad_tables_name_the_field(task):
    (task.folder / "tuner_rules.toml").write_text(
        '[[roles]]\nname = "warps"\nmatch = ["NUM_WARPS"]\nmin = 4\nmax = 8\n[[rules]]\n'
        'name = "hot"\nwhen = ["alu_pipe_pct > 90"]\nmoves = [{ role = "warps", step = "down" }]\n'
        'hypothesis = "ALU at {alu_pipe_pct}%, {missing}"\npredicted_effect = "faster"\n'
    )
    agent = TunerAgent(task, per_round=9)
    props = agent.propose(context(FUSED, {"alu_pipe_pct": 95.0}))
    # Only NUM_WARPS has a role in this table, and 16 is outside its range.
    assert [p.hypothesis for p in props] == ["ALU at 95%, not measured"]
    (task.folder / "tuner_rules.toml").write_text(
        '[[roles]]\nname = "w"\nmatch = ["*"]\nmin = 1\nmax = 8\n'
        '[[rules]]\nname = "x"\nwhen = ["occupancy is low"]\n'
        'moves = [{ role = "w", step = "up" }]\nhypothesis = "h"\npredicted_effect = "e"\n'
    )
    with pytest.raises(TunerRulesError, match=r"tuner_rules.toml: field 'rules.0.when'") as err:
        TunerAgent(task)
    assert isinstance(err.value, KernelloopError)
    bad_template = (
        (task.folder / "tuner_rules.toml").read_text().replace('"occupancy is low"', '"a > 1"')
    )
    (task.folder / "tuner_rules.toml").write_text(
        bad_template.replace('hypothesis = "h"', 'hypothesis = "{0}"')
    )
    with pytest.raises(TunerRulesError, match=r"field 'rules.0.hypothesis'"):
        TunerAgent(task)


def test_it_tunes_the_flagship_baseline_within_its_rules():
    flagship = load_task(Path(__file__).parents[2] / "examples" / "ln_softmax_dropout")
    base = flagship.baseline_path.read_text()
    props = TunerAgent(flagship, per_round=20).propose(
        context(base, {"occupancy_limiter": "registers"})
    )
    assert len(props) >= 4
    for p in props:
        assert (
            refusals(check_proposal(flagship.spec.rules, base, p.source, flagship.spec.task.entry))
            == []
        )


def test_a_tuned_kernel_still_computes_the_op(task, tmp_path):
    """The edit is real: the tuned source runs under Triton's interpreter and matches torch."""
    (p,) = TunerAgent(task).propose(context(FUSED, REGISTER_BOUND))
    (tmp_path / "cand.py").write_text(p.source)
    script = """
import torch, cand
torch.manual_seed(0)
x, r, w, b = torch.randn(7, 100), torch.randn(7, 100), torch.randn(100), torch.randn(100)
out = cand.forward(x, r, w, b, p=0.0, eps=1e-5, seed=3)
ref = torch.softmax(torch.nn.functional.layer_norm(x, (100,), w, b, 1e-5), -1) + r
assert cand.NUM_WARPS == 4
print((out - ref).abs().max().item())
"""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.strip()) < 1e-5


@pytest.mark.parametrize(
    "metrics,direction",
    [
        (
            {"occupancy_limiter": "registers, shared memory"},
            "register-limited occupancy: NUM_WARPS down",
        ),
        (
            {"occupancy_limiter": "shared memory"},
            "shared-memory-limited occupancy: NUM_STAGES down",
        ),
        ({"spills": 12}, "register spills: ROWS_PER_PROGRAM down"),
        ({"waves_per_sm": 0.8}, "tail effect: ROWS_PER_PROGRAM down"),
        (
            {"dram_throughput_pct": 38.0, "alu_pipe_pct": 9.0},
            "memory-bound, bandwidth not saturated: ROWS_PER_PROGRAM up",
        ),
        ({"dram_throughput_pct": 38.0}, "neighbourhood search: ROWS_PER_PROGRAM up"),
        ({"top_stall": "long_scoreboard"}, "memory latency stalls: NUM_STAGES up"),
        ({"occupancy_limiter": "blocks per SM"}, "block-count-limited occupancy: NUM_WARPS up"),
        ({"waves_per_sm": 3.0, "spills": 0}, "neighbourhood search: ROWS_PER_PROGRAM up"),
    ],
)
def test_the_shipped_table_maps_symptoms_to_moves(task, metrics, direction):
    (p,) = TunerAgent(task).propose(context(FUSED, metrics))
    assert p.direction == direction


def test_conditions_compare_numbers_and_words():
    table = load_table(DEFAULT_TABLE)
    rule = Rule.model_validate(
        {**table.rules[0].model_dump(), "when": ["a >= 2", "b == Registers", "c != 3"]}
    )
    assert rule.fires({"a": 2, "b": "registers", "c": 4.0})
    assert not rule.fires({"a": 2, "b": "registers", "c": "3"})
    assert not rule.fires(
        {"a": "high", "b": "registers", "c": 4}
    )  # a word never compares as a number
    assert not rule.fires({"b": "registers", "c": 4})  # a missing metric never fires


def test_a_metric_the_profile_lacks_reads_not_measured_in_the_hypothesis(task):
    # On a CPU the compiler gives registers but no achieved occupancy.
    first = TunerAgent(task, per_round=1).propose(
        context(FUSED, {"occupancy_limiter": "registers", "registers_per_thread": 168})
    )[0]
    assert "theoretical occupancy not measured, achieved not measured)" in first.hypothesis
    assert "?" not in first.hypothesis and "%" not in first.hypothesis
