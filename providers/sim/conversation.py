"""Reading a chat request the way a model would: texts, images, tools offered, tool results."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from providers.base import TOOL_IMAGES_PREFIX
from providers.sim.media import image_bytes

_TOOLS_BLOCK = re.compile(r"<tools>(.*?)</tools>", re.S)


@dataclass(slots=True)
class View:
    """The parts of a conversation a policy decides from."""

    text_protocol: bool
    tools: dict[str, dict[str, Any]]
    user_text: str
    """Text of the latest real user turn (not a tool result)."""
    images: list[str] = field(default_factory=list)
    """Data URLs of the images in order of appearance."""
    tool_results: list[tuple[str, str, list[str]]] = field(default_factory=list)
    """(tool name, text, image data URLs) of the calls made since the latest user turn."""
    previous_answers: list[str] = field(default_factory=list)


def _parts(content: Any) -> tuple[str, list[str]]:
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[str] = []
    for p in content or []:
        if p.get("type") == "text":
            texts.append(p.get("text", ""))
        elif p.get("type") == "image_url":
            images.append(p["image_url"]["url"])
    return "\n".join(texts), images


def read_conversation(body: dict[str, Any]) -> View:
    messages: list[dict[str, Any]] = body.get("messages") or []
    tools: dict[str, dict[str, Any]] = {}
    for t in body.get("tools") or []:
        fn = t.get("function", {})
        tools[fn.get("name", "")] = fn
    text_protocol = False
    if not tools and messages and messages[0].get("role") == "system":
        sys_text, _ = _parts(messages[0].get("content"))
        # Prompts may mention "<tools></tools>" in prose: use the block that holds signatures.
        for block in reversed(_TOOLS_BLOCK.findall(sys_text)):
            for line in block.strip().splitlines():
                try:
                    spec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(spec, dict):
                    fn = spec.get("function", spec)
                    tools[str(fn.get("name", ""))] = fn
            if tools:
                text_protocol = True
                break
    view = View(text_protocol=text_protocol, tools=tools, user_text="")
    pending: dict[str, str] = {}
    for m in messages:
        role = m.get("role")
        text, imgs = _parts(m.get("content"))
        view.images.extend(imgs)
        if role == "assistant":
            for tc in m.get("tool_calls") or []:
                pending[tc.get("id", "")] = tc["function"]["name"]
            if text_protocol and "<tool_call>" in (text or ""):
                match = re.search(r"<tool_call>(.*?)</tool_call>", text, re.S)
                try:
                    pending["text"] = orjson.loads(match.group(1))["name"] if match else ""
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    pending["text"] = ""
            elif not m.get("tool_calls") and text:
                view.previous_answers.append(text)
        elif role == "tool":
            view.tool_results.append((pending.get(m.get("tool_call_id", ""), ""), text, imgs))
        elif role == "user":
            if text_protocol and text.lstrip().startswith("<tool_response>"):
                inner = text.strip().removeprefix("<tool_response>").removesuffix("</tool_response>").strip()
                view.tool_results.append((pending.get("text", ""), inner, imgs))
            elif view.tool_results and text.startswith(TOOL_IMAGES_PREFIX):
                # images of a tool result that the loop moved into a following user message
                name, t, prev = view.tool_results[-1]
                view.tool_results[-1] = (name, t, prev + imgs)
            else:
                view.user_text = text
                view.tool_results = []
    return view


def image_level(url: str) -> float:
    """Median grey level of an image: how sim 'reads' a uniform patch."""
    import numpy as np  # here: most sim requests carry no image to read (and listing policies none)
    import pyvips

    # file:// URLs were checked against the allowed root before any policy runs.
    raw = image_bytes(url, Path("/"))
    img = pyvips.Image.new_from_buffer(raw, "")
    if img.bands > 1:
        img = img.colourspace("b-w")[0]
    arr = np.ndarray(buffer=img.write_to_memory(), dtype=np.uint8, shape=(img.height, img.width))
    return float(np.median(arr))
