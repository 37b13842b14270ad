"""``fasteval report --format csv|markdown``: the report's rows for a spreadsheet or a pull request.

One line per model × suite × setting with the figures of the table form (scores in percent, tokens
per trajectory). A partial run says so: the Markdown opens with its line, and every CSV line
carries its model's jobs with a record and planned (``fasteval.view.completion``). Names are text
the run's config wrote: cleaned of control characters, never a spreadsheet formula
(``core.cells.spreadsheet_text``), escaped for Markdown (``markdown_text``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from fasteval.core.cells import markdown_text, spreadsheet_text
from fasteval.core.terminal import clean

COLUMNS = ("model", "suite", "setting", "mean", "std", "ci_low", "ci_high", "seeds", "n_ok", "n_error", "pass@k",
           "pass^k", "prompt tok/traj", "completion tok/traj", "tool calls/traj", "mean latency s", "cost $")


def _pct(x: Any) -> str:
    return "" if not isinstance(x, int | float) else f"{100 * x:.1f}"


def _num(x: Any, digits: int = 2) -> str:
    return "" if not isinstance(x, int | float) else f"{x:.{digits}f}"


def _per_traj(row: Mapping[str, Any], field: str) -> str:
    n = int(row.get("n_ok") or 0) + int(row.get("n_error") or 0)
    total = (row.get("tokens") or {}).get(field)
    return "" if total is None or not n else f"{total / n:.0f}"


def row_cells(row: Mapping[str, Any]) -> list[str]:
    """One report row as the cells of COLUMNS (empty where there is no figure)."""
    ci = row.get("ci95") or [None, None]
    return [clean(row["model"]), clean(row["suite"]), clean(row["setting"]), _pct(row.get("mean")),
            _pct(row.get("std")), _pct(ci[0]), _pct(ci[1]), str(row.get("n_seeds", "")), str(row.get("n_ok", "")),
            str(row.get("n_error", "")), _pct(row.get("pass_at_k")), _pct(row.get("pass_pow_k")),
            _per_traj(row, "prompt_tokens"), _per_traj(row, "completion_tokens"),
            _num(row.get("tool_calls_per_trajectory")), _num(row.get("mean_latency_s")), _num(row.get("cost_usd"))]


def report_csv(rep: Mapping[str, Any]) -> str:
    """The report's rows as CSV, each with its model's jobs done and planned."""
    by_model = (rep.get("completion") or {}).get("by_model") or {}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*COLUMNS, "model jobs done", "model jobs planned"])
    for r in rep.get("rows") or []:  # names are text a spreadsheet must not run as a formula
        jobs = by_model.get(r["model"]) or {}
        cells = row_cells(r)
        w.writerow([*(spreadsheet_text(c) for c in cells[:3]), *cells[3:], jobs.get("done", ""), jobs.get("total", "")])
    return buf.getvalue()


def report_markdown(rep: Mapping[str, Any]) -> str:
    """The report's rows as a Markdown table (every text escaped: '|', '<', '>', '&'); a partial run's line first."""
    md = markdown_text
    lines = []
    partial = clean(str((rep.get("completion") or {}).get("line") or ""))
    if partial:
        lines += [f"**{md(partial)}**", ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(md(c) or "-" for c in row_cells(r)) + " |" for r in rep.get("rows") or []]
    lines += ["", "Scores in percent: mean ± std over seeds of each seed's mean; tokens per trajectory."]
    return "\n".join(lines) + "\n"
