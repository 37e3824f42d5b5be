"""A round's reference cache (issue 13): every candidate of a round reuses the float64
references of the calls it shares with the others, the cache stays within its bytes,
and nothing a candidate does changes what it holds or what a verdict is."""

from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.values.judge import Judge
from kernelloop.evaluate.trusted.values.plan import Seeds, plan_calls
from kernelloop.evaluate.trusted.values.refcache import References
from tests.conftest import FLAGSHIP, FUSED

ONE = {"device": "cpu", "shapes": "7x129", "dtypes": ["float32"], "timing": False}
WRONG = Path(__file__).parents[1] / "cheats" / "candidates" / "one_pass_variance.py"


def test_a_round_computes_each_reference_once_and_verdicts_stay(flagship):
    refs = References()
    first = evaluate(flagship, FUSED, references=refs, **ONE)
    assert first.verdict.accepted, first.verdict.reasons
    after_first = refs.stats()
    # within one evaluation the calls that share inputs share their references
    assert after_first["hits"] > 0 and after_first["kept"] == after_first["misses"]
    assert after_first["bytes"] > 0
    second = evaluate(flagship, FLAGSHIP / "baseline.py", references=refs, **ONE)
    assert second.verdict.accepted, second.verdict.reasons
    now = refs.stats()
    assert now["misses"] == after_first["misses"]  # nothing computed again
    assert now["hits"] > after_first["hits"]
    # the same checks, on the same inputs, judged the same way (in the order the
    # workers sent them)
    assert sorted((c.suite, c.case, c.shape, c.dtype, c.passed) for c in first.checks) == sorted(
        (c.suite, c.case, c.shape, c.dtype, c.passed) for c in second.checks
    )
    # a wrong candidate judged against the warm cache is still wrong
    wrong = evaluate(flagship, WRONG, references=refs, **ONE)
    assert wrong.verdict.category == "wrong", wrong.verdict.reasons
    assert any("large_offset" in r for r in wrong.verdict.reasons)


def test_a_new_round_shares_nothing(flagship):
    a, b = References(), References()
    shapes = [flagship.find_shape("7x129")]
    ja, jb = Judge(flagship, "cpu", a), Judge(flagship, "cpu", b)
    # the call at p = 0 on random inputs (one reference; with p > 0 it is the kept/dropped
    # pair; which extreme calls run at p = 0 is drawn per plan)
    call_a = next(c for c in plan_calls(flagship, shapes, ["float32"], seeds=a.seeds).calls
                  if c.suite == "stochastic" and c.rate == 0)  # fmt: skip
    call_b = next(c for c in plan_calls(flagship, shapes, ["float32"], seeds=b.seeds).calls
                  if c.id == call_a.id)  # fmt: skip
    assert call_a.id == call_b.id and call_a.input_seed != call_b.input_seed
    ra, rb = ja.value_refs(call_a), jb.value_refs(call_b)
    assert not ra["ref"].equal(rb["ref"])
    assert a.stats()["misses"] == b.stats()["misses"] == 1


def test_the_key_holds_everything_the_reference_depends_on(flagship):
    refs = References(Seeds())
    judge = Judge(flagship, "cpu", refs)
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"], seeds=refs.seeds)
    call = next(c for c in plan.calls if c.case == "random" and c.rate == 0)
    base = judge.value_refs(call)["ref"]
    assert judge.value_refs(call)["ref"] is base and refs.stats()["hits"] == 1
    variants = [
        {"input_seed": call.input_seed + 1},
        {"case": "spike"},
        {"dtype": "float16"},
        {"params": {**call.params, "eps": 1e-3}},
    ]
    for change in variants:
        other = type(call)(**{**call.__dict__, **change})
        got = judge.value_refs(other)
        assert got.get("ref") is not base, change
        assert refs.stats()["hits"] == 1, change  # computed, not found
    # the stochastic pair (kept / dropped) is its own entry, never the plain reference
    stoch = next(c for c in plan.calls if c.suite == "stochastic" and c.rate > 0)
    assert set(judge.value_refs(stoch)) == {"keep", "drop"}


def test_the_cache_keeps_no_more_than_its_bytes(flagship):
    refs = References(max_bytes=7 * 129 * 8 * 2)  # room for two float64 7x129 references
    judge = Judge(flagship, "cpu", refs)
    plan = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"], seeds=refs.seeds)
    singles = [c for c in plan.calls if not c.group and c.rate == 0][:4]  # one reference each
    assert len(singles) == 4
    for c in singles:
        judge.value_refs(c)
    st = refs.stats()
    assert st["kept"] == 2 and st["not_kept"] == 2 and st["bytes"] <= refs.max_bytes
    # the first ones planned stay: a later candidate still finds them
    judge.value_refs(singles[0])
    judge.value_refs(singles[3])
    assert refs.stats()["hits"] == 1 and refs.stats()["not_kept"] == 3


def test_a_job_sent_elsewhere_takes_the_seeds_not_the_cache(flagship):
    import pickle

    refs = References(max_bytes=1 << 20)
    judge = Judge(flagship, "cpu", refs)
    call = plan_calls(flagship, [flagship.find_shape("7x129")], ["float32"], seeds=refs.seeds)
    judge.value_refs(next(c for c in call.calls if c.rate == 0))
    copy = pickle.loads(pickle.dumps(refs))
    assert copy.seeds.key == refs.seeds.key and copy.max_bytes == refs.max_bytes
    assert copy.stats() == {"kept": 0, "bytes": 0, "hits": 0, "misses": 0, "not_kept": 0}
