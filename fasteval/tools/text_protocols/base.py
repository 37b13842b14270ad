"""What a text tool protocol is: how a harness has the model write tool calls as text.

Some harnesses never send a ``tools`` list: the system prompt describes the tool, the model
writes the call inside tags (DeepEyes' ``<tool_call>{json}</tool_call>``, Mini-o3's
``<grounding>{json}</grounding>``), the harness parses it, runs it and feeds the result back as
a new user turn. A ``TextProtocol`` is those three steps for one job (a new instance per job: it
may remember the job's observations), a ``CallProtocol`` like the loop's native and built-in text
ones (``fasteval.tools.call_protocol``); its tools run through the agent loop's ``execute_tool``
like any other, so every call is logged with its arguments, status and images.
"""

from __future__ import annotations

import ast
from abc import abstractmethod
from typing import Any, ClassVar

import orjson

from fasteval.core.types import Message, ToolCall
from fasteval.tools.base import Tool, ToolResult
from fasteval.tools.call_protocol import CallProtocol, ParsedTurn
from providers import ChatResponse, ToolCallRequest

__all__ = ["MAX_CALL_TEXT", "MAX_ERROR_TEXT", "ParsedTurn", "TextProtocol", "bounded", "call_request",
           "read_call_object"]

MAX_CALL_TEXT = 20_000
"""The longest tool-call text we try to read (a model may write megabytes of junk in a tag)."""
MAX_ERROR_TEXT = 500
"""Errors shown to the model and kept on the record are cut to this many characters."""


class TextProtocol(CallProtocol):
    """How the model writes tool calls in text, and how results go back to it."""

    tool_name: ClassVar[str]
    """The name the protocol's calls are logged under (and looked up by in the job's tools)."""
    own_system_prompt: ClassVar[bool] = True

    def __init__(self, fidelity: str, system_prompt: str | None) -> None:
        self.fidelity = fidelity
        self.system_prompt = system_prompt
        """The system message of every job under this protocol (it describes the tool)."""

    @abstractmethod
    def tools(self) -> dict[str, Tool]:
        """The tools this protocol's calls run, by name (added to the job's tools)."""

    @abstractmethod
    def parse(self, content: str) -> ParsedTurn:
        """Read one model reply; never raises (a malformed call is ``rejected``)."""

    def read(self, resp: ChatResponse) -> ParsedTurn:
        return self.parse(resp.content or "")

    @abstractmethod
    def result_messages(self, call: ToolCall, result: ToolResult) -> list[Message]:
        """The user turn(s) that carry a call's result (or its error) back to the model."""

    def ends_turn(self, call: ToolCall) -> bool:
        """Whether the harness stops the episode after this call (e.g. DeepEyes on an error)."""
        return False

    def feed_back(self, call: ToolCall, result: ToolResult, messages: list[Message]) -> bool:
        if self.ends_turn(call):
            return True
        messages.extend(self.result_messages(call, result))
        return False


def bounded(text: str, limit: int = MAX_ERROR_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def read_call_object(text: str) -> Any:
    """A call's JSON, or the Python literal the reference harness reads with ``eval`` (single
    quotes, True/None); read with ``ast.literal_eval`` so nothing in the text ever runs.

    Raises ValueError with a short reason.
    """
    if len(text) > MAX_CALL_TEXT:
        raise ValueError(f"the call is {len(text):,} characters long (at most {MAX_CALL_TEXT:,} are read)")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        json_error = str(e)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError(f"not valid JSON ({json_error})") from None


def call_request(name: str, arguments: dict[str, Any]) -> ToolCallRequest:
    """A parsed call as the loop runs it (one call per round: the id is the protocol's)."""
    return ToolCallRequest(id="text_call", name=name, arguments=orjson.dumps(arguments).decode())
