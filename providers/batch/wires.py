"""Which batch API a provider has: the one place that maps an interactive provider to its wire."""

from __future__ import annotations

from providers.anthropic import AnthropicProvider
from providers.base import Provider
from providers.batch.anthropic import AnthropicBatchWire
from providers.batch.base import BatchWire
from providers.batch.gemini import GeminiBatchWire
from providers.batch.openai import OpenAIBatchWire
from providers.batch.openai_responses import OpenAIResponsesBatchWire
from providers.gemini import GeminiProvider
from providers.openai_compat import OpenAICompatProvider
from providers.openai_responses import OpenAIResponsesProvider

BATCH_PROVIDERS = frozenset({"openai", "openai-responses", "anthropic", "gemini", "sim"})
"""Config ``provider:`` values whose endpoint has a batch API (sim: all three wires). vLLM, SGLang
and ``openai_compat`` servers have none; a gateway behind ``openai`` is refused at preflight."""
BATCH_WIRES = frozenset({"openai", "openai-responses", "anthropic", "gemini"})
"""Wires whose batch API we speak (the Responses API's through OpenAI's Batch API, ``/v1/responses``)."""


def wire_for(provider: Provider) -> BatchWire:
    """The batch wire of an interactive provider; ValueError for one without a batch API."""
    if isinstance(provider, AnthropicProvider):
        return AnthropicBatchWire(provider)
    if isinstance(provider, GeminiProvider):
        return GeminiBatchWire(provider)
    if isinstance(provider, OpenAIResponsesProvider):
        return OpenAIResponsesBatchWire(provider)
    if isinstance(provider, OpenAICompatProvider):
        return OpenAIBatchWire(provider)
    raise ValueError(f"{type(provider).__name__} has no batch API that fasteval speaks")
