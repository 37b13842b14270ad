"""One screen per run: a row per model, a column per suite (× setting), the papers' numbers beside ours.

Built from the report's rows (``fasteval.view.report.report``), which come from the run index
and the suites' own streamed tables, so the leaderboard reads nothing the report has not already
read and cannot disagree with it. A cell holds the headline (mean ± between-seed std of the
per-seed mean score, the setting's fidelity), both scorers' numbers where the suite's table has
them (``reference`` and ``fixed``), and every published number for that model and setting (the
shipped ``fasteval/suites/published.yaml`` and the config's own ``published:``). All scores here
are fractions (0..1); papers' percentages are divided by 100.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasteval.core.cells import markdown_text, spreadsheet_text
from fasteval.core.errors import BadInput
from fasteval.core.terminal import clean

if TYPE_CHECKING:  # the suites package loads only when a leaderboard is built (status and report stay light)
    from fasteval.suites.published import PublishedScore

SORTS = ("average", "model")
"""``--sort`` takes one of these or a column (``suite`` or ``suite/setting``)."""


def leaderboard(rep: Mapping[str, Any], config: Mapping[str, Any], *, sort: str = "average",
                published: Sequence[PublishedScore] | None = None) -> dict[str, Any]:
    """The leaderboard of one report (``report(run_dir)``) and the run's config (from its manifest)."""
    from fasteval.suites.published import all_scores

    rows: Sequence[Mapping[str, Any]] = rep.get("rows") or []
    known = all_scores(config) if published is None else list(published)
    ids = {str(m["name"]): str(m.get("model") or m["name"]) for m in config.get("models") or []
           if isinstance(m, Mapping) and "name" in m}
    settings: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        settings[str(r["suite"])].add(str(r["setting"]))
    columns = [{"key": f"{suite}/{setting}", "suite": suite, "setting": setting,
                "label": suite if len(settings[suite]) == 1 else f"{suite}/{setting}"}
               for suite in sorted(settings) for setting in sorted(settings[suite])]
    cells: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in rows:
        model = str(r["model"])
        names = (model, ids.get(model, model))
        found = [p for p in known if p.suite == r["suite"] and p.setting == r["setting"] and p.matches(names)]
        if any(p.options for p in found):  # only then the suite's defaults are needed (importing it)
            opts, defaults = _entry_options(config, str(r["suite"]), str(r["setting"]))
            found = [p for p in found if p.fits(opts, defaults)]
        cells[model][f"{r['suite']}/{r['setting']}"] = _cell(r, found)
    out_rows = []
    done = rep.get("completion") or {}
    for model in sorted(cells):
        means = [c["mean"] for c in cells[model].values() if c["mean"] is not None]
        out_rows.append({"model": model, "model_id": ids.get(model), "cells": cells[model],
                         "average": statistics.fmean(means) if means else None, "n_columns": len(means),
                         "complete": len(means) == len(columns),
                         "jobs": (done.get("by_model") or {}).get(model)})  # done / total of the plan
    out_rows.sort(key=_sort_key(sort, columns))
    return {"run_dir": rep.get("run_dir"), "completion": rep.get("completion"), "sort": sort, "columns": columns,
            "rows": out_rows,
            "average": "mean of the model's column headlines; a row with fewer columns than the table "
                       "averages over the ones it has (complete: false)"}


def _entry_options(config: Mapping[str, Any], suite: str, setting: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The options of the suite entry that ran ``setting`` and the suite's defaults: HR-Bench 4K and 8K
    share setting names, so a published 8K number must not sit beside a 4K run (its ``options``)."""
    from fasteval.suites import SUITES

    entries = [e for e in config.get("suites") or [] if isinstance(e, Mapping) and e.get("name") == suite]
    named = [e for e in entries if any(isinstance(s, Mapping) and s.get("name") == setting
                                       for s in e.get("settings") or [])]
    entry = (named or entries or [{}])[0]
    cls = SUITES.get(suite)
    return entry.get("options") or {}, getattr(cls, "option_defaults", {}) if cls is not None else {}


def _cell(row: Mapping[str, Any], published: list[PublishedScore]) -> dict[str, Any]:
    cell: dict[str, Any] = {"mean": row.get("mean"), "std": row.get("std"), "n_seeds": row.get("n_seeds"),
                            "n_error": row.get("n_error")}
    metrics = row.get("suite_metrics") or {}
    if all(isinstance(metrics.get(k), int | float) for k in ("reference", "fixed")):
        cell.update((k, metrics.get(k)) for k in ("fixed", "fixed_std", "reference", "reference_std"))
    cell["published"] = [p.as_dict() for p in published]
    if row.get("origin"):  # the leaderboard across runs: which runs, and when the newest record was computed
        cell["origin"] = row["origin"]
    return cell


def _sort_key(sort: str, columns: list[dict[str, Any]]) -> Any:
    """Scores high to low with missing ones last; ``model`` by name."""
    if sort == "model":
        return lambda r: r["model"]
    key = next((c["key"] for c in columns if sort in (c["key"], c["label"])), None)
    if sort != "average" and key is None:
        raise BadInput(f"--sort {sort!r}: not one of {', '.join([*SORTS, *(c['label'] for c in columns)])}")

    def value(r: dict[str, Any]) -> tuple[bool, float, str]:
        v = r["average"] if key is None else (r["cells"].get(key) or {}).get("mean")
        return (v is None, -(v or 0.0), r["model"])
    return value


def sort_choices(board: Mapping[str, Any]) -> list[str]:
    return [*SORTS, *(c["label"] for c in board["columns"])]


def pct(x: Any) -> str:
    return "-" if not isinstance(x, int | float) else f"{100 * x:.1f}"


def short_paper(paper: str) -> str:
    """'VistaHop: Benchmarking ...' -> 'VistaHop' (the cell cites paper and table; the JSON has it all)."""
    return paper.split(":")[0].split(" (")[0].strip()


def cell_lines(cell: Mapping[str, Any] | None) -> list[str]:
    """A cell as lines of text: ours, both scorers where there are two, each published number."""
    if not cell:
        return ["-"]
    lines = [f"{pct(cell['mean'])} ± {pct(cell['std'])}"]
    if "fixed" in cell:
        lines.append(f"fixed {pct(cell['fixed'])} ± {pct(cell.get('fixed_std'))}, "
                     f"ref {pct(cell['reference'])} ± {pct(cell.get('reference_std'))}")
    lines += [f"paper {round(100 * p['value'], 2):g} ({short_paper(p['paper'])} {p['table']}, as {p['model']})"
              for p in cell["published"]]
    if cell.get("origin"):
        lines.append(origin_text(cell["origin"]))
    return [clean(line) for line in lines]


def partial_jobs(row: Mapping[str, Any]) -> str:
    """``" (12/330 jobs)"`` beside a model whose planned jobs do not all have a record, else ``""``."""
    jobs = row.get("jobs")
    return f" ({jobs['done']}/{jobs['total']} jobs)" if jobs and jobs.get("remaining") else ""


def completion_line(board: Mapping[str, Any]) -> str:
    """The run's partial-run line (``fasteval.view.completion``), ``""`` for a complete run."""
    return clean(str((board.get("completion") or {}).get("line") or ""))


def origin_text(origin: Mapping[str, Any]) -> str:
    """'run <folder> (+k), <date>': where a cell of the leaderboard across runs came from."""
    runs = [Path(str(r)).name for r in origin.get("runs") or []]
    more = f" (+{len(runs) - 1})" if len(runs) > 1 else ""
    return f"run {runs[0] if runs else '?'}{more}, {str(origin.get('date') or '?')[:10]}"


def markdown(board: Mapping[str, Any]) -> str:
    """A Markdown table (a cell's lines joined with '<br>'; every text escaped: '|', '<', '>', '&')."""
    md = markdown_text
    head = ["model", *(c["label"] for c in board["columns"]), "average"]
    partial = completion_line(board)
    lines = [f"**{md(partial)}**", ""] if partial else []
    lines += ["| " + " | ".join(md(clean(h)) for h in head) + " |", "|" + "---|" * len(head)]
    for r in board["rows"]:
        cells = ["<br>".join(md(x) for x in cell_lines(r["cells"].get(c["key"]))) for c in board["columns"]]
        avg = pct(r["average"]) + ("" if r["complete"] else f" ({r['n_columns']}/{len(board['columns'])})")
        lines.append("| " + " | ".join([md(clean(r["model"]) + partial_jobs(r)), *cells, avg]) + " |")
    lines.append("")
    lines.append("Score (%): mean ± std over seeds. paper: a published number for the same model and setting "
                 "(source in `--format json`).")
    return "\n".join(lines) + "\n"


def _csv_pct(x: Any) -> str:
    """A percentage, or an empty cell where there is none (a one-scorer suite's fixed/reference):
    a spreadsheet reads an empty cell as missing, ``-`` as text."""
    return "" if not isinstance(x, int | float) else f"{100 * x:.1f}"


def csv_text(board: Mapping[str, Any]) -> str:
    """One line per model: its jobs with a record and planned (a partial run's rows say so), per column its
    mean, std, fixed, reference and first published number (percent)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    head = ["model", "average", "n_columns", "jobs done", "jobs planned"]
    origin = any("origin" in cell for r in board["rows"] for cell in r["cells"].values())
    extra = ("origin",) if origin else ()
    for c in board["columns"]:
        head += [spreadsheet_text(f"{c['label']} {x}")
                 for x in ("mean", "std", "fixed", "reference", "published", "published source", *extra)]
    w.writerow(head)
    for r in board["rows"]:  # names and sources are text a spreadsheet must not run; numbers are ours
        jobs = r.get("jobs") or {}
        line = [spreadsheet_text(clean(r["model"])), _csv_pct(r["average"]), r["n_columns"], jobs.get("done", ""),
                jobs.get("total", "")]
        for c in board["columns"]:
            cell = r["cells"].get(c["key"]) or {}
            pub = (cell.get("published") or [None])[0]
            line += [_csv_pct(cell.get(k)) for k in ("mean", "std", "fixed", "reference")]
            line += [pct(pub["value"]) if pub else "",
                     spreadsheet_text(clean(f"{pub['paper']}, {pub['table']}")) if pub else ""]
            if origin:
                line.append(spreadsheet_text(clean(origin_text(cell["origin"]))) if cell.get("origin") else "")
        w.writerow(line)
    return buf.getvalue()


def html(board: Mapping[str, Any]) -> str:
    """The leaderboard as an HTML table (every text escaped; sources in each cell's title)."""
    head = "".join(f'<th class="num">{escape(c["label"])}</th>' for c in board["columns"])
    body = []
    for r in board["rows"]:
        tds = []
        for c in board["columns"]:
            cell = r["cells"].get(c["key"])
            lines = cell_lines(cell)
            title = "; ".join(f"{p['model']}: {p['paper']}, {p['table']}" + (f" ({p['note']})" if p.get("note") else "")
                              for p in (cell or {}).get("published") or [])
            tds.append(f'<td class="num" title="{escape(title)}">' + "<br>".join(
                escape(x) if i == 0 else f'<span class="meta">{escape(x)}</span>' for i, x in enumerate(lines))
                + "</td>")
        avg = pct(r["average"]) + ("" if r["complete"] else f" ({r['n_columns']}/{len(board['columns'])})")
        body.append(f"<tr><td>{escape(r['model'] + partial_jobs(r))}</td>{''.join(tds)}"
                    f"<td class=\"num\">{escape(avg)}</td></tr>")
    return (f'<table class="leaderboard"><tr><th>model</th>{head}<th class="num">average</th></tr>{"".join(body)}'
            "</table><p class=\"meta\">Score (%): mean ± std over seeds; fixed/ref: both scorers where the suite "
            "has two; paper: a published number for the same model and setting (hover for its source).</p>")
