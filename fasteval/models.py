"""Turning config entries into ModelClients: the evaluated models and the model roles.

``provider: sim`` points at the sweep's embedded sim server; ``openai`` (alias ``vllm``,
``sglang``, ``openai_compat``) at any OpenAI-compatible endpoint. Keys are read from the
environment variable the config names, at request time, and never stored anywhere.
"""

from __future__ import annotations

from typing import Any

from fasteval.images.processor import ProcessorResize, processor_resize
from providers.base import ProviderError
from providers.body import ByteBudget
from providers.client import ModelClient, RetryPolicy
from providers.openai_compat import ImageResolver, OpenAICompatProvider, Timeouts

OPENAI_LIKE = frozenset({"openai", "openai_compat", "vllm", "sglang"})
DEFAULT_MAX_BODY_MB = 1024
"""Request body bytes in flight per model before new requests wait (``limits.max_body_mb``)."""


class ModelConfigError(ValueError):
    pass


def build_client(name: str, spec: dict[str, Any], *, sim_base_url: str | None,
                 resolver: ImageResolver | None) -> ModelClient:
    """A ModelClient for one config entry (model or role)."""
    provider_name = spec["provider"]
    limits = dict(spec.get("limits") or {})
    timeouts = Timeouts(**(spec.get("timeouts") or {}))
    retry = RetryPolicy(**(spec.get("retry") or {}))
    if provider_name == "sim":
        if sim_base_url is None:
            raise ModelConfigError(f"model {name}: the sim server is not running")
        base_url, model_id, key_env = sim_base_url, name, None
        retry = RetryPolicy(**{"base_delay_s": 0.05, "max_delay_s": 2.0, **(spec.get("retry") or {})})
    elif provider_name in OPENAI_LIKE:
        if not spec.get("base_url"):
            raise ModelConfigError(f"model {name}: 'base_url' is required for provider {provider_name}")
        base_url, model_id, key_env = spec["base_url"], spec.get("model", name), spec.get("api_key_env")
    else:
        raise ModelConfigError(f"model {name}: unknown provider {provider_name!r} "
                               f"(known: sim, {', '.join(sorted(OPENAI_LIKE))})")
    provider = OpenAICompatProvider(
        base_url, model_id, api_key_env=key_env, extra_body=spec.get("extra_body"), timeouts=timeouts,
        tool_message_images=bool(spec.get("tool_message_images", False)), image_resolver=resolver,
        endpoint_name=spec.get("endpoint_id") or (f"sim:{name}" if provider_name == "sim" else None),
        body_budget=_body_budget(name, limits))
    return ModelClient(name, provider, concurrency=int(limits.get("concurrency", 256)), rpm=limits.get("rpm"),
                       tpm=limits.get("tpm"), retry=retry, params=spec.get("params"))


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


def image_resolver(encoder: Any, max_bytes: int | None = None, max_pixels: int | None = None, *,
                   spec: dict[str, Any] | None = None) -> ImageResolver:
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
    async def resolve(ref: str, profile: str) -> bytes:
        try:
            url: bytes = await encoder.image_url(ref, profile, max_bytes=max_bytes, max_pixels=max_pixels,
                                                 processor=processor, local=local)
        except (ValueError, KeyError, OSError) as e:
            raise ProviderError("bad_input", f"image {ref[:12]} cannot be encoded ({profile}): {e}") from None
        return url
    return resolve
