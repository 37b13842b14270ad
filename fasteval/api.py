"""The Python API: run a sweep and stream its records without the CLI.

``run`` does what ``fasteval run`` does (strict config, selectors, preflight, the same run
folder and resume rules) and returns a summary instead of an exit code; ``load_records``
streams the latest record of each job through the run index, so a big run folder never sits in memory.

This module is also the one door into a sweep: ``claimed_run_folder`` runs preflight once, creates
and locks the run folder, and undoes a start that failed; every sweep (``fasteval run``, ``--watch``
rounds, ``--pilot``, a Slurm shard, this API) runs inside it through ``ClaimedRun.sweep``.
``run_planned`` is that path for one sweep (``cli/run.py`` adds only its terminal and run.log).
``tests/architecture/test_run_path.py`` fails on a sweep started anywhere else.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fasteval.config.load import SweepConfig, load_config
from fasteval.core.errors import ControlRefused, PreflightFailed, RunDirUnwritable, UsageError
from fasteval.core.exitcodes import RunIncomplete, exit_code_for
from fasteval.core.redact import redact_text
from fasteval.engine.plan import RunOptions, Selectors, default_run_dir
from fasteval.engine.run.sweep import SweepIncomplete, SweepResult, run_sweep
from fasteval.runfolder.diskfaults import unwritable_run_dir
from fasteval.runfolder.index import open_index
from fasteval.runfolder.lock import run_folder_lock
from fasteval.runfolder.names import MANIFEST, RECORDS
from fasteval.runfolder.records import read_manifest, write_manifest


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


def _summary(run_dir: Path, r: SweepResult, incomplete: SweepIncomplete | None = None) -> RunSummary:
    code = r.exit_code() if incomplete is None else exit_code_for(incomplete)  # the CLI's map, not a copy
    return RunSummary(run_dir=run_dir, ok=r.ok, errors=r.errors, skipped=r.skipped, not_run=r.not_run,
                      wall_s=r.wall_s, exit_code=code, errors_by=r.errors_by,
                      incomplete=None if incomplete is None else str(incomplete))


async def run_async(config: str | Path | SweepConfig, *, run_dir: str | Path | None = None,
                    preflight: bool = True, keep_errors: bool = False,
                    max_concurrency: int | None = None, models: list[str] | None = None,
                    suites: list[str] | None = None, settings: list[str] | None = None,
                    seeds: list[int] | None = None, limit: int | None = None) -> RunSummary:
    """``run`` inside a running event loop (notebooks, async applications)."""
    cfg = config if isinstance(config, SweepConfig) else load_config(config)
    folder = Path(run_dir) if run_dir is not None else default_run_dir(cfg.path)
    sel = Selectors(models=list(models or []), suites=list(suites or []), settings=list(settings or []),
                    seeds=list(seeds or []), limit=limit)
    opts = RunOptions(run_dir=folder, keep_errors=keep_errors, max_concurrency=max_concurrency,
                      progress=False, selectors=sel)
    try:
        result = await run_planned(cfg, opts, preflight=preflight)
    except SweepIncomplete as e:
        return _summary(folder, e.result, e)
    return _summary(folder, result)


async def run_planned(cfg: SweepConfig, opts: RunOptions, *, preflight: bool = True,
                      command: str = "run (Python API)",
                      while_held: Callable[[Path], AbstractContextManager[object]] | None = None) -> SweepResult:
    """The one run path of ``fasteval run``, ``--pilot`` and ``run_async``: preflight, claim the run
    folder, sweep.

    ``while_held`` wraps the sweep once the folder's lock is held (the CLI opens run.log there, so
    a refused second run writes nothing). Raises ``PreflightFailed``, ``RunDirUnwritable`` and
    ``RunFolderBusy`` before anything ran, ``SweepIncomplete`` with the partial result.
    """
    async with claimed_run_folder(cfg, opts, preflight=preflight, command=command) as claimed:
        with while_held(opts.run_dir) if while_held is not None else nullcontext():
            return await claimed.sweep(cfg)


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    """A run folder this process has claimed (preflight passed, the folder locked): its sweeps."""

    opts: RunOptions

    async def sweep(self, cfg: SweepConfig) -> SweepResult:
        """One sweep of ``cfg`` into the claimed folder (``--watch`` runs one per round); how it ended
        goes into the manifest, so a report of a partial run can say why it is partial."""
        run_dir = self.opts.run_dir
        try:
            result = await run_sweep(cfg, self.opts)
        except SweepIncomplete as e:
            _note_ending(run_dir, "incomplete", str(e))
            raise
        except RunIncomplete as e:  # a local fault (a full disk): the note itself may not be written
            _note_ending(run_dir, "stopped", str(e))
            raise
        except (KeyboardInterrupt, asyncio.CancelledError):
            _note_ending(run_dir, "interrupted")
            raise
        if result.interrupted:
            _note_ending(run_dir, "interrupted")
        else:
            _note_ending(run_dir, "narrowed" if self.opts.selectors else "finished")
        return result


def _note_ending(run_dir: Path, how: str, why: str | None = None) -> None:
    """``how`` the sweep that started last ended, on its ``history`` entry (never on an earlier
    sweep's: a start refused before it wrote one notes nothing). Best effort: a manifest that
    cannot be read or written leaves the ending unsaid, never the run failed."""
    from datetime import UTC, datetime

    try:
        manifest = read_manifest(run_dir)
        history = (manifest or {}).get("history")
        if manifest is None or not isinstance(history, list) or not history or not isinstance(history[-1], dict) \
                or "ended" in history[-1]:
            return
        ending: dict[str, Any] = {"at": datetime.now(UTC).isoformat(), "how": how}
        if why:
            ending["why"] = redact_text(why)[:500]
        history[-1]["ended"] = ending
        write_manifest(run_dir, manifest)
    except (OSError, UsageError):
        return


@asynccontextmanager
async def claimed_run_folder(cfg: SweepConfig, opts: RunOptions, *, preflight: bool,
                             command: str) -> AsyncIterator[ClaimedRun]:
    """Preflight once, then create and lock ``opts.run_dir`` for the block; a start that fails claims nothing.

    Preflight comes first so that endpoints not ready leave no folder behind. A start the user
    must fix (a ``UsageError``: a config the sweep refuses, a changed config) or stopped (Ctrl-C,
    a cancelled task) is undone here, and only here, while the folder holds no records: a folder
    this call created is deleted, a manifest it added to a folder that had none is removed. A
    folder it cannot write, or one whose control socket another sweep answers on, is left as it
    is, and so is one where a bug of ours stopped the start (run.log holds its traceback).
    """
    if preflight:
        from fasteval.engine.run.preflight import preflight as check

        problems = await check(cfg)
        if problems:
            raise PreflightFailed(problems)
    run_dir = opts.run_dir
    existed = _create(run_dir)
    with run_folder_lock(run_dir, command):
        claimed = (run_dir / MANIFEST).exists()
        try:
            yield ClaimedRun(opts)
        except (UsageError, KeyboardInterrupt, asyncio.CancelledError) as e:
            if not isinstance(e, (RunDirUnwritable, ControlRefused)) and not (run_dir / RECORDS).exists():
                _unclaim(run_dir, existed=existed, claimed=claimed)
            raise


def _unclaim(run_dir: Path, *, existed: bool, claimed: bool) -> None:
    """Undo what a failed start wrote: the folder it created, or the manifest it added."""
    if not existed:
        shutil.rmtree(run_dir, ignore_errors=True)
    elif not claimed:
        (run_dir / MANIFEST).unlink(missing_ok=True)


def _create(run_dir: Path) -> bool:
    """Create the run folder (once, at start: no sweep shares the loop yet); whether it existed."""
    existed = run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise unwritable_run_dir(e, run_dir) from e
    return existed


def run(config: str | Path | SweepConfig, *, run_dir: str | Path | None = None, **options: Any) -> RunSummary:
    """Run (or resume) a sweep; selectors (models, suites, settings, seeds, limit) narrow the plan.

    Raises ConfigError for a bad config or a failed preflight (nothing ran, no run folder),
    RunDirUnwritable for a folder it cannot create, and RunFolderBusy when another command (a CLI
    run, a rescore) holds the run folder.
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
