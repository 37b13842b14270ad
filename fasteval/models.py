"""Turning config entries into ModelClients: the evaluated models and the model roles.

``provider: sim`` points at the sweep's embedded sim server (``wire: anthropic|gemini`` speaks
those APIs to it, to exercise the native clients end to end); ``openai`` (alias ``vllm``,
``sglang``, ``openai_compat``) at any OpenAI-compatible endpoint; ``anthropic`` and ``gemini``
at those APIs natively. Keys are read from the environment variable the config names, at
request time, and never stored anywhere.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from fasteval.images.processor import ProcessorResize, processor_resize
from providers.anthropic import AnthropicProvider
from providers.base import Capabilities, Provider, ProviderError
from providers.body import ByteBudget
from providers.breaker import BreakerPolicy, CircuitBreaker
from providers.client import ModelClient, RetryPolicy
from providers.gemini import GeminiProvider
from providers.http_json import Timeouts
from providers.openai_compat import ImageResolver, ImageUrlResolver, OpenAICompatProvider

OPENAI_LIKE = frozenset({"openai", "openai_compat", "vllm", "sglang"})
NATIVE = frozenset({"anthropic", "gemini"})
DEFAULT_MAX_BODY_MB = 1024
"""Request body bytes in flight per model before new requests wait (``limits.max_body_mb``)."""


class ModelConfigError(ValueError):
    pass


def build_client(name: str, spec: dict[str, Any], *, sim_base_url: str | None,
                 resolver: ImageUrlResolver | None, breaker: BreakerPolicy | None = None,
                 serving: Any = None) -> ModelClient:
    """A ModelClient for one config entry (model or role); ``serving`` provides served models.

    A served model gets no circuit breaker: its supervisor restarts dead servers and raises
    EndpointDown itself when they are exhausted.
    """
    provider_name = spec["provider"]
    limits = dict(spec.get("limits") or {})
    timeouts = Timeouts(**(spec.get("timeouts") or {}))
    retry = RetryPolicy(**(spec.get("retry") or {}))
    if spec.get("serve") is not None:
        if serving is None or provider_name not in OPENAI_LIKE:
            raise ModelConfigError(f"model {name}: 'serve' needs provider vllm (or sglang/openai_compat) in a sweep")
        endpoint = serving.endpoint_name(name)

        def make(base_url: str) -> OpenAICompatProvider:
            replica = OpenAICompatProvider(
                base_url, name, extra_body=spec.get("extra_body"), timeouts=timeouts, image_resolver=resolver,
                tool_message_images=bool(spec.get("tool_message_images", False)), endpoint_name=endpoint)
            _apply_capabilities(name, replica, spec)  # each replica's provider decides what it sends (seed)
            return replica

        served = serving.provider(name, make, tool_message_images=bool(spec.get("tool_message_images", False)))
        _apply_capabilities(name, served, spec)
        return ModelClient(name, served, concurrency=int(limits.get("concurrency", 256)), rpm=limits.get("rpm"),
                           tpm=limits.get("tpm"), retry=retry, params=spec.get("params"))
    # vllm, sglang, openai_compat speak the OpenAI wire format like openai itself
    wire = str(spec.get("wire", "openai")) if provider_name == "sim" else \
        "openai" if provider_name in OPENAI_LIKE else provider_name
    if provider_name == "sim":
        if sim_base_url is None:
            raise ModelConfigError(f"model {name}: the sim server is not running")
        base_url, model_id, key_env = sim_base_url, name, None
        retry = RetryPolicy(**{"base_delay_s": 0.05, "max_delay_s": 2.0, **(spec.get("retry") or {})})
    elif provider_name in OPENAI_LIKE:
        if not spec.get("base_url"):
            raise ModelConfigError(f"model {name}: 'base_url' is required for provider {provider_name}")
        base_url, model_id, key_env = spec["base_url"], spec.get("model", name), spec.get("api_key_env")
    elif provider_name in NATIVE:
        base_url, model_id, key_env = spec.get("base_url", ""), spec.get("model", name), spec.get("api_key_env")
    else:
        raise ModelConfigError(f"model {name}: unknown provider {provider_name!r} "
                               f"(known: sim, {', '.join(sorted(OPENAI_LIKE | NATIVE))})")
    endpoint_name = spec.get("endpoint_id") or (f"sim:{name}" if provider_name == "sim" else None)
    provider: Provider
    if wire in NATIVE:
        provider = _native_provider(wire, model_id, spec, base_url=base_url, key_env=key_env, timeouts=timeouts,
                                    resolver=_as_text(resolver), endpoint_name=endpoint_name, sim=provider_name == "sim")
    elif wire == "openai":
        provider = OpenAICompatProvider(
            base_url, model_id, api_key_env=key_env, extra_body=spec.get("extra_body"), timeouts=timeouts,
            tool_message_images=bool(spec.get("tool_message_images", False)), image_resolver=resolver,
            endpoint_name=endpoint_name, body_budget=_body_budget(name, limits))
    else:
        raise ModelConfigError(f"model {name}: unknown sim wire {wire!r} (known: openai, anthropic, gemini)")
    _apply_capabilities(name, provider, spec)
    lister = getattr(provider, "list_models", None)
    probe = None
    if lister is not None:
        async def probe() -> None:  # GET /models: is the server back? (no list: the breaker half-opens)
            await lister(timeout_s=min(10.0, timeouts.connect_s + 5.0))

    label = f"{name} ({base_url})" if provider_name != "sim" and base_url else name
    return ModelClient(name, provider, concurrency=int(limits.get("concurrency", 256)), rpm=limits.get("rpm"),
                       tpm=limits.get("tpm"), retry=retry, params=spec.get("params"),
                       breaker=CircuitBreaker(label, breaker, probe) if breaker is not None else None)


def _body_budget(name: str, limits: dict[str, Any]) -> ByteBudget:
    mb = limits.get("max_body_mb", DEFAULT_MAX_BODY_MB)
    if isinstance(mb, bool) or not isinstance(mb, int | float) or mb <= 0:
        raise ModelConfigError(f"model {name}: limits.max_body_mb must be a positive number, got {mb!r}")
    return ByteBudget(int(mb * 1024 * 1024))


def model_processor(spec: dict[str, Any]) -> ProcessorResize | None:
    """The model's ``image_resize`` switch, resolved (ModelConfigError when malformed)."""
    try:
        return processor_resize(spec.get("image_resize"))
    except ValueError as e:
        raise ModelConfigError(f"model {spec.get('name', '?')}: {e}") from None


def _apply_capabilities(name: str, provider: Provider, spec: dict[str, Any]) -> None:
    caps = spec.get("capabilities") or {}
    unknown = set(caps) - {f.name for f in fields(Capabilities)}
    if unknown:
        raise ModelConfigError(f"model {name}: unknown capabilities {sorted(unknown)}; known: "
                               f"{sorted(f.name for f in fields(Capabilities))}")
    if caps:
        provider.capability_overrides = {k: bool(v) for k, v in caps.items()}


def image_resolver(encoder: Any, max_bytes: int | None = None, max_pixels: int | None = None, *,
                   spec: dict[str, Any] | None = None) -> ImageUrls:
    """Image URLs from the sweep's ImageEncoder; a bad image becomes a non-retried bad_input error.

    A model entry's ``max_image_bytes`` / ``max_image_pixels`` downsize images that would
    otherwise be rejected (APIs refuse large data URLs) instead of failing the request.
    ``local_media: true`` (a server that reads local files, e.g. vLLM started with
    ``--allowed-local-media-path`` covering the run folder) sends ``file://`` URLs of the blob
    store instead of base64 data URLs. ``image_resize`` (e.g. ``qwen2_5_vl``) shrinks images to
    what the model's processor would make of them (fasteval.images.processor).
    """
    local = False
    processor = None
    if spec is not None:
        max_bytes = spec.get("max_image_bytes", max_bytes)
        max_pixels = spec.get("max_image_pixels", max_pixels)
        local = bool(spec.get("local_media", False))
        processor = model_processor(spec)
    return ImageUrls(encoder, max_bytes, max_pixels, processor, local)


class ImageUrls:
    """One model's image URLs (an ImageUrlResolver): awaited when an image must be encoded,
    ``cached`` without a coroutine when it already was (every later round of every trajectory)."""

    __slots__ = ("encoder", "local", "max_bytes", "max_pixels", "processor")

    def __init__(self, encoder: Any, max_bytes: int | None, max_pixels: int | None,
                 processor: ProcessorResize | None, local: bool) -> None:
        self.encoder = encoder
        self.max_bytes, self.max_pixels, self.processor, self.local = max_bytes, max_pixels, processor, local

    async def __call__(self, ref: str, profile: str) -> bytes:
        try:
            url: bytes = await self.encoder.image_url(ref, profile, max_bytes=self.max_bytes, max_pixels=self.max_pixels,
                                                      processor=self.processor, local=self.local)
        except (ValueError, KeyError, OSError) as e:
            raise ProviderError("bad_input", f"image {ref[:12]} cannot be encoded ({profile}): {e}") from None
        return url

    def cached(self, ref: str, profile: str) -> bytes | None:
        url: bytes | None = self.encoder.cached_image_url(ref, profile, max_bytes=self.max_bytes,
                                                          max_pixels=self.max_pixels, processor=self.processor,
                                                          local=self.local)
        return url


def _as_text(resolver: ImageUrlResolver | None) -> ImageResolver | None:
    """The native providers take data URLs as text (they split off the base64 part)."""
    if resolver is None:
        return None
    async def resolve(ref: str, profile: str) -> str:
        return (await resolver(ref, profile)).decode("ascii")
    return resolve


def _native_provider(wire: str, model_id: str, spec: dict[str, Any], *, base_url: str, key_env: str | None,
                     timeouts: Timeouts, resolver: ImageResolver | None, endpoint_name: str | None,
                     sim: bool) -> Provider:
    """An Anthropic or Gemini client; against the embedded sim it uses the sim's root and a dummy key."""
    kwargs: dict[str, Any] = {"timeouts": timeouts, "image_resolver": resolver, "endpoint_name": endpoint_name,
                              "thinking_budget": spec.get("thinking_budget"), "extra_body": spec.get("extra_body")}
    if sim:
        kwargs.update(base_url=base_url.removesuffix("/v1"), api_key_env=None, api_key="sim")
    else:
        if base_url:
            kwargs["base_url"] = base_url
        if key_env:
            kwargs["api_key_env"] = key_env
    if wire == "anthropic":
        return AnthropicProvider(model_id, prompt_caching=bool(spec.get("prompt_caching", True)), **kwargs)
    return GeminiProvider(model_id, **kwargs)
