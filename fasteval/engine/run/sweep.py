"""One sweep: plan the jobs, skip what the run folder already holds, run the rest, record each.

Jobs start lazily from the plan iterator under a global in-flight cap (never thousands of idle
coroutines); per-endpoint limits live in each ModelClient. A job's own life (open, agent, score,
close) and its record are fasteval.engine.run.job's; the sweep counts it in the run's ledger
(fasteval.engine.ledger) and appends its record: every finished job, ok or error, is one JSONL
line. SIGINT/SIGTERM stop the launch of new jobs and cancel the running ones; what was written
stays, and the same command resumes.

A sweep starts only through the run path (``fasteval.api.claimed_run_folder``: the folder locked,
preflight run, a failed start undone there); ``tests/architecture/test_run_path.py`` keeps it so.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import platform
import signal
import sqlite3
import time
import uuid
from collections.abc import Container, Coroutine
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.config.load import SweepConfig, config_diff
from fasteval.core.errors import OutOfDescriptors
from fasteval.core.exitcodes import EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_JOB_ERRORS, EXIT_OK, RunIncomplete
from fasteval.core.pricing import model_prices
from fasteval.core.redact import add_secrets_from_env, secret_env_names, secret_like_env_names
from fasteval.core.types import Job, Record, Task
from fasteval.engine.batch.batching import BatchesPending, BatchLane, concurrency_caps, pending_line
from fasteval.engine.growth import GroupChange, GroupKey, classify, describe, identity_section
from fasteval.engine.identity import Fingerprints, checkpoint_identities, fingerprints
from fasteval.engine.ledger import Ledger, already_done
from fasteval.engine.plan import (
    RunOptions,
    SuiteRun,
    check_roles,
    check_setting_selectors,
    load_suite,
    plan,
    plan_combos,
    plan_left,
    plan_totals,
)
from fasteval.engine.run.admission import Admission
from fasteval.engine.run.clients import model_processor
from fasteval.engine.run.job import JobRunner
from fasteval.engine.run.progress import ProgressDisplay
from fasteval.engine.run.runtime import open_runtime
from fasteval.engine.run.serving import Serving
from fasteval.engine.run.store_link import StoreLink
from fasteval.engine.steer.control import Controller
from fasteval.engine.steer.control_server import control_channel
from fasteval.engine.steer.notify import Health, Notifier, watching
from fasteval.engine.steer.steering import Steering
from fasteval.engine.steer.tracking import Tracking, tracking
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.diskfaults import database_failure, out_of_descriptors, write_failure
from fasteval.runfolder.index import INDEX, open_index
from fasteval.runfolder.names import BLOBS, CACHE_KEYS, MANIFEST
from fasteval.runfolder.records import RECORDS, RecordWriter, read_manifest, write_manifest
from fasteval.suites.base import LoadError, Setting
from fasteval.tools.base import TOOLS
from providers import AdaptiveLimit, EndpointDown, ModelClient, price_terms

if TYPE_CHECKING:  # the store (and numpy with it) loads only for a run that names one
    from fasteval.store.writer import StoreMirror

log = logging.getLogger("fasteval")


@dataclass(slots=True)
class SweepResult:
    """What one sweep invocation did: its ledger's counts (nothing here counts), and how it ended."""

    ledger: Ledger = field(default_factory=Ledger)
    interrupted: bool = False
    wall_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    batches: dict[str, int] = field(default_factory=dict)
    """Batched models with batches still at the provider when the run stopped: name -> how many."""
    reused: int = 0
    """Jobs copied from the results store instead of run (among ``skipped``: the run folder holds them)."""
    stored: int = 0
    """Records this run also wrote into the results store."""

    @property
    def ok(self) -> int:
        return self.ledger.ok

    @property
    def errors(self) -> int:
        return self.ledger.error

    @property
    def skipped(self) -> int:
        """Jobs the run folder already held (resumed)."""
        return self.ledger.resumed

    @property
    def planned(self) -> int:
        """The plan's jobs within the selectors, already done ones included."""
        return self.ledger.planned

    @property
    def total(self) -> int:
        """Jobs this invocation took to a record or was to (resumed and not-run ones excluded)."""
        return self.ledger.total

    @property
    def not_run(self) -> int:
        """Jobs of this invocation left without a record (an endpoint down, a drain, Ctrl-C): a rerun runs them."""
        return self.ledger.not_run_total

    @property
    def down(self) -> dict[str, str]:
        """Endpoints given up on: name -> reason."""
        return self.ledger.down

    @property
    def errors_by(self) -> dict[str, dict[str, list[Any]]]:
        """model -> error_kind -> [count, one example message]: the end-of-run summary table."""
        return self.ledger.errors_by

    def exit_code(self, incomplete: bool = False) -> int:
        """What ``fasteval run`` returns for this result (the API reports the same number)."""
        if incomplete:
            return EXIT_INCOMPLETE
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_JOB_ERRORS if self.errors else EXIT_OK


class SweepIncomplete(RunIncomplete):
    """The sweep stopped with work left that a rerun can do (exit 3); carries the partial result."""

    def __init__(self, message: str, result: SweepResult) -> None:
        super().__init__(message)
        self.result = result


def _versions() -> dict[str, str]:
    import aiohttp
    import pyvips

    from fasteval.core.version import fasteval_version

    return {"fasteval": fasteval_version(), "python": platform.python_version(), "aiohttp": aiohttp.__version__,
            "libvips": f"{pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}"}


def prepare_run_dir(cfg: SweepConfig, opts: RunOptions, runs: list[SuiteRun] | None = None,
                    ids: Fingerprints | None = None,
                    checkpoints: dict[str, dict[str, Any]] | None = None) -> dict[GroupKey, GroupChange]:
    """Create or update the run folder's manifest; returns what each group of the config is to it.

    Nothing is refused: an edited config's groups get new fingerprints (their jobs run, their old
    records are kept aside as superseded, the index reads which from ``identity``), and a change no
    fingerprint sees reruns nothing. What changed is written to run.log, group by group.
    """
    from fasteval.suites.base import suites_with_tables

    opts.run_dir.mkdir(parents=True, exist_ok=True)
    old = read_manifest(opts.run_dir)
    now = datetime.now(UTC).isoformat()
    changes: list[str] = []
    if old is not None and old.get("config_hash") != cfg.hash():
        changes = config_diff(old.get("config", {}), cfg.raw)
        log.info("config changed since the last run of this folder: %s", "; ".join(changes[:50]))
    checkpoints = checkpoint_identities(cfg) if checkpoints is None else checkpoints
    manifest = {
        "config": cfg.raw, "config_hash": cfg.hash(), "config_path": str(cfg.path.resolve()),
        "created": (old or {}).get("created", now), "updated": now, "versions": _versions(),
        "run_id": (old or {}).get("run_id") or uuid.uuid4().hex,
        "shard": f"{opts.shard[0]}/{opts.shard[1]}" if opts.shard else None,
        # a series' checkpoints not in this config any more (``last: N``, watch mode) keep their fingerprints
        "checkpoints": {**((old or {}).get("checkpoints") or {}), **checkpoints},
        "history": ((old or {}).get("history") or []) + [{"started": now, "config_hash": cfg.hash(),
                                                           "changed": changes[:50]}],
        "suite_tables": suites_with_tables(str(s.get("name")) for s in cfg.suites),
    }
    if old is not None and "store_synced" in old:  # how far the records are in the results store
        manifest["store_synced"] = old["store_synced"]
    grown: dict[GroupKey, GroupChange] = {}
    if runs is not None:
        ids = ids if ids is not None else fingerprints(cfg, runs, checkpoints)
        before = (old or {}).get("identity")
        manifest["identity"] = identity_section(before, cfg, runs, ids, now)
        grown = classify(before, manifest["identity"])
        for key, change in grown.items():
            if change.state == "changed" or change.note:
                log.warning("%s", describe(key, change))
    elif old is not None and "identity" in old:
        manifest["identity"] = old["identity"]
    if old is not None and old.get("config_hash") == manifest["config_hash"]:
        # What the sweep derives from this same config stays until it is written again: a kill in
        # between must not leave status without the plan's totals.
        manifest.update({k: old[k] for k in ("plan", "texts", "image_resize") if k in old})
    write_manifest(opts.run_dir, manifest)
    return grown


class Sweep:
    """Runs one config into one run folder (started only through ``fasteval.api``'s run path)."""

    def __init__(self, cfg: SweepConfig, opts: RunOptions) -> None:
        self.cfg = cfg
        self.opts = opts
        self.ledger = Ledger()
        """Every count of this invocation: the panel, the result, ``ctl status`` and notify read it."""
        self.serving = Serving.from_config(cfg, opts.run_dir)
        self.steering = Steering([m.name for m in cfg.models], list(cfg.roles), self.ledger, self.serving,
                                 suites=[str(s.get("name")) for s in cfg.suites])
        """Pauses, drains and cancels from the first moment; every client's request gate."""
        self.clients: dict[str, ModelClient] = {}
        self.lanes: dict[str, BatchLane] = {}
        self.roles: dict[str, ModelClient] = {}
        self.services: dict[str, Any] = {}
        self._stop = asyncio.Event()
        self._fatal: RuntimeError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: RecordWriter | None = None
        self.tracking: Tracking | None = None
        self.cap = opts.max_concurrency or cfg.run.max_concurrency
        """The global in-flight cap the run starts with (``ctl set global concurrency=N`` moves it)."""
        self.ids: Fingerprints | None = None
        """Every model, suite and setting's fingerprint (set once the suites are loaded)."""
        self.reused = 0
        """Jobs copied from the results store at the start."""
        self.store = StoreLink(cfg.store, opts.run_dir, cfg.run.fsync, self._fault) if cfg.store is not None else None
        """The results store (``store:``), or None."""
        self.changes: dict[GroupKey, GroupChange] = {}
        """What each model × suite × setting of the config is to this run folder (new, changed, same)."""

    def _fault(self, err: RuntimeError) -> None:
        """A fault no job can survive (full disk, vanished run folder): stop everything now.

        Callable from any thread (blob writes happen in tool threads). The first fault wins; the
        writer accepts no more records, so no job finishing after it is claimed as done.
        """
        loop = self._loop
        if loop is not None and not _in_loop(loop):
            loop.call_soon_threadsafe(self._fault, err)
            return
        if self._fatal is None:
            self._fatal = err  # the CLI prints it once; run.log may be what cannot be written
        if self._writer is not None:
            self._writer.halt()
        self._stop.set()

    def _blob_fault(self, exc: OSError, path: Path) -> None:
        self._fault(write_failure(exc, path, self.opts.run_dir))

    async def run(self) -> SweepResult:
        """Run the sweep; a storage fault ends it with RunIncomplete or RunDirUnwritable (one line).

        A start that fails leaves the folder to the run path that claimed it (``fasteval.api``),
        which undoes what the start wrote.
        """
        t0 = time.monotonic()
        self._loop = asyncio.get_running_loop()
        if self.serving is not None:
            self.serving.preflight()  # before the run folder is written: exit 2, nothing written
        add_secrets_from_env(secret_env_names(self.cfg.raw) | secret_like_env_names())
        try:
            self.opts.run_dir.mkdir(parents=True, exist_ok=True)
            read_manifest(self.opts.run_dir)  # a damaged one stops the start before anything is loaded
            blobs = BlobStore(self.opts.run_dir / BLOBS)
        except OSError as e:
            raise write_failure(e, self.opts.run_dir / MANIFEST, self.opts.run_dir) from None
        blobs.on_failure = self._blob_fault
        await asyncio.to_thread(blobs.clean_temp)
        runs = [await asyncio.to_thread(load_suite, entry, blobs) for entry in self.cfg.suites]
        check_setting_selectors(runs, self.opts.selectors)
        check_roles(self.cfg, runs, self.opts.selectors)
        checkpoints = await asyncio.to_thread(checkpoint_identities, self.cfg)
        self.ids = fingerprints(self.cfg, runs, checkpoints)
        try:
            self.changes = prepare_run_dir(self.cfg, self.opts, runs, self.ids, checkpoints)
        except OSError as e:
            raise write_failure(e, self.opts.run_dir / MANIFEST, self.opts.run_dir) from None
        try:
            return await self._run(blobs, runs, t0)
        except OutOfDescriptors as e:  # one that struck outside a job (the plan's loader, a batch lane)
            raise out_of_descriptors(e.error) from None
        finally:
            await asyncio.to_thread(blobs.clean_temp, own=True)

    async def _run(self, blobs: BlobStore, runs: list[SuiteRun], t0: float) -> SweepResult:
        # The resume set comes from the run index: one sorted array of done keys, however many
        # jobs are done; the plan is keyed against it a block at a time as it is launched.
        try:
            index = await asyncio.to_thread(open_index, self.opts.run_dir)
            # a fresh folder has nothing done: no array to read (nor numpy to import before the first request)
            finished: Container[str] = frozenset() if not index.stats()["jobs"] else \
                await asyncio.to_thread(index.done_keys, ok_only=not self.opts.keep_errors)
        except (OSError, sqlite3.Error) as e:
            raise (database_failure(e, self.opts.run_dir / INDEX, self.opts.run_dir) or e) from None
        if self.store is not None:  # the store's records of jobs not done here, copied in: not run
            try:
                todo = plan(self.cfg, runs, self.opts.shard, self.opts.shard_by, self.opts.selectors, done=finished,
                            ids=self.ids)
                self.reused = await self.store.take((job for job, _, _, _ in todo), index, set(), blobs.root)
                if self.reused:  # the copies are ok rows of the index now: its resume set has them
                    finished = await asyncio.to_thread(index.done_keys, ok_only=not self.opts.keep_errors)
            except BaseException:
                index.close()
                raise
        jobs_total, by = plan_totals(self.cfg, runs, self.opts.shard, self.opts.shard_by, ids=self.ids)
        self._record_plan(runs, jobs_total, by)
        if self._fatal is not None:  # a loader's blob write hit a full disk
            raise self._fatal
        if self.opts.selectors:
            jobs_total, by = plan_totals(self.cfg, runs, self.opts.shard, self.opts.shard_by, self.opts.selectors,
                                         ids=self.ids)
        sel = self.opts.selectors
        done = already_done(index, by["model"], (sel.suites, sel.settings, [str(s) for s in sel.seeds]),
                            self.opts.keep_errors)
        self.ledger.seed(jobs_total, by, done)
        if self.cfg.log_to is not None:  # the trackers are told each group once all its jobs have a record
            self.ledger.seed_groups(self._group_totals(runs), done["group"])
        if self.serving is not None:  # how many jobs each served model has left: its servers stop after them
            served = [m.name for m in self.cfg.models if self.serving.served(m.name)]
            if served:
                narrowed = replace(self.opts.selectors, models=[m for m in served if not self.opts.selectors.models
                                                                or m in self.opts.selectors.models])
                left = await asyncio.to_thread(plan_left, self.cfg, runs, self.opts.shard, self.opts.shard_by,
                                               narrowed, finished, self.ids)
                for (model, _, _, _), n in left.items():
                    self.serving.expect(model, n)
        result = SweepResult(self.ledger, reused=self.reused)
        needed = self._services_needed(runs)
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(self._remove_signals)
            stack.callback(index.close)
            await stack.enter_async_context(control_channel(self.steering, self.opts.run_dir))
            # entered before the writer: closed after its last records are flushed, so the leaderboard has them
            self.tracking = await stack.enter_async_context(
                tracking(self.cfg, self.opts.run_dir, read_manifest(self.opts.run_dir) or {}))
            writer = RecordWriter(self.opts.run_dir / RECORDS, fsync=self.cfg.run.fsync,
                                  index=index, on_failure=self._fault)
            self._writer = writer
            rt = await open_runtime(stack, blobs, self.cfg, models=self.cfg.models, roles=self.cfg.roles,
                                    needed=needed, serving=self.serving,
                                    breaker=self.cfg.run.breaker,
                                    local_media_root=blobs.root, used_keys=self.opts.run_dir / CACHE_KEYS,
                                    run_dir=self.opts.run_dir, no_wait=self.opts.no_wait,
                                    gate=self.steering, say=self.steering.starting)
            self.clients, self.roles, self.services = rt.clients, rt.roles, rt.services
            self.lanes = rt.lanes
            for lane in self.lanes.values():  # a full disk under batches/ stops the sweep like one under blobs/
                lane.journal.on_failure = self._blob_fault
            for line in concurrency_caps(self.lanes, self.cap, jobs_total):
                log.warning("%s", line)
            if self.store is not None:  # closed after the writer's last batch (callbacks run last-in first)
                mirror = self.store.mirror(blobs.root)
                writer.mirror = mirror.offer
                stack.push_async_callback(asyncio.to_thread, self._close_mirror, self.store, mirror, result)
            await writer.start()
            stack.push_async_callback(writer.close)  # every job has ended by then: the last records flush first
            admission, control = self._admission(writer, blobs)
            self.steering.open(control)  # the runtime is open: ctl's commands reach it from now on
            display = self._display(admission.slots, control)
            display.start()
            stack.push_async_callback(display.stop)
            if self.cfg.notify is not None:  # endpoint down, error rate, disk: told while it runs
                await stack.enter_async_context(watching(Notifier(
                    self.cfg.notify, str(self.cfg.raw.get("name") or self.cfg.path.stem), self.opts.run_dir,
                    frozenset(secret_env_names(self.cfg.raw) | secret_like_env_names())), self._health))
            self._install_signals()
            await self._launch(runs, finished, admission, control, result)
        return self._outcome(result, control, t0)

    def _outcome(self, result: SweepResult, control: Controller, t0: float) -> SweepResult:
        """The result, or why the sweep ends incomplete (a fault, an endpoint down, a drain)."""
        if self._fatal is not None:
            raise self._fatal
        result.wall_s = time.monotonic() - t0
        result.stats = {n: asdict(c.stats) for n, c in (self.clients | self.roles).items()}
        result.batches = {n: k for n, lane in self.lanes.items() if (k := lane.in_flight())}
        if result.interrupted:
            return result
        if self.ledger.not_run.get("batch pending"):  # --no-wait: the rest is at the provider
            raise SweepIncomplete(pending_line(self.lanes, result.not_run), result)
        if result.down:
            names = "; ".join(f"endpoint {n} down ({r})" for n, r in result.down.items())
            raise SweepIncomplete(f"incomplete: {names}; {result.not_run} jobs not run; rerun to continue", result)
        if steered := control.incomplete_line():
            raise SweepIncomplete(steered, result)  # drained or cancelled: a rerun continues
        return result

    def _close_mirror(self, link: StoreLink, mirror: StoreMirror, result: SweepResult) -> None:
        result.stored = link.close(mirror, whole=self._fatal is None)

    def _record_plan(self, runs: list[SuiteRun], jobs_total: int, by: dict[str, dict[str, int]]) -> None:
        """The whole plan's totals, settings, texts and image sizes in the manifest (status reads them)."""
        manifest = read_manifest(self.opts.run_dir) or {}
        manifest["plan"] = {"total": jobs_total, **{f"by_{k}": v for k, v in by.items()},
                            "settings": {r.suite.name: [asdict(s) for s in r.settings] for r in runs}}
        manifest["texts"] = {r.suite.name: m for r in runs if (m := r.suite.text_manifest()) is not None}
        manifest["image_resize"] = {m.name: p.as_dict() for m in self.cfg.models if (p := model_processor(m))}
        try:
            write_manifest(self.opts.run_dir, manifest)
        except OSError as e:
            raise write_failure(e, self.opts.run_dir / MANIFEST, self.opts.run_dir) from None

    def _group_totals(self, runs: list[SuiteRun]) -> dict[tuple[str, str, str], int]:
        """The plan's jobs per model × suite × setting (within the selectors)."""
        out: dict[tuple[str, str, str], int] = {}
        for (model, suite, setting, _), n in plan_combos(self.cfg, runs, self.opts.shard, self.opts.shard_by,
                                                         self.opts.selectors, self.ids).items():
            out[model, suite, setting] = out.get((model, suite, setting), 0) + n
        return out

    def _services_needed(self, runs: list[SuiteRun]) -> set[str]:
        """The services the planned tools require, the cache when roles or the config ask for it."""
        # Each distinct tool name is looked up once: a million-task suite names the same few tools.
        names = {name for run in runs for s in run.settings for item in run.items if isinstance(item, Task)
                 for name in run.suite.tools(item, s)}
        needed = {req for name in names if name in TOOLS for req in getattr(TOOLS[name], "requires", ())}
        if self.cfg.roles or self.cfg.run.cache:
            needed.add("cache")
        needed.add("limiters")
        if self.cfg.run.browser:  # browser-rendered pages (VistaHop's reference)
            needed.add("browser")
        return needed

    def _health(self) -> Health:
        now = time.monotonic()
        down = {name: now - c.breaker.down_since for name, c in (self.clients | self.roles).items()
                if c.breaker is not None and c.breaker.down_since is not None}
        return Health(done=self.ledger.ok, errors=self.ledger.error, down_s=down)

    def _display(self, slots: AdaptiveLimit, control: Controller) -> ProgressDisplay:
        # services with synchronous stats() (the sandbox pool); the cache's stats are async I/O
        extra = {n: s.stats for n, s in self.services.items() if callable(getattr(s, "stats", None))
                 and not inspect.iscoroutinefunction(s.stats) and not isinstance(s, ModelClient)}
        limiters = self.services.get("limiters")
        rows = [f for f in (limiters.rows if limiters is not None else None,
                            self.serving.rows if self.serving is not None else None) if f is not None]
        rows += [lane.rows for lane in self.lanes.values()]  # batches in flight per batched model
        serving = self.serving

        def notes() -> str:  # steering (``fasteval ctl``), then servers that look preprocessing-bound
            return "; ".join(n for n in (control.notes(), serving.notes() if serving else "") if n)

        return ProgressDisplay(self.ledger, self.clients | self.roles, live=self.opts.progress, extra=extra,
                               extra_rows=(lambda: {k: v for f in rows for k, v in f().items()}) if rows else None,
                               prices=model_prices(self.cfg.raw, price_terms), notes=notes, global_cap=slots)

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._stop.set)
            except (NotImplementedError, RuntimeError):
                pass

    def _remove_signals(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        except (NotImplementedError, RuntimeError):
            pass

    def _admission(self, writer: RecordWriter, blobs: BlobStore) -> tuple[Admission, Controller]:
        """Admission under the global cap, and the Controller built from what it steers: the ledger,
        the clients, the slots, admission's launch and its jobs in flight (the runtime is open)."""
        jobs = JobRunner(self.clients, self.services, blobs, halted=lambda: self._fatal is not None)

        def run_job(job: Job, run: SuiteRun, setting: Setting, item: Task | LoadError) -> Coroutine[Any, Any, None]:
            return self._one(jobs, (job, run, setting, item), writer, control)  # control: built below, before any job

        # `fasteval ctl set --global concurrency=N` moves the cap through these slots
        admission = Admission(AdaptiveLimit(self.cap), self.clients, self.steering, self.serving, run_job, self.ledger)
        control = Controller(self.steering, self.ledger, self.clients | self.roles, admission.slots, admission.start,
                             admission.running)
        return admission, control

    async def _launch(self, runs: list[SuiteRun], finished: Container[str], admission: Admission, control: Controller,
                      result: SweepResult) -> None:
        planned = plan(self.cfg, runs, self.opts.shard, self.opts.shard_by, self.opts.selectors, done=finished,
                       on_done=self.ledger.skip, ids=self.ids)
        # Waiting on two events, not on every running task: asyncio.wait over a thousand tasks per
        # completion would cost O(n) callbacks each time.
        stop_wait = asyncio.create_task(self._stop.wait())
        launch = asyncio.create_task(admission.feed(planned))
        idle_wait: asyncio.Task[Any] | None = None
        try:
            await asyncio.wait({launch, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if launch.done():
                launch.result()  # a failing plan or loader surfaces here
                idle_wait = asyncio.create_task(control.settled(admission.idle))
                await asyncio.wait({idle_wait, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await control.close()  # no resumed or requeued job starts after this
            for t in (launch, stop_wait, idle_wait):
                if t is not None:
                    t.cancel()
            if await admission.cancel_running() or self._stop.is_set():
                result.interrupted = True
        if result.interrupted and self._fatal is None:
            for _ in planned:  # the plan's rest: what it skips is counted, so what did not run is exact
                pass
            self.ledger.settle("interrupted")  # never started: the plan's rest, held and deferred jobs

    def _why_unrecorded(self, job: Job) -> str:
        """Why a started job ended without a record (no EndpointDown): the ledger's ``not_run`` key."""
        if self._fatal is not None:
            return "stopped"
        return "cancelled" if job.model in self.steering.cancelled else "interrupted"

    async def _one(self, jobs: JobRunner, entry: tuple[Job, SuiteRun, Setting, Task | LoadError],
                   writer: RecordWriter, control: Controller) -> None:
        """Run one job (fasteval.engine.run.job), in the ledger from its start to its one end, and
        write its record."""
        job = entry[0]
        rec: Record | None = None
        why, endpoint, reason = "", "", ""
        self.ledger.start(job)
        try:
            rec = await jobs.run(*entry)
        except BatchesPending:  # submitted with --no-wait: a rerun collects it
            why = "batch pending"
        except EndpointDown as e:  # not attempted (or cut short) because the endpoint is gone
            why, endpoint, reason = "endpoint down", e.endpoint, e.reason
        except OutOfDescriptors as e:  # the process's limit, like a full disk: stop, blame no job
            log.warning("job %s: %s", job.job_id, e)
            self._fault(out_of_descriptors(e.error))  # the ledger then says "stopped"
        finally:
            if rec is None:
                self.ledger.end(job, None, why or self._why_unrecorded(job), endpoint=endpoint, reason=reason)
            else:
                self.ledger.end(job, rec)
        if rec is None:  # not run, or a storage fault stopped the sweep under it: not recorded
            return
        if rec.status != "ok":
            control.errored(entry, rec.error_kind or "error")
        writer.write(rec)
        if self.tracking is not None and (planned := self.ledger.whole(job)) is not None:
            self.tracking.group_done(job.model, job.suite, job.setting, planned)


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def run_sweep(cfg: SweepConfig, opts: RunOptions) -> SweepResult:
    """One sweep into ``opts.run_dir``: for the run path (``fasteval.api``), which holds the folder."""
    return await Sweep(cfg, opts).run()
