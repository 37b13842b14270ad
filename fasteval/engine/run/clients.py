"""Turning config entries into ModelClients: the evaluated models and the model roles.

What each provider is (its wire, whether the sweep serves it itself, whether ``serve:`` may
start it) comes from the provider registry (``providers.registry``); this module only wires an
entry's typed spec to a client with the sweep's limits, retries, breaker and image URLs. Keys
are read from the environment variable the config names, at request time, and never stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from fasteval.config.endpoint import DEFAULT_CONCURRENCY, EndpointSpec
from fasteval.core.errors import ModelConfigError, OutOfDescriptors, descriptor_fault
from fasteval.images.processor import ProcessorResize, processor_resize
from providers import (
    BatchRoute,
    BreakerPolicy,
    ByteBudget,
    Capabilities,
    CircuitBreaker,
    ImageUrlResolver,
    ModelClient,
    Provider,
    ProviderError,
    RequestGate,
    ResponseCache,
    SimModel,
    WireArgs,
    make_provider,
)
from providers import providers as provider_table

CacheHook = Callable[[ModelClient], ResponseCache]
"""Wraps a client's requests in the response cache (``fasteval.services.response_cache``)."""
BatchHook = Callable[[ModelClient], BatchRoute]
"""Puts a client in batch mode: its lane (``fasteval.engine.batch.batching.batch_lane``)."""


def sim_models(endpoints: Iterable[EndpointSpec]) -> list[SimModel]:
    """The endpoints the embedded sim serves (their provider's kind says ``embedded``)."""
    return [SimModel.from_config(ep.name, ep.options) for ep in endpoints if ep.kind.embedded]


def build_client(name: str, spec: Mapping[str, Any] | EndpointSpec, *, sim_base_url: str | None,
                 resolver: ImageUrlResolver | None, breaker: BreakerPolicy | None = None,
                 serving: Any = None, cache: CacheHook | None = None, batch: BatchHook | None = None,
                 gate: RequestGate | None = None) -> ModelClient:
    """A ModelClient for one config entry (model or role), whole: its provider with the entry's
    capabilities, limits, retries, breaker, the ``cache`` and ``batch`` lane wrapping it, and the
    sweep's pause ``gate`` (fasteval.engine.steer.steering) before each request. ``serving``
    provides served models.

    A served model gets no circuit breaker: its supervisor restarts dead servers and raises
    EndpointDown itself when they are exhausted.
    """
    try:
        ep = spec if isinstance(spec, EndpointSpec) else EndpointSpec.of(name, spec)
    except (KeyError, ValueError) as e:
        raise ModelConfigError(f"model {name}: {e.args[0]}") from None
    _check_capabilities(name, ep)
    limits = ep.limits
    sized: dict[str, Any] = {"concurrency": DEFAULT_CONCURRENCY if limits.concurrency is None else limits.concurrency,
                             "rpm": limits.rpm, "tpm": limits.tpm, "retry": ep.retry, "params": ep.params,
                             "cache": cache, "batch": batch, "gate": gate}
    if ep.serve is not None:
        return ModelClient(name, _served_provider(name, ep, resolver, serving), **sized)
    provider, label = _provider(name, ep, sim_base_url, resolver)
    lister = getattr(provider, "list_models", None)
    probe = None
    if lister is not None:
        async def probe() -> None:  # GET /models: is the server back? (no list: the breaker half-opens)
            await lister(timeout_s=min(10.0, ep.timeouts.connect_s + 5.0))

    return ModelClient(name, provider, breaker=CircuitBreaker(label, breaker, probe) if breaker is not None else None,
                       **sized)


def _served_provider(name: str, ep: EndpointSpec, resolver: ImageUrlResolver | None, serving: Any) -> Provider:
    """A served model's provider: it routes to replicas, each its own OpenAI-wire provider."""
    if serving is None or not ep.kind.servable:
        servable = ", ".join(sorted(n for n, k in provider_table().items() if k.servable))
        raise ModelConfigError(f"model {name}: 'serve' needs a provider fasteval can serve ({servable}) in a sweep")
    endpoint = serving.endpoint_name(name)

    def make(base_url: str) -> Provider:  # each replica's provider decides what it sends (seed)
        return make_provider(ep.kind.wire, WireArgs(
            model_id=name, base_url=base_url, key_env=None, timeouts=ep.timeouts, extra_body=ep.extra_body,
            endpoint_name=endpoint, image_resolver=resolver, tool_message_images=ep.tool_message_images,
            capabilities=ep.capabilities))

    routed: Provider = serving.provider(name, make, tool_message_images=ep.tool_message_images)
    return routed.with_capabilities(ep.capabilities)


def _provider(name: str, ep: EndpointSpec, sim_base_url: str | None,
              resolver: ImageUrlResolver | None) -> tuple[Provider, str]:
    """A hosted or embedded endpoint's provider (its wire's factory) and the breaker's label for it."""
    kind = ep.kind
    if kind.embedded:
        if sim_base_url is None:
            raise ModelConfigError(f"model {name}: the sim server is not running")
        base_url, model_id, key_env = sim_base_url, name, None
    else:
        if kind.needs_base_url and not ep.base_url:
            raise ModelConfigError(f"model {name}: 'base_url' is required for provider {kind.name}")
        base_url, model_id, key_env = ep.base_url or "", ep.model, ep.key_env
    try:
        provider = make_provider(ep.wire, WireArgs(
            model_id=model_id, base_url=base_url, key_env=key_env, timeouts=ep.timeouts, extra_body=ep.extra_body,
            endpoint_name=ep.endpoint_id or (f"sim:{name}" if kind.embedded else None), image_resolver=resolver,
            tool_message_images=ep.tool_message_images, body_budget=_body_budget(name, ep.limits.max_body_mb),
            options=ep.options, embedded=kind.embedded, capabilities=ep.capabilities))
    except ValueError as e:
        raise ModelConfigError(f"model {name}: {e}") from None
    return provider, f"{name} ({base_url})" if not kind.embedded and base_url else name


def _body_budget(name: str, mb: Any) -> ByteBudget:
    if isinstance(mb, bool) or not isinstance(mb, int | float) or mb <= 0:
        raise ModelConfigError(f"model {name}: limits.max_body_mb must be a positive number, got {mb!r}")
    return ByteBudget(int(mb * 1024 * 1024))


def model_processor(ep: EndpointSpec) -> ProcessorResize | None:
    """The model's ``image_resize`` switch, resolved (ModelConfigError when malformed); ``auto``
    reads the served checkpoint's preprocessor config."""
    serve = ep.serve
    checkpoint = Path(str(serve["model"])) if isinstance(serve, dict) and serve.get("model") else None
    try:
        return processor_resize(ep.images.resize, checkpoint)
    except ValueError as e:
        raise ModelConfigError(f"model {ep.name}: {e}") from None


def _check_capabilities(name: str, ep: EndpointSpec) -> None:
    caps = ep.capabilities
    known = {f.name for f in fields(Capabilities)}
    unknown = set(caps) - known
    if unknown:
        raise ModelConfigError(f"model {name}: unknown capabilities {sorted(unknown)}; known: {sorted(known)}")
    limit = caps.get("max_images")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ModelConfigError(f"model {name}: capabilities.max_images must be a whole number >= 0, got {limit!r}")


def image_resolver(encoder: Any, max_bytes: int | None = None, max_pixels: int | None = None, *,
                   spec: EndpointSpec | None = None) -> ImageUrls:
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
        images = spec.images
        max_bytes = images.max_bytes if images.max_bytes is not None else max_bytes
        max_pixels = images.max_pixels if images.max_pixels is not None else max_pixels
        local = images.local_media
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
            if (fault := descriptor_fault(e)) is not None:  # the process's limit, not the image: stop
                raise OutOfDescriptors(fault, "encoding an image") from e
            raise ProviderError("bad_input", f"image {ref[:12]} cannot be encoded ({profile}): {e}") from None
        return url

    def cached(self, ref: str, profile: str) -> bytes | None:
        url: bytes | None = self.encoder.cached_image_url(ref, profile, max_bytes=self.max_bytes,
                                                          max_pixels=self.max_pixels, processor=self.processor,
                                                          local=self.local)
        return url
