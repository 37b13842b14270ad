"""Sweep configs: YAML files with models, model roles, suites with settings, and seeds.

Model lists can live in their own files and be pulled in with ``include:``, so a lab keeps one
list of endpoints and many sweeps. The config hash that guards resume ignores purely
operational knobs (concurrency, fsync, progress), which may change between attempts.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.log_to import LogTo, log_to_problems, log_to_spec
from fasteval.config.notify import NotifySpec, notify_problems, notify_spec
from fasteval.config.run import RunSettings
from fasteval.config.schema import (
    KNOWN_ROLES,
    TOP_LEVEL,
    KeyPath,
    Problems,
    Source,
    check_endpoint,
    check_mapping,
    check_published,
    check_suite,
    did_you_mean,
)
from fasteval.config.secrets import secret_problems
from fasteval.config.series import Checkpoint, SeriesError, SeriesSpec, expand_series, series_entry
from fasteval.config.yaml_read import read_yaml
from fasteval.core.errors import ConfigError, DamagedRunFolder
from fasteval.runfolder.names import MANIFEST

OPERATIONAL_RUN_KEYS = frozenset({"max_concurrency", "fsync", "progress", "keep_errors", "sandbox", "cache", "http",
                                  "breaker", "gpus"})


@dataclass(slots=True)
class SweepConfig:
    raw: dict[str, Any]
    """The config as written (includes expanded): what the manifest stores and the hash covers."""
    path: Path
    models: list[EndpointSpec]
    """The evaluated models, typed (a series' checkpoints each one model)."""
    roles: dict[str, EndpointSpec]
    suites: list[dict[str, Any]]
    """Suite entries with their path options resolved against the config file's folder."""
    seeds: list[int]
    run: RunSettings = field(default_factory=RunSettings)
    notify: NotifySpec | None = None
    """Who is told when the sweep ends or goes wrong (``notify:``)."""
    log_to: LogTo | None = None
    """The experiment trackers told each group's scores as it completes (``log_to:``)."""
    series: dict[str, list[Checkpoint]] = field(default_factory=dict)
    """Each series entry's checkpoints taken, in serving order (their models are in ``models``)."""
    pending: dict[str, list[str]] = field(default_factory=dict)
    """Per series, the matched folders not taken (not loadable yet), one line each: watch mode's wait."""
    store: Path | None = None
    """The results store (``store:``, else ``$FASTEVAL_STORE``; None: none)."""

    def hash(self) -> str:
        return config_hash(self.raw)

    def endpoint(self, name: str) -> EndpointSpec:
        """The typed spec of the model or role called ``name`` (KeyError if none)."""
        found = next((m for m in self.models if m.name == name), None)
        return found if found is not None else self.roles[name]


def _refuse_secrets(spec: Any, where: KeyPath, src: Source, problems: Problems) -> bool:
    """Report every secret in a config subtree (it would be copied into the manifest); True if any."""
    found = False
    for path, message in secret_problems(spec):
        problems.add(src, (*where, *path), message)
        found = True
    return found


def _check_sandbox_limits(run: Any, src: Source, problems: Problems) -> None:
    """Typed by the schema; a zero or negative limit is refused now, not when the pool starts."""
    sandbox = run.get("sandbox") if isinstance(run, dict) else None
    limits = sandbox.get("limits") if isinstance(sandbox, dict) else None
    if not isinstance(limits, dict):
        return
    for name, value in limits.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            problems.add(src, ("run", "sandbox", "limits", name), f"must be positive, got {value}")


def _read(path: Path) -> tuple[Any, Source]:
    data, lines = read_yaml(path)
    return data, Source(path, lines)


MAX_INCLUDE_DEPTH = 8


def _expand_includes(items: list[Any], src: Source, base: Path, problems: Problems,
                     path: KeyPath = ("models",), chain: tuple[Path, ...] = ()) -> list[tuple[Any, Source, KeyPath]]:
    """Model entries with the file and key path each came from (for messages that point at it).

    ``chain`` is the files being included, outermost first: a file including itself, directly or
    through others, is a config error at the include line (not a RecursionError).
    """
    out: list[tuple[Any, Source, KeyPath]] = []
    chain = chain or (src.file.resolve(),)
    for i, item in enumerate(items):
        where: KeyPath = (*path, i)
        if isinstance(item, dict) and "include" in item:
            if set(item) != {"include"}:
                problems.add(src, where, "an include entry holds only 'include: FILE'")
                continue
            inc = base / str(item["include"])
            if not inc.is_file():
                problems.add(src, (*where, "include"), f"{item['include']} does not exist (looked for {inc})")
                continue
            target = inc.resolve()
            if target in chain or len(chain) >= MAX_INCLUDE_DEPTH:
                trail = " -> ".join(str(f.name) for f in (*chain, target))
                why = "an include cycle" if target in chain else f"includes nested deeper than {MAX_INCLUDE_DEPTH}"
                problems.add(src, (*where, "include"), f"{why}: {trail}")
                continue
            try:
                loaded, inc_src = _read(inc)
            except ConfigError as e:
                problems.items.extend(e.problems)
                continue
            inc_path: KeyPath = ()
            if isinstance(loaded, dict):
                loaded, inc_path = loaded.get("models", []), ("models",)
            if not isinstance(loaded, list):
                problems.add(inc_src, (), "an included model list must be a YAML list")
                continue
            out.extend(_expand_includes(loaded, inc_src, inc.parent, problems, inc_path, (*chain, target)))
        else:
            out.append((item, src, where))
    return out


Readiness = Callable[[Path], str | None]


def _expand(spec: dict[str, Any], src: Source, where: KeyPath, base: Path, problems: Problems,
            ready: Readiness | None, series: dict[str, list[Checkpoint]],
            pending: dict[str, list[str]]) -> list[dict[str, Any]]:
    """A model entry, or the entries of its series' checkpoints (one per step)."""
    found = SeriesSpec.of(spec, base)
    if found is None:
        return [spec]
    if not isinstance(spec.get("serve"), dict):
        problems.add(src, (*where, "checkpoints"), "a series needs serve: (its checkpoints are served locally)")
        return []
    try:
        taken, refused, waiting = expand_series(found, spec, ready)
    except SeriesError as e:
        problems.add(src, (*where, "serve", "model"), str(e))
        return []
    for line in refused:
        problems.add(src, (*where, "serve", "model"), f"not a loadable checkpoint: {line}")
    if ready is None and problems.check_paths and not taken and not refused and not waiting:
        # (unchecked paths: a recipe whose checkpoints a trainer has yet to write still reads)
        problems.add(src, (*where, "serve", "model"), f"no checkpoint folder matches {found.pattern}")
    series[found.name] = taken
    pending[found.name] = waiting
    return [series_entry(spec, ckpt) for ckpt in taken]


def load_config(path: str | Path, *, check_paths: bool = True, ready: Readiness | None = None) -> SweepConfig:
    """Read and validate a sweep config; every problem is reported at once (ConfigError.problems).

    Relative paths are read from the config file's folder. ``check_paths=False`` skips the check
    that data files exist, and lets a series match no checkpoint yet (for tools that only inspect
    a config). A series entry expands into one
    model per checkpoint; a matched folder that is not loadable is a config error, except a step
    still being written (``series.unfinished``: no marker file yet, or the newest step mid-save),
    which is left out and listed in ``pending``; with ``ready`` (watch mode) every folder it refuses
    waits there until ready.
    """
    p = Path(path)
    raw, src = _read(p)
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: the top level must be a mapping")
    problems = Problems(check_paths=check_paths)
    base = p.parent
    top = check_mapping(raw, TOP_LEVEL, (), src, problems, base)
    expanded = _expand_includes(raw.get("models") or [] if isinstance(raw.get("models"), list) else [],
                                src, base, problems)
    written: list[dict[str, Any]] = []
    models: list[dict[str, Any]] = []
    series: dict[str, list[Checkpoint]] = {}
    pending: dict[str, list[str]] = {}
    for spec, spec_src, where in expanded:
        if _refuse_secrets(spec, where, spec_src, problems):
            continue
        check_endpoint(spec, where, spec_src, problems, role=False)
        if isinstance(spec, dict):
            written.append(spec)
            models.extend(_expand(spec, spec_src, where, base, problems, ready, series, pending))
    raw["models"] = written  # as written: a checkpoint that lands later does not change the hash
    if not expanded and "models" in raw:
        problems.add(src, ("models",), "'models' is empty")
    names = [m.get("name") for m in models] + [n for n in series if n not in {m.get("name") for m in models}]
    dupes = sorted({str(n) for n in names if names.count(n) > 1})
    if dupes:
        problems.add(src, ("models",), f"model names must be unique: {', '.join(dupes)} repeated")
    roles = raw.get("roles") or {}
    if isinstance(roles, dict):
        for role, spec in roles.items():
            if role not in KNOWN_ROLES:
                problems.add(src, ("roles", role), f"unknown role{did_you_mean(str(role), KNOWN_ROLES)} "
                             f"(known: {', '.join(sorted(KNOWN_ROLES))})")
            if _refuse_secrets(spec, ("roles", role), src, problems):
                continue
            check_endpoint(spec, ("roles", role), src, problems, role=True)
    for key in ("run", "suites", "notify", "log_to"):
        _refuse_secrets(raw.get(key), (key,), src, problems)
    for key, message in notify_problems(raw.get("notify")):
        problems.add(src, ("notify", key) if key else ("notify",), message)
    for key, message in log_to_problems(raw.get("log_to")):
        problems.add(src, ("log_to", key) if key else ("log_to",), message)
    _check_sandbox_limits(raw.get("run"), src, problems)
    suites: list[dict[str, Any]] = []
    entries = raw.get("suites")
    if isinstance(entries, list):
        if not entries:
            problems.add(src, ("suites",), "'suites' is empty")
        for i, entry in enumerate(entries):
            suites.append(check_suite(entry, ("suites", i), src, problems, base))
    check_published(raw.get("published"), src, problems)
    if problems:
        items = problems.in_file_order()
        raise ConfigError(f"{p}: {len(items)} problem{'s' if len(items) > 1 else ''}:\n  " + "\n  ".join(items),
                          items)
    seeds_raw = raw.get("seeds", [0])
    seeds = list(range(seeds_raw)) if isinstance(seeds_raw, int) else [int(x) for x in seeds_raw]
    return SweepConfig(raw=raw, path=p, models=[EndpointSpec.of(str(m["name"]), m) for m in models],
                       roles={str(r): EndpointSpec.of(str(r), spec) for r, spec in (roles if isinstance(roles, dict) else {}).items()},
                       suites=suites, seeds=seeds, run=RunSettings.of(top.get("run")),
                       notify=notify_spec(top.get("notify")), log_to=log_to_spec(top.get("log_to"), base),
                       series=series, pending=pending, store=store_path(top.get("store")))


STORE_ENV = "FASTEVAL_STORE"
"""A team's default results store, for configs that do not name one."""


def store_path(value: Any) -> Path | None:
    """``store:`` as resolved against the config's folder, else ``$FASTEVAL_STORE`` (empty: none)."""
    if isinstance(value, str) and value:
        return Path(value)
    env = os.environ.get(STORE_ENV, "")
    return Path(env).expanduser().resolve() if env else None


def config_from_manifest(manifest: dict[str, Any], run_dir: Path) -> SweepConfig:
    """The config a run folder was started with, its relative paths read from the original
    config file's folder (recorded in the manifest) as they were at run time."""
    try:
        raw = manifest["config"]
        base = Path(str(manifest.get("config_path") or run_dir / MANIFEST)).parent
        problems = Problems(check_paths=False)
        suites = [check_suite(e, ("suites", i), Source(run_dir / MANIFEST), problems, base)
                  for i, e in enumerate(raw.get("suites") or [])]
        return SweepConfig(raw=raw, path=run_dir / MANIFEST,
                           models=[EndpointSpec.of(str(m["name"]), m) for m in raw["models"]],
                           roles={str(r): EndpointSpec.of(str(r), spec) for r, spec in (raw.get("roles") or {}).items()},
                           suites=suites, seeds=[], run=RunSettings.of(raw.get("run")))
    except (KeyError, ValueError, TypeError, AttributeError) as e:  # what fasteval never writes: a damaged manifest
        raise DamagedRunFolder(f"{run_dir / MANIFEST}: its config cannot be read ({type(e).__name__}: {e}); "
                               "pass --config CONFIG instead") from None


# How a served model is kept up, not what it computes: may change between attempts of one run.
OPERATIONAL_SERVE_KEYS = frozenset({"replicas", "startup_timeout_s", "max_restarts", "routing", "admission",
                                    "health_interval_s", "restart_backoff_s", "stop_timeout_s",
                                    "gpu_memory_utilization"})


def _identity(raw: dict[str, Any]) -> dict[str, Any]:
    # how a run is watched (notify, log_to), what is shown beside it (published) and where its
    # results are also kept (store): not what it computes
    ident = {k: v for k, v in raw.items() if k not in ("notify", "log_to", "published", "store")}
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
