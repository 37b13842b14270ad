"""``fasteval run``: run or resume a sweep, with preflight, a run log and honest exit codes."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvloop
from rich.console import Console
from rich.table import Table

from fasteval.cli.commands import HELP
from fasteval.cli.common import console, print_config_error, print_error, print_pending, private_run_files
from fasteval.cli.run_log import RunLog, internal_error
from fasteval.core.exitcodes import (
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_USAGE,
    RunIncomplete,
    exit_code_for,
)
from fasteval.core.redact import add_secrets_from_env, redact_text, secret_env_names, secret_like_env_names
from fasteval.core.terminal import clean, plain
from fasteval.runfolder.diskfaults import shown

if TYPE_CHECKING:
    from fasteval.config.load import SweepConfig
    from fasteval.engine.forecast.dry_run import PlanPreview
    from fasteval.engine.offline.watch import RunSweep
    from fasteval.engine.plan import RunOptions, Selectors
    from fasteval.engine.run.sweep import SweepResult


def _selectors(a: argparse.Namespace, cfg: SweepConfig) -> Selectors:
    """The plan narrowing asked for on the command line; unknown names are usage errors (ConfigError)."""
    from fasteval.config.schema import did_you_mean
    from fasteval.core.errors import ConfigError
    from fasteval.engine.plan import Selectors

    try:
        seeds = [int(x) for x in _names(a.seeds)]
    except ValueError as e:
        raise ConfigError(str(e)) from e
    sel = Selectors(models=_names(a.model), suites=_names(a.suite), settings=_names(a.setting),
                    seeds=seeds, limit=a.limit)
    known = {"--model": [m.name for m in cfg.models], "--suite": [str(s["name"]) for s in cfg.suites],
             "--seeds": [str(x) for x in cfg.seeds]}
    for flag, asked in (("--model", sel.models), ("--suite", sel.suites), ("--seeds", [str(x) for x in sel.seeds])):
        for name in asked:
            if name not in known[flag]:
                raise ConfigError(f"{flag} {name}: not in {cfg.path}{did_you_mean(name, known[flag])} "
                                 f"(known: {', '.join(known[flag])})")
    if sel.limit is not None and sel.limit < 1:
        raise ConfigError("--limit must be at least 1")
    return sel


def _names(values: list[str] | None) -> list[str]:
    """Repeatable and comma-separated: ``--model a --model b`` or ``--model a,b``."""
    return [x.strip() for v in values or [] for x in v.split(",") if x.strip()]


def _print_preview(cfg: SweepConfig, opts: RunOptions) -> int:
    from fasteval.core.errors import UsageError
    from fasteval.engine.forecast.dry_run import preview

    try:
        pv = preview(cfg, opts)
    except UsageError as e:  # ours only: a bug is an internal error (cli/main.py), never "usage"
        print_error(e)
        return exit_code_for(e)
    store = f", {pv.from_store} from the results store" if pv.store else ""
    t = Table(title=plain(f"dry run of {cfg.path}: {pv.total} jobs, {pv.resumed} already done in {opts.run_dir}"
                          f"{store}, {pv.total - pv.resumed - pv.from_store} to run"))
    for col in ("model", "suite", "setting", "seeds", "jobs"):
        t.add_column(col, justify="right" if col in ("seeds", "jobs") else "left")
    groups: dict[tuple[str, str, str], dict[int, int]] = {}
    for (m, su, st, sd), n in pv.groups.items():  # a row per group, its seeds in one cell (JSON keeps each)
        groups.setdefault((m, su, st), {})[sd] = n
    for (m, su, st), by_seed in groups.items():
        t.add_row(plain(m), plain(su), plain(st), plain(seed_list(sorted(by_seed))), plain(sum(by_seed.values())))
    console().print(t)
    _print_growth(pv)
    _print_series(cfg)
    f = Table(title="first jobs to run")
    for col in ("job_id", "model", "suite", "setting", "task_id", "seed"):
        f.add_column(col)
    for j in pv.first:
        f.add_row(*(plain(j[c]) for c in ("job_id", "model", "suite", "setting", "task_id", "seed")))
    console().print(f)
    return EXIT_OK


def seed_list(seeds: list[int]) -> str:
    """``0-4`` for a run of seeds, ``0,2,5`` otherwise: the plan's seeds in one cell."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(x) for x in seeds)


def _print_growth(pv: PlanPreview) -> None:
    """Per model × suite: jobs reused from this folder, copied from the store, new, changed (and why)."""
    g = Table(title="per model and suite: reused (held here), store (copied, not run), new, changed")
    for col in ("model", "suite", "reused", "store", "new", "changed"):
        g.add_column(col, justify="left" if col in ("model", "suite") else "right")
    for (m, su), n in pv.by_model_suite.items():
        g.add_row(plain(m), plain(su), *(plain(n[k]) for k in ("reused", "store", "new", "changed")))
    console().print(g)
    from fasteval.engine.growth import describe

    for key, change in pv.changes.items():
        if change.state == "changed" or change.note:
            console().print(plain(f"  {describe(key, change)}"))
    if pv.unkeyed:
        console().print(plain(f"  {pv.unkeyed} record(s) here are from before fingerprints: where their model, suite "
                              "and setting are still in the config they are kept aside and their jobs run again"))


def _print_series(cfg: SweepConfig) -> None:
    """Each series' checkpoints in serving order, with their steps (and folders not loadable yet)."""
    for name, ckpts in cfg.series.items():
        t = Table(title=plain(f"series {name}: {len(ckpts)} checkpoint(s), served in this order"))
        for col in ("step", "model", "folder"):
            t.add_column(col, justify="right" if col == "step" else "left", overflow="fold")
        for c in ckpts:
            t.add_row(plain(c.step), plain(f"{name}@{c.step}"), plain(c.model_dir))
        console().print(t)
        for line in cfg.pending.get(name, []):
            console().print(plain(f"  not ready: {line}"))


def _print_error_summary(result: SweepResult) -> None:
    """The end-of-run table: errors by model × kind, each with one readable example."""
    if not result.errors_by:
        return
    t = Table(title="errors by model and kind (details in run.log and records.jsonl)", title_justify="left")
    for col in ("model", "error_kind", "jobs", "example"):
        t.add_column(col, overflow="fold")
    for model, kinds in result.errors_by.items():
        for kind, (count, example) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
            t.add_row(plain(model), plain(kind), plain(count), plain(redact_text(str(example))[:200]))
    Console(stderr=True, width=None if sys.stderr.isatty() else 160).print(t)


class _Started:
    """What ``notify:`` needs to tell how a run that got past its config ended."""

    cfg: SweepConfig | None = None
    run_dir: Path = Path()
    started: float = 0.0
    result: SweepResult | None = None


FORCE_GONE = ("--force is gone: an edited config reruns only the jobs it changed, by itself (their old records are "
              "kept aside as superseded; `fasteval run CONFIG --dry-run` shows what would rerun); for a fresh start, "
              "pass a new --run-dir (docs/run-folder.md, \"A run folder that grows\")")
"""What an old script's ``run --force`` gets instead of argparse's bare "unrecognized arguments"."""


def cmd_run(a: argparse.Namespace) -> int:
    """``fasteval run``: everything it creates is private unless ``--shared-run-dir`` (docs/run-folder.md)."""
    if a.force:
        from fasteval.core.errors import UsageError

        raise UsageError(FORCE_GONE)  # one line, exit 2 (cli/main.py): before anything is read or claimed
    with private_run_files(a.shared_run_dir):
        seen = _Started()
        code = _run(a, seen)
        if seen.cfg is not None and seen.cfg.notify is not None:
            from fasteval.engine.steer.notify import tell_finished

            tell_finished(seen.cfg, seen.run_dir, code, seen.result, seen.started)
        return code


def _run(a: argparse.Namespace, seen: _Started) -> int:
    from fasteval.config.load import load_config
    from fasteval.config.series import not_loadable
    from fasteval.core.errors import ConfigError
    from fasteval.engine.plan import RunOptions, default_run_dir, parse_shard

    try:
        cfg = load_config(a.config, ready=not_loadable if a.watch else None)  # watch: a half-written one waits
        shard = parse_shard(a.shard) if a.shard else None
        selectors = _selectors(a, cfg)
    except ConfigError as e:
        print_config_error(e)
        return exit_code_for(e)
    if not (a.watch or a.dry_run):  # watch waits for them by design; the dry run lists them in its plan
        print_pending(cfg.pending)
    add_secrets_from_env(secret_env_names(cfg.raw) | secret_like_env_names())
    _cache_overrides(a, cfg)
    _warn_missing_trackers(cfg)
    run_dir = Path(a.run_dir) if a.run_dir else default_run_dir(a.config, shard)
    opts = RunOptions(run_dir=run_dir, shard=shard, shard_by=a.shard_by,
                      max_concurrency=a.max_concurrency,
                      keep_errors=a.keep_errors, progress=False if a.no_progress else None, selectors=selectors,
                      no_wait=a.no_wait)
    if a.estimate or a.estimate_from or a.pilot is not None:
        from fasteval.cli.estimate import print_estimate

        return print_estimate(cfg, opts, a)
    if a.dry_run:
        return _print_preview(cfg, opts)
    seen.cfg, seen.run_dir, seen.started = cfg, run_dir, time.monotonic()
    return _sweep(a, cfg, opts, seen)


def _warn_missing_trackers(cfg: SweepConfig) -> None:
    """``log_to:`` names a tracker whose library is not installed: one line each; the sweep runs without it."""
    if cfg.log_to is None:
        return
    from fasteval.trackers.sinks import MissingExtra, installed

    for spec in cfg.log_to.trackers:
        if not installed(spec.kind):
            print(f"warning: log_to: {MissingExtra(spec.kind)}; the sweep runs without it", file=sys.stderr)


def _cache_overrides(a: argparse.Namespace, cfg: SweepConfig) -> None:
    """``--cache`` and ``--cache-mode`` over the config's ``run.cache``."""
    if a.cache or a.cache_mode:
        cfg.run = cfg.run.with_cache(path=a.cache, modes=a.cache_mode)


def _sweep(a: argparse.Namespace, cfg: SweepConfig, opts: RunOptions, seen: _Started) -> int:
    """The run (``api.run_planned``, or ``--watch``) and what the terminal says of how it ended."""
    from fasteval.api import run_planned
    from fasteval.core.errors import PreflightFailed, UsageError
    from fasteval.engine.run.sweep import SweepIncomplete

    log = RunLog()
    try:
        if a.watch:
            return uvloop.run(_watched(a, cfg, opts, log))
        result = uvloop.run(run_planned(cfg, opts, preflight=not a.no_preflight, command="run",
                                        while_held=log.held))
    except KeyboardInterrupt as e:
        if not (log.opened or a.no_preflight):
            print("interrupted during preflight: nothing ran", file=sys.stderr)
        elif a.watch and log.opened:  # between rounds: nothing is running, the run folder is whole
            print("watch interrupted: rerun the same command to go on watching", file=sys.stderr)
        else:
            raise  # cli/main.py: "interrupted: rerun the same command to resume"
        return exit_code_for(e)
    except PreflightFailed as e:
        print(f"error: preflight found {len(e.problems)} endpoint(s) not ready (nothing ran; --no-preflight "
              f"skips this check):", file=sys.stderr)
        for line in e.problems:
            print(f"  {clean(redact_text(line))}", file=sys.stderr)  # an upstream may echo the key back
        return exit_code_for(e)
    except SweepIncomplete as e:
        r = seen.result = e.result
        print(f"{opts.run_dir}: {r.ok} ok, {r.errors} error, {r.skipped} already done, {r.not_run} not run "
              f"in {r.wall_s:.1f} s", file=sys.stderr)
        _print_error_summary(r)
        print(clean(redact_text(str(e)), block=True), file=sys.stderr)
        return exit_code_for(e)
    except RunIncomplete as e:
        msg = clean(redact_text(str(e)), block=True)
        print(msg if msg.startswith("incomplete") else f"error: {msg}", file=sys.stderr)
        return exit_code_for(e)
    except UsageError as e:  # ours: a config, a changed config, a damaged or busy run folder
        print_error(e)
        return exit_code_for(e)
    except Exception as e:
        if e is not log.bug:  # a bug before run.log: cli/main.py prints its traceback
            raise
        return internal_error(e, opts.run_dir)
    seen.result = result
    return _print_finished(result, opts.run_dir)


def _print_finished(result: SweepResult, run_dir: Path) -> int:
    not_run = f", {result.not_run} not run" if result.not_run else ""
    reused = f", {result.reused} of them copied from the results store" if result.reused else ""
    print(f"{run_dir}: {result.ok} ok, {result.errors} error, {result.skipped} already done{reused}{not_run} "
          f"(of {result.planned}) in {result.wall_s:.1f} s", file=sys.stderr)
    if result.interrupted:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        if result.batches:
            n = sum(result.batches.values())
            print(f"{n} batch(es) left running at the provider (their cost is committed): the rerun collects "
                  f"them; `fasteval batches cancel {shown(run_dir)}` stops them", file=sys.stderr)
    elif result.errors:
        _print_error_summary(result)
    return result.exit_code()


async def _watched(a: argparse.Namespace, cfg: SweepConfig, opts: RunOptions, log: RunLog) -> int:
    """``--watch`` on ``run_planned``'s path: the same preflight, claimed folder and run.log; each
    round is one sweep through the claimed folder."""
    from fasteval.api import claimed_run_folder

    async with claimed_run_folder(cfg, opts, preflight=not a.no_preflight, command="run") as claimed:
        with log.held(opts.run_dir):
            return await _watch(a, opts, claimed.sweep)


async def _watch(a: argparse.Namespace, opts: RunOptions, sweep: RunSweep) -> int:
    """``--watch``: sweeps into one run folder as checkpoints complete (fasteval/engine/offline/watch.py)."""
    from fasteval.core.errors import ConfigError
    from fasteval.engine.offline.watch import WatchOptions, watch_sweep

    if a.watch_interval <= 0 or (a.idle_timeout is not None and a.idle_timeout <= 0):
        print("error: --watch-interval and --idle-timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    wopts = WatchOptions(interval_s=a.watch_interval, until_step=a.until_step, idle_timeout_s=a.idle_timeout,
                         run_dir=opts.run_dir)
    try:
        w = await watch_sweep(Path(a.config), sweep, wopts)
    except ConfigError as e:  # the config was edited into an invalid one under the watch
        print_config_error(e)
        return exit_code_for(e)
    print(f"{opts.run_dir}: watch ended ({w.stopped_by}) after {w.rounds} round(s), "
          f"{len(w.evaluated)} checkpoint model(s) taken", file=sys.stderr)
    if w.interrupted:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
    if w.incomplete:
        return EXIT_INCOMPLETE
    return w.last.exit_code() if w.last is not None else EXIT_OK


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help=HELP["run"])
    r.add_argument("config", help="the sweep config (YAML; docs/config.md)")
    r.add_argument("--run-dir", help="where records go (default runs/<config file name>; a shard's own folder)")
    r.add_argument("--shard", help="i/n: run only this deterministic share of the jobs")
    r.add_argument("--shard-by", choices=["job", "model"], default="job",
                   help="spread jobs by hash (default) or give each shard whole models")
    r.add_argument("--max-concurrency", type=int, metavar="N",
                   help="jobs in flight at once (instead of the config's run.max_concurrency)")
    r.add_argument("--keep-errors", action="store_true", help="do not rerun jobs that ended in error")
    r.add_argument("--force", action="store_true", help=argparse.SUPPRESS)  # removed: FORCE_GONE says why
    r.add_argument("--no-progress", action="store_true", help="plain progress lines instead of the live panel")
    r.add_argument("--cache", help="cache database path (default $FASTEVAL_CACHE_DIR or ~/.cache/fasteval)")
    r.add_argument("--cache-mode", help="per-namespace modes, e.g. 'search=replay,judge=use,model=off'")
    r.add_argument("--dry-run", action="store_true", help="print the plan (and what resume would skip), run nothing")
    r.add_argument("--estimate", action="store_true",
                   help="with --dry-run: requests, tokens, cost and wall time per model × suite (docs/overnight.md)")
    r.add_argument("--estimate-from", action="append", metavar="RUN",
                   help="measure rounds, completion tokens and seconds per job in this earlier run folder (repeatable)")
    r.add_argument("--pilot", type=int, metavar="N",
                   help="estimate from N real jobs per model × suite × setting (one seed); asks first")
    r.add_argument("--yes", action="store_true", help="--pilot: run it without asking")
    r.add_argument("--estimate-json", action="store_true", help="the estimate as JSON")
    r.add_argument("--no-preflight", action="store_true", help="skip the check that every endpoint answers")
    r.add_argument("--no-wait", action="store_true",
                   help="batched models: submit their batches and exit 3; a rerun collects the results")
    r.add_argument("--shared-run-dir", action="store_true",
                   help="create the run folder with your umask (readable by others) instead of 0700 with 0600 files")
    r.add_argument("--watch", action="store_true",
                   help="keep evaluating a series' checkpoints as the trainer writes them (docs/serving.md)")
    r.add_argument("--watch-interval", type=float, default=30.0,
                   help="--watch: seconds between looks; a checkpoint unchanged over one is complete (default 30)")
    r.add_argument("--until-step", type=int, help="--watch: evaluate steps up to N, stop once one at or past N lands")
    r.add_argument("--idle-timeout", type=float, help="--watch: stop after this many seconds without a new checkpoint")
    r.add_argument("--limit", type=int, help="only the first N tasks of each suite")
    r.add_argument("--model", action="append", help="only this model (repeatable, or a,b)")
    r.add_argument("--suite", action="append", help="only this suite (repeatable)")
    r.add_argument("--setting", action="append", help="only this setting (repeatable)")
    r.add_argument("--seeds", action="append", help="only these seeds, e.g. 0,1")
    r.set_defaults(func=cmd_run)
