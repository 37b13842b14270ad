"""The Python API: run a sweep and stream its records without the CLI.

``run`` does what ``fasteval run`` does (strict config, selectors, preflight, the same run
folder and resume rules) and returns a summary instead of an exit code; ``load_records``
streams the latest record of each job through the run index, so a big run folder never sits in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fasteval.config.load import SweepConfig, load_config
from fasteval.core.errors import ConfigError
from fasteval.engine.plan import RunOptions, Selectors, default_run_dir
from fasteval.engine.sweep import SweepIncomplete, SweepResult, run_sweep
from fasteval.runfolder.index import open_index
from fasteval.runfolder.records import RECORDS


@dataclass(slots=True)
class RunSummary:
    """What a run did; ``exit_code`` is what ``fasteval run`` would have returned."""

    run_dir: Path
    ok: int
    errors: int
    skipped: int
    not_run: int
    wall_s: float
    exit_code: int
    errors_by: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    """model -> error_kind -> [count, one example message]."""
    incomplete: str | None = None
    """Why the run stopped with work left (an endpoint down), or None."""


def _summary(run_dir: Path, r: SweepResult, incomplete: str | None) -> RunSummary:
    return RunSummary(run_dir=run_dir, ok=r.ok, errors=r.errors, skipped=r.skipped, not_run=r.not_run,
                      wall_s=r.wall_s, exit_code=r.exit_code(incomplete is not None), errors_by=r.errors_by, incomplete=incomplete)


async def run_async(config: str | Path | SweepConfig, *, run_dir: str | Path | None = None,
                    preflight: bool = True, force: bool = False, keep_errors: bool = False,
                    max_concurrency: int | None = None, models: list[str] | None = None,
                    suites: list[str] | None = None, settings: list[str] | None = None,
                    seeds: list[int] | None = None, limit: int | None = None) -> RunSummary:
    """``run`` inside a running event loop (notebooks, async applications)."""
    cfg = config if isinstance(config, SweepConfig) else load_config(config)
    if preflight:
        from fasteval.engine.preflight import preflight as check

        problems = await check(cfg)
        if problems:
            raise ConfigError("preflight: " + "; ".join(problems), problems)
    folder = Path(run_dir) if run_dir is not None else default_run_dir(cfg.path)
    sel = Selectors(models=list(models or []), suites=list(suites or []), settings=list(settings or []),
                    seeds=list(seeds or []), limit=limit)
    opts = RunOptions(run_dir=folder, force=force, keep_errors=keep_errors, max_concurrency=max_concurrency,
                      progress=False, selectors=sel)
    from fasteval.runfolder.lock import run_folder_lock

    folder.mkdir(parents=True, exist_ok=True)
    with run_folder_lock(folder, "run (Python API)"):  # RunFolderBusy when another command writes it
        try:
            result = await run_sweep(cfg, opts)
        except SweepIncomplete as e:
            return _summary(folder, e.result, str(e))
    return _summary(folder, result, None)


def run(config: str | Path | SweepConfig, *, run_dir: str | Path | None = None, **options: Any) -> RunSummary:
    """Run (or resume) a sweep; selectors (models, suites, settings, seeds, limit) narrow the plan.

    Raises ConfigError for a bad config or a failed preflight (nothing ran, no run folder), and
    RunFolderBusy when another command (a CLI run, a rescore) holds the run folder.
    """
    return asyncio.run(run_async(config, run_dir=run_dir, **options))


def load_records(run_dir: str | Path, **filters: Any) -> Iterator[dict[str, Any]]:
    """Stream each job's latest record as a dict, in file order, one at a time.

    Reads through the run index (one small row per job), so memory stays flat however large the
    run. ``filters`` narrow by index column, e.g. ``model="gpt-4o"``, ``status="error"``,
    ``suite=["tirbench", "vistahop"]``.
    """
    folder = Path(run_dir)
    if not (folder / RECORDS).exists():
        raise FileNotFoundError(f"{run_dir} holds no {RECORDS}")
    with open_index(folder) as index:
        yield from index.iter_records(**filters)
