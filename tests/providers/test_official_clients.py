"""The vendors' own Python clients run a tool loop with images against the sim on loopback.

Our providers and the sim could share a misreading of an API; the official clients cannot share
it with us. Each test drives a full loop (an image in the first turn, a tool call, a tool result
carrying an image, the call matched by id, the final answer) through ``AsyncOpenAI`` (Chat
Completions and the Responses API), ``AsyncAnthropic`` and ``genai.Client``: if the vendor's client
cannot talk to the sim, the sim is wrong. Every exchange is also checked by the SDK types.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from providers.base import TOOL_IMAGES_PREFIX
from providers.sim import SimModel
from tests.providers.native.native_support import native_sim, root

KEY = "sk-official-client-0123456789"
PNG = (Path(__file__).parent / "golden" / "crop1.png").read_bytes()
PNG_B64 = base64.b64encode(PNG).decode()
PNG_URL = f"data:image/png;base64,{PNG_B64}"
ZOOM = {"name": "zoom", "description": "Zoom into a box of the image.",
        "parameters": {"type": "object", "properties": {"bbox": {"type": "array", "items": {"type": "number"}}},
                       "required": ["bbox"], "additionalProperties": False}}
TOOL_TEXT = "zoomed crop of the square"


def _model() -> SimModel:
    return SimModel("sim-model", policy="tools", tool_uses=2)


async def test_async_openai_chat_completions_tool_loop_with_images() -> None:
    from openai import AsyncOpenAI

    async with native_sim([_model()], {"openai": KEY}) as sim:
        client = AsyncOpenAI(api_key=KEY, base_url=f"{root(sim)}/v1", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": PNG_URL}}, {"type": "text", "text": "What is in the square?"}]}]
        calls = 0
        for _ in range(5):
            resp = await client.chat.completions.create(model="sim-model", messages=messages,
                                                        tools=[{"type": "function", "function": ZOOM}])
            msg = resp.choices[0].message
            if not msg.tool_calls:
                break
            messages.append(msg.model_dump(exclude_none=True))
            for tc in msg.tool_calls:
                calls += 1
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": TOOL_TEXT})
            # OpenAI's API takes images from users only: the crop follows as a user message
            messages.append({"role": "user", "content": [{"type": "text", "text": f"{TOOL_IMAGES_PREFIX}:"},
                                                         {"type": "image_url", "image_url": {"url": PNG_URL}}]})
        await client.close()
    assert calls == 2 and resp.choices[0].finish_reason == "stop"
    assert msg.content == TOOL_TEXT


async def test_async_openai_responses_tool_loop_with_images_and_reasoning() -> None:
    from openai import AsyncOpenAI

    async with native_sim([_model()], {"openai": KEY}) as sim:
        client = AsyncOpenAI(api_key=KEY, base_url=f"{root(sim)}/v1", max_retries=0)
        items: list[Any] = [{"role": "user", "content": [{"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
                                                         {"type": "input_text", "text": "What is in the square?"}]}]
        calls = 0
        for _ in range(5):
            resp = await client.responses.create(
                model="sim-model", input=items, store=False, include=["reasoning.encrypted_content"],
                reasoning={"effort": "low", "summary": "auto"}, tools=[{"type": "function", "strict": True, **ZOOM}])
            items += [item.model_dump(exclude_none=True) for item in resp.output]  # reasoning items included
            fn_calls = [item for item in resp.output if item.type == "function_call"]
            if not fn_calls:
                break
            for call in fn_calls:
                calls += 1
                items.append({"type": "function_call_output", "call_id": call.call_id, "output": [
                    {"type": "input_text", "text": TOOL_TEXT}, {"type": "input_image", "image_url": PNG_URL}]})
        await client.close()
    assert calls == 2 and resp.status == "completed" and resp.output_text == TOOL_TEXT
    assert resp.output[0].type == "reasoning" and resp.usage is not None
    assert resp.usage.output_tokens_details.reasoning_tokens > 0


async def test_async_anthropic_tool_loop_with_images_in_tool_results() -> None:
    from anthropic import AsyncAnthropic

    async with native_sim([_model()], {"anthropic": KEY}) as sim:
        client = AsyncAnthropic(api_key=KEY, base_url=root(sim), max_retries=0)
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
        messages: list[Any] = [{"role": "user", "content": [image, {"type": "text", "text": "What is in the square?"}]}]
        calls = 0
        for _ in range(5):
            resp = await client.messages.create(model="sim-model", max_tokens=1024, messages=messages,
                                                tools=[{"name": ZOOM["name"], "description": ZOOM["description"],
                                                        "input_schema": ZOOM["parameters"]}])
            if resp.stop_reason != "tool_use":
                break
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in resp.content]})
            results = []
            for block in resp.content:
                if block.type == "tool_use":
                    calls += 1
                    results.append({"type": "tool_result", "tool_use_id": block.id,
                                    "content": [{"type": "text", "text": TOOL_TEXT}, image]})
            messages.append({"role": "user", "content": results})
        await client.close()
    assert calls == 2 and resp.stop_reason == "end_turn"
    assert [b.text for b in resp.content if b.type == "text"] == [TOOL_TEXT]


async def test_genai_client_tool_loop_with_call_ids_and_images() -> None:
    from google import genai
    from google.genai import types

    async with native_sim([_model()], {"gemini": KEY}) as sim:
        client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=root(sim), api_version="v1beta"))
        contents: list[types.Content] = [types.Content(role="user", parts=[
            types.Part.from_bytes(data=PNG, mime_type="image/png"), types.Part(text="What is in the square?")])]
        config = types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name=ZOOM["name"], description=ZOOM["description"],
                parameters=types.Schema(type=types.Type.OBJECT, required=["bbox"], properties={
                    "bbox": types.Schema(type=types.Type.ARRAY, items=types.Schema(type=types.Type.NUMBER))}))])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
        ids: list[str | None] = []
        for _ in range(5):
            resp = await client.aio.models.generate_content(model="sim-model", contents=contents, config=config)
            assert resp.candidates and resp.candidates[0].content is not None
            calls = resp.function_calls or []
            if not calls:
                break
            contents.append(resp.candidates[0].content)
            parts = []
            for call in calls:
                ids.append(call.id)
                parts.append(types.Part(function_response=types.FunctionResponse(
                    id=call.id, name=call.name, response={"output": TOOL_TEXT})))
            parts.append(types.Part.from_bytes(data=PNG, mime_type="image/png"))
            contents.append(types.Content(role="user", parts=parts))
        await client.aio.aclose()
    assert len(ids) == 2 and all(i and i.startswith("call_") for i in ids)  # matched by id, as the API requires
    assert resp.text == TOOL_TEXT
