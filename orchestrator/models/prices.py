"""What model calls cost in money: a small table of list prices, and the cost of one call.

Prices are US dollars per million tokens, as the providers list them for their common models
(checked 2026-11; `PRICES_CHECKED`): input, cached input (a prompt-cache read), cache write,
output. A model the table does not know has no price: its calls show tokens only, never a
made-up cost. A user's table (a YAML or JSON file, or a job spec's `prices:`) goes over it:

    anthropic:claude-sonnet-4-6: {input: 3, cached_input: 0.3, cache_write: 3.75, output: 15}
    openai-compatible:qwen3: {input: 0, output: 0}     # a local server: free

A name matches exactly, or without a date suffix (`claude-sonnet-4-5-20250929` is priced as
`claude-sonnet-4-5`). Cache writes are priced at the 5-minute rate (1.25x input); a model with
`cache_ttl: 1h` has its writes priced at twice its input price, as Anthropic bills them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from ..messages import Usage
from ..security.inputs import JsonInputError, YamlInputError, load_json, load_yaml
from ..security.inventory import reads

PRICES_CHECKED = "2026-11"
_DATED = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


class Price(BaseModel):
    """A model's price in US dollars per million tokens. Cached input defaults to the input
    price (no discount known), a cache write to the input price too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)

    def cost(self, usage: Usage) -> float:
        """What a call (or a sum of calls) with this usage costs, in US dollars."""
        read = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        total = (
            usage.uncached_input_tokens * self.input
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
            + usage.output_tokens * self.output
        )
        return total / 1_000_000

    def most(self, input_tokens: int, output_tokens: int) -> float:
        """The most a call could cost: all of its input uncached (or written to the cache,
        if that costs more) and all of its output allowance used."""
        dearest = max(self.input, self.cache_write or 0.0)
        return (input_tokens * dearest + output_tokens * self.output) / 1_000_000


def _price(input: float, output: float, read: float, write: float | None = None) -> Price:
    return Price(input=input, output=output, cached_input=read, cache_write=write)


DEFAULT_PRICES: dict[str, Price] = {
    "anthropic:claude-opus-4-6": _price(5, 25, 0.5, 6.25),
    "anthropic:claude-opus-4-5": _price(5, 25, 0.5, 6.25),
    "anthropic:claude-opus-4-1": _price(15, 75, 1.5, 18.75),
    "anthropic:claude-opus-4": _price(15, 75, 1.5, 18.75),
    "anthropic:claude-sonnet-4-6": _price(3, 15, 0.3, 3.75),
    "anthropic:claude-sonnet-4-5": _price(3, 15, 0.3, 3.75),
    "anthropic:claude-sonnet-4": _price(3, 15, 0.3, 3.75),
    "anthropic:claude-haiku-4-5": _price(1, 5, 0.1, 1.25),
    "anthropic:claude-3-5-haiku": _price(0.8, 4, 0.08, 1.0),
    "openai:gpt-5": _price(1.25, 10, 0.125),
    "openai:gpt-5-mini": _price(0.25, 2, 0.025),
    "openai:gpt-5-nano": _price(0.05, 0.4, 0.005),
    "openai:gpt-4.1": _price(2, 8, 0.5),
    "openai:gpt-4.1-mini": _price(0.4, 1.6, 0.1),
    "openai:gpt-4.1-nano": _price(0.1, 0.4, 0.025),
    "openai:gpt-4o": _price(2.5, 10, 1.25),
    "openai:gpt-4o-mini": _price(0.15, 0.6, 0.075),
    "openai:o3": _price(2, 8, 0.5),
    "openai:o4-mini": _price(1.1, 4.4, 0.275),
    "deepseek:deepseek-chat": _price(0.28, 0.42, 0.028),
    "deepseek:deepseek-reasoner": _price(0.28, 0.42, 0.028),
}


class PriceTable:
    """Prices by model string; `overrides` go over the defaults."""

    def __init__(
        self, overrides: Mapping[str, Price] | None = None, *, defaults: bool = True
    ) -> None:
        self.prices = {**(DEFAULT_PRICES if defaults else {}), **(overrides or {})}

    def get(self, model: str) -> Price | None:
        """The price of `provider:model`, or None when it is not known."""
        found = self.prices.get(model)
        if found is None and _DATED.search(model):
            found = self.prices.get(_DATED.sub("", model))
        return found

    def over(self, overrides: Mapping[str, Price]) -> PriceTable:
        """This table with `overrides` over it."""
        table = PriceTable(defaults=False)
        table.prices = {**self.prices, **overrides}
        return table


def parse_prices(data: object, source: str = "prices") -> dict[str, Price]:
    """`{"provider:model": {input, output, cached_input?, cache_write?}}` as prices (a key is
    a model's name as runs record it: `scripted` prices the scripted model); a ConfigError
    names the entry that is wrong."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of model strings to prices")
    prices: dict[str, Price] = {}
    for name, value in data.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(
                f"{source}: {name!r}: a price is keyed by its model, 'provider:model'"
            )
        try:
            prices[name] = Price.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"{source}: {name}: {problems}") from None
    return prices


@reads("file a spec names")
def load_prices(path: str | Path) -> dict[str, Price]:
    """A price file (YAML or JSON) as prices."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    try:
        is_json = path.suffix == ".json"
        data: Any = load_json(text, str(path)) if is_json else load_yaml(text, str(path))
    except JsonInputError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.detail})") from None
    except YamlInputError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc.detail})") from None
    return parse_prices(data or {}, str(path))


STANDARD_PRICES = PriceTable()


def unpriced(model: str) -> ConfigError:
    """The error for a money-capped run on a model without a price: it names each way to give
    one, a job's, an orchestrator's and an agent's own."""
    return ConfigError(
        f"the budget caps money (max_cost_usd), but model {model!r} has no price; give it one "
        "under prices: in the job spec, as Orchestrator(prices={...}), or for an Agent as its "
        "model PricedModel(model, Price(input=..., output=...)) (orchestrator.models; US "
        "dollars per million tokens)"
    )
