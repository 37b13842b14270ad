"""``fasteval run CONFIG --watch``: evaluate a training run's checkpoints as the trainer writes them.

The watcher is a loop around ordinary sweeps, not a second scheduler: it looks at the series'
folders every ``interval_s``, and whenever a checkpoint has become complete it loads the config
again (the new checkpoint is one more model of the series) and runs the sweep into the same run
folder, through the run path that claimed it (``fasteval.api.ClaimedRun.sweep``). Resume skips every job already recorded, so each round runs only the new checkpoint's
jobs, and a ``kill -9`` at any moment is undone by running the same command again: nothing lives
in the watcher that the run folder does not hold.

A checkpoint is complete when every weight file its index names is present and the names, sizes
and modification times of its files did not change between two looks ``interval_s`` apart, or,
when the series names a ``marker``, once that file exists (the reliable signal: a writer that
pauses longer than the interval looks finished). A half-written folder is never served.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from fasteval.config.load import SweepConfig, load_config
from fasteval.config.series import SeriesSpec, not_loadable, step_of
from fasteval.engine.run.sweep import SweepIncomplete, SweepResult
from fasteval.runfolder.index import open_index
from fasteval.runfolder.names import MANIFEST
from fasteval.runfolder.records import read_manifest

RunSweep = Callable[[SweepConfig], Awaitable[SweepResult]]
"""One sweep into the watched run folder (the run path's ``ClaimedRun.sweep``)."""

log = logging.getLogger("fasteval.engine.offline.watch")

Snapshot = tuple[tuple[str, int, int], ...]


@dataclass(slots=True)
class WatchOptions:
    interval_s: float = 30.0
    """Seconds between two looks at the checkpoint folders (also the stability window)."""
    until_step: int | None = None
    """Evaluate steps up to this one, and stop once a checkpoint at or past it has landed."""
    idle_timeout_s: float | None = None
    """Stop after this long without a new complete checkpoint."""
    run_dir: Path | None = None
    """The watched run folder: a restarted watch reads what it already holds, so the checkpoints it
    evaluated before are not announced (or swept) as new."""


@dataclass(slots=True)
class WatchResult:
    rounds: int = 0
    """Sweeps run (one per batch of newly complete checkpoints)."""
    evaluated: list[str] = field(default_factory=list)
    """Models taken, in the order they were first taken."""
    last: SweepResult | None = None
    incomplete: bool = False
    """The last round left jobs unrun (a server that did not start, an endpoint down)."""
    interrupted: bool = False
    stopped_by: str = ""
    """``until-step``, ``idle-timeout`` or ``interrupt``."""


class Completeness:
    """Whether a checkpoint folder is complete: loadable and unchanged since the previous look."""

    def __init__(self, markers: dict[Path, str] | None = None) -> None:
        self._seen: dict[Path, Snapshot] = {}
        self.markers = markers or {}
        """Series pattern prefix -> marker file name (a series that names one)."""

    def marker_for(self, folder: Path) -> str | None:
        for root, marker in self.markers.items():
            if folder.is_relative_to(root):
                return marker
        return None

    def __call__(self, folder: Path) -> str | None:
        """None when ``folder`` may be served; else why it is still waiting."""
        marker = self.marker_for(folder)
        if marker is not None and not (folder / marker).exists():
            return f"waiting for its marker file {marker}"
        why = not_loadable(folder)
        if why is not None:
            return f"incomplete ({why})"
        if marker is not None:
            return None
        now = snapshot(folder)
        before, self._seen[folder] = self._seen.get(folder), now
        if before != now:
            return "still being written (files changed since the last look)" if before else "first look"
        return None


def snapshot(folder: Path) -> Snapshot:
    """Names, sizes and modification times of every file under the folder: what a writer in
    progress changes (the time too: a trainer that preallocates its shards at full size and then
    fills them changes no size)."""
    out: list[tuple[str, int, int]] = []
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            try:
                st = path.stat()
                out.append((path.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns))
            except OSError:
                out.append((path.relative_to(folder).as_posix(), -1, -1))  # gone between listing and stat
    return tuple(sorted(out))


def _markers(cfg_path: Path) -> dict[Path, str]:
    """Each series' marker file, keyed by the fixed part of its glob (read from the written config)."""
    cfg = load_config(cfg_path, check_paths=False, ready=lambda _: "not looked at")
    out: dict[Path, str] = {}
    for entry in cfg.raw["models"]:
        spec = SeriesSpec.of(entry, cfg.path.parent)
        if spec is not None and spec.marker:
            out[_fixed_prefix(spec.pattern)] = spec.marker
    return out


def _fixed_prefix(pattern: str) -> Path:
    parts: list[str] = []
    for part in Path(pattern).parts:
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    return Path(*parts) if parts else Path("/")


def _within(cfg: SweepConfig, until_step: int | None) -> SweepConfig:
    """The config without the checkpoints past ``until_step`` (they are not evaluated)."""
    if until_step is None:
        return cfg
    late = {f"{name}@{c.step}" for name, ckpts in cfg.series.items() for c in ckpts if c.step > until_step}
    cfg.models = [m for m in cfg.models if m.name not in late]
    for name, ckpts in cfg.series.items():
        cfg.series[name] = [c for c in ckpts if c.step <= until_step]
    return cfg


def _reached(cfg: SweepConfig, until_step: int | None) -> bool:
    """A checkpoint at or past ``until_step`` has landed (complete or not) in every series."""
    if until_step is None or not cfg.series:
        return False
    for name, ckpts in cfg.series.items():
        steps = [c.step for c in ckpts] + [s for line in cfg.pending.get(name, [])
                                            if (s := step_of(Path(line.split(": ", 1)[0]))) is not None]
        if not steps or max(steps) < until_step:
            return False
    return True


async def watch_sweep(config: Path, sweep: RunSweep, wopts: WatchOptions,
                      say: Callable[[str], None] | None = None) -> WatchResult:
    """Run sweeps (``sweep``: into the run folder the caller claimed) as checkpoints complete, until
    a stop condition.

    Config errors in a later look (the file edited under a running watch) end the watch with
    the error, as they would end ``fasteval run``. Ctrl-C ends it with ``interrupted``.
    """
    tell = say or (lambda line: print(line, file=sys.stderr, flush=True))
    ready = Completeness(_markers(config))
    result = WatchResult()
    taken: set[str] = set()
    last_new = time.monotonic()
    before = _recorded(wopts.run_dir)  # what an earlier watch of this run folder evaluated
    while True:
        cfg = _within(load_config(config, ready=ready), wopts.until_step)
        fresh = [m.name for m in cfg.models if m.name not in taken]
        done = [m for m in fresh if m in before and before[m][0] >= before[m][1] > 0]
        begun = [m for m in fresh if m in before and m not in done]
        new = [m for m in fresh if m not in before]
        if done:
            tell(f"watch: {len(done)} checkpoint(s) already evaluated in this run folder: {', '.join(done)}")
        if begun:
            tell(f"watch: resuming {len(begun)} checkpoint(s) begun before: {', '.join(begun)}")
        taken.update(fresh)
        result.evaluated.extend(fresh)
        if new or begun:
            if new:
                tell(f"watch: {len(new)} new checkpoint(s): {', '.join(new)}")
            last_new = time.monotonic()
            result.rounds += 1
            try:
                result.last, result.incomplete = await sweep(cfg), False
            except SweepIncomplete as e:  # a checkpoint that did not start: the others still get evaluated
                result.last, result.incomplete = e.result, True
                tell(f"watch: {e}")
            r = result.last
            tell(f"watch: round {result.rounds}: {r.ok} ok, {r.errors} error, {r.skipped} already done")
            if result.last.interrupted:
                result.interrupted, result.stopped_by = True, "interrupt"
                return result
        waiting = [line for lines in cfg.pending.values() for line in lines]
        if _reached(cfg, wopts.until_step) and not any(_step_le(w, wopts.until_step) for w in waiting):
            result.stopped_by = "until-step"
            return result
        if wopts.idle_timeout_s is not None and time.monotonic() - last_new >= wopts.idle_timeout_s:
            result.stopped_by = "idle-timeout"
            return result
        await asyncio.sleep(wopts.interval_s)


def _recorded(run_dir: Path | None) -> dict[str, tuple[int, int]]:
    """Per model of the run folder: (ok records, jobs its plan had), from the run index and the
    manifest; a model with records is not new, and one whose jobs are all ok was evaluated."""
    if run_dir is None or not (run_dir / MANIFEST).exists():
        return {}
    planned = ((read_manifest(run_dir) or {}).get("plan") or {}).get("by_model") or {}
    with open_index(run_dir) as index:
        counts = index.counts(by=("model",))
    return {str(model): (by_status.get("ok", 0), int(planned.get(str(model), 0)))
            for (model,), by_status in counts.items()}


def _step_le(line: str, until_step: int | None) -> bool:
    step = step_of(Path(line.split(": ", 1)[0]))
    return step is not None and (until_step is None or step <= until_step)


