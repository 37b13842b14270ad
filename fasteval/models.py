"""Turning config entries into ModelClients: the evaluated models and the model roles.

``provider: sim`` points at the sweep's embedded sim server; ``openai`` (alias ``vllm``,
``sglang``, ``openai_compat``) at any OpenAI-compatible endpoint. Keys are read from the
environment variable the config names, at request time, and never stored anywhere.
"""

from __future__ import annotations

from typing import Any

from providers.base import ProviderError
from providers.client import ModelClient, RetryPolicy
from providers.openai_compat import ImageResolver, OpenAICompatProvider, Timeouts

OPENAI_LIKE = frozenset({"openai", "openai_compat", "vllm", "sglang"})


class ModelConfigError(ValueError):
    pass


def build_client(name: str, spec: dict[str, Any], *, sim_base_url: str | None,
                 resolver: ImageResolver | None, serving: Any = None) -> ModelClient:
    """A ModelClient for one config entry (model or role); ``serving`` provides served models."""
    provider_name = spec["provider"]
    limits = dict(spec.get("limits") or {})
    timeouts = Timeouts(**(spec.get("timeouts") or {}))
    retry = RetryPolicy(**(spec.get("retry") or {}))
    if spec.get("serve") is not None:
        if serving is None or provider_name not in OPENAI_LIKE:
            raise ModelConfigError(f"model {name}: 'serve' needs provider vllm (or sglang/openai_compat) in a sweep")
        endpoint = serving.endpoint_name(name)

        def make(base_url: str) -> OpenAICompatProvider:
            return OpenAICompatProvider(
                base_url, name, extra_body=spec.get("extra_body"), timeouts=timeouts, image_resolver=resolver,
                tool_message_images=bool(spec.get("tool_message_images", False)), endpoint_name=endpoint)

        served = serving.provider(name, make, tool_message_images=bool(spec.get("tool_message_images", False)))
        return ModelClient(name, served, concurrency=int(limits.get("concurrency", 256)), rpm=limits.get("rpm"),
                           tpm=limits.get("tpm"), retry=retry, params=spec.get("params"))
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
        endpoint_name=spec.get("endpoint_id") or (f"sim:{name}" if provider_name == "sim" else None))
    return ModelClient(name, provider, concurrency=int(limits.get("concurrency", 256)), rpm=limits.get("rpm"),
                       tpm=limits.get("tpm"), retry=retry, params=spec.get("params"))


def image_resolver(encoder: Any, max_bytes: int | None = None, max_pixels: int | None = None, *,
                   spec: dict[str, Any] | None = None) -> ImageResolver:
    """Data URLs from the sweep's ImageEncoder; a bad image becomes a non-retried bad_input error.

    A model entry's ``max_image_bytes`` / ``max_image_pixels`` downsize images that would
    otherwise be rejected (APIs refuse large data URLs) instead of failing the request.
    """
    if spec is not None:
        max_bytes = spec.get("max_image_bytes", max_bytes)
        max_pixels = spec.get("max_image_pixels", max_pixels)
    async def resolve(ref: str, profile: str) -> str:
        try:
            url: str = await encoder.data_url(ref, profile, max_bytes=max_bytes, max_pixels=max_pixels)
        except (ValueError, KeyError, OSError) as e:
            raise ProviderError("bad_input", f"image {ref[:12]} cannot be encoded ({profile}): {e}") from None
        return url
    return resolve
