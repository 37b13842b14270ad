"""Request bodies on the wire are byte-identical to the golden bodies captured before the
request path was optimised (pre-serialised pieces, shared image parts).

Each scenario replays a growing conversation the way the agent loop builds it (append-only,
images as blob refs, tool images in tool messages or in a following user message, the text
tool protocol, a second user turn, a history rebuilt between turns) through the real client
and provider, against a real HTTP server on loopback that records every body it receives.
Images use the ``original`` profile, so the bytes sent are the committed fixture files and the
golden files do not depend on the libvips version. The ``large_*`` scenarios send an image
whose data URL is large enough to be shared rather than serialised per request; their golden
files hold the length and sha256 of each body instead of the body.

To recapture (only when a body change is intended): FASTEVAL_UPDATE_GOLDEN=1 pytest this file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from fasteval.core.types import Message
from fasteval.engine.run.clients import image_resolver
from fasteval.images import ImageEncoder
from fasteval.runfolder.blobs import BlobStore
from providers.base import TOOL_IMAGES_PREFIX, ChatRequest
from providers.client import ModelClient, RetryPolicy
from providers.openai_compat import OpenAICompatProvider
from tests.providers.wire_types import assert_valid_request

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("FASTEVAL_UPDATE_GOLDEN") == "1"

CALC = {"type": "function", "function": {"name": "calculator", "description": "Evaluate arithmetic.",
                                         "parameters": {"type": "object",
                                                        "properties": {"expression": {"type": "string"}},
                                                        "required": ["expression"]}}}
ZOOM = {"type": "function", "function": {"name": "image_zoom_in_tool", "description": "Zoom in (0-1000 box).",
                                         "parameters": {"type": "object",
                                                        "properties": {"bbox_2d": {"type": "array"}},
                                                        "required": ["bbox_2d"]}}}


class Recorder:
    """A real OpenAI-compatible endpoint that keeps every request body it is sent."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.read())
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                              "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
        return web.json_response(reply)

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1"


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    rec = Recorder()
    await rec.start()
    yield rec
    assert rec.runner is not None
    await rec.runner.cleanup()


def _img(ref: str) -> dict[str, Any]:
    return {"type": "image", "image": ref}


def _call(n: int, name: str, args: dict[str, Any]) -> Message:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": orjson.dumps(args).decode()}}]}


Step = Callable[[list[Message]], list[Message] | None]
"""Changes the history between two requests; returns a new list when it replaces the history."""


def histories(history: list[Message], steps: list[Step]) -> Iterator[list[Message]]:
    """The history as each request of the conversation sends it: first as given, then after each step."""
    yield history
    for step in steps:
        replaced = step(history)
        if replaced is not None:
            history = replaced
        yield history


def native_steps(refs: dict[str, str], images_in_tool: bool) -> tuple[list[Message], list[Step]]:
    photo, crop1, crop2 = refs["photo"], refs["crop1"], refs["crop2"]
    history: list[Message] = [
        {"role": "system", "content": "You are a careful assistant. Ünïcödé ✓ \"quotes\" \\ and </script>"},
        {"role": "user", "content": [_img(photo), {"type": "text", "text": "Read the square in box [1, 2, 3, 4]."}]},
    ]

    def tool_images(call_id: str, text: str, imgs: list[str]) -> list[Message]:
        if images_in_tool:
            return [{"role": "tool", "tool_call_id": call_id,
                     "content": [{"type": "text", "text": text}] + [_img(r) for r in imgs]}]
        return [{"role": "tool", "tool_call_id": call_id, "content": text},
                {"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_PREFIX + ":"}]
                 + [_img(r) for r in imgs]}]

    def s1(h: list[Message]) -> None:
        h.append(_call(1, "image_zoom_in_tool", {"bbox_2d": [1, 2, 3, 4]}))
        h.extend(tool_images("call_1", "Here is the zoomed image:", [crop1]))

    def s2(h: list[Message]) -> None:
        h.append(_call(2, "image_zoom_in_tool", {"bbox_2d": [5, 6, 7, 8]}))
        h.extend(tool_images("call_2", "Here is the zoomed image:", [crop2, crop1]))

    def s3(h: list[Message]) -> None:
        h.append(_call(3, "calculator", {"expression": "40 + 2"}))
        h.append({"role": "tool", "tool_call_id": "call_3", "content": '{"result": 42, "status": "success"}'})

    def s4(h: list[Message]) -> None:  # the answer, then a second user turn (multi-turn)
        h.append({"role": "assistant", "content": "42"})
        h.append({"role": "user", "content": "Now subtract 2 from your previous answer."})

    def s5(h: list[Message]) -> list[Message]:  # a suite rebuilds the history before a turn
        return [dict(m) for m in h[:2]] + [{"role": "assistant", "content": "42"},
                                           {"role": "user", "content": [_img(crop2), {"type": "text", "text": "And here?"}]}]

    def s6(h: list[Message]) -> None:
        h.append(_call(4, "calculator", {"expression": "42 - 2"}))
        h.append({"role": "tool", "tool_call_id": "call_4", "content": '{"result": 40}'})

    return history, [s1, s2, s3, s4, s5, s6]


def text_steps(refs: dict[str, str]) -> tuple[list[Message], list[Step]]:
    photo, crop1 = refs["photo"], refs["crop1"]
    tools_block = "<tools>\n" + orjson.dumps(ZOOM).decode() + "\n</tools>"
    history: list[Message] = [
        {"role": "system", "content": "Call tools like <tool_call>{json}</tool_call>.\n" + tools_block},
        {"role": "user", "content": [_img(photo), {"type": "text", "text": "Where is the cat?"}]},
    ]

    def s1(h: list[Message]) -> None:
        h.append({"role": "assistant", "content": '<tool_call>{"name": "image_zoom_in_tool", '
                                                  '"arguments": {"bbox_2d": [0, 0, 500, 500]}}</tool_call>'})
        h.append({"role": "user", "content": [{"type": "text", "text": "<tool_response>\nHere is the zoomed image:\n"
                                                                       "</tool_response>"}, _img(crop1)]})

    def s2(h: list[Message]) -> None:
        h.append({"role": "assistant", "content": '<tool_call>{"name": "image_zoom_in_tool", "arguments": {}}</tool_call>'})
        h.append({"role": "user", "content": [{"type": "text", "text": "<tool_response>\nInvalid bbox format\n"
                                                                       "</tool_response>"}]})

    def s3(h: list[Message]) -> None:
        h.append({"role": "assistant", "content": "<answer>top left</answer>"})
        h.append({"role": "user", "content": [{"type": "text", "text": "And the dog?"}, _img(photo)]})

    return history, [s1, s2, s3]


SCENARIOS: dict[str, dict[str, Any]] = {
    "native_tool_images_in_tool": {"protocol": "native", "images_in_tool": True},
    "native_tool_images_in_user": {"protocol": "native", "images_in_tool": False},
    "text_protocol": {"protocol": "text", "images_in_tool": False},
    "large_native_tool_images_in_tool": {"protocol": "native", "images_in_tool": True, "large": True},
    "large_native_tool_images_in_user": {"protocol": "native", "images_in_tool": False, "large": True},
    "large_text_protocol": {"protocol": "text", "images_in_tool": False, "large": True},
}


async def replay(recorder: Recorder, tmp_path: Path, scenario: dict[str, Any]) -> list[bytes]:
    blobs = BlobStore(tmp_path / "blobs")
    refs = {name: blobs.put((GOLDEN / f"{name}.png").read_bytes()) for name in ("photo", "crop1", "crop2")}
    if scenario.get("large"):
        refs["photo"] = refs["crop2"] = blobs.put((GOLDEN / "large.png").read_bytes())
    encoder = ImageEncoder(blobs)
    provider = OpenAICompatProvider(recorder.url, "golden-model", extra_body={"top_k": 20},
                                    tool_message_images=scenario["images_in_tool"],
                                    image_resolver=image_resolver(encoder))
    client = ModelClient("golden", provider, params={"temperature": 0.0, "max_tokens": 512},
                         retry=RetryPolicy(max_attempts=1))
    text = scenario["protocol"] == "text"
    history, steps = text_steps(refs) if text else native_steps(refs, scenario["images_in_tool"])
    tools = None if text else [ZOOM, CALC]
    try:
        for sent in histories(history, steps):
            await client.chat(ChatRequest(messages=sent, tools=tools, params={"max_tokens": 256}, seed=7))
    finally:
        await client.close()
        encoder.close()
    return recorder.bodies


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_request_bodies_match_golden(name: str, recorder: Recorder, tmp_path: Path) -> None:
    bodies = await replay(recorder, tmp_path, SCENARIOS[name])
    for body in bodies:  # every golden body is one the OpenAI SDK's request types accept
        assert_valid_request("chat", body)
    if SCENARIOS[name].get("large"):
        assert all(len(b) > 30_000 for b in bodies)  # the large image is in every request
        bodies = [f"{len(b)} {hashlib.sha256(b).hexdigest()}".encode() for b in bodies]
    path = GOLDEN / f"{name}.{'sha256' if SCENARIOS[name].get('large') else 'jsonl'}"
    if UPDATE:
        path.write_bytes(b"\n".join(bodies) + b"\n")
    golden = path.read_bytes().split(b"\n")[:-1]
    assert len(bodies) == len(golden)
    for i, (got, want) in enumerate(zip(bodies, golden, strict=True)):
        assert got == want, f"{name}: request {i} differs from the golden body"
    if not SCENARIOS[name].get("large"):  # the bodies carry the images as data URLs
        assert all(b"data:image/png;base64," in b for b in bodies)


async def test_large_images_are_shared_not_copied_into_each_body(tmp_path: Path) -> None:
    """Two requests that resend a large image carry the encoder's one URL object, unjoined."""
    blobs = BlobStore(tmp_path / "blobs")
    ref = blobs.put((GOLDEN / "large.png").read_bytes())
    encoder = ImageEncoder(blobs)
    provider = OpenAICompatProvider("http://127.0.0.1:9/v1", "m", image_resolver=image_resolver(encoder))
    try:
        history: list[Message] = [{"role": "user", "content": [_img(ref), {"type": "text", "text": "hi"}]}]
        first = await provider.build_body(ChatRequest(messages=history))
        history += [{"role": "assistant", "content": "?"}, {"role": "user", "content": [_img(ref)]}]
        second = await provider.build_body(ChatRequest(messages=history))
        url = await encoder.image_url(ref, "original")
        assert sum(p is url for p in first) == 1 and sum(p is url for p in second) == 2
        assert max(len(p) for p in second if p is not url) < 200  # the rest is the small JSON around it
    finally:
        await provider.close()
        encoder.close()
