"""What a sweep costs: a prices table per model and the arithmetic over token counts.

Prices are USD per million tokens: input (uncached prompt), output, cache read and cache write
(prompt caching bills the tokens it stores and serves differently). The shipped table holds the
providers' list prices for common models as published in 2025; prices change, so a config
overrides them: a model entry's ``price: {input, output, cache_read, cache_write}`` or a
top-level ``prices: {<model name or id>: {...}}``. A model with no price is reported with its
tokens and no cost, never with a guessed one.

A request a provider's batch API served pays its provider's batch factor of every price, cache
reads and writes included: 0.5 for OpenAI, Anthropic and Gemini as published (the provider
registry's ``ProviderKind.batch_factor``, handed in as ``PriceTerms``: this leaf names no provider);
``price: {batch: f}`` or ``prices: {batch_factor: {<provider>: f}}`` overrides it. The discount follows the request, not
the model: a batched model's request retried interactively after a batch failure pays the full
price, so a record carries which part of its tokens rode in batches (``usage.batch_*``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any


@dataclass(slots=True, frozen=True)
class Price:
    input: float
    output: float
    cache_read: float | None = None
    """Defaults to the input price (no discount) when a provider publishes none."""
    cache_write: float | None = None
    """Defaults to the input price (no surcharge)."""
    batch: float | None = None
    """The share of these prices a batched request pays: an entry's own override of its provider's
    (``PriceTerms.batch_factor``); ``model_prices`` fills it in for every batched entry."""

    @classmethod
    def from_config(cls, spec: dict[str, Any], where: str) -> Price:
        unknown = set(spec) - {"input", "output", "cache_read", "cache_write", "batch"}
        if unknown or "input" not in spec or "output" not in spec:
            raise ValueError(f"{where}: a price needs input and output (USD per million tokens) and may have "
                             f"cache_read, cache_write, batch; got {sorted(spec)}")
        return cls(**{k: float(v) for k, v in spec.items()})


@dataclass(slots=True, frozen=True)
class PriceTerms:
    """What an entry's provider says of its bill: ``providers.registry.price_terms`` answers for each entry."""

    free: bool = False
    """Served by the sweep itself (the embedded sim): no cost, whatever its model id."""
    batch_factor: float | None = None
    """The share of the interactive price its batch API charges; None: ``DEFAULT_BATCH_FACTOR``."""


DEFAULT_BATCH_FACTOR = 0.5


# Longest matching prefix of the served model id wins ("gpt-4o-mini-2024-07-18" -> "gpt-4o-mini").
PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4o": Price(2.50, 10.0, 1.25),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "o3": Price(2.0, 8.0, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.025),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
}


def lookup(model_id: str, table: dict[str, Price] | None = None) -> Price | None:
    """The price of the longest table key that prefixes ``model_id`` (case-insensitive)."""
    table = PRICES if table is None else table
    mid = model_id.lower().rsplit("/", 1)[-1]  # "anthropic/claude-..." gateway ids
    best = max((k for k in table if mid.startswith(k.lower())), key=len, default=None)
    return table[best] if best is not None else None


def price_for(name: str, spec: dict[str, Any], overrides: dict[str, Any] | None = None,
              free: bool = False) -> Price | None:
    """A model entry's price: its own ``price:``, then the config's ``prices:`` by name or id, then the table.

    ``free``: the entry costs nothing whatever its model id (``PriceTerms.free``: the embedded sim).
    """
    if spec.get("price"):
        return Price.from_config(dict(spec["price"]), f"model {name}: price")
    model_id = str(spec.get("model", name))
    for key in (name, model_id):
        if overrides and key in overrides:
            return Price.from_config(dict(overrides[key]), f"prices.{key}")
    if free:
        return None
    return lookup(model_id)


TOKEN_KINDS = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")
BATCH_TOKENS = tuple(f"batch_{k}" for k in TOKEN_KINDS)
"""A record's ``usage.batch_prompt_tokens`` and so on: the part of each count a batch API billed."""


def cost_usd(usage: dict[str, Any], price: Price) -> float:
    """USD for token counts in record form (prompt_tokens counts cached tokens too).

    The ``batch_*`` parts are charged ``price.batch`` of the price (``DEFAULT_BATCH_FACTOR`` when
    unset), the rest in full: a batched model's interactive fallbacks are full price.
    """
    full = _cost({k: usage.get(k) for k in TOKEN_KINDS}, price)
    batched = {k: usage.get(b) for k, b in zip(TOKEN_KINDS, BATCH_TOKENS, strict=True)}
    if not any(batched.values()):
        return full
    factor = DEFAULT_BATCH_FACTOR if price.batch is None else price.batch
    return full - (1.0 - factor) * _cost(batched, price)


def _cost(usage: dict[str, Any], price: Price) -> float:
    prompt = int(usage.get("prompt_tokens") or 0)
    read = int(usage.get("cache_read_tokens") or 0)
    write = int(usage.get("cache_write_tokens") or 0)
    out = int(usage.get("completion_tokens") or 0)
    uncached = max(0, prompt - read - write)
    cr = price.input if price.cache_read is None else price.cache_read
    cw = price.input if price.cache_write is None else price.cache_write
    return (uncached * price.input + read * cr + write * cw + out * price.output) / 1e6


def batch_factor(spec: Mapping[str, Any], price: Price, overrides: dict[str, Any] | None = None,
                 terms: PriceTerms | None = None) -> float:
    """The share of the interactive price a batched entry pays: its own, the config's for its
    provider (``prices: {batch_factor: {<provider>: f}}``, as the user keyed it), its provider's."""
    if price.batch is not None:
        return price.batch
    by_provider = (overrides or {}).get("batch_factor") or {}
    provider = str(spec.get("provider"))
    if provider in by_provider:
        return float(by_provider[provider])
    factor = terms.batch_factor if terms is not None else None
    return DEFAULT_BATCH_FACTOR if factor is None else factor


def model_prices(config: dict[str, Any], terms: Callable[[Mapping[str, Any]], PriceTerms] | None = None
                 ) -> dict[str, Price | None]:
    """Name -> price for every model and role of a config (raw, as in a manifest); ``terms`` says what
    each entry's provider charges (``providers.registry.price_terms``; None: nothing free, default factors).

    A batched entry's price carries its batch factor (``Price.batch``): ``cost_usd`` applies it to
    the tokens that rode in batches only.
    """
    overrides = config.get("prices") or {}
    entries = [(m["name"], m) for m in config.get("models") or [] if isinstance(m, dict) and "name" in m]
    entries += [(r, s) for r, s in (config.get("roles") or {}).items() if isinstance(s, dict)]
    out: dict[str, Price | None] = {}
    for name, spec in entries:
        own = terms(spec) if terms is not None else PriceTerms()
        price = price_for(name, spec, overrides, own.free)
        if price is not None and spec.get("batch"):
            price = replace(price, batch=batch_factor(spec, price, overrides, own))
        out[name] = price
    return out
