"""What the agent reads each round: the loop fills the best's % of the roofline floor per
shape (it used to be read by the prompt but never filled), and the prompt shows it."""

from kernelloop.agents.llm.prompts import context_values, load_prompts
from kernelloop.loop.context import agent_context
from kernelloop.loop.state import Best
from kernelloop.objective import floor_pct, shape_rows

# A stored benchmark record and gate verdict, as the history keeps them (JSON).
BENCH = {
    "shapes": [
        {"shape": "16384x8192", "dtype": "bfloat16", "tag": "common", "weight": 0.6,
         "floor_ms": 0.20, "noise_rel": 0.004,
         "impls": {"candidate": {"median_ms": 0.365, "pct_of_floor": 54.8},
                   "baseline": {"median_ms": 1.29, "pct_of_floor": 15.5}}},
        {"shape": "1024x32768", "dtype": "bfloat16", "tag": "long_tail", "weight": 0.4,
         "floor_ms": 0.05, "noise_rel": 0.006,
         "impls": {"candidate": {"median_ms": 0.365, "pct_of_floor": 13.7},
                   "baseline": {"median_ms": 0.365, "pct_of_floor": 13.7}}},
    ]
}  # fmt: skip
GATE = {"shapes": [{"shape": "16384x8192", "speedup_vs_baseline": 3.53},
                   {"shape": "1024x32768", "speedup_vs_baseline": 1.0}]}  # fmt: skip


def test_the_prompt_shows_the_best_per_shape_percent_of_floor(flagship):
    rows = shape_rows(BENCH, GATE)
    best = Best(7, "def forward(x):\n    return x\n", None, 3.03, floor_pct(flagship, rows),
                shapes=rows)  # fmt: skip
    ctx = agent_context(flagship, "(nothing tried yet)", best, 2, 5)
    assert ctx.best_pct_of_floor == {"16384x8192": 54.8, "1024x32768": 13.7}
    assert (ctx.best_objective, ctx.best_id, ctx.rounds_left) == (3.03, "7", 4)
    prompt = load_prompts().render("propose", context_values(ctx, "4 rounds left"))
    assert (
        "3.030x the baseline's speed; 16384x8192: 55% of floor, 1024x32768: 14% of floor" in prompt
    )


def test_without_floors_the_prompt_says_the_distance_is_unknown(flagship):
    best = Best(1, "def forward(x):\n    return x\n", None, 1.0)
    ctx = agent_context(flagship, "", best, 1, 1)
    assert ctx.best_pct_of_floor == {}
    prompt = load_prompts().render("propose", context_values(ctx, "1 round left"))
    assert "distance to the roofline floor unknown" in prompt
