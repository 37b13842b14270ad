"""``fasteval compare RUN_A[:MODEL] RUN_B[:MODEL]``: B against A per suite × setting, with a verdict.

Also between two models of one run (``RUN:a RUN:b``) and along a checkpoint series
(``fasteval compare RUN --series run7``: each step against the one before). ``--gate`` makes a
"worse" anywhere exit 1, for a regression check in CI.
"""

from __future__ import annotations

import argparse
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

from rich.table import Table

from fasteval.cli.commands import HELP
from fasteval.cli.common import console, fmt, print_error, print_json
from fasteval.core.errors import UsageError
from fasteval.core.exitcodes import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, exit_code_for
from fasteval.core.terminal import plain
from fasteval.runfolder.names import MANIFEST


class CompareError(ValueError, UsageError):
    """A side that names no run folder or no model: one line, exit 2."""


def parse_side(arg: str) -> tuple[Path, str | None]:
    """``RUN`` or ``RUN:MODEL``; the run folder is the shortest prefix that is one (a path may hold ':')."""
    if (Path(arg) / MANIFEST).exists():
        return Path(arg), None
    for i, ch in enumerate(arg):
        if ch == ":" and (Path(arg[:i]) / MANIFEST).exists():
            return Path(arg[:i]), arg[i + 1:] or None
    raise CompareError(f"{arg}: not a run folder (no manifest.json), nor RUN:MODEL of one")


def _pick(run: Path, wanted: str | None, hint: str | None, models: list[str]) -> str:
    if wanted is not None:
        if wanted not in models:
            raise CompareError(f"{run}: no model {wanted!r} (has {', '.join(models) or 'no records'})")
        return wanted
    if hint is not None and hint in models:
        return hint
    if not models:
        raise CompareError(f"{run} has no records yet: nothing to compare")
    if len(models) == 1:
        return models[0]
    raise CompareError(f"{run} has several models ({', '.join(models)}): name one as {run}:MODEL")


def pairs(args: argparse.Namespace, notes: list[str] | None = None) -> list[tuple[Any, Any]]:
    """The (A, B) sides the arguments ask for; ``notes`` gets a line for each model left out."""
    from fasteval.view.compare import Side, checkpoint_series, models_of

    if len(args.sides) > 2:
        raise CompareError("compare takes one run with --series, or two sides RUN_A[:MODEL] RUN_B[:MODEL]")
    parsed = [parse_side(s) for s in args.sides]
    if len(parsed) == 1 or args.series:
        if len(parsed) != 1 or parsed[0][1] is not None:
            raise CompareError("--series compares the steps of one run: fasteval compare RUN --series NAME")
        run = parsed[0][0]
        series = checkpoint_series(models_of(run))
        chosen = {args.series: series[args.series]} if args.series in series else series if not args.series else {}
        if not chosen:
            raise CompareError(f"{run}: no checkpoint series{f' {args.series!r}' if args.series else ''} "
                             f"(models named NAME@STEP, two steps or more; found: {', '.join(series) or 'none'})")
        return [(Side(run, x), Side(run, y)) for steps in chosen.values() for x, y in pairwise(steps)]
    (run_a, ma), (run_b, mb) = parsed
    models_a, models_b = models_of(run_a), models_of(run_b)
    if ma is None and mb is None:
        common = [m for m in models_a if m in models_b]
        if common and not (len(models_a) == len(models_b) == 1):
            if notes is not None:
                notes += [f"{run} has {_plural(only)} the other side lacks, not compared: {', '.join(only)} "
                          "(compare them as RUN_A:MODEL RUN_B:MODEL)"
                          for run, only in ((run_a, [m for m in models_a if m not in models_b]),
                                            (run_b, [m for m in models_b if m not in models_a])) if only]
            return [(Side(run_a, m), Side(run_b, m)) for m in common]
    a = _pick(run_a, ma, mb, models_a)
    return [(Side(run_a, a), Side(run_b, _pick(run_b, mb, a, models_b)))]


def _plural(models: list[str]) -> str:
    return "a model" if len(models) == 1 else f"{len(models)} models"


def cmd_compare(a: argparse.Namespace) -> int:
    from fasteval.view.compare import compare
    from fasteval.view.completion import run_completion

    if not 0 < a.alpha < 1:
        print("error: --alpha must be between 0 and 1", file=sys.stderr)
        return EXIT_USAGE
    notes: list[str] = []
    try:
        todo = pairs(a, notes)
    except CompareError as e:
        print_error(e)
        return exit_code_for(e)
    results = [compare(x, y, alpha=a.alpha, n_resamples=a.resamples) for x, y in todo]
    if all(r["n_shared_jobs"] == 0 for r in results):
        print("error: the two sides share no job (same suite, setting, task and seed)", file=sys.stderr)
        return EXIT_USAGE
    worse = sum(r["worse"] for r in results)
    # A side of a partial run is compared on what it has: the run says so above the figures.
    runs = list(dict.fromkeys(side.run_dir for pair in todo for side in pair))
    done = {str(run): run_completion(run) for run in runs}
    if a.format == "json":
        print_json({"comparisons": results, "gate": "fail" if worse else "pass", "completion": done,
                    "notes": notes})
    else:
        for run, c in done.items():
            if c.get("line"):
                console().print(plain(f"{run}: {c['line']}", style="bold yellow"))
        for line in notes:
            console().print(plain(f"note: {line}"))
        for r in results:
            _print(r)
        if len(results) > 1:
            _print_summary(results)
        if a.gate:
            console().print(f"gate: {'FAIL' if worse else 'pass'} ({worse} worse at alpha={a.alpha:g})")
    return EXIT_REGRESSION if a.gate and worse else EXIT_OK


def _print(r: dict[str, Any]) -> None:
    a, b = r["a"], r["b"]
    t = Table(title=plain(f"B = {b['run_dir']}:{b['model']}  vs  A = {a['run_dir']}:{a['model']}"),
              caption=plain(f"{r['n_shared_jobs']} paired jobs; only in A: {r['only_a']}, only in B: {r['only_b']}; "
                            f"CI {100 * (1 - r['alpha']):g}% paired bootstrap over items (seeds averaged within an "
                            "item); McNemar exact where items are 0/1"))
    for col in ("suite", "setting", "items", "A %", "B %", "B-A pts", "CI", "McNemar p", "lost/gained", "verdict"):
        t.add_column(col)
    for g in r["groups"]:
        if not g["n_items"]:
            t.add_row(plain(g["suite"]), plain(g["setting"]), "0", *(["-"] * 6), plain(g["verdict"]))
            continue
        p = g["mcnemar_p"]
        t.add_row(plain(g["suite"]), plain(g["setting"]), str(g["n_items"]), fmt(g["mean_a"]), fmt(g["mean_b"]),
                  f"{100 * g['diff']:+.1f}", f"[{100 * g['ci'][0]:+.1f}, {100 * g['ci'][1]:+.1f}]",
                  "-" if p is None else f"{p:.3g}", f"{g['n_lost']}/{g['n_gained']}", plain(g["verdict"]))
    console().print(t)
    for g in r["groups"]:
        for name in ("lost", "gained"):
            if g.get(name):
                more = g[f"n_{name}"] - len(g[name])
                console().print(plain(f"{g['suite']}/{g['setting']} {name} ({'A solved, B not' if name == 'lost' else 'B solved, A not'}): "
                                      + ", ".join(g[name]) + (f" and {more} more" if more else "")))


def _print_summary(results: list[dict[str, Any]]) -> None:
    """Every pair's groups in one table (a series' steps, or each model of two runs): B − A and the verdict."""
    t = Table(title=f"summary: {len(results)} comparisons (B − A, points)", title_justify="left")
    for col in ("A", "B", "suite", "setting", "items", "A %", "B %", "B-A pts", "verdict"):
        t.add_column(col, justify="right" if col in ("items", "A %", "B %", "B-A pts") else "left")
    for r in results:
        for g in r["groups"]:
            diff = "-" if not g["n_items"] else f"{100 * g['diff']:+.1f}"
            t.add_row(plain(r["a"]["model"]), plain(r["b"]["model"]), plain(g["suite"]), plain(g["setting"]),
                      str(g["n_items"]), fmt(g.get("mean_a")), fmt(g.get("mean_b")), diff, plain(g["verdict"]))
    console().print(t)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("compare", help=HELP["compare"])
    p.add_argument("sides", nargs="+", metavar="RUN[:MODEL]", help="A then B; or one run with --series")
    p.add_argument("--series", metavar="NAME", help="compare neighbouring steps of models NAME@STEP in one run")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--gate", action="store_true", help="exit 1 when any suite × setting is worse")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=cmd_compare)
