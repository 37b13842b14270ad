"""``fasteval run CONFIG --dry-run --estimate``: the cost and duration table, and the pilot that feeds it.

The numbers come from ``fasteval.engine.forecast.estimate`` (docs/overnight.md says how each is obtained
and how good it is). ``--pilot N`` first runs N tasks of every model × suite × setting, one
seed, for real: it says what that may cost and asks, and refuses to ask without a terminal
unless ``--yes``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from fasteval.cli.common import console, print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE, exit_code_for
from fasteval.core.redact import redact_text
from fasteval.core.terminal import clean, plain
from fasteval.runfolder.names import RECORDS

if TYPE_CHECKING:
    from fasteval.config.load import SweepConfig
    from fasteval.engine.forecast.estimate import Estimate
    from fasteval.engine.plan import RunOptions


def tokens(n: float | None) -> str:
    if n is None:
        return "—"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return f"{n:.0f}"


def dollars(x: float | None) -> str:
    return "—" if x is None else f"${x:,.2f}" if x >= 1 else f"${x:.4f}"


def duration(s: float | None) -> str:
    if s is None:
        return "unknown"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.1f} min" if s >= 60 else f"{s:.1f} s"


def pilot_dir(run_dir: Path) -> Path:
    """Where a pilot runs: beside the run folder, so a later ``--estimate-from`` can name it."""
    return run_dir.with_name(run_dir.name + "-pilot")


def _pilot_options(cfg: SweepConfig, opts: RunOptions, n: int) -> RunOptions:
    seeds = opts.selectors.seeds or cfg.seeds
    sel = replace(opts.selectors, limit=min(n, opts.selectors.limit or n), seeds=[seeds[0]],
                  spread=opts.selectors.limit is None)
    return replace(opts, run_dir=pilot_dir(opts.run_dir), selectors=sel, progress=False, no_wait=False)


def _ask(question: str, yes: bool) -> bool | None:
    """True to go on; None when there is no terminal to ask on (and no --yes)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        return None
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def run_pilot(cfg: SweepConfig, opts: RunOptions, n: int, yes: bool, preflight: bool) -> Path | int:
    """Run the pilot after saying what it may cost; its run folder, or an exit code.

    The pilot is a sweep like any other: through the one run path (``api.run_planned``), which
    runs preflight, locks the pilot's folder (a ``run`` into it meanwhile is refused, and the
    reverse) and undoes a start that failed.
    """
    import uvloop

    from fasteval.api import run_planned
    from fasteval.cli.run_log import RunLog, internal_error
    from fasteval.core.errors import PreflightFailed
    from fasteval.engine.forecast.estimate import estimate
    from fasteval.engine.run.sweep import SweepIncomplete

    popts = _pilot_options(cfg, opts, n)
    bound = estimate(cfg, popts).totals()
    cost = (f"at most {dollars(bound['cost_usd'])} at list price (every round used, every request at "
            "max_tokens)" if bound["cost_usd"] is not None else "no model with a known price")
    print(f"pilot: {bound['jobs']} real jobs ({n} tasks spread over every model × suite × setting, seed "
          f"{popts.selectors.seeds[0]}) into {popts.run_dir}; {cost}", file=sys.stderr)
    answer = _ask("run the pilot now? [y/N] ", yes)
    if answer is None:
        print("error: --pilot spends money and asks first; without a terminal pass --yes", file=sys.stderr)
        return EXIT_USAGE
    if not answer:
        print("pilot not run: nothing was spent", file=sys.stderr)
        return EXIT_OK
    log = RunLog()  # run.log in the pilot's folder, and warnings (math_verify's) off the terminal, as a run
    try:
        result = uvloop.run(run_planned(cfg, popts, preflight=preflight, command="run", while_held=log.held))
        print(f"pilot: {result.ok} ok, {result.errors} error in {result.wall_s:.1f} s", file=sys.stderr)
    except PreflightFailed as e:
        print(f"error: preflight found {len(e.problems)} endpoint(s) not ready (the pilot did not run):",
              file=sys.stderr)
        for line in e.problems:
            print(f"  {clean(redact_text(line))}", file=sys.stderr)
        return exit_code_for(e)
    except SweepIncomplete as e:  # what finished is still evidence
        print(f"pilot incomplete ({clean(redact_text(str(e)))}): estimating from what finished", file=sys.stderr)
    except KeyboardInterrupt as e:
        return exit_code_for(e)
    except Exception as e:
        if e is not log.bug:  # a bug before run.log: cli/main.py prints its traceback
            raise
        return internal_error(e, popts.run_dir)
    return popts.run_dir


def print_estimate(cfg: SweepConfig, opts: RunOptions, a: argparse.Namespace) -> int:
    from fasteval.engine.forecast.estimate import estimate

    evidence = [Path(p) for p in a.estimate_from or []]
    for p in evidence:
        if not (p / RECORDS).exists():
            print(f"error: --estimate-from {clean(p)}: not a run folder (no records.jsonl)", file=sys.stderr)
            return EXIT_USAGE
    if a.pilot:
        if a.pilot < 1:
            print("error: --pilot must be at least 1", file=sys.stderr)
            return EXIT_USAGE
        got = run_pilot(cfg, opts, a.pilot, a.yes, not a.no_preflight)
        if not isinstance(got, Path):
            return got
        evidence.append(got)
    est = estimate(cfg, opts, evidence)  # our errors are UsageErrors (exit 2 in cli/main.py); anything else is a bug
    if a.estimate_json:
        print_json(est.to_dict())
    else:
        _table(cfg, opts, est)
    return EXIT_OK


def _table(cfg: SweepConfig, opts: RunOptions, est: Estimate) -> None:
    total = est.totals()
    t = Table(title=plain(f"estimate of {cfg.path} ({opts.run_dir}): {total['jobs']} jobs to run"),
              title_justify="left")
    for col in ("model", "suite", "setting", "jobs", "requests", "prompt tok", "completion tok", "list price",
                "batch price", "from"):
        t.add_column(col, justify="right" if col not in ("model", "suite", "setting", "from") else "left")
    for g in est.groups:
        le = "≤ " if g.upper_bound else ""
        t.add_row(plain(g.model), plain(g.suite), plain(g.setting), plain(g.jobs), plain(le + tokens(g.requests)),
                  plain(le + tokens(g.prompt_tokens)), plain(le + tokens(g.completion_tokens)),
                  plain(le + dollars(g.cost_usd) if g.cost_usd is not None else "—"),
                  plain(le + dollars(g.batch_cost_usd) if g.batch_cost_usd is not None else "—"), plain(g.basis))
    le = "≤ " if total["upper_bound"] else ""
    costs = [le + dollars(total[k]) if total[k] is not None else "—" for k in ("cost_usd", "batch_cost_usd")]
    t.add_row("total", "", "", plain(total["jobs"]), plain(le + tokens(total["requests"])),
              plain(le + tokens(total["prompt_tokens"])), plain(le + tokens(total["completion_tokens"])),
              plain(costs[0]), plain(costs[1]), "")
    console().print(t)
    for w in est.walls.values():
        bound = "" if w.complete or w.seconds is None else "at least "
        batch = ("; batched: each round also waits for its batch (mostly under an hour, at most 24 h)"
                 if w.batched else "")
        console().print(plain(f"{w.model}: {bound}{duration(w.seconds)} ({w.limited_by}){batch}"))
    wall = duration(est.wall_s)
    if est.wall_s is not None and not all(w.complete for w in est.walls.values()):
        wall = f"at least {wall}"  # some rows had no seconds per request to go on
    console().print(plain(f"wall time: {wall} under run.max_concurrency {est.global_cap}"
                          + ("" if est.wall_s is not None else " (no evidence: --estimate-from RUN or --pilot N)")))
    for source, n in est.refused.items():
        console().print(plain(f"--estimate-from {source}: {n} jobs' rows left out: values no run produces (negative "
                              "or absurd token counts, rounds or seconds: a damaged or edited run folder)"))
    if est.unloaded:
        console().print(plain(f"{est.unloaded} jobs have a task that did not load: they become error records and "
                              "send nothing (`--dry-run` without --estimate lists the plan)"))
    if total["upper_bound"]:
        console().print(plain("≤: an upper bound (no evidence for that row: every round used, every request "
                              "at max_tokens); --estimate-from RUN or --pilot N measures it"))
