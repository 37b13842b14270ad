"""A model or role entry, typed once at load time.

The validated config stays as written (it is what the manifest stores and the hash covers), and
each entry also becomes an ``EndpointSpec``: the provider's kind from the provider registry, the
model id, where the server is, which variable holds the key, limits, timeouts, retry, declared
capabilities and ``serve:``. Code that builds clients, checks endpoints or prices them reads
these fields instead of re-reading dicts, and asks the kind (``embedded``, ``servable``, its
wire) instead of comparing provider names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from providers.registry import ProviderKind, provider_kind


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
    limits: dict[str, Any] = field(default_factory=dict)
    timeouts: dict[str, Any] = field(default_factory=dict)
    retry: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, bool | int] = field(default_factory=dict)
    """Switches (bool) and ``max_images`` (a count, kept as written)."""
    params: dict[str, Any] | None = None
    serve: dict[str, Any] | None = None
    endpoint_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    """The entry as written (provider-specific options live here)."""

    @property
    def provider(self) -> str:
        return self.kind.name

    @classmethod
    def of(cls, name: str, entry: dict[str, Any]) -> EndpointSpec:
        """Type a validated entry (KeyError for a provider the registry does not know)."""
        kind = provider_kind(str(entry["provider"]))
        if kind is None:
            raise KeyError(f"unknown provider {entry['provider']!r}")
        wire = kind.wire_of(entry)
        return cls(name=name, kind=kind, model=str(entry.get("model", name)), base_url=entry.get("base_url"),
                   key_env=entry.get("api_key_env"), wire=wire, limits=dict(entry.get("limits") or {}),
                   timeouts=dict(entry.get("timeouts") or {}), retry=dict(entry.get("retry") or {}),
                   capabilities={k: v if k == "max_images" else bool(v)
                                 for k, v in (entry.get("capabilities") or {}).items()},
                   params=entry.get("params"), serve=entry.get("serve"), endpoint_id=entry.get("endpoint_id"),
                   raw=entry)
