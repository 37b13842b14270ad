"""OpenAI's Batch API for the Responses API: the same files and ``/v1/batches``, lines to ``/v1/responses``.

A reasoning model's tool loop carries its encrypted reasoning items from round to round (the
interactive provider's ``build_payload`` puts them back, ``store: false``), so a batched round
is the very request an interactive round would be; only the line's ``url``, the batch's
``endpoint`` and how a body is read differ from the Chat Completions wire.
"""

from __future__ import annotations

import orjson

from providers.base import ChatRequest, ChatResponse, ProviderError
from providers.batch.openai import OpenAIBatchWire
from providers.openai_responses import (
    OpenAIResponsesProvider,
    classify_responses_error,
    parse_responses_response,
)


class OpenAIResponsesBatchWire(OpenAIBatchWire):
    name = "openai-responses"
    endpoint = "/v1/responses"

    def __init__(self, provider: OpenAIResponsesProvider, *, timeout_s: float = 600.0) -> None:
        self._init(provider, provider.timeouts.connect_s, timeout_s)
        self.responses = provider

    def classify(self, status: int, body: bytes) -> ProviderError:
        return classify_responses_error(status, body, {})

    async def body(self, request: ChatRequest) -> bytes:
        return orjson.dumps(await self.responses.build_payload(request))

    def parse(self, body: bytes) -> ChatResponse:
        return parse_responses_response(body)
