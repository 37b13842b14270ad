"""Every native provider's request bodies for the golden conversations pass the vendor's SDK types.

The same growing conversations the golden-body tests replay through the OpenAI-compatible client
(tool calls, tool results with images, the text protocol, a rebuilt history) are built by the
Anthropic, Gemini and Responses API providers, round by round, and each body is checked by
pydantic over the SDK's request types with unknown keys refused (tests/providers/wire_types.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from fasteval.core.types import Message
from providers.anthropic import AnthropicProvider
from providers.base import ChatRequest
from providers.gemini import GeminiProvider
from providers.openai_responses import OpenAIResponsesProvider
from tests.providers.test_request_bodies import CALC, GOLDEN, ZOOM, native_steps, text_steps
from tests.providers.wire_types import assert_valid_request, request_problems

IMAGES = {name: (GOLDEN / f"{name}.png").read_bytes() for name in ("photo", "crop1", "crop2")}


async def _resolve(ref: str, profile: str) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(IMAGES[ref]).decode()


Build = Callable[[ChatRequest], Awaitable[dict[str, Any]]]


def _providers() -> dict[str, tuple[str, Any]]:
    return {
        "anthropic": ("anthropic", AnthropicProvider("claude-x", api_key_env=None, api_key="k", image_resolver=_resolve,
                                                      thinking_budget=2048)),
        "gemini": ("gemini", GeminiProvider("gemini-x", api_key_env=None, api_key="k", image_resolver=_resolve,
                                            thinking_budget=512)),
        "responses": ("responses", OpenAIResponsesProvider("o4-mini", api_key_env=None, api_key="k",
                                                           image_resolver=_resolve, reasoning_effort="low")),
    }


@pytest.mark.parametrize("wire", ["anthropic", "gemini", "responses"])
@pytest.mark.parametrize("scenario", ["native_in_tool", "native_in_user", "text"])
async def test_native_bodies_of_the_golden_conversations_pass_the_sdk_types(wire: str, scenario: str) -> None:
    name, provider = _providers()[wire]
    refs = {k: k for k in IMAGES}
    history: list[Message]
    if scenario == "text":
        history, steps = text_steps(refs)
        tools = None
    else:
        history, steps = native_steps(refs, scenario == "native_in_tool")
        tools = [ZOOM, CALC]
    params = {"max_tokens": 4096, "temperature": 0.0, "top_p": 0.9, "stop": ["</answer>"]}
    bodies = 0
    try:
        for step in [None, *steps]:
            if step is not None:
                replaced = step(history)
                if replaced is not None:
                    history = replaced
            payload = await provider.build_payload(ChatRequest(messages=history, tools=tools, params=params, seed=7))
            assert_valid_request(name, orjson.dumps(payload))
            bodies += 1
    finally:
        await provider.close()
    assert bodies == len(steps) + 1


@pytest.mark.parametrize(("wire", "body", "needle"), [
    ("chat", {"model": "m", "messages": [{"role": "user", "content": "x", "native": {}}]}, "native"),
    ("chat", {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:", "detial": "low"}}]}]}, "detial"),
    ("anthropic", {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "x", "cache": True}]}]}, "cache"),
    ("anthropic", {"model": "m", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}, "role"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"text": "x"}]}], "generationConfig": {"maxTokens": 5}},
     "maxTokens"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "output": {}}}]}]},
     "output"),
    ("responses", {"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": [
        {"type": "image", "image_url": "data:"}]}]}, "image"),
    ("responses", {"model": "m", "input": "x", "reasoning": {"effort": "extreme"}}, "effort"),
    ("responses", {"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": {}}]},
     "strict"),
])
def test_the_check_refuses_what_the_sdk_types_do_not_know(wire: str, body: dict[str, Any], needle: str) -> None:
    problems = request_problems(wire, orjson.dumps(body))
    assert problems and any(needle in p for p in problems), problems


def test_the_check_reports_response_fields_the_sdk_does_not_declare() -> None:
    from tests.providers.wire_types import response_problems

    good = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}]}
    assert response_problems("chat", orjson.dumps(good)) == []
    bad = {**good, "choices": [{**good["choices"][0], "message": {"role": "assistant", "content": "x", "thought": 1}}]}
    assert any("thought" in p for p in response_problems("chat", orjson.dumps(bad)))
    assert response_problems("anthropic", orjson.dumps({"id": "m", "type": "message", "role": "assistant"}))


def test_golden_dir_holds_the_images() -> None:
    assert all(isinstance(v, bytes) and v[:4] == b"\x89PNG" for v in IMAGES.values()) and Path(GOLDEN).is_dir()


async def test_every_sim_exchange_of_every_wire_is_checked(_sdk_checked_sim: Any) -> None:
    """The autouse check (tests/conftest.py) sees the sim's traffic on all four wires."""
    from providers.sim import SimModel
    from tests.providers.native.native_support import native_sim, root

    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    async with native_sim([SimModel("m", policy="scripted", default_reply="ok")]) as sim:
        from providers.openai_compat import OpenAICompatProvider

        clients = [OpenAICompatProvider(sim.base_url, "m"),
                   AnthropicProvider("m", base_url=root(sim), api_key_env=None, api_key="k"),
                   GeminiProvider("m", base_url=root(sim), api_key_env=None, api_key="k"),
                   OpenAIResponsesProvider("m", base_url=sim.base_url, api_key_env=None, api_key="k")]
        for client in clients:
            assert (await client.chat(request)).content == "ok"
            await client.close()
    assert _sdk_checked_sim.checked == 4 and _sdk_checked_sim.problems == []
