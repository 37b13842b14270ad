"""Sweep configs: YAML files with models, model roles, suites with settings, and seeds.

Model lists can live in their own files and be pulled in with ``include:``, so a lab keeps one
list of endpoints and many sweeps. The config hash that guards resume ignores purely
operational knobs (concurrency, fsync, progress), which may change between attempts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

OPERATIONAL_RUN_KEYS = frozenset({"max_concurrency", "fsync", "progress", "keep_errors", "sandbox", "cache", "http",
                                  "gpus"})


class ConfigError(ValueError):
    pass


@dataclass(slots=True)
class SweepConfig:
    raw: dict[str, Any]
    path: Path
    models: list[dict[str, Any]]
    roles: dict[str, dict[str, Any]]
    suites: list[dict[str, Any]]
    seeds: list[int]
    run: dict[str, Any] = field(default_factory=dict)

    def hash(self) -> str:
        return config_hash(self.raw)


_SECRET_KEYS = frozenset({"api_key", "apikey", "key", "token", "authorization", "password"})


def _check_no_secrets(spec: dict[str, Any], where: str) -> None:
    """Refuse keys written into a config: it is copied into every run folder's manifest."""
    for key in spec:
        if str(key).lower() in _SECRET_KEYS:
            raise ConfigError(f"{where}: do not put secrets in configs ({key!r}); put the key in an "
                              f"environment variable and name it with api_key_env")


def _expand_includes(items: list[Any], base: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict) and set(item) == {"include"}:
            path = base / str(item["include"])
            loaded = yaml.safe_load(path.read_text())
            if isinstance(loaded, dict):
                loaded = loaded.get("models", [])
            if not isinstance(loaded, list):
                raise ConfigError(f"{path}: an included model list must be a YAML list")
            out.extend(_expand_includes(loaded, path.parent))
        elif isinstance(item, dict):
            out.append(item)
        else:
            raise ConfigError(f"expected a mapping, got {item!r}")
    return out


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate a sweep config; errors name the offending field."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read config {p}: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: the top level must be a mapping")
    models = _expand_includes(raw.get("models") or [], p.parent)
    raw["models"] = models
    if not models:
        raise ConfigError(f"{p}: 'models' is empty")
    names = [m.get("name") for m in models]
    for m in models:
        _check_no_secrets(m, f"{p}: model {m.get('name')}")
        if not m.get("name") or not m.get("provider"):
            raise ConfigError(f"{p}: every model needs 'name' and 'provider' (got {m})")
    if len(set(names)) != len(names):
        raise ConfigError(f"{p}: model names must be unique: {names}")
    suites = raw.get("suites") or []
    if not suites:
        raise ConfigError(f"{p}: 'suites' is empty")
    for s in suites:
        if not isinstance(s, dict) or not s.get("name"):
            raise ConfigError(f"{p}: every suite needs a 'name' (got {s})")
    seeds_raw = raw.get("seeds", [0])
    seeds = list(range(seeds_raw)) if isinstance(seeds_raw, int) else [int(x) for x in seeds_raw]
    roles = raw.get("roles") or {}
    for role, spec in roles.items():
        if not isinstance(spec, dict) or not spec.get("provider"):
            raise ConfigError(f"{p}: role {role!r} needs a 'provider'")
        _check_no_secrets(spec, f"{p}: role {role}")
    return SweepConfig(raw=raw, path=p, models=models, roles=roles, suites=suites, seeds=seeds,
                       run=dict(raw.get("run") or {}))


# How a served model is kept up, not what it computes: may change between attempts of one run.
OPERATIONAL_SERVE_KEYS = frozenset({"replicas", "startup_timeout_s", "max_restarts", "routing", "admission",
                                    "health_interval_s", "restart_backoff_s", "stop_timeout_s",
                                    "gpu_memory_utilization"})


def _identity(raw: dict[str, Any]) -> dict[str, Any]:
    ident = dict(raw)
    run = {k: v for k, v in (raw.get("run") or {}).items() if k not in OPERATIONAL_RUN_KEYS}
    ident["run"] = run
    if any(isinstance(m, dict) and isinstance(m.get("serve"), dict) for m in raw.get("models") or []):
        ident["models"] = [{**m, "serve": {k: v for k, v in m["serve"].items() if k not in OPERATIONAL_SERVE_KEYS}}
                           if isinstance(m, dict) and isinstance(m.get("serve"), dict) else m
                           for m in raw["models"]]
    return ident


def config_hash(raw: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(_identity(raw), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def config_diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Human-readable list of what changed between two configs (identity parts only)."""
    if prefix == "":
        old, new = _identity(old), _identity(new)
    changes: list[str] = []
    for key in sorted(set(old) | set(new), key=str):
        where = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changes.extend(config_diff(a, b, where + "."))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and a != b:
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                if isinstance(x, dict) and isinstance(y, dict):
                    changes.extend(config_diff(x, y, f"{where}[{i}]."))
                elif x != y:
                    changes.append(f"{where}[{i}]: {orjson.dumps(x).decode()} -> {orjson.dumps(y).decode()}")
        elif a != b:
            changes.append(f"{where}: {orjson.dumps(a).decode()} -> {orjson.dumps(b).decode()}")
    return changes
