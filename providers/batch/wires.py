"""Which batch API a provider has: the one place that maps an interactive provider to its wire."""

from __future__ import annotations

from providers.anthropic import AnthropicProvider
from providers.base import Provider
from providers.batch.anthropic import AnthropicBatchWire
from providers.batch.base import BatchWire
from providers.batch.openai import OpenAIBatchWire
from providers.openai_compat import OpenAICompatProvider

BATCH_PROVIDERS = frozenset({"openai", "anthropic", "sim"})
"""Config ``provider:`` values whose endpoint has a batch API (sim: wires openai and anthropic)."""
NO_BATCH_WIRES = frozenset({"gemini"})
"""Wires whose batch mode we do not speak yet."""


def wire_for(provider: Provider) -> BatchWire:
    """The batch wire of an interactive provider; ValueError for one without a batch API."""
    if isinstance(provider, AnthropicProvider):
        return AnthropicBatchWire(provider)
    if isinstance(provider, OpenAICompatProvider):
        return OpenAIBatchWire(provider)
    raise ValueError(f"{type(provider).__name__} has no batch API that fasteval speaks")
