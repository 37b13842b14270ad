"""The ``fasteval`` command: run, status, report, merge, tool run (and cache, rescore, score-file)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import uvloop
from rich.console import Console
from rich.table import Table

from fasteval.diskfaults import RunDirUnwritable, RunLogHandler, shown
from fasteval.exitcodes import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_JOB_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    RunIncomplete,
)
from fasteval.redact import (
    RedactingFilter,
    add_secrets_from_env,
    redact_text,
    secret_env_names,
    secret_like_env_names,
)
from fasteval.report import report, status

if TYPE_CHECKING:  # the engine (and the config, which imports aiohttp) loads only for commands that run it
    from fasteval.config import ConfigError, SweepConfig
    from fasteval.sweep import RunOptions, Selectors, SweepResult


class _VersionAction(argparse.Action):
    """``--version``, reading the installed version only when asked (importlib.metadata: ~60 ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help="show the program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        import fasteval

        print(f"fasteval {fasteval.__version__}")
        parser.exit()


def _print_json(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


def _print_config_error(e: ConfigError) -> None:
    for line in str(e).splitlines():
        print(f"error: {line.strip()}" if not line.startswith("  ") else line, file=sys.stderr)


def _selectors(a: argparse.Namespace, cfg: SweepConfig) -> Selectors:
    from fasteval.sweep import Selectors
    """The plan narrowing asked for on the command line; unknown names are usage errors."""
    from fasteval.config_schema import did_you_mean

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
    from fasteval.dry_run import preview

    try:
        pv = preview(cfg, opts)
    except (ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    t = Table(title=f"dry run of {cfg.path}: {pv.total} jobs, {pv.resumed} already done in {opts.run_dir}, "
                    f"{pv.total - pv.resumed} to run")
    for col in ("model", "suite", "setting", "seed", "jobs"):
        t.add_column(col, justify="right" if col in ("seed", "jobs") else "left")
    for (m, su, st, sd), n in pv.groups.items():
        t.add_row(m, su, st, str(sd), str(n))
    _console().print(t)
    f = Table(title="first jobs to run")
    for col in ("job_id", "model", "suite", "setting", "task_id", "seed"):
        f.add_column(col)
    for j in pv.first:
        f.add_row(*(str(j[c]) for c in ("job_id", "model", "suite", "setting", "task_id", "seed")))
    _console().print(f)
    return EXIT_OK


def _print_error_summary(result: SweepResult) -> None:
    """The end-of-run table: errors by model × kind, each with one readable example."""
    if not result.errors_by:
        return
    t = Table(title="errors by model and kind (details in run.log and records.jsonl)", title_justify="left")
    for col in ("model", "error_kind", "jobs", "example"):
        t.add_column(col, overflow="fold")
    for model, kinds in result.errors_by.items():
        for kind, (count, example) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
            t.add_row(model, kind, str(count), redact_text(str(example))[:200])
    Console(stderr=True, width=None if sys.stderr.isatty() else 160).print(t)


class _TerminalFilter(logging.Filter):
    """During a run the terminal shows only errors; warnings (ours and third-party libraries',
    e.g. math_verify's timeout notice) go to run.log, where they do not tear the live panel."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


def cmd_run(a: argparse.Namespace) -> int:
    from fasteval.config import ConfigError, load_config
    from fasteval.models import ModelConfigError
    from fasteval.sweep import ConfigChanged, RunOptions, SweepIncomplete, parse_shard, run_sweep

    try:
        cfg = load_config(a.config)
        shard = parse_shard(a.shard) if a.shard else None
        selectors = _selectors(a, cfg)
    except ConfigError as e:
        _print_config_error(e)
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
    run_dir = Path(a.run_dir or Path("runs") / Path(a.config).stem)
    if shard and not a.run_dir:
        run_dir = run_dir.with_name(f"{run_dir.name}-shard{shard[0]}of{shard[1]}")
    opts = RunOptions(run_dir=run_dir, shard=shard, shard_by=a.shard_by,
                      max_concurrency=a.max_concurrency, force=a.force,
                      keep_errors=a.keep_errors, progress=False if a.no_progress else None, selectors=selectors)
    if a.dry_run:
        return _print_preview(cfg, opts)
    if not a.no_preflight:
        from fasteval.preflight import preflight

        try:
            problems = uvloop.run(preflight(cfg))
        except KeyboardInterrupt:
            print("interrupted during preflight: nothing ran", file=sys.stderr)
            return EXIT_INTERRUPTED
        if problems:
            print(f"error: preflight found {len(problems)} endpoint(s) not ready (nothing ran; --no-preflight "
                  f"skips this check):", file=sys.stderr)
            for line in problems:
                print(f"  {redact_text(line)}", file=sys.stderr)  # an upstream may echo the key back
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
        result = uvloop.run(run_sweep(cfg, opts))
    except SweepIncomplete as e:
        r = e.result
        print(f"{run_dir}: {r.ok} ok, {r.errors} error, {r.skipped} already done, {r.not_run} not run "
              f"in {r.wall_s:.1f} s", file=sys.stderr)
        _print_error_summary(r)
        print(redact_text(str(e)), file=sys.stderr)
        return EXIT_INCOMPLETE
    except RunIncomplete as e:
        msg = redact_text(str(e))
        print(msg if msg.startswith("incomplete") else f"error: {msg}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except RunDirUnwritable as e:
        print(f"error: {redact_text(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigChanged, ModelConfigError, KeyError, ValueError) as e:
        if not existed and not (run_dir / "records.jsonl").exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # a start that failed claims nothing
        print(f"error: {redact_text(str(e))}", file=sys.stderr)
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
        return EXIT_INTERRUPTED
    if result.errors:
        _print_error_summary(result)
        return EXIT_JOB_ERRORS
    return EXIT_OK


def cmd_status(a: argparse.Namespace) -> int:
    try:
        st = status(Path(a.run_dir))
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.format == "json":
        _print_json(st)
        return 0
    t = Table(title=f"{a.run_dir}: {st['done']} done, {st['error']} error, {st['remaining']} remaining of {st['total']}")
    for col in ("group", "value", "total", "done", "error", "remaining"):
        t.add_column(col)
    for dim in ("model", "suite", "setting", "seed"):
        for k, v in st[f"by_{dim}"].items():
            t.add_row(dim, k, str(v["total"]), str(v["done"]), str(v["error"]), str(v["remaining"]))
    _console().print(t)
    if st.get("errors_by_kind"):
        errs = Table(title="errors by model and kind", title_justify="left")
        for col in ("model", "error_kind", "jobs", "example"):
            errs.add_column(col, overflow="fold")
        for row in st["errors_by_kind"]:
            errs.add_row(str(row["model"]), str(row["error_kind"]), str(row["jobs"]), str(row["example"] or "")[:200])
        _console().print(errs)
    return 0


def _console() -> Console:
    """Wide enough for the report table even when stdout is a pipe or a CI log."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def _fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}" if pct else f"{x:.3f}"


def cmd_report(a: argparse.Namespace) -> int:
    run_dir = Path(a.run_dir)
    if not (run_dir / "manifest.json").exists():
        print(f"error: {run_dir} is not a run folder (no manifest.json)", file=sys.stderr)
        return 2
    if a.html:
        from fasteval.view.html_report import write_report

        size = write_report(run_dir, Path(a.html), examples=a.examples)
        print(f"{a.html}: {size // 1000} KB", file=sys.stderr)
        return 0
    rep = report(run_dir)
    if a.format == "json":
        _print_json(rep)
        return 0
    t = Table(title=f"{run_dir}: score (%) mean ± std over seeds")
    for col in ("model", "suite", "setting", "mean ± std", "95% CI", "seeds", "n_ok", "n_error", "pass@k", "pass^k",
                "cost $"):
        t.add_column(col)
    for r in rep["rows"]:
        ci = r["ci95"]
        t.add_row(r["model"], r["suite"], r["setting"], f"{_fmt(r['mean'])} ± {_fmt(r['std'])}",
                  f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "-", str(r["n_seeds"]), str(r["n_ok"]),
                  str(r["n_error"]), _fmt(r["pass_at_k"]), _fmt(r["pass_pow_k"]),
                  "-" if r.get("cost_usd") is None else f"{r['cost_usd']:.2f}")
    if rep.get("cost_usd") is not None:
        t.caption = f"estimated cost of the evaluated models: ${rep['cost_usd']:.2f} (fasteval.pricing; roles not included)"
    _console().print(t)
    for suite_name, label in (rep.get("texts") or {}).items():
        _console().print(f"texts: {suite_name}: {label}")
    u = Table(title="cost and behaviour per trajectory")
    for col in ("model", "suite", "setting", "prompt tok", "completion tok", "mean latency s", "tool calls/traj",
                "terminations"):
        u.add_column(col)
    for r in rep["rows"]:
        lat, calls = r.get("mean_latency_s"), r.get("tool_calls_per_trajectory")
        ends = ", ".join(f"{k}={v}" for k, v in sorted((r.get("terminations") or {}).items()))
        tokens = r.get("tokens") or {}
        u.add_row(r["model"], r["suite"], r["setting"], str(tokens.get("prompt_tokens", "-")),
                  str(tokens.get("completion_tokens", "-")), "-" if lat is None else f"{lat:.2f}",
                  "-" if calls is None else f"{calls:.2f}", ends)
    _console().print(u)
    for r in rep["rows"]:
        if r.get("suite_metrics"):
            _print_metrics(f"{r['suite']}: {r['model']} / {r['setting']}", r["suite_metrics"])
    typed = [r for r in rep["rows"] if r.get("by_task_type")]
    if typed:
        kinds = sorted({k for r in typed for k in r["by_task_type"]})
        pt = Table(title="score (%) per task type (all seeds)")
        pt.add_column("task type")
        for r in typed:
            pt.add_column(f"{r['model']}\n{r['setting']}", justify="right")
        for k in kinds:
            pt.add_row(k, *(_fmt(r["by_task_type"].get(k)) for r in typed))
        _console().print(pt)
    return 0


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _cell(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_cell(x)}" for k, x in v.items())
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _print_metrics(title: str, metrics: dict[str, Any]) -> None:
    """A suite's own tables: scalars in one table, each dict of rows in its own, the rest as JSON."""
    console = _console()
    scalars = {k: v for k, v in metrics.items() if _scalar(v)}
    if scalars:
        t = Table(title=title, title_justify="left")
        t.add_column("metric")
        t.add_column("value", justify="right")
        for k, v in scalars.items():
            t.add_row(k, _cell(v))
        console.print(t)
    for key, value in metrics.items():
        if _scalar(value):
            continue
        if isinstance(value, dict) and value and all(_scalar(v) for v in value.values()):
            t = Table(title=f"{title}: {key}", title_justify="left")
            t.add_column(key)
            t.add_column("value", justify="right")
            for k, v in value.items():
                t.add_row(str(k), _cell(v))
            console.print(t)
        elif isinstance(value, dict) and value and all(
                isinstance(v, dict) and all(_scalar(x) or isinstance(x, dict) for x in v.values())
                for v in value.values()):
            cols = list(dict.fromkeys(c for v in value.values() for c in v))
            t = Table(title=f"{title}: {key}", title_justify="left")
            t.add_column(key)
            for c in cols:
                t.add_column(str(c), justify="right")
            for k, v in value.items():
                t.add_row(str(k), *(_cell(v.get(c, "")) for c in cols))
            console.print(t)
        else:
            console.print(f"{title}: {key}")
            console.print_json(orjson.dumps(value).decode())


def cmd_merge(a: argparse.Namespace) -> int:
    from fasteval.merge import MergeConflict, merge_runs

    try:
        out = merge_runs(Path(a.out), [Path(s) for s in a.sources])
    except MergeConflict as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    _print_json(out)
    return 0


def cmd_tool_run(a: argparse.Namespace) -> int:
    from fasteval.toolrun import run_tool_once

    try:
        args = orjson.loads(a.args)
    except orjson.JSONDecodeError as e:
        print(f"error: --args is not valid JSON: {e}", file=sys.stderr)
        return 2
    if not isinstance(args, dict):
        print("error: --args must be a JSON object", file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="fasteval-tool-"))
    try:
        result = uvloop.run(run_tool_once(a.name, args, [Path(p) for p in a.image], a.fidelity, out))
    except (KeyError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    _print_json(result)
    return 0


def cmd_score_file(a: argparse.Namespace) -> int:
    import fasteval.suites  # noqa: F401  (registers the suites)
    from fasteval.suites.base import SUITES

    cls = SUITES.get(a.suite)
    if cls is None:
        print(f"error: unknown suite {a.suite!r}; known: {sorted(SUITES)}", file=sys.stderr)
        return 2
    options = dict(orjson.loads(a.options)) if a.options else {}
    try:
        files = [Path(f) for f in a.file]
        result = cls.score_file(files[0] if len(files) == 1 else files, a.fidelity, options)  # type: ignore[attr-defined]
    except (ValueError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.format == "json":
        _print_json(result)
    else:
        t = Table(title=f"{' + '.join(a.file)}: overall {_fmt(result.get('overall'), pct=False)}")
        t.add_column("category")
        t.add_column("score")
        for k, v in (result.get("by_category") or {}).items():
            t.add_row(str(k), _fmt(v, pct=False) if isinstance(v, int | float) else str(v))
        _console().print(t)
    return 0


def cmd_rescore(a: argparse.Namespace) -> int:
    from fasteval.config import ConfigError, config_from_manifest, load_config
    from fasteval.records import read_manifest
    from fasteval.rescore import rescore

    run_dir = Path(a.run_dir)
    manifest = read_manifest(run_dir)
    if manifest is None:
        print(f"error: {run_dir} is not a run folder (no manifest.json)", file=sys.stderr)
        return 2
    try:
        if a.config:
            cfg = load_config(a.config)
        else:
            cfg = config_from_manifest(manifest, run_dir)
        if a.judge:
            cfg.roles["judge"] = dict(orjson.loads(a.judge))
    except (ConfigError, orjson.JSONDecodeError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res = uvloop.run(rescore(cfg, run_dir))
    print(f"{run_dir}: rescored {res.rescored} ok, {res.errors} error, {res.skipped} skipped; "
          f"judge requests {res.judge_requests}, judge cache hits {res.judge_cache_hits}", file=sys.stderr)
    return 0


def cmd_data_fetch(a: argparse.Namespace) -> int:
    from fasteval.data_fetch import FetchError, fetch

    try:
        path = fetch(a.name, Path(a.dest) if a.dest else None, revision=a.revision)
    except (FetchError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the ``command`` being run, only what it needs is imported."""
    ap = argparse.ArgumentParser(prog="fasteval", description="High-throughput async evaluator for "
                                 "multimodal models that think with images.")
    ap.add_argument("--version", action=_VersionAction)
    sub = ap.add_subparsers(dest="command", required=True)
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
    r.add_argument("--limit", type=int, help="only the first N tasks of each suite")
    r.add_argument("--model", action="append", help="only this model (repeatable, or a,b)")
    r.add_argument("--suite", action="append", help="only this suite (repeatable)")
    r.add_argument("--setting", action="append", help="only this setting (repeatable)")
    r.add_argument("--seeds", action="append", help="only these seeds, e.g. 0,1")
    r.set_defaults(func=cmd_run)
    s = sub.add_parser("status", help="what is done and what remains in a run folder")
    s.add_argument("run_dir")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.set_defaults(func=cmd_status)
    p = sub.add_parser("report", help="scores per model × suite × setting, mean ± std over seeds")
    p.add_argument("run_dir")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML report (tables, plots)")
    p.add_argument("--examples", type=int, default=0, metavar="N", help="with --html: N trajectories per model")
    p.set_defaults(func=cmd_report)
    m = sub.add_parser("merge", help="join shard run folders into one")
    m.add_argument("out")
    m.add_argument("sources", nargs="+")
    m.set_defaults(func=cmd_merge)
    t = sub.add_parser("tool", help="tools by hand")
    tsub = t.add_subparsers(dest="tool_command", required=True)
    tr = tsub.add_parser("run", help="run one tool exactly as the agent loop would")
    tr.add_argument("name")
    tr.add_argument("--args", default="{}")
    tr.add_argument("--image", action="append", default=[])
    tr.add_argument("--fidelity", choices=["reference", "fixed"], default="reference")
    tr.add_argument("--out")
    tr.set_defaults(func=cmd_tool_run)
    rs = sub.add_parser("rescore", help="re-judge finished trajectories without regenerating them")
    rs.add_argument("run_dir")
    rs.add_argument("--config", help="a config whose roles (judge, extractor) replace the run's")
    rs.add_argument("--judge", help='a judge role as JSON, e.g. \'{"provider": "openai", "base_url": ..., "model": ...}\'')
    rs.set_defaults(func=cmd_rescore)
    sf = sub.add_parser("score-file", help="score a reference harness's own output file, item by item")
    sf.add_argument("file", nargs="+", help="one file, or several pooled (e.g. single- and multi-turn)")
    sf.add_argument("--suite", required=True)
    sf.add_argument("--fidelity", choices=["reference", "fixed"], default="reference")
    sf.add_argument("--options", help="JSON object of suite-specific options (e.g. rubrics path)")
    sf.add_argument("--format", choices=["table", "json"], default="table")
    sf.set_defaults(func=cmd_score_file)
    d = sub.add_parser("data", help="benchmark data")
    dsub = d.add_subparsers(dest="data_command", required=True)
    df = dsub.add_parser("fetch", help="download a benchmark's official files (needs huggingface_hub and a network)")
    df.add_argument("name")
    df.add_argument("--dest", help="folder (default: where the shipped configs read it, data/<benchmark>)")
    df.add_argument("--revision")
    df.set_defaults(func=cmd_data_fetch)
    if command is None or command not in sub.choices:
        _add_optional_commands(sub)  # their imports cost every built-in command ~0.2 s otherwise
    return ap


# Command groups that live with their packages: each module has ``add_parser(sub)``.
COMMAND_MODULES: tuple[str, ...] = ("cache.cli", "fasteval.slurm.cli", "fasteval.runindex.cli", "fasteval.catalog",
                                   "fasteval.view.cli", "fasteval.suites.prompts_cli", "fasteval.serve_command")


def _add_optional_commands(sub: Any) -> None:
    """Register the command groups of COMMAND_MODULES (one line each, so packages stay apart)."""
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for h in logging.getLogger().handlers:
        h.addFilter(RedactingFilter())
    args = sys.argv[1:] if argv is None else list(argv)
    a = build_parser(next((x for x in args if not x.startswith("-")), None)).parse_args(args)
    # A SIGTERM before the sweep installs its own handlers (a Slurm warning that arrives while the
    # suites load) stops as cleanly as Ctrl-C: nothing is written yet, and the rerun resumes.
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        code: int = a.func(a)
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return code


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    sys.exit(main())
