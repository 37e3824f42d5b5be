"""A stand-in for the loop's history writes, run as a real process so tests can SIGKILL it.

usage: crash_writer.py DB rounds|stream|resume
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from kernels import SOFTMAX_PARENT, with_block  # noqa: E402
from records import make_record  # noqa: E402

from kernelloop.history import HistoryStore  # noqa: E402

TASK = "softmax"
LAST_ROUND = 5


def say(*words: object) -> None:
    print(*words, flush=True)  # printed only after the write returned (= committed)


def evaluate(
    store: HistoryStore, run: int, rnd: int, pid: int, best: tuple[int, float]
) -> tuple[int, float]:
    objective = 1.0 + 0.1 * rnd if pid % 2 else 0.9
    accepted = objective > best[1]
    store.add_evaluation(
        pid,
        make_record(accepted, "accepted" if accepted else "slower"),
        objective=objective,
        per_shape={"4096x8000": objective},
    )
    if accepted:
        store.set_best(run, pid)
        best = (pid, objective)
    say("EVALUATED", pid)
    return best


def propose(store: HistoryStore, run: int, rnd: int, k: int, parent: int) -> int:
    src = with_block(SOFTMAX_PARENT, 1024 * (rnd + 1) + k)
    pid = store.add_proposal(
        run, rnd, k=k, source=src, hypothesis=f"BLOCK for r{rnd}-{k}", parent_id=parent
    )
    store.add_model_call(run, rnd, "cheap", "openai", 100, 50, 0.001, 0.5, proposal_id=pid)
    return pid


def rounds(store: HistoryStore) -> None:
    run = store.start_run(TASK, "digest1", agent="scripted", arch="sm_90")
    base = store.add_proposal(run, 0, source=SOFTMAX_PARENT, hypothesis="baseline")
    best = evaluate(store, run, 0, base, (0, 0.0))
    for rnd in range(1, LAST_ROUND + 1):
        store.start_round(run, rnd)
        for k in (1, 2):
            pid = propose(store, run, rnd, k, best[0])
            if rnd == 4 and k == 2:
                say("IN_FLIGHT", pid)
                time.sleep(120)  # "benchmarking" when the SIGKILL arrives
            best = evaluate(store, run, rnd, pid, best)
        store.finish_round(run, rnd)
        say("ROUND_DONE", rnd)


def stream(store: HistoryStore) -> None:
    run = store.start_run(TASK, "digest1")
    rnd = 0
    while True:
        rnd += 1
        store.start_round(run, rnd)
        pid = propose(store, run, rnd, 1, None)
        say("PROPOSED", pid)
        store.add_evaluation(pid, make_record(), objective=1.0, per_shape={})
        say("EVALUATED", pid)
        store.finish_round(run, rnd)


def resume(store: HistoryStore) -> None:
    state = store.find_resumable_run(TASK)
    assert state is not None
    best = (state.best_proposal_id, state.best_objective)
    done = {(a.round, a.k) for a in state.attempts}
    for a in state.in_flight:  # the evaluation lost to the kill is redone, nothing else
        best = evaluate(store, state.run_id, a.round, a.id, best)
        done.add((a.round, a.k))
    for rnd in range(state.next_round, LAST_ROUND + 1):
        store.start_round(state.run_id, rnd)
        for k in (1, 2):
            if (rnd, k) not in done:
                best = evaluate(
                    store, state.run_id, rnd, propose(store, state.run_id, rnd, k, best[0]), best
                )
        store.finish_round(state.run_id, rnd)
        say("ROUND_DONE", rnd)
    store.finish_run(state.run_id, "finished")


if __name__ == "__main__":
    with HistoryStore.open(sys.argv[1]) as s:
        {"rounds": rounds, "stream": stream, "resume": resume}[sys.argv[2]](s)
