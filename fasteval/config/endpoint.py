"""A model or role entry, typed once at load time.

The validated config stays as written (it is what the manifest stores and the hash covers), and
each entry also becomes an ``EndpointSpec``: the provider's kind from the provider registry, the
model id, where the server is, which variable holds the key, its limits, timeouts, retry policy,
batch settings, image settings, declared capabilities and ``serve:``. Code that builds clients,
checks endpoints or prices them reads these fields instead of re-reading dicts, and asks the kind
(``embedded``, ``servable``, its wire) instead of comparing provider names. Only the provider's
own options (a sim's policy, ``thinking_budget``...) stay a read-only mapping, handed to the
provider's factory as they were written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from providers import BatchSettings, ProviderKind, RetryPolicy, Timeouts, provider_kind

DEFAULT_CONCURRENCY = 256
"""Requests in flight per endpoint when ``limits.concurrency`` is not given."""
DEFAULT_MAX_BODY_MB = 1024
"""Request body megabytes in flight per model before new requests wait (``limits.max_body_mb``)."""
SIM_RETRY = {"base_delay_s": 0.05, "max_delay_s": 2.0}
"""The embedded sim answers at once: its retries back off for milliseconds, not seconds."""


@dataclass(frozen=True, slots=True)
class EndpointLimits:
    """``limits:``: requests in flight, per-minute budgets and request-body bytes in flight."""

    concurrency: int | None = None
    """None: the client's default (``DEFAULT_CONCURRENCY``); the estimate then takes the sweep's cap."""
    rpm: float | None = None
    tpm: float | None = None
    max_body_mb: Any = DEFAULT_MAX_BODY_MB
    """As written: checked (a positive number) when the client is built, where the error names the model."""


@dataclass(frozen=True, slots=True)
class ImageSettings:
    """How a model's images are sent: downsized above a size, as file URLs, through its processor's resize."""

    max_bytes: int | None = None
    max_pixels: int | None = None
    local_media: bool = False
    """``file://`` URLs of the run's blob store instead of data URLs (a server that reads local media)."""
    resize: Any = None
    """``image_resize`` as written (a preset, a mapping or ``auto``): resolved when the client is built,
    since ``auto`` reads the served checkpoint's files."""


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    name: str
    """The model's name in records (or the role's name)."""
    kind: ProviderKind
    model: str
    """The model id the server serves (default: the name)."""
    base_url: str | None
    key_env: str | None
    wire: str
    """The request format: the kind's, or the entry's ``wire:`` where the kind lets it choose (the sim)."""
    limits: EndpointLimits = field(default_factory=EndpointLimits)
    timeouts: Timeouts = field(default_factory=Timeouts)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """The entry's ``retry:`` over the defaults (the sim's shorter backoff for an embedded endpoint)."""
    batch: BatchSettings | None = None
    """``batch:`` (None: interactive requests only)."""
    images: ImageSettings = field(default_factory=ImageSettings)
    tool_message_images: bool = False
    extra_body: dict[str, Any] | None = None
    capabilities: dict[str, bool | int] = field(default_factory=dict)
    """Switches (bool) and ``max_images`` (a count, kept as written)."""
    params: dict[str, Any] | None = None
    serve: dict[str, Any] | None = None
    endpoint_id: str | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The entry as written, read-only: the provider-specific options its factory reads (and the sim's script)."""

    @property
    def provider(self) -> str:
        return self.kind.name

    @classmethod
    def of(cls, name: str, entry: Mapping[str, Any]) -> EndpointSpec:
        """Type an entry: KeyError for a provider the registry does not know, ValueError for a
        value that cannot be typed (an entry that skipped validation: a manifest, ``--judge``)."""
        kind = provider_kind(str(entry["provider"]))
        if kind is None:
            raise KeyError(f"unknown provider {entry['provider']!r}")
        retry = dict(entry.get("retry") or {})
        try:
            timeouts = Timeouts(**(entry.get("timeouts") or {}))
            policy = RetryPolicy(**({**SIM_RETRY, **retry} if kind.embedded else retry))
        except TypeError as e:
            raise ValueError(str(e)) from None
        return cls(name=name, kind=kind, model=str(entry.get("model", name)), base_url=entry.get("base_url"),
                   key_env=entry.get("api_key_env"), wire=kind.wire_of(dict(entry)), limits=_limits(entry),
                   timeouts=timeouts, retry=policy, batch=BatchSettings.from_config(entry.get("batch")),
                   images=ImageSettings(entry.get("max_image_bytes"), entry.get("max_image_pixels"),
                                        bool(entry.get("local_media", False)), entry.get("image_resize")),
                   tool_message_images=bool(entry.get("tool_message_images", False)),
                   extra_body=entry.get("extra_body"),
                   capabilities={k: v if k == "max_images" else bool(v)
                                 for k, v in (entry.get("capabilities") or {}).items()},
                   params=entry.get("params"), serve=entry.get("serve"), endpoint_id=entry.get("endpoint_id"),
                   options=MappingProxyType(entry if isinstance(entry, dict) else dict(entry)))


def _limits(entry: Mapping[str, Any]) -> EndpointLimits:
    limits = entry.get("limits") or {}
    return EndpointLimits(concurrency=None if limits.get("concurrency") is None else int(limits["concurrency"]), rpm=limits.get("rpm"),
                          tpm=limits.get("tpm"), max_body_mb=limits.get("max_body_mb", DEFAULT_MAX_BODY_MB))
