"""How a model asks for tool calls and gets their results back: one protocol per job.

The agent loop has one path whatever the protocol: it asks the model, the protocol reads the
reply into calls or an answer (``read``), the loop runs the calls, and the protocol writes each
result back into the conversation (``feed_back``). Three kinds exist:

* ``NativeCalls``: the provider's ``tool_calls``; the tool specs go out with each request, each
  result comes back as a ``tool`` message, and images that message cannot carry (the provider's
  ``tool_message_images``) follow in one user message after the round's results.
* ``ToolCallText``: the built-in text protocol (``tool_protocol: text``): the first
  ``<tool_call>{json}</tool_call>`` span is the round's one call, as VistaHop's harness does, and
  its result goes back as a user turn wrapped in ``<tool_response>``.
* a harness's own ``TextProtocol`` (``fasteval.tools.text_protocols``: DeepEyes, Mini-o3), which
  brings its tools and its system prompt and may end the turn on a call.

A suite may still word a result its own way (``Suite.tool_result_messages``); the loop asks it
first and the protocol writes only the results the suite leaves to it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from fasteval.core.tagged import Tagged
from fasteval.core.types import ImageRef, Message, ToolCall
from fasteval.tools.base import Tool, ToolResult
from providers import TOOL_IMAGES_PREFIX, ChatResponse, Provider, ToolCallRequest

_TEXT_CALL = Tagged("<tool_call>", "</tool_call>")


@dataclass(slots=True)
class ParsedTurn:
    """One model reply read by a protocol: the calls it asks for, or an answer.

    ``content`` is the reply as the history keeps it (Mini-o3's harness stops generation at
    ``</grounding>``, so text after it is dropped). ``rejected`` says why a call the model tried
    to write could not be read; the loop logs it as a failed call and shows the model the
    protocol's error message, or ends the turn where the harness does.
    """

    content: str
    calls: list[ToolCallRequest] = field(default_factory=list)
    rejected: str | None = None
    raw_call: str = ""
    """The text of the rejected call, cut to MAX_ERROR_TEXT, for the record."""


class CallProtocol(ABC):
    """How one job's model writes tool calls, and how their results go back to it."""

    name: ClassVar[str]
    tool_name: ClassVar[str] = ""
    """The name a call the protocol could not read is logged under (text protocols only)."""
    sends_tools: ClassVar[bool] = False
    """Whether requests carry the tool specs (native calls) or the prompt describes the tools (text)."""
    own_system_prompt: ClassVar[bool] = False
    """Whether ``system_prompt`` replaces the suite's (a harness's protocol describes its tool there)."""
    system_prompt: str | None = None

    def tools(self) -> dict[str, Tool]:
        """Tools the protocol brings, by name (added to the job's own)."""
        return {}

    @abstractmethod
    def read(self, resp: ChatResponse) -> ParsedTurn:
        """The calls a reply asks for (none: it is the answer); never raises."""

    def assistant_message(self, resp: ChatResponse, turn: ParsedTurn) -> Message:
        """The reply as the conversation keeps it."""
        msg: Message = {"role": "assistant", "content": turn.content}
        if resp.native is not None:  # e.g. thinking blocks the provider needs back verbatim
            msg["native"] = resp.native
        return msg

    @abstractmethod
    def feed_back(self, call: ToolCall, result: ToolResult, messages: list[Message]) -> bool:
        """Append what carries ``result`` back to the model; True when the harness ends the turn on
        this call instead (nothing is appended then, nor for the round's later calls)."""

    def end_round(self, messages: list[Message]) -> None:  # noqa: B027
        """After a round's results: what goes back once for all of them (nothing by default)."""


class NativeCalls(CallProtocol):
    """The provider's ``tool_calls``: results in ``tool`` messages, images moved where they cannot go."""

    name: ClassVar[str] = "native"
    sends_tools: ClassVar[bool] = True

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self._moved: list[ImageRef] = []

    def read(self, resp: ChatResponse) -> ParsedTurn:
        return ParsedTurn(resp.content or "", resp.tool_calls)

    def assistant_message(self, resp: ChatResponse, turn: ParsedTurn) -> Message:
        msg: Message = {"role": "assistant", "content": resp.content}  # None stays None on this wire
        if resp.native is not None:
            msg["native"] = resp.native
        if turn.calls:
            msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in turn.calls]
        return msg

    def feed_back(self, call: ToolCall, result: ToolResult, messages: list[Message]) -> bool:
        if result.images and self.provider.tool_message_images():
            content: Any = [{"type": "text", "text": result.output}] + [{"type": "image", "image": r}
                                                                        for r in result.images]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        else:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.output})
            self._moved.extend(result.images)
        return False

    def end_round(self, messages: list[Message]) -> None:  # noqa: B027
        if self._moved:
            messages.append({"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_PREFIX + ":"}]
                             + [{"type": "image", "image": r} for r in self._moved]})
            self._moved = []


def parse_text_tool_call(content: str, arguments_only: bool = False) -> ToolCallRequest | None:
    """The first <tool_call> span as a call; None (a final answer) if absent or not valid JSON.

    ``arguments_only`` reads the arguments from ``"arguments"`` alone (VistaHop's runner), not
    from ``"parameters"`` as a fallback.
    """
    call = _TEXT_CALL.first(content or "")
    if call is None:
        return None
    try:
        obj = orjson.loads(call.strip())
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", {}) if arguments_only else obj.get("arguments", obj.get("parameters", {}))
    return ToolCallRequest(id="text_call", name=obj["name"], arguments=orjson.dumps(args).decode())


class ToolCallText(CallProtocol):
    """``tool_protocol: text``: one ``<tool_call>`` span per reply, the result in ``<tool_response>``."""

    name: ClassVar[str] = "tool_call-text"

    def __init__(self, *, arguments_only: bool, has_tools: bool) -> None:
        self.arguments_only = arguments_only
        self.has_tools = has_tools
        """Without tools every reply is an answer, whatever it holds."""

    def read(self, resp: ChatResponse) -> ParsedTurn:
        content = resp.content or ""
        call = parse_text_tool_call(content, self.arguments_only) if self.has_tools else None
        return ParsedTurn(content, [call] if call else [])

    def feed_back(self, call: ToolCall, result: ToolResult, messages: list[Message]) -> bool:
        content: list[dict[str, Any]] = [{"type": "text", "text": f"<tool_response>\n{result.output}\n</tool_response>"}]
        content += [{"type": "image", "image": r} for r in result.images]
        messages.append({"role": "user", "content": content})
        return False
