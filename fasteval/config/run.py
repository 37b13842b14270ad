"""``run:``, typed once at load time: how the sweep runs, not what it computes.

The engine reads these fields (the global job cap, when records are synced, the GPUs, the
breaker...). The services tools ask for (the cache, the sandbox pool, the HTTP session, named
limiters, the browser) live below the config and read their own sections: ``service_options``
hands them over as written, read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from providers import BreakerPolicy

if TYPE_CHECKING:
    from fasteval.runfolder.records import FsyncPolicy

DEFAULT_MAX_CONCURRENCY = 256
"""Jobs in flight in the whole sweep when neither ``run.max_concurrency`` nor the CLI says."""

SERVICE_SECTIONS = ("sandbox", "cache", "http", "limits", "browser")
"""The sections of ``run:`` that a service (not the engine) reads."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    fsync: FsyncPolicy = "batch"
    """When records.jsonl is synced: always, batch or never."""
    progress: bool | None = None
    keep_errors: bool = False
    gpus: Any = "auto"
    """``auto``, a count or a list of ids (``providers.local.gpus.detect_gpus`` reads it)."""
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    cache: Mapping[str, Any] | None = None
    """``run.cache`` as written ({path, modes}), or None when the config has none."""
    sandbox: Mapping[str, Any] | None = None
    http: Mapping[str, Any] | None = None
    limits: Mapping[str, int] | None = None
    browser: Mapping[str, Any] | None = None
    """Set: the run renders pages in a browser (VistaHop's reference), so its service is started."""

    @classmethod
    def of(cls, run: Mapping[str, Any] | None) -> RunSettings:
        """Type a validated ``run:`` section (an empty or missing one takes every default)."""
        run = run or {}

        def section(key: str) -> Mapping[str, Any] | None:
            value = run.get(key)
            return MappingProxyType(dict(value)) if value else None

        return cls(max_concurrency=int(run.get("max_concurrency", DEFAULT_MAX_CONCURRENCY)),
                   fsync=run.get("fsync", "batch"), progress=run.get("progress"),
                   keep_errors=bool(run.get("keep_errors", False)), gpus=run.get("gpus", "auto"),
                   breaker=BreakerPolicy(**(run.get("breaker") or {})), cache=section("cache"),
                   sandbox=section("sandbox"), http=section("http"), limits=section("limits"),
                   browser=section("browser"))

    def with_cache(self, *, path: str | None = None, modes: str | None = None) -> RunSettings:
        """``--cache`` / ``--cache-mode`` over ``run.cache``."""
        cache = dict(self.cache or {})
        if path:
            cache["path"] = path
        if modes:
            cache["modes"] = modes
        return replace(self, cache=MappingProxyType(cache))

    def service_options(self) -> dict[str, Any]:
        """The sections services read, by name (what ``fasteval.services.start_services`` is given)."""
        return {key: dict(value) for key in SERVICE_SECTIONS if (value := getattr(self, key)) is not None}
