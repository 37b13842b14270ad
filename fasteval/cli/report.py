"""``fasteval report``: scores per model × suite × setting, suites' own tables, or an HTML report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.syntax import Syntax
from rich.table import Table

from fasteval.cli.commands import HELP
from fasteval.cli.common import console, fmt, print_completion, print_control, print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean, json_text, plain
from fasteval.runfolder.names import MANIFEST
from fasteval.view.report import report


def cmd_report(a: argparse.Namespace) -> int:
    if a.store is not None:
        if not a.leaderboard or a.run_dir is not None or a.html or a.series:
            print("error: --store STORE goes with --leaderboard and no run folder (the leaderboard across the "
                  "store's runs)", file=sys.stderr)
            return EXIT_USAGE
        from fasteval.cli.leaderboard import print_store_leaderboard

        return print_store_leaderboard(Path(a.store), a.format, a.sort, Path(a.published) if a.published else None)
    if a.run_dir is None:
        print("error: name a run folder (or --store STORE --leaderboard)", file=sys.stderr)
        return EXIT_USAGE
    run_dir = Path(a.run_dir)
    if not (run_dir / MANIFEST).exists():
        print(f"error: {clean(run_dir)} is not a run folder (no manifest.json)", file=sys.stderr)
        return EXIT_USAGE
    if a.html:
        from fasteval.view.html_report import write_report

        size = write_report(run_dir, Path(a.html), examples=a.examples)
        print(f"{clean(a.html)}: {size // 1000} KB", file=sys.stderr)
        return EXIT_OK
    if a.leaderboard:  # after --html: the HTML report opens with the leaderboard anyway
        from fasteval.cli.leaderboard import print_leaderboard

        return print_leaderboard(run_dir, a.format, a.sort, Path(a.published) if a.published else None)
    if a.format == "markdown" and a.series is not None:
        print("error: --series takes --format table, json or csv", file=sys.stderr)
        return EXIT_USAGE
    rep = report(run_dir)
    if a.series is not None:
        return _print_series(rep, a.series, a.format)
    if a.format in ("csv", "markdown"):
        from fasteval.view.report_formats import report_csv, report_markdown

        sys.stdout.write(report_csv(rep) if a.format == "csv" else report_markdown(rep))
        return EXIT_OK
    if a.format == "json":
        print_json(rep)
        return EXIT_OK
    print_completion(rep.get("completion"))
    t = Table(title=plain(f"{run_dir}: score (%) mean ± std over seeds"))
    for col in ("model", "suite", "setting", "mean ± std", "95% CI", "seeds", "n_ok", "n_error", "pass@k", "pass^k",
                "cost $"):
        t.add_column(col)
    for r in rep["rows"]:
        ci = r["ci95"]
        t.add_row(plain(r["model"]), plain(r["suite"]), plain(r["setting"]), f"{fmt(r['mean'])} ± {fmt(r['std'])}",
                  f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "-", str(r["n_seeds"]), str(r["n_ok"]),
                  str(r["n_error"]), fmt(r["pass_at_k"]), fmt(r["pass_pow_k"]),
                  "-" if r.get("cost_usd") is None else f"{r['cost_usd']:.2f}")
    if rep.get("cost_usd") is not None:
        t.caption = f"estimated cost of the evaluated models: ${rep['cost_usd']:.2f} (fasteval.core.pricing; roles not included)"
    console().print(t)
    for suite_name, label in (rep.get("texts") or {}).items():
        console().print(plain(f"texts: {suite_name}: {label}"))
    print_control(rep.get("control"))
    u = Table(title="cost and behaviour per trajectory")
    for col in ("model", "suite", "setting", "prompt tok/traj", "completion tok/traj", "image tok/traj",
                "prefix cache hit", "mean latency s", "tool calls/traj", "terminations"):
        u.add_column(col)
    for r in rep["rows"]:
        lat, calls = r.get("mean_latency_s"), r.get("tool_calls_per_trajectory")
        ends = plain(", ".join(f"{k}={v}" for k, v in sorted((r.get("terminations") or {}).items())))
        u.add_row(plain(r["model"]), plain(r["suite"]), plain(r["setting"]),
                  _per_traj(_tokens_per_trajectory(r, "prompt_tokens")),
                  _per_traj(_tokens_per_trajectory(r, "completion_tokens")),
                  _per_traj(r.get("image_tokens_per_trajectory")), fmt_rate(r.get("prefix_cache_hit_rate")),
                  "-" if lat is None else f"{lat:.2f}",
                  "-" if calls is None else f"{calls:.2f}", ends)
    console().print(u)
    for r in rep["rows"]:
        if r.get("suite_metrics"):
            _print_metrics(f"{r['suite']}: {r['model']} / {r['setting']}", r["suite_metrics"])
    for name, series in (rep.get("curves") or {}).items():
        _print_curves(name, series)
    typed = [r for r in rep["rows"] if r.get("by_task_type")]
    if typed:
        kinds = sorted({k for r in typed for k in r["by_task_type"]})
        pt = Table(title="score (%) per task type (all seeds)")
        pt.add_column("task type")
        for r in typed:
            pt.add_column(plain(f"{r['model']}\n{r['setting']}", block=True), justify="right")
        for k in kinds:
            pt.add_row(plain(k), *(fmt(r["by_task_type"].get(k)) for r in typed))
        console().print(pt)
    return EXIT_OK


def _per_traj(value: float | None) -> str:
    """Tokens per trajectory, or ``-`` where the server did not count them."""
    return "-" if value is None else f"{value:.0f}"


def _tokens_per_trajectory(row: dict[str, Any], field: str) -> float | None:
    """A group's token total over its trajectories (error records too: they were billed); the JSON
    report keeps the totals under ``tokens``."""
    n = row["n_ok"] + row["n_error"]
    total = (row.get("tokens") or {}).get(field)
    return None if total is None or not n else total / n


def _print_series(rep: dict[str, Any], name: str, form: str) -> int:
    """``--series NAME``: one series' learning curve as a table, JSON or CSV."""
    from fasteval.view.curves import curves_csv

    curves = rep.get("curves") or {}
    if name not in curves:
        known = ", ".join(sorted(curves)) or "none: this run has no series with results"
        print(f"error: no series {clean(name)!r} in {clean(rep['run_dir'])} (series: {clean(known)})",
              file=sys.stderr)
        return EXIT_USAGE
    if form == "json":
        print_json({"series": name, **curves[name]})
    elif form == "csv":
        sys.stdout.write(curves_csv(name, curves[name]))
    else:
        _print_curves(name, curves[name])
    return EXIT_OK


_BLOCKS = " ▁▂▃▄▅▆▇█"


def _print_curves(name: str, series: dict[str, Any]) -> None:
    """Per suite and setting: score (%) ± the between-seed std and tool calls per step, best marked."""
    for curve in series["curves"]:
        best = (curve.get("best") or {}).get("step")
        t = Table(title=plain(f"learning curve of {name}: {curve['suite']} / {curve['setting']} "
                              f"(best step {best if best is not None else '-'})"), title_justify="left")
        for col in ("step", "score (%)", "± std", "", "tool calls/traj", "n_ok", "n_error"):
            t.add_column(col, justify="left" if col == "" else "right")
        for p in curve["points"]:
            mean = p["mean"]
            bar = "-" if mean is None else _BLOCKS[min(len(_BLOCKS) - 1, round(mean * (len(_BLOCKS) - 1)))]
            calls = p["tool_calls_per_trajectory"]
            t.add_row(plain(p["step"]), fmt(mean), fmt(p["std"]), bar + (" best" if p["step"] == best else ""),
                      "-" if calls is None else f"{calls:.2f}", str(p["n_ok"]), str(p["n_error"]))
        console().print(t)


def fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _cell(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_cell(x)}" for k, x in v.items())
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _print_metrics(title: str, metrics: dict[str, Any]) -> None:
    """A suite's own tables: scalars in one table, each dict of rows in its own, the rest as JSON."""
    out = console()
    scalars = {k: v for k, v in metrics.items() if _scalar(v)}
    if scalars:
        t = Table(title=plain(title), title_justify="left")
        t.add_column("metric")
        t.add_column("value", justify="right")
        for k, v in scalars.items():
            t.add_row(plain(k), plain(_cell(v)))
        out.print(t)
    for key, value in metrics.items():
        if _scalar(value):
            continue
        if isinstance(value, dict) and value and all(_scalar(v) for v in value.values()):
            t = Table(title=plain(f"{title}: {key}"), title_justify="left")
            t.add_column(plain(key))
            t.add_column("value", justify="right")
            for k, v in value.items():
                t.add_row(plain(k), plain(_cell(v)))
            out.print(t)
        elif isinstance(value, dict) and value and all(
                isinstance(v, dict) and all(_scalar(x) or isinstance(x, dict) for x in v.values())
                for v in value.values()):
            cols = list(dict.fromkeys(c for v in value.values() for c in v))
            t = Table(title=plain(f"{title}: {key}"), title_justify="left")
            t.add_column(plain(key))
            for c in cols:
                t.add_column(plain(c), justify="right")
            for k, v in value.items():
                t.add_row(plain(k), *(plain(_cell(v.get(c, ""))) for c in cols))
            out.print(t)
        else:
            out.print(plain(f"{title}: {key}"))
            # Not print_json: Rich re-parses and re-dumps the JSON, undoing json_text's escapes.
            out.print(Syntax(json_text(value), "json", word_wrap=True))


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help=HELP["report"])
    p.add_argument("run_dir", nargs="?")
    p.add_argument("--store", metavar="STORE",
                   help="with --leaderboard: every model the results store holds, across runs (no run folder)")
    p.add_argument("--format", choices=["table", "json", "csv", "markdown"], default="table",
                   help="csv and markdown: a line per model × suite × setting (with --leaderboard: per model; "
                        "with --series, csv: per suite, setting and step)")
    p.add_argument("--series", metavar="NAME", help="only this series' learning curve (score and tool calls by step)")
    p.add_argument("--leaderboard", action="store_true",
                   help="one row per model, one column per suite, published numbers beside ours")
    p.add_argument("--sort", default="average", metavar="KEY",
                   help="with --leaderboard: average (default), model, or a column (suite or suite/setting)")
    p.add_argument("--published", metavar="FILE.yaml",
                   help="with --leaderboard: more published numbers (a list, the fields of a config's published:)")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML report (tables, plots)")
    p.add_argument("--examples", type=int, default=0, metavar="N", help="with --html: N trajectories per model")
    p.set_defaults(func=cmd_report)
