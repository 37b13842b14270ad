"""One provider interface: ``chat(request) -> response`` in OpenAI chat format.

Capability differences are small overridable methods with safe defaults, not if-chains in the
core. Providers raise ProviderError with a ``kind`` from the retry taxonomy; the retry,
rate-limit and concurrency layer around every provider (providers.client) acts on that kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Self

from fasteval.core.types import Message, Usage

TOOL_IMAGES_PREFIX = "Images returned by the tool call above"
"""Opens the user message that carries tool-result images for providers that cannot take them
in a ``tool`` message (inspect-ai's fallback; vLLM rejects them for some chat templates)."""

ErrorKind = Literal["rate_limit", "transient", "timeout", "fatal", "auth", "context_overflow", "bad_response",
                    "bad_input", "cache_miss"]


@dataclass(slots=True)
class ChatRequest:
    """A chat completion request. Image parts are {"type": "image", "image": ImageRef}."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters (temperature, max_tokens, ...), merged over the model's defaults."""
    seed: int | None = None
    image_profile: str = "original"
    """How images are encoded for the wire (a suite's choice, e.g. "jpeg85"; see fasteval.images)."""


@dataclass(slots=True)
class ToolCallRequest:
    """A tool call the model asked for; ``arguments`` is the raw JSON text it wrote."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class ChatResponse:
    content: str | None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish_reason: str = "stop"
    """``stop``, ``tool_calls``, ``length`` (output limit), ``refusal`` or ``content_filter``."""
    usage: Usage = field(default_factory=Usage)
    native: dict[str, Any] | None = None
    """The provider's own form of the assistant turn (e.g. Anthropic content blocks with thinking
    signatures), kept on the assistant message so the next request can send it back verbatim."""


@dataclass(slots=True, frozen=True)
class Capabilities:
    """What an endpoint accepts, read by the agent loop instead of provider names.

    A model entry's ``capabilities:`` mapping overrides any of them (a gateway may lack what the
    provider's own API has).
    """

    tool_result_images: bool = False
    """Can a tool result carry images? If not, they follow in a user message."""
    parallel_tool_calls: bool = True
    seed: bool = True
    thinking: bool = False
    sampling: bool = True
    """Does the model take ``temperature``/``top_p``? OpenAI's reasoning models refuse them."""
    max_images: int | None = None
    """The most images one request may carry (a served vLLM's ``--limit-mm-per-prompt``); None: no limit known."""


class ProviderError(Exception):
    """A failed request, classified so the retry layer knows what to do with it."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        code = f" HTTP {self.status}" if self.status else ""
        return f"{self.kind}{code}: {self.args[0]}"


class Provider(ABC):
    """A model endpoint. Subclasses implement ``chat`` and override capabilities as needed."""

    capability_overrides: dict[str, bool | int] = {}  # replaced per instance, never mutated
    """Set from a model entry's ``capabilities:``; applied over ``default_capabilities()``."""

    @abstractmethod
    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Send one request; raise ProviderError (classified) on failure."""

    def with_capabilities(self, overrides: Mapping[str, bool | int]) -> Self:
        """This provider with a model entry's ``capabilities:`` over its defaults; set once, when the
        client is built (``providers.registry.make_provider``), never changed afterwards."""
        if overrides:
            self.capability_overrides = dict(overrides)
        return self

    def endpoint_id(self) -> str:
        """Identity of the endpoint for limiters and cache keys (never includes secrets)."""
        return type(self).__name__

    def default_capabilities(self) -> Capabilities:
        """The provider's own capabilities; ``capabilities()`` applies the config's overrides."""
        return Capabilities()

    def capabilities(self) -> Capabilities:
        # Asked several times per round: made once per overrides mapping (replaced, never mutated).
        cached: tuple[dict[str, bool | int], Capabilities] | None = self.__dict__.get("_capabilities")
        if cached is not None and cached[0] is self.capability_overrides:
            return cached[1]
        caps = self.default_capabilities()
        overrides: dict[str, Any] = dict(self.capability_overrides)
        caps = replace(caps, **overrides) if overrides else caps
        self.__dict__["_capabilities"] = (self.capability_overrides, caps)
        return caps

    def tool_message_images(self) -> bool:
        """Can a ``tool`` message carry image parts? If not, images go in a following user message."""
        return self.capabilities().tool_result_images

    def accepts_seed(self) -> bool:
        return self.capabilities().seed

    async def close(self) -> None:  # noqa: B027
        """Release connections."""
