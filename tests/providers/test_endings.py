"""How a reply ended reads the same on every wire: cut by the output limit, filtered, declined."""

from __future__ import annotations

from typing import Any

import pytest

from providers.anthropic import AnthropicProvider
from providers.base import ChatRequest, Provider
from providers.gemini import GeminiProvider
from providers.openai_compat import OpenAICompatProvider
from providers.openai_responses import OpenAIResponsesProvider
from providers.sim import SimModel
from providers.sim.spec import Faults
from tests.providers.native.native_support import native_sim, root


def _client(wire: str, sim: Any) -> Provider:
    if wire == "chat":
        return OpenAICompatProvider(sim.base_url, "m")
    if wire == "anthropic":
        return AnthropicProvider("m", base_url=root(sim), api_key_env=None, api_key="k")
    if wire == "gemini":
        return GeminiProvider("m", base_url=root(sim), api_key_env=None, api_key="k")
    return OpenAIResponsesProvider("m", base_url=sim.base_url, api_key_env=None, api_key="k")


@pytest.mark.parametrize("wire", ["chat", "anthropic", "gemini", "responses"])
@pytest.mark.parametrize(("ending", "finish"), [("length", "length"), ("content_filter", "refusal"),
                                                ("refusal", "refusal"), ("ok", "stop")])
async def test_endings_map_to_the_same_finish_reason_on_every_wire(wire: str, ending: str, finish: str) -> None:
    model = SimModel("m", policy="scripted", default_reply="a long answer", faults=Faults(schedule=[ending]))
    async with native_sim([model]) as sim:
        client = _client(wire, sim)
        resp = await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await client.close()
    assert resp.finish_reason == finish
    if ending == "ok":
        assert resp.content == "a long answer"
