"""Scripted behaviours of sim models. A policy sees only the request, never an answer key.

``tools`` solves the demo task the way a tool-using model would (zoom into the named box,
read the patch, add with the calculator) and otherwise calls offered tools a fixed number of
times; ``direct`` answers at once from the full image; ``scripted`` replies by regex (judges).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import orjson

from fasteval.core.registry import LazyRegistry
from providers.sim.conversation import View, image_level, read_conversation
from providers.sim.spec import SimModel

Reply = dict[str, Any]
"""An assistant message: {"content": str | None, "tool_calls": [...]}."""

Policy = Callable[[SimModel, dict[str, Any], int], Reply]
POLICIES: LazyRegistry[Policy] = LazyRegistry(
    "sim policy", {"oracle": "providers.sim.oracle", "guess": "providers.sim.oracle"},
    key=lambda fn: str(getattr(fn, "policy_name")))  # noqa: B009 (set by register_policy)
"""Every policy by name; the tir-synth ones (``oracle.py``) load when first named, so listing the
names (``fasteval list policies``, the config check) imports no server."""

_BOX = re.compile(r"box \[(\d+), (\d+), (\d+), (\d+)\]")
_ADD = re.compile(r"add (\d+)")
_SUB = re.compile(r"subtract (\d+) from your previous answer")


def register_policy(name: str) -> Callable[[Policy], Policy]:
    def deco(fn: Policy) -> Policy:
        setattr(fn, "policy_name", name)  # noqa: B010 (a function has no declared attribute for it)
        return POLICIES.register(fn)
    return deco


def call(view: View, name: str, args: dict[str, Any], n: int) -> Reply:
    """A tool call in the protocol the request used (native tool_calls or <tool_call> text)."""
    if view.text_protocol:
        return {"content": f"<tool_call>{orjson.dumps({'name': name, 'arguments': args}).decode()}</tool_call>"}
    return {"content": None, "tool_calls": [{"id": f"call_{n}", "type": "function",
                                             "function": {"name": name, "arguments": orjson.dumps(args).decode()}}]}


def answer(view: View, text: str) -> Reply:
    return {"content": f"<answer>{text}</answer>" if view.text_protocol else text}


def _last_number(text: str) -> str | None:
    nums = re.findall(r"-?\d+(?:\.\d+)?", text)
    return nums[-1] if nums else None


def _tool_number(text: str) -> str | None:
    """The ``result`` of a calculator reply, else the last number in the text."""
    try:
        obj = orjson.loads(text)
        if isinstance(obj, dict) and isinstance(obj.get("result"), int | float):
            return _fmt(float(obj["result"]))
    except orjson.JSONDecodeError:
        pass
    return _last_number(text)


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _demo_step(view: View, n: int, misread: float = 0.0, seed: Any = None) -> Reply | None:
    """The demo task: read a grey patch inside a box, add a number; later turns subtract."""
    done = [name for name, _, _ in view.tool_results]
    sub = _SUB.search(view.user_text)
    if sub and view.previous_answers:
        prev = _last_number(view.previous_answers[-1]) or "0"
        if "calculator" in view.tools and "calculator" not in done:
            return call(view, "calculator", {"expression": f"{prev} - {sub.group(1)}"}, n)
        result = _tool_number(view.tool_results[-1][1]) if view.tool_results else None
        return answer(view, result or _fmt(float(prev) - float(sub.group(1))))
    box, add = _BOX.search(view.user_text), _ADD.search(view.user_text)
    if not (box and add):
        return None
    if "image_zoom_in_tool" in view.tools and "image_zoom_in_tool" not in done:
        bbox = [int(g) for g in box.groups()]
        return call(view, "image_zoom_in_tool", {"bbox_2d": bbox, "label": "patch", "img_idx": 0}, n)
    crops = [imgs for name, _, imgs in view.tool_results if name == "image_zoom_in_tool" and imgs]
    source = crops[-1][-1] if crops else (view.images[0] if view.images else None)
    level = round(image_level(source)) if source else 0
    if misread and random.Random(f"{seed}|{view.user_text}").random() < misread:
        level += random.Random(f"{seed}|{view.user_text}|delta").choice([-3, -2, -1, 1, 2, 3])
    if "calculator" in view.tools and "calculator" not in done:
        return call(view, "calculator", {"expression": f"{level} + {add.group(1)}"}, n)
    calc = [t for name, t, _ in view.tool_results if name == "calculator"]
    if calc and _tool_number(calc[-1]) is not None:
        return answer(view, str(_tool_number(calc[-1])))
    return answer(view, _fmt(level + int(add.group(1))))


def _example_args(spec: dict[str, Any]) -> dict[str, Any]:
    """Plausible arguments from a JSON schema, for tools the sim has no plan for."""
    props = (spec.get("parameters") or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for key, p in props.items():
        kind = p.get("type")
        if key in ("bbox_2d", "bbox"):
            out[key] = [0, 0, 1000, 1000]
        elif key == "expression":
            out[key] = "1 + 1"
        elif key == "code":
            out[key] = "print('hello')"
        elif kind in ("number", "integer"):
            out[key] = 0
        elif kind == "array":
            out[key] = []
        elif kind == "boolean":
            out[key] = False
        else:
            out[key] = "test"
    return out


@register_policy("tools")
def tools_policy(model: SimModel, body: dict[str, Any], n: int) -> Reply:
    """Calls the offered tools (``tool_uses`` times) with example arguments, then answers."""
    view = read_conversation(body)
    step = _demo_step(view, n, float(model.options.get("misread_rate", 0.0)), body.get("seed"))
    if step is not None:
        return step
    if view.tools and len(view.tool_results) < model.tool_uses:
        name = sorted(view.tools)[len(view.tool_results) % len(view.tools)]
        return call(view, name, _example_args(view.tools[name]), n)
    last = view.tool_results[-1][1] if view.tool_results else model.default_reply
    return answer(view, last.strip()[:200] or model.default_reply)


@register_policy("direct")
def direct_policy(model: SimModel, body: dict[str, Any], n: int) -> Reply:
    """Answers at once, never calls a tool."""
    view = read_conversation(body)
    view.tools = {}
    view.tool_results = []
    step = _demo_step(view, n)
    return step if step is not None else answer(view, model.default_reply)


@register_policy("scripted")
def scripted_policy(model: SimModel, body: dict[str, Any], n: int) -> Reply:
    """Replies from ``script`` (first regex that matches the conversation), else ``default_reply``."""
    view = read_conversation(body)
    for rule in model.script:
        if re.search(rule["match"], view.user_text, re.S):
            return {"content": rule["reply"]}
    return {"content": model.default_reply}


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    first = next((m for m in messages if m.get("role") == "user"), None)
    content = first.get("content") if first else ""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


@register_policy("sequence")
def sequence_policy(model: SimModel, body: dict[str, Any], n: int) -> Reply:
    """Replies in order, one per assistant turn so far: ``script`` rules ``{match, replies: [...]}``,
    the first whose regex matches the first user text; past its last reply, ``default_reply``.

    For harnesses whose model writes tool calls as text and reads results as user turns (DeepEyes,
    Mini-o3): a test scripts the episode (a call, a call on the crop, an answer) per task.
    """
    messages: list[dict[str, Any]] = body.get("messages") or []
    text = _first_user_text(messages)
    done = sum(1 for m in messages if m.get("role") == "assistant")
    for rule in model.script:
        if re.search(rule["match"], text, re.S):
            replies: Any = rule.get("replies") or [rule.get("reply", model.default_reply)]
            return {"content": str(replies[done]) if done < len(replies) else model.default_reply}
    return {"content": model.default_reply}
