"""The prompt of a task's requests, in tokens, before anything is sent.

A trajectory's first request holds the system prompt, the tool definitions (where the provider
bills them) and the first user turn with its images; each later request re-sends all of that
plus every reply and tool result since. This module counts the part the task fixes, per user
turn (``TaskPrompt.bases``); ``fasteval.engine.forecast.estimate`` adds what the rounds grow it by.
Images are measured from their headers (no pixel is decoded) and priced by the model's rule:
its provider's published formula (``providers.token_rules``), or for a served open model with
``image_resize`` (or a Qwen-VL model id) its processor's grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyvips

from fasteval.config.endpoint import EndpointSpec
from fasteval.core.types import ImageRef, Task, Trajectory
from fasteval.images.decode import ImageError
from fasteval.images.ops import smart_resize
from fasteval.images.processor import PROCESSOR_PRESETS, ProcessorResize, processor_resize
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import Setting, Suite
from fasteval.tools.base import make_tool
from providers import TokenRule, token_rule

# Served checkpoints whose processor we know, by a piece of their model id.
_PROCESSOR_BY_ID = (("qwen3-vl", "qwen3_vl"), ("qwen2.5-vl", "qwen2_5_vl"), ("qwen2_5", "qwen2_5_vl"),
                    ("qwen2-vl", "qwen2_vl"))


def processor_rule(resize: ProcessorResize) -> TokenRule:
    """A Qwen-VL processor: the image resized onto its grid, one token per factor x factor patch."""

    def tokens(width: int, height: int) -> int:
        try:
            h, w = smart_resize(height, width, factor=resize.factor, min_pixels=resize.min_pixels,
                                max_pixels=resize.max_pixels)
        except ImageError:  # an aspect ratio the processor refuses: the request will fail, not cost
            return 0
        return (h // resize.factor) * (w // resize.factor)

    return TokenRule(f"processor {resize.name}", tokens)


def model_token_rule(ep: EndpointSpec) -> TokenRule:
    """The rule for a model entry, on images as they are sent (``max_image_pixels`` shrinks them first)."""
    rule = _entry_rule(ep)
    cap = ep.images.max_pixels
    if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
        return rule

    def shrunk(width: int, height: int) -> int:
        scale = min(1.0, math.sqrt(cap / max(width * height, 1)))
        return rule.image(max(1, int(width * scale)), max(1, int(height * scale)))

    return TokenRule(rule.name, shrunk, rule.tool_specs_billed)


def _entry_rule(ep: EndpointSpec) -> TokenRule:
    """Its ``image_resize`` processor, a known served processor, else its provider's."""
    if ep.images.resize:
        resize = processor_resize(ep.images.resize)
        if resize is not None:
            return processor_rule(resize)
    served = ep.serve or {}
    if served or ep.kind.open_weights:
        model_id = str(served.get("model") or ep.model).lower()
        for piece, preset in _PROCESSOR_BY_ID:
            if piece in model_id:
                return processor_rule(PROCESSOR_PRESETS[preset])
    return token_rule(ep.wire, embedded=ep.kind.embedded, base_url=ep.base_url)


@dataclass(slots=True)
class TaskPrompt:
    """What one task fixes of its requests' prompts, for one rule."""

    bases: list[int]
    """Prompt tokens of a request in user turn t before any round of that turn (system, tools, turns 0..t)."""
    image_tokens: int
    """Tokens of the first turn's images: the bound's guess at what a tool's image result costs."""
    has_tools: bool
    """Whether the model may call tools (a round may be followed by another); else one request a turn."""


@dataclass(slots=True)
class PromptCounter:
    """Counts ``TaskPrompt``s, reading each image's size once."""

    blobs: BlobStore
    sizes: dict[ImageRef, tuple[int, int]] = field(default_factory=dict)
    tool_specs: dict[tuple[str, tuple[str, ...]], list[dict[str, Any]]] = field(default_factory=dict)

    def size(self, ref: ImageRef) -> tuple[int, int]:
        if ref not in self.sizes:
            try:  # the header only: an 8K page is not decoded to be measured
                img = pyvips.Image.new_from_file(str(self.blobs.path(ref)), access="sequential")
                self.sizes[ref] = (int(img.width), int(img.height))
            except pyvips.Error:
                self.sizes[ref] = (0, 0)
        return self.sizes[ref]

    def _specs(self, suite: Suite, setting: Setting, task: Task) -> list[dict[str, Any]]:
        names = tuple(suite.tools(task, setting))
        key = (setting.name, names)
        if key not in self.tool_specs:
            opts = dict(setting.options.get("tool_options") or {})
            self.tool_specs[key] = [make_tool(n, **{"fidelity": setting.fidelity, **(opts.get(n) or {})}).spec()
                                    for n in names]
        return self.tool_specs[key]

    def count(self, suite: Suite, setting: Setting, task: Task, rule: TokenRule) -> TaskPrompt:
        """The fixed part of ``task``'s prompts under ``setting``, as the agent loop would lay it out."""
        specs = self._specs(suite, setting, task)
        protocol = suite.text_protocol(task, setting)
        system = protocol.system_prompt if protocol is not None else suite.system_prompt(task, setting, specs)
        fixed = rule.text(len(system or ""))
        if specs and protocol is None and setting.tool_protocol != "text" and rule.tool_specs_billed:
            fixed += rule.text(len(orjson.dumps(specs)))
        bases: list[int] = []
        first_images = 0
        traj = Trajectory()
        for t in range(len(task.turns)):
            text, images = _message_parts(suite.user_message(task, t, setting, traj))
            image_tokens = sum(rule.image(*self.size(ref)) for ref in images)
            if t == 0:
                first_images = image_tokens
            fixed += rule.text(text) + image_tokens
            bases.append(fixed)
        return TaskPrompt(bases=bases or [fixed], image_tokens=first_images,
                          has_tools=bool(specs) or protocol is not None)


def _message_parts(message: dict[str, Any]) -> tuple[int, list[ImageRef]]:
    """Characters of text and the images of one message in our chat format."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content), []
    chars = 0
    images: list[ImageRef] = []
    for part in content or []:
        if part.get("type") == "image":
            images.append(part["image"])
        else:
            chars += len(str(part.get("text", "")))
    return chars, images


def trajectory_prompt(bases: list[int], rounds_per_turn: float, growth: float) -> float:
    """Prompt tokens of a whole trajectory: every request re-sends its turn's base plus all rounds before it.

    ``growth`` is what one round adds to every later request (the reply, the tool's result).
    """
    total = 0.0
    n = rounds_per_turn
    for t, base in enumerate(bases):
        before = t * n
        total += n * base + growth * (n * before + n * (n - 1) / 2)
    return total


def pairs(rounds: float) -> float:
    """How many (earlier round, later request) pairs a trajectory of ``rounds`` requests has."""
    return rounds * (rounds - 1) / 2

