"""Every provider fasteval can talk to, by the name a config gives it: one table, read by everyone.

Two tables: ``WIRE_KINDS`` holds each request format (its client, its vendor's batch API, how
its vendor counts image tokens) and ``providers()`` each provider name (its wire, its config keys,
what it can do, the share of the price its batch API charges). The config schema, the client
builder, the preflight, pricing and the estimate, the batch lanes and the catalog (``fasteval list
providers``) read them, so nothing outside this module compares or keys a provider's name, and a
new provider is one entry here plus its wire's module (``tests/architecture/test_provider_table.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from fasteval.core.options import Opt, OptionSchema
from fasteval.core.pricing import PriceTerms
from providers.token_rules import ANTHROPIC, GEMINI, OPENAI, SIM, TokenRule, vendor_rule

if TYPE_CHECKING:
    from providers.base import Provider
    from providers.batch.base import BatchWire
    from providers.http_json import Timeouts

Wire = str
_P = TypeVar("_P")
"""The request format a provider speaks: ``openai``, ``anthropic``, ``gemini`` or ``openai-responses``."""



@dataclass(frozen=True, slots=True)
class WireArgs:
    """What every wire's client is built from (already resolved from the typed endpoint spec)."""

    model_id: str
    base_url: str
    key_env: str | None
    timeouts: Timeouts
    extra_body: dict[str, Any] | None
    endpoint_name: str | None
    image_resolver: Any
    """bytes-returning resolver (``ImageUrlResolver``); the native wires get it as text."""
    tool_message_images: bool = False
    body_budget: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    """The entry's provider-specific options (thinking_budget, prompt_caching, ...), read-only."""
    embedded: bool = False
    capabilities: Mapping[str, bool | int] = field(default_factory=dict)
    """The entry's ``capabilities:`` over the wire's defaults (checked by the caller)."""


@dataclass(frozen=True, slots=True)
class ProviderKind:
    """What fasteval knows of one provider name."""

    name: str
    description: str
    wire: Wire
    options_of: Callable[[], OptionSchema] = dict
    """Config keys an entry of this provider may have, besides the ones every endpoint has
    (a function: the sim's and serve's tables import their packages, which a report never needs)."""
    embedded: bool = False
    """Served by the sweep's own in-process sim: no network, no key, no price, no preflight."""
    servable: bool = False
    """``serve:`` may start it (an OpenAI-compatible server fasteval launches itself)."""
    needs_base_url: bool = False
    """The entry must say where the server is (unless it is served)."""
    wire_option: bool = False
    """The entry picks its wire with ``wire:`` (the sim speaks all three)."""
    validate: Callable[[dict[str, Any]], Iterator[tuple[str, str]]] | None = None
    """Extra checks of an entry: (key, message) for each problem."""
    choices: Callable[[], dict[str, list[str]]] | None = None
    """Keys whose values come from a registry of their own (the sim's policies), for the JSON Schema."""

    api_option: bool = False
    """The entry may say ``api: responses`` to speak OpenAI's Responses API instead of Chat Completions."""
    open_weights: bool = False
    """A server of open-weights checkpoints (vLLM, SGLang): images go through the served model's own
    processor, which the estimate guesses from the model id."""
    batch_factor: float | None = None
    """The endpoint has its vendor's batch API (``batch:`` may use it), and a batched request pays this
    share of the interactive price (0.5 as OpenAI, Anthropic and Google publish, for work done within
    24 h); None: no batch API (vLLM, SGLang, an OpenAI-compatible server)."""

    def options(self) -> OptionSchema:
        return self.options_of()

    def wire_of(self, entry: dict[str, Any]) -> Wire:
        """The wire an entry speaks: the kind's, its ``wire:`` (the sim) or its ``api:`` (OpenAI)."""
        if self.wire_option:
            return str(entry.get("wire", self.wire))
        if self.api_option and entry.get("api") == "responses":
            return "openai-responses"
        return self.wire

    def batch_wire(self, wire: Wire) -> Callable[[Provider], BatchWire] | None:
        """The batch API of an entry of this provider speaking ``wire``; None where there is none."""
        return WIRE_KINDS[wire].batch if self.batch_factor is not None and wire in WIRE_KINDS else None


_KEY = Opt("str", "the environment variable holding the key (never the key itself)", shapes=False)
_EXTRA = Opt("dict", "extra JSON fields sent with every request")


def _openai_options() -> OptionSchema:
    from providers.local.spec import SERVE_OPTIONS

    return {
        # required unless the entry has `serve:` (enforced in the config check; the JSON Schema cannot say it)
        "base_url": Opt("str", "e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1", shapes=False),
        "api_key_env": _KEY,
        "extra_body": _EXTRA,
        "serve": Opt("dict", "a local checkpoint fasteval serves itself (docs/serving.md); no base_url then",
                     fields=SERVE_OPTIONS),
    }


def _openai_api_options() -> OptionSchema:
    """``provider: openai``: an OpenAI-compatible server, or OpenAI's Responses API with ``api: responses``."""
    return {**_openai_options(), "api": Opt("str", "chat (Chat Completions, the default) or responses",
                                            choices=("chat", "responses")), **_RESPONSES}


_NATIVE: OptionSchema = {
    "base_url": Opt("str", "the API root (default: the vendor's)", shapes=False),
    "api_key_env": _KEY,
    "extra_body": _EXTRA,
    "thinking_budget": Opt("int", "extended thinking tokens"),
}


_RESPONSES: OptionSchema = {
    "reasoning_effort": Opt("str", "Responses API: reasoning.effort (minimal, low, medium, high)"),
    "reasoning_summary": Opt("str", "Responses API: reasoning.summary (auto, concise, detailed, none; default auto)"),
    "strict_tools": Opt("bool", "Responses API: tools with strict: true (default false; always sent explicitly)"),
}


def _responses_options() -> OptionSchema:
    return {k: v for k, v in {**_NATIVE, **_RESPONSES}.items() if k != "thinking_budget"}


def _anthropic_options() -> OptionSchema:
    return {**_NATIVE, "prompt_caching": Opt("bool", "cache_control on the stable prefix (default true)", shapes=False)}


def _sim_options() -> OptionSchema:
    from providers.sim.spec import SIM_OPTIONS

    # the sim speaks every wire: its ``wire:`` takes the table's names
    return {**SIM_OPTIONS, "wire": replace(SIM_OPTIONS["wire"], choices=WIRES)}


def _sim_choices() -> dict[str, list[str]]:
    from providers.sim import POLICIES

    return {"policy": sorted(POLICIES)}


def _check_sim(spec: dict[str, Any]) -> Iterator[tuple[str, str]]:
    from providers.sim import POLICIES

    policy = spec.get("policy", "tools")
    if policy not in POLICIES:
        from difflib import get_close_matches

        close = get_close_matches(str(policy), list(POLICIES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        yield "policy", f"unknown sim policy {policy!r}{hint} (known: {', '.join(sorted(POLICIES))})"


_HALF = 0.5
"""What OpenAI's, Anthropic's and Google's batch APIs charge of the interactive price."""


def _compatible(name: str, description: str) -> ProviderKind:
    """An OpenAI-compatible server: the OpenAI wire, a base_url, and ``serve:`` may start it."""
    return ProviderKind(name, description, "openai", _openai_options, servable=True, needs_base_url=True)


def _kinds() -> dict[str, ProviderKind]:
    return {k.name: k for k in (
        ProviderKind("sim", "the embedded scripted server (no keys, no network)", "openai", _sim_options,
                     embedded=True, wire_option=True, validate=_check_sim, choices=_sim_choices,
                     batch_factor=_HALF),
        ProviderKind("openai", "any OpenAI-compatible endpoint (OpenAI, gateways); api: responses for the "
                     "Responses API", "openai", _openai_api_options, servable=True, needs_base_url=True,
                     api_option=True, batch_factor=_HALF),
        _compatible("openai_compat", "alias of openai"),
        replace(_compatible("vllm", "a vLLM server (OpenAI-compatible)"), open_weights=True),
        replace(_compatible("sglang", "an SGLang server (OpenAI-compatible)"), open_weights=True),
        ProviderKind("anthropic", "the Anthropic Messages API, natively", "anthropic", _anthropic_options,
                     batch_factor=_HALF),
        ProviderKind("gemini", "the Gemini API, natively", "gemini", lambda: dict(_NATIVE), batch_factor=_HALF),
        ProviderKind("openai-responses", "OpenAI's Responses API, natively (reasoning kept across tool calls)",
                     "openai-responses", _responses_options, batch_factor=_HALF),
    )}


_PROVIDERS: dict[str, ProviderKind] = {}


def providers() -> dict[str, ProviderKind]:
    """Every provider by name (built on first use: the option tables import the sim and serve specs)."""
    if not _PROVIDERS:
        _PROVIDERS.update(_kinds())
    return _PROVIDERS


def provider_kind(name: str) -> ProviderKind | None:
    return providers().get(name)


def is_embedded(spec: Mapping[str, Any]) -> bool:
    """An endpoint the sweep serves itself (no network, no key, no price)."""
    kind = provider_kind(str(spec.get("provider")))
    return kind is not None and kind.embedded


def price_terms(spec: Mapping[str, Any]) -> PriceTerms:
    """What an entry's provider says of its bill (``fasteval.core.pricing`` asks, naming no provider)."""
    kind = provider_kind(str(spec.get("provider")))
    if kind is None:
        return PriceTerms()
    return PriceTerms(free=kind.embedded, batch_factor=kind.batch_factor)


def batch_providers() -> list[str]:
    """The provider names whose endpoints have a batch API, for the messages that list them."""
    return [k.name for k in providers().values() if k.batch_factor is not None]


def batch_wires() -> list[Wire]:
    """The wires whose batch API we speak."""
    return [w.name for w in WIRE_KINDS.values() if w.batch is not None]


def make_provider(wire: Wire, args: WireArgs) -> Provider:
    """A client speaking ``wire``, built whole: its wire's factory, then the entry's capabilities."""
    kind = WIRE_KINDS.get(wire)
    if kind is None:
        raise ValueError(f"unknown wire {wire!r} (known: {', '.join(WIRE_KINDS)})")
    return kind.make(args).with_capabilities(args.capabilities)


def batch_wire(wire: Wire, provider: Provider) -> BatchWire:
    """The batch API of ``wire`` over an interactive client of it (its body builders, key and base URL);
    ValueError for a wire without one."""
    kind = WIRE_KINDS.get(wire)
    if kind is None or kind.batch is None:
        raise ValueError(f"the {wire} wire has no batch API that fasteval speaks (known: {', '.join(batch_wires())})")
    return kind.batch(provider)


def token_rule(wire: Wire, *, embedded: bool = False, base_url: str | None = None) -> TokenRule:
    """How an endpoint's prompt tokens are counted: the sim's, else its host's vendor's (an
    OpenAI-compatible door into another vendor's models), else its wire's."""
    if embedded:
        return SIM
    kind = WIRE_KINDS.get(wire)
    return vendor_rule(base_url) or (kind.tokens if kind is not None else OPENAI)


# Each wire's class is imported by its factory, on first use: aiohttp and the wires cost ~0.1 s.
def _openai_wire(args: WireArgs) -> Provider:
    from providers.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(
        args.base_url, args.model_id, api_key_env=args.key_env, extra_body=args.extra_body,
        timeouts=args.timeouts, tool_message_images=args.tool_message_images,
        image_resolver=args.image_resolver, endpoint_name=args.endpoint_name, body_budget=args.body_budget)


def _native_kwargs(wire: Wire, args: WireArgs) -> dict[str, Any]:
    """What the three native wires share: timeouts, images as text, where the API is and its key."""
    kwargs: dict[str, Any] = {"timeouts": args.timeouts, "image_resolver": _as_text(args.image_resolver),
                              "endpoint_name": args.endpoint_name, "extra_body": args.extra_body}
    if args.embedded:  # the sim's root (the Responses API lives under /v1, like OpenAI's) and a dummy key
        root = args.base_url if wire == "openai-responses" else args.base_url.removesuffix("/v1")
        kwargs.update(base_url=root, api_key_env=None, api_key="sim")
    else:
        if args.base_url:
            kwargs["base_url"] = args.base_url
        if args.key_env:
            kwargs["api_key_env"] = args.key_env
    return kwargs


def _responses_wire(args: WireArgs) -> Provider:
    from providers.openai_responses import OpenAIResponsesProvider

    opts = {k: args.options[k] for k in ("reasoning_effort", "reasoning_summary", "strict_tools") if k in args.options}
    return OpenAIResponsesProvider(args.model_id, **_native_kwargs("openai-responses", args), **opts)


def _anthropic_wire(args: WireArgs) -> Provider:
    from providers.anthropic import AnthropicProvider

    return AnthropicProvider(args.model_id, prompt_caching=bool(args.options.get("prompt_caching", True)),
                             thinking_budget=args.options.get("thinking_budget"), **_native_kwargs("anthropic", args))


def _gemini_wire(args: WireArgs) -> Provider:
    from providers.gemini import GeminiProvider

    return GeminiProvider(args.model_id, thinking_budget=args.options.get("thinking_budget"),
                          **_native_kwargs("gemini", args))


# Each batch wire is imported on first use too: it is only needed by a batched entry.
def _openai_batch(provider: Provider) -> BatchWire:
    from providers.batch.openai import OpenAIBatchWire
    from providers.openai_compat import OpenAICompatProvider

    return OpenAIBatchWire(_as(provider, OpenAICompatProvider))


def _responses_batch(provider: Provider) -> BatchWire:
    from providers.batch.openai_responses import OpenAIResponsesBatchWire
    from providers.openai_responses import OpenAIResponsesProvider

    return OpenAIResponsesBatchWire(_as(provider, OpenAIResponsesProvider))


def _anthropic_batch(provider: Provider) -> BatchWire:
    from providers.anthropic import AnthropicProvider
    from providers.batch.anthropic import AnthropicBatchWire

    return AnthropicBatchWire(_as(provider, AnthropicProvider))


def _gemini_batch(provider: Provider) -> BatchWire:
    from providers.batch.gemini import GeminiBatchWire
    from providers.gemini import GeminiProvider

    return GeminiBatchWire(_as(provider, GeminiProvider))


def _as(provider: Provider, cls: type[_P]) -> _P:
    """The wire's own client, which its batch API reuses (its body builders, key and base URL)."""
    if not isinstance(provider, cls):
        raise ValueError(f"{type(provider).__name__} is not a {cls.__name__}: its batch API needs that wire's client")
    return provider


@dataclass(frozen=True, slots=True)
class WireKind:
    """One request format: its client, its vendor's batch API, how its vendor counts image tokens."""

    name: Wire
    make: Callable[[WireArgs], Provider]
    """Its client, built from the typed entry's ``WireArgs``."""
    tokens: TokenRule
    batch: Callable[[Provider], BatchWire] | None = None
    """Its vendor's batch API over one of its clients; None: none we speak."""


WIRE_KINDS: dict[Wire, WireKind] = {w.name: w for w in (
    WireKind("openai", _openai_wire, OPENAI, _openai_batch),
    WireKind("anthropic", _anthropic_wire, ANTHROPIC, _anthropic_batch),
    WireKind("gemini", _gemini_wire, GEMINI, _gemini_batch),
    WireKind("openai-responses", _responses_wire, OPENAI, _responses_batch),  # through OpenAI's Batch API
)}
"""Every wire: a new one is one entry and its module (its client, and its batch API if it has one)."""
WIRES: tuple[Wire, ...] = tuple(WIRE_KINDS)


def _as_text(resolver: Any) -> Any:
    """The native providers take data URLs as text (they split off the base64 part)."""
    if resolver is None:
        return None

    async def resolve(ref: str, profile: str) -> str:
        url: bytes = await resolver(ref, profile)
        return url.decode("ascii")
    return resolve
