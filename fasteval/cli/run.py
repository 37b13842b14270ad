"""``fasteval run``: run or resume a sweep, with preflight, a run log and honest exit codes."""

from __future__ import annotations

import argparse
import gc
import logging
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvloop
from rich.console import Console
from rich.table import Table

from fasteval.cli.common import console, print_config_error, private_run_files
from fasteval.core.exitcodes import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    RunIncomplete,
)
from fasteval.core.redact import add_secrets_from_env, redact_text, secret_env_names, secret_like_env_names
from fasteval.core.terminal import clean, plain
from fasteval.runfolder.diskfaults import RunDirUnwritable, RunLogHandler, shown

if TYPE_CHECKING:
    from fasteval.config.load import SweepConfig
    from fasteval.engine.sweep import RunOptions, Selectors, SweepResult


def _selectors(a: argparse.Namespace, cfg: SweepConfig) -> Selectors:
    from fasteval.engine.sweep import Selectors
    """The plan narrowing asked for on the command line; unknown names are usage errors."""
    from fasteval.config.schema import did_you_mean

    sel = Selectors(models=_names(a.model), suites=_names(a.suite), settings=_names(a.setting),
                    seeds=[int(x) for x in _names(a.seeds)], limit=a.limit)
    known = {"--model": [m["name"] for m in cfg.models], "--suite": [str(s["name"]) for s in cfg.suites],
             "--seeds": [str(x) for x in cfg.seeds]}
    for flag, asked in (("--model", sel.models), ("--suite", sel.suites), ("--seeds", [str(x) for x in sel.seeds])):
        for name in asked:
            if name not in known[flag]:
                raise ValueError(f"{flag} {name}: not in {cfg.path}{did_you_mean(name, known[flag])} "
                                 f"(known: {', '.join(known[flag])})")
    if sel.limit is not None and sel.limit < 1:
        raise ValueError("--limit must be at least 1")
    return sel


def _names(values: list[str] | None) -> list[str]:
    """Repeatable and comma-separated: ``--model a --model b`` or ``--model a,b``."""
    return [x.strip() for v in values or [] for x in v.split(",") if x.strip()]


def _print_preview(cfg: SweepConfig, opts: RunOptions) -> int:
    from fasteval.engine.dry_run import preview

    try:
        pv = preview(cfg, opts)
    except (ValueError, KeyError) as e:
        print(f"error: {clean(e)}", file=sys.stderr)
        return EXIT_USAGE
    t = Table(title=plain(f"dry run of {cfg.path}: {pv.total} jobs, {pv.resumed} already done in {opts.run_dir}, "
                          f"{pv.total - pv.resumed} to run"))
    for col in ("model", "suite", "setting", "seed", "jobs"):
        t.add_column(col, justify="right" if col in ("seed", "jobs") else "left")
    for (m, su, st, sd), n in pv.groups.items():
        t.add_row(plain(m), plain(su), plain(st), plain(sd), plain(n))
    console().print(t)
    _print_series(cfg)
    f = Table(title="first jobs to run")
    for col in ("job_id", "model", "suite", "setting", "task_id", "seed"):
        f.add_column(col)
    for j in pv.first:
        f.add_row(*(plain(j[c]) for c in ("job_id", "model", "suite", "setting", "task_id", "seed")))
    console().print(f)
    return EXIT_OK


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


class _TerminalFilter(logging.Filter):
    """During a run the terminal shows only errors; warnings (ours and third-party libraries',
    e.g. math_verify's timeout notice) go to run.log, where they do not tear the live panel."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


def cmd_run(a: argparse.Namespace) -> int:
    """``fasteval run``: everything it creates is private unless ``--shared-run-dir`` (docs/run-folder.md)."""
    with private_run_files(a.shared_run_dir):
        return _run(a)


def _run(a: argparse.Namespace) -> int:
    from fasteval.config.load import load_config
    from fasteval.config.series import not_loadable
    from fasteval.core.errors import ConfigError
    from fasteval.engine.clients import ModelConfigError
    from fasteval.engine.sweep import (
        ConfigChanged,
        RunOptions,
        SweepIncomplete,
        default_run_dir,
        parse_shard,
        run_sweep,
    )

    try:
        cfg = load_config(a.config, ready=not_loadable if a.watch else None)  # watch: a half-written one waits
        shard = parse_shard(a.shard) if a.shard else None
        selectors = _selectors(a, cfg)
    except ConfigError as e:
        print_config_error(e)
        return EXIT_USAGE
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    add_secrets_from_env(secret_env_names(cfg.raw) | secret_like_env_names())
    if a.cache or a.cache_mode:
        cache_cfg = dict(cfg.run.get("cache") or {})
        if a.cache:
            cache_cfg["path"] = a.cache
        if a.cache_mode:
            cache_cfg["modes"] = a.cache_mode
        cfg.run["cache"] = cache_cfg
    run_dir = Path(a.run_dir) if a.run_dir else default_run_dir(a.config, shard)
    opts = RunOptions(run_dir=run_dir, shard=shard, shard_by=a.shard_by,
                      max_concurrency=a.max_concurrency, force=a.force,
                      keep_errors=a.keep_errors, progress=False if a.no_progress else None, selectors=selectors,
                      no_wait=a.no_wait)
    if a.dry_run:
        return _print_preview(cfg, opts)
    if not a.no_preflight:
        from fasteval.engine.preflight import preflight

        try:
            problems = uvloop.run(preflight(cfg))
        except KeyboardInterrupt:
            print("interrupted during preflight: nothing ran", file=sys.stderr)
            return EXIT_INTERRUPTED
        if problems:
            print(f"error: preflight found {len(problems)} endpoint(s) not ready (nothing ran; --no-preflight "
                  f"skips this check):", file=sys.stderr)
            for line in problems:
                print(f"  {clean(redact_text(line))}", file=sys.stderr)  # an upstream may echo the key back
            return EXIT_USAGE
    existed = run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        handler = RunLogHandler(run_dir / "run.log")
    except OSError as e:
        print(f"error: cannot write the run folder {shown(run_dir)} ({e.strerror or e}): "
              "use a writable --run-dir", file=sys.stderr)
        return EXIT_USAGE
    root = logging.getLogger()
    root.addHandler(handler)
    ours = logging.getLogger("fasteval")
    old_level = ours.level
    ours.setLevel(logging.INFO)  # breaker and job failures in full in run.log; third parties stay at WARNING
    quiet = _TerminalFilter()
    terminal = [h for h in root.handlers if h is not handler]
    for h in terminal:
        h.addFilter(quiet)
    logging.captureWarnings(True)
    # Long sweeps hold many small live objects; the default GC thresholds rescan them thousands of
    # times a second. Freeze what startup built and collect young objects less often.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    try:
        if a.watch:
            return _watch(a, opts)
        result = uvloop.run(run_sweep(cfg, opts))
    except SweepIncomplete as e:
        r = e.result
        print(f"{run_dir}: {r.ok} ok, {r.errors} error, {r.skipped} already done, {r.not_run} not run "
              f"in {r.wall_s:.1f} s", file=sys.stderr)
        _print_error_summary(r)
        print(clean(redact_text(str(e)), block=True), file=sys.stderr)
        return EXIT_INCOMPLETE
    except RunIncomplete as e:
        msg = clean(redact_text(str(e)), block=True)
        print(msg if msg.startswith("incomplete") else f"error: {msg}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except RunDirUnwritable as e:
        print(f"error: {clean(redact_text(str(e)))}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigChanged, ModelConfigError, KeyError, ValueError) as e:
        if not existed and not (run_dir / "records.jsonl").exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # a start that failed claims nothing
        print(f"error: {clean(redact_text(str(e)))}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        logging.captureWarnings(False)
        for h in terminal:
            h.removeFilter(quiet)
        ours.setLevel(old_level)
        root.removeHandler(handler)
        handler.close()
    print(f"{run_dir}: {result.ok} ok, {result.errors} error, {result.skipped} already done "
          f"(of {result.total + result.skipped}) in {result.wall_s:.1f} s", file=sys.stderr)
    if result.interrupted:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        if result.batches:
            n = sum(result.batches.values())
            print(f"{n} batch(es) left running at the provider (their cost is committed): the rerun collects "
                  f"them; `fasteval batches cancel {shown(run_dir)}` stops them", file=sys.stderr)
    elif result.errors:
        _print_error_summary(result)
    return result.exit_code()


def _watch(a: argparse.Namespace, opts: RunOptions) -> int:
    """``--watch``: sweeps into one run folder as checkpoints complete (fasteval/engine/watch.py)."""
    from fasteval.core.errors import ConfigError
    from fasteval.engine.watch import WatchOptions, watch_sweep

    if a.watch_interval <= 0 or (a.idle_timeout is not None and a.idle_timeout <= 0):
        print("error: --watch-interval and --idle-timeout must be positive", file=sys.stderr)
        return EXIT_USAGE
    wopts = WatchOptions(interval_s=a.watch_interval, until_step=a.until_step, idle_timeout_s=a.idle_timeout)
    try:
        w = uvloop.run(watch_sweep(Path(a.config), opts, wopts))
    except KeyboardInterrupt:  # between rounds: nothing is running, the run folder is whole
        print("watch interrupted: rerun the same command to go on watching", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ConfigError as e:  # the config was edited into an invalid one under the watch
        print_config_error(e)
        return EXIT_USAGE
    print(f"{opts.run_dir}: watch ended ({w.stopped_by}) after {w.rounds} round(s), "
          f"{len(w.evaluated)} checkpoint model(s) taken", file=sys.stderr)
    if w.interrupted:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
    if w.incomplete:
        return EXIT_INCOMPLETE
    return w.last.exit_code() if w.last is not None else EXIT_OK


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run (or resume) a sweep")
    r.add_argument("config")
    r.add_argument("--run-dir")
    r.add_argument("--shard", help="i/n: run only this deterministic share of the jobs")
    r.add_argument("--shard-by", choices=["job", "model"], default="job",
                   help="spread jobs by hash (default) or give each shard whole models")
    r.add_argument("--max-concurrency", type=int)
    r.add_argument("--force", action="store_true", help="continue a run folder whose config changed")
    r.add_argument("--keep-errors", action="store_true", help="do not rerun jobs that ended in error")
    r.add_argument("--no-progress", action="store_true", help="plain progress lines instead of the live panel")
    r.add_argument("--cache", help="cache database path (default $FASTEVAL_CACHE_DIR or ~/.cache/fasteval)")
    r.add_argument("--cache-mode", help="per-namespace modes, e.g. 'search=replay,judge=use,model=off'")
    r.add_argument("--dry-run", action="store_true", help="print the plan (and what resume would skip), run nothing")
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
