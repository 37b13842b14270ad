"""How far a run got: the jobs with a record against the plan, and how its last sweep ended.

A report, a leaderboard or a comparison of a run that is 1% done reads like a final one unless it
says so. Every reader that shows a run's numbers puts :func:`completion`'s line at its top. The
counts come from the run index (one grouped count by model) and the plan's totals in the
manifest; how the last sweep ended comes from the manifest's ``history`` (``fasteval.api`` notes
it), and whether one runs now from its control socket. No record is read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fasteval.runfolder.control import sweep_answers
from fasteval.runfolder.index import RunIndex, open_index
from fasteval.runfolder.manifest import read_manifest

_WHY_NOISE = re.compile(r"^incomplete: |;? *rerun (the same command )?to continue$")
"""What the terminal's line of an incomplete sweep says that the partial-run line says itself."""

_ENDINGS = {
    "interrupted": "the last sweep was interrupted (Ctrl-C or SIGTERM)",
    "incomplete": "the last sweep stopped with work left",
    "stopped": "the last sweep stopped on a local fault",
    "narrowed": "the last sweep ran a part of the plan (--limit, --model, --suite, --setting or --seeds)",
    "finished": "the last sweep finished without running the rest",
    "merged": "merged from sources that did not all finish",
}


def completion(run_dir: Path, index: RunIndex, manifest: dict[str, Any]) -> dict[str, Any]:
    """``{"total", "done", "remaining", "complete", "state", "why", "by_model", "line"}`` of one run.

    ``done`` counts jobs with a record, ok or error, as ``fasteval status`` does; ``total`` is the
    plan's (None for a folder without one, whose completeness is unknown). ``state`` is
    ``complete``, ``running`` (a sweep answers on its control socket), or how the last sweep ended:
    ``interrupted``, ``incomplete``, ``stopped``, ``narrowed``, ``finished``, or ``killed`` (it
    never said: ``kill -9``, a crash, a lost node). ``by_model``: each planned model's counts.
    """
    plan = manifest.get("plan") or {}
    done_by: dict[str, int] = {}
    for (model,), by_status in index.counts(by=("model",)).items():
        done_by[str(model)] = sum(by_status.values())
    planned_by = {str(k): int(v) for k, v in (plan.get("by_model") or {}).items()}
    total = int(plan["total"]) if "total" in plan else None
    done = sum(min(n, planned_by.get(m, n)) for m, n in done_by.items()) if planned_by else sum(done_by.values())
    out: dict[str, Any] = {"total": total, "done": done, "remaining": None, "complete": None, "state": "unknown",
                           "why": None, "by_model": {}, "line": ""}
    if total is None:
        return out
    remaining = max(0, total - done)
    out.update(remaining=remaining, complete=remaining == 0)
    out["by_model"] = {m: {"total": t, "done": min(done_by.get(m, 0), t), "remaining": t - min(done_by.get(m, 0), t)}
                       for m, t in sorted(planned_by.items())}
    if remaining == 0:
        out["state"] = "complete"
        return out
    state, why = _last_ending(run_dir, manifest)
    out.update(state=state, why=why)
    out["line"] = _line(out)
    return out


def run_completion(run_dir: Path) -> dict[str, Any]:
    """:func:`completion` of a run folder, opening its index (for readers that hold none open)."""
    with open_index(run_dir) as index:
        return completion(run_dir, index, read_manifest(run_dir) or {})


def _last_ending(run_dir: Path, manifest: dict[str, Any]) -> tuple[str, str | None]:
    history = manifest.get("history")
    last = history[-1] if isinstance(history, list) and history and isinstance(history[-1], dict) else {}
    ended = last.get("ended")
    if sweep_answers(run_dir):
        return "running", None
    if isinstance(ended, dict) and ended.get("how") in _ENDINGS:
        why = _WHY_NOISE.sub("", str(ended.get("why") or "")).strip(" ;")
        return str(ended["how"]), why or None
    return "killed", None


def _line(c: dict[str, Any]) -> str:
    """One sentence: how far, why it stopped, what is left per model (at most 6 named)."""
    total, done = c["total"], c["done"]
    share = f"{100 * done / total:.0f}%" if total else "0%"
    head = {"running": "partial run (a sweep is running now)",
            "killed": "partial run: the last sweep left no word of how it ended (kill -9, a crash, a lost node)"}.get(
        c["state"], f"partial run: {_ENDINGS.get(c['state'], 'incomplete')}")
    if c.get("why"):
        head += f" ({c['why']})"
    left = [f"{m} {v['remaining']} of {v['total']}" for m, v in c["by_model"].items() if v["remaining"]]
    more = f", and {len(left) - 6} more models" if len(left) > 6 else ""
    tail = {"running": "", "narrowed": "; run without the selectors for the rest",
            "merged": "; rerun the sources and merge again"}.get(
        c["state"], "; rerun the same command to continue")
    return (f"{head}: {done} of {total} jobs have a record ({share}), {c['remaining']} remaining"
            + (f"; remaining per model: {', '.join(left[:6])}{more}" if left else "") + tail)
