"""The cost ledger: one entry per model call, summed per model, per round and per run.

Token counts come from the responses' usage fields, never from estimates; prices from
the price table. `rows()` is what the history store records; `cascade_summary()` is what
the run summary prints to show what the cheap→strong cascade saved.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from kernelloop.agents.llm.prices import PriceTable
from kernelloop.agents.llm.providers import Completion, Usage


@dataclass(frozen=True)
class LedgerEntry:
    model: str
    provider: str
    round: int
    stage: str  # "propose", "screen", "final"; a parse-error retry adds "-retry"
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    latency_s: float
    attempts: int
    priced: bool

    @property
    def usage(self) -> Usage:
        return Usage(
            self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens
        )


@dataclass(frozen=True)
class Totals:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0

    def add(self, e: LedgerEntry) -> Totals:
        return Totals(
            self.calls + 1,
            self.input_tokens + e.input_tokens,
            self.output_tokens + e.output_tokens,
            self.cost_usd + e.cost_usd,
            self.latency_s + e.latency_s,
        )


@dataclass
class CostLedger:
    prices: PriceTable
    entries: list[LedgerEntry] = field(default_factory=list)

    def record(self, completion: Completion, round_index: int, stage: str) -> LedgerEntry:
        cost = self.prices.cost_usd(completion.model, completion.usage)
        u = completion.usage
        entry = LedgerEntry(
            model=completion.model,
            provider=completion.provider,
            round=round_index,
            stage=stage,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens,
            cost_usd=cost or 0.0,
            latency_s=completion.latency_s,
            attempts=completion.attempts,
            priced=cost is not None,
        )
        self.entries.append(entry)
        return entry

    @property
    def total_usd(self) -> float:
        return sum(e.cost_usd for e in self.entries)

    def total(self) -> Totals:
        t = Totals()
        for e in self.entries:
            t = t.add(e)
        return t

    def by_model(self) -> dict[str, Totals]:
        out: dict[str, Totals] = defaultdict(Totals)
        for e in self.entries:
            out[f"{e.provider}:{e.model}"] = out[f"{e.provider}:{e.model}"].add(e)
        return dict(out)

    def by_round(self) -> dict[int, Totals]:
        out: dict[int, Totals] = defaultdict(Totals)
        for e in self.entries:
            out[e.round] = out[e.round].add(e)
        return dict(out)

    def unpriced_models(self) -> list[str]:
        return sorted({f"{e.provider}:{e.model}" for e in self.entries if not e.priced})

    def rows(self, round_index: int | None = None) -> list[dict[str, object]]:
        """One plain dict per call (of one round, if given), for the history store."""
        return [asdict(e) for e in self.entries if round_index in (None, e.round)]

    def as_if_model_usd(self, model: str) -> float | None:
        """What the same calls (same token counts) would have cost at `model`'s price."""
        price = self.prices.price_for(model)
        if price is None:
            return None
        return sum(price.cost_usd(e.usage) for e in self.entries)

    def cascade_summary(self, final_model: str) -> dict[str, object]:
        """The cascade's spend against the strong model doing every call itself."""
        actual = self.total_usd
        strong_only = self.as_if_model_usd(final_model)
        saved = None if strong_only is None else strong_only - actual
        return {
            "cascade_usd": round(actual, 6),
            "strong_only_usd": None if strong_only is None else round(strong_only, 6),
            "saved_usd": None if saved is None else round(saved, 6),
            "saved_pct": (
                None if not strong_only or saved is None else round(100.0 * saved / strong_only, 1)
            ),
            "final_model": final_model,
            "unpriced_models": self.unpriced_models(),
        }

    def summary(self) -> dict[str, object]:
        """Per run, per model and per round totals, JSON-ready."""
        t = self.total()
        return {
            "calls": t.calls,
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
            "cost_usd": round(t.cost_usd, 6),
            "by_model": {k: asdict(v) for k, v in self.by_model().items()},
            "by_round": {str(k): asdict(v) for k, v in sorted(self.by_round().items())},
            "unpriced_models": self.unpriced_models(),
            "price_sources": list(self.prices.sources),
        }
