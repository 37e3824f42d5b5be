"""The price table: USD per million tokens per model, from a TOML data file.

The bundled `prices.toml` is the default; a user file (an explicit path or
$KERNELLOOP_PRICES) is laid over it key by key, so a team can correct one price or add a
self-hosted model without copying the whole table.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelloop.agents.llm.errors import PriceTableError
from kernelloop.agents.llm.providers import Usage

PRICES_ENV = "KERNELLOOP_PRICES"


class Price(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost_usd(self, usage: Usage) -> float:
        plain = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            plain * self.input
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
            + usage.output_tokens * self.output
        ) / 1e6


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, Price] = Field(default_factory=dict)


@dataclass(frozen=True)
class PriceTable:
    prices: Mapping[str, Price]
    sources: tuple[str, ...] = ()

    def price_for(self, model: str) -> Price | None:
        """Exact name first, then the longest `prefix*` key that matches."""
        if model in self.prices:
            return self.prices[model]
        best: tuple[int, Price] | None = None
        for key, price in self.prices.items():
            if key.endswith("*") and model.startswith(key[:-1]):
                if best is None or len(key) > best[0]:
                    best = (len(key), price)
        return best[1] if best else None

    def cost_usd(self, model: str, usage: Usage) -> float | None:
        """None when the model has no price (the ledger then flags it as unpriced)."""
        price = self.price_for(model)
        return None if price is None else price.cost_usd(usage)


def _read(text: str, where: str) -> dict[str, Price]:
    try:
        data = tomllib.loads(text)
        return dict(_PriceFile.model_validate(data).models)
    except tomllib.TOMLDecodeError as e:
        raise PriceTableError(f"{where} is not valid TOML ({e}); fix the syntax.") from e
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise PriceTableError(
            f"{where}: field {field!r}: {err['msg']}; write each model as "
            '[models."NAME"] input = USD_PER_MTOK, output = USD_PER_MTOK.'
        ) from e


def load_price_table(
    path: str | Path | None = None, env: Mapping[str, str] | None = None
) -> PriceTable:
    env = os.environ if env is None else env
    bundled = resources.files("kernelloop.agents.llm").joinpath("prices.toml")
    prices = _read(bundled.read_text(encoding="utf-8"), "the bundled prices.toml")
    sources = ["bundled prices.toml"]
    user = path or env.get(PRICES_ENV)
    if user:
        p = Path(user)
        if not p.is_file():
            raise PriceTableError(
                f"price table {p} does not exist; fix the path (or unset {PRICES_ENV})."
            )
        prices.update(_read(p.read_text(encoding="utf-8"), str(p)))
        sources.append(str(p))
    return PriceTable(prices=prices, sources=tuple(sources))
