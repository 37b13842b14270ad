"""HTML for the summary and the job table: thin templates over the dicts of ``fasteval.view.data``.

Pages are rendered on the server from exactly the JSON the ``/api`` routes return, so what a
page shows and what a script reads cannot drift. Every value goes through ``escape``. The
stylesheet and the one small script ship in ``static/`` and are inlined, so a page (and the
static report) needs nothing from the network.
"""

from __future__ import annotations

from functools import cache
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from fasteval.view import leaderboard, plots
from fasteval.view.data import FACETS, JobQuery
from fasteval.view.plots import Point


@cache
def asset(name: str) -> str:
    return (resources.files("fasteval.view") / "static" / name).read_text(encoding="utf-8")


@cache
def code_css() -> str:
    from pygments.formatters import HtmlFormatter

    css: str = HtmlFormatter(style="default").get_style_defs(".hl")
    return css


def layout(title: str, body: str, *, nav: bool = True) -> str:
    links = ('<nav><span class="brand"><a href="/">fasteval</a></span><a href="/">summary</a>'
             '<a href="/jobs">jobs</a></nav>') if nav else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><link rel=\"icon\" href=\"data:,\">"
            f"<style>{asset('style.css')}\n{code_css()}</style></head>"
            f"<body>{links}<main>{body}</main>"
            f'<dialog id="lightbox"><img alt="enlarged image"></dialog>'
            f"<script>{asset('app.js')}</script></body></html>")


def pct(x: Any) -> str:
    """A score as the CLI table prints it: percent with one decimal, '-' when absent."""
    return "-" if x is None else f"{100 * float(x):.1f}"


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_cell(x)}" for k, x in v.items())
    return "" if v is None else str(v)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def value_table(data: dict[str, Any], cls: str = "kv") -> str:
    """A dict as a table: scalars inline, lists of dicts as sub-tables, the rest as JSON."""
    rows = []
    for k, v in data.items():
        if _scalar(v):
            shown = escape(_cell(v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            shown = records_table(v)
        elif isinstance(v, dict) and v and all(_scalar(x) for x in v.values()):
            shown = value_table(v)
        else:
            shown = f"<pre>{escape(orjson.dumps(v, option=orjson.OPT_INDENT_2).decode())}</pre>"
        rows.append(f"<tr><th>{escape(str(k))}</th><td>{shown}</td></tr>")
    return f'<table class="{cls}">{"".join(rows)}</table>'


def records_table(items: list[dict[str, Any]]) -> str:
    cols = list(dict.fromkeys(c for it in items for c in it))
    head = "".join(f"<th>{escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{escape(_cell(it.get(c)))}</td>" for c in cols) + "</tr>"
                   for it in items)
    return f"<table><tr>{head}</tr>{body}</table>"


def _metrics_html(title: str, metrics: dict[str, Any]) -> str:
    """A suite's own tables, shaped like ``fasteval report`` prints them."""
    out = [f"<h3>{escape(title)}</h3>"]
    scalars = {k: v for k, v in metrics.items() if _scalar(v)}
    if scalars:
        out.append(value_table(scalars))
    for key, value in metrics.items():
        if _scalar(value):
            continue
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            cols = list(dict.fromkeys(c for v in value.values() for c in v))
            head = "".join(f'<th class="num">{escape(str(c))}</th>' for c in cols)
            body = "".join(f"<tr><td>{escape(str(k))}</td>"
                           + "".join(f'<td class="num">{escape(_cell(v.get(c)))}</td>' for c in cols) + "</tr>"
                           for k, v in value.items())
            out.append(f"<h4>{escape(key)}</h4><table><tr><th>{escape(key)}</th>{head}</tr>{body}</table>")
        else:
            out.append(f"<h4>{escape(key)}</h4>{value_table(value) if isinstance(value, dict) else value_table({key: value})}")
    return "".join(out)


def _money(v: Any) -> str:
    return "-" if v is None else f"{float(v):.2f}"


def _per_traj(v: Any) -> str:
    """Image tokens per trajectory, ``-`` where the server did not count them."""
    return "-" if v is None else f"{float(v):.0f}"


def summary_table(run: dict[str, Any]) -> str:
    cols = ("model", "suite", "setting", "mean ± std", "95% CI", "seeds", "n_ok", "n_error", "pass@k", "pass^k",
            "prefix cache hit", "image tok/traj", "cost $")
    head = "".join(f'<th class="{"num" if i > 2 else ""}">{escape(c)}</th>' for i, c in enumerate(cols))
    body = []
    for r in run["rows"]:
        ci = r.get("ci95")
        body.append(
            f'<tr data-model="{escape(r["model"])}" data-suite="{escape(r["suite"])}" '
            f'data-setting="{escape(r["setting"])}">'
            f'<td>{escape(r["model"])}</td><td>{escape(r["suite"])}</td><td>{escape(r["setting"])}</td>'
            f'<td class="num mean-std"><span class="mean">{pct(r["mean"])}</span> ± '
            f'<span class="std">{pct(r["std"])}</span></td>'
            f'<td class="num ci">{f"[{pct(ci[0])}, {pct(ci[1])}]" if ci else "-"}</td>'
            f'<td class="num n_seeds">{r["n_seeds"]}</td><td class="num n_ok">{r["n_ok"]}</td>'
            f'<td class="num n_error">{r["n_error"]}</td><td class="num pass_at_k">{pct(r["pass_at_k"])}</td>'
            f'<td class="num pass_pow_k">{pct(r["pass_pow_k"])}</td>'
            f'<td class="num prefix_cache">{pct(r.get("prefix_cache_hit_rate"))}</td>'
            f'<td class="num image_tokens">{_per_traj(r.get("image_tokens_per_trajectory"))}</td>'
            f'<td class="num cost">{_money(r.get("cost_usd"))}</td></tr>')
    total = run.get("cost_usd")
    caption = (f"<caption>estimated cost of the evaluated models: ${total:.2f} (fasteval.core.pricing; roles not "
               f"included)</caption>" if total is not None else "")
    return f'<table class="summary">{caption}<tr>{head}</tr>{"".join(body)}</table>'


def _row_label(r: dict[str, Any], suites: int) -> str:
    return f"{r['model']} / {r['setting']}" if suites == 1 else f"{r['model']} / {r['suite']} / {r['setting']}"


def run_plots(run: dict[str, Any]) -> list[tuple[str, str]]:
    """(caption, svg) of every summary plot of one run."""
    rows = run["rows"]
    n_suites = len({r["suite"] for r in rows})
    out: list[tuple[str, str]] = []
    for suite in sorted({r["suite"] for r in rows}):
        typed = [r for r in rows if r["suite"] == suite and r.get("by_task_type")]
        if typed:
            cats = sorted({k for r in typed for k in r["by_task_type"]})
            series = [(_row_label(r, 1), [r["by_task_type"].get(c) for c in cats]) for r in typed]
            out.append((f"{suite}: score (%) per category",
                        plots.grouped_bars(f"{suite} score per category", cats, series, pct=True, y_label="%")))
    out.append(("Seed spread: each dot one seed's mean score (%), bar the mean",
                plots.strip_plot("seed spread", [(_row_label(r, n_suites), r.get("seed_means") or [])
                                                 for r in rows])))
    stats = run.get("stats") or {}
    for key, caption in (("tool_calls", "Tool calls per trajectory (jobs)"), ("rounds", "Rounds per trajectory (jobs)")):
        hist: dict[str, dict[str, int]] = stats.get(key) or {}
        buckets = sorted({int(b) for h in hist.values() for b in h})
        series = [(label, [float(h.get(str(b), 0)) for b in buckets]) for label, h in hist.items()]
        out.append((caption, plots.grouped_bars(caption, [str(b) for b in buckets], series, y_label="jobs")))
    out.append(("Tool mix (calls by tool)", plots.stacked_hbars("tool mix", list((stats.get("tool_mix") or {}).items()))))
    out.append(("Terminations", plots.stacked_hbars(
        "terminations", [(_row_label(r, n_suites), r.get("terminations") or {}) for r in rows])))
    errs = [(_row_label(r, n_suites), r.get("errors") or {}) for r in rows if r.get("errors")]
    out.append(("Errors by kind", plots.stacked_hbars("errors by kind", errs)))
    return out


def curves_html(curves: dict[str, Any]) -> str:
    """Each series' learning curves: score (%) with the between-seed band, tool calls, per step."""
    parts = ["<h2>Learning curves</h2>"]
    for name, series in curves.items():
        for c in series["curves"]:
            best = (c.get("best") or {}).get("step")
            label = f"{name}: {c['suite']} / {c['setting']}"
            score: list[Point] = [(p["step"], p["mean"], *(p["band"] or (None, None))) for p in c["points"]
                                  if p["mean"] is not None]
            calls: list[Point] = [(p["step"], p["tool_calls_per_trajectory"], None, None) for p in c["points"]
                                  if p["tool_calls_per_trajectory"] is not None]
            rows = "".join(f'<tr{" class=best" if p["step"] == best else ""}><td class="num">{p["step"]}</td>'
                           f'<td class="num">{pct(p["mean"])}</td><td class="num">{pct(p["std"])}</td>'
                           f'<td class="num">{_cell(p["tool_calls_per_trajectory"])}</td></tr>' for p in c["points"])
            parts.append(
                f'<section class="curve" data-series="{escape(name)}"><h3>{escape(label)} · best step '
                f'{escape(str(best))}</h3><div class="plots"><figure><figcaption>score (%) by step, band: lowest to highest '
                f'seed mean</figcaption>{plots.line_band(label + " score", score, best=best, y_label="%")}'
                f'</figure><figure><figcaption>tool calls per trajectory by step</figcaption>'
                f'{plots.line_band(label + " tool calls", calls, pct=False, y_label="calls")}</figure></div>'
                f'<table class="curve"><tr><th>step</th><th>score (%)</th><th>± std</th><th>tool calls/traj</th>'
                f"</tr>{rows}</table></section>")
    return "".join(parts)


def summary_body(summary: dict[str, Any], *, live: bool = True) -> str:
    """The summary of every run: table, suite tables, per-type table, plots."""
    parts = []
    for run in summary["runs"]:
        st = run.get("by_status") or {}
        jobs_link = (f' · <a href="/jobs?{urlencode({"run": run["name"]})}">jobs</a>' if live else "")
        parts.append(
            f'<section class="run" data-run="{escape(run["name"])}"><h1>{escape(run["name"])}</h1>'
            f'<p class="meta">{escape(run["path"])} · config {escape(str(run.get("config_name")))} '
            f'({escape(str(run.get("config_hash")))}) · created {escape(str(run.get("created")))} · '
            f'{sum(st.values())} of {run.get("planned") or "?"} jobs recorded '
            f'({st.get("ok", 0)} ok, {sum(v for k, v in st.items() if k != "ok")} error){jobs_link}</p>'
            + completion_html(run.get("completion"))
            + (f"<h2>Leaderboard</h2>{leaderboard.html(run['leaderboard'])}" if run.get("leaderboard") else "")
            + f"<h2>Score (%) mean ± std over seeds</h2>{summary_table(run)}")
        for r in run["rows"]:
            if r.get("suite_metrics"):
                parts.append(_metrics_html(f"{r['suite']}: {r['model']} / {r['setting']}", r["suite_metrics"]))
        typed = [r for r in run["rows"] if r.get("by_task_type")]
        if typed:
            kinds = sorted({k for r in typed for k in r["by_task_type"]})
            head = "".join(f'<th class="num">{escape(r["model"])}<br>{escape(r["setting"])}</th>' for r in typed)
            body = "".join(f"<tr><td>{escape(k)}</td>"
                           + "".join(f'<td class="num">{pct(r["by_task_type"].get(k))}</td>' for r in typed)
                           + "</tr>" for k in kinds)
            parts.append(f'<h2>Score (%) per task type (all seeds)</h2><table class="by-type">'
                         f"<tr><th>task type</th>{head}</tr>{body}</table>")
        parts.append(control_html(run.get("control") or []))
        if run.get("curves"):
            parts.append(curves_html(run["curves"]))
        figs = "".join(f"<figure><figcaption>{escape(c)}</figcaption>{svg}</figure>" for c, svg in run_plots(run))
        parts.append(f'<h2>Plots</h2><div class="plots">{figs}</div></section>')
    return "".join(parts)


def completion_html(done: dict[str, Any] | None) -> str:
    """A partial run's line above its numbers (``fasteval.view.completion``), escaped."""
    if not done or not done.get("line"):
        return ""
    return f'<p class="partial error-box">{escape(done["line"])}</p>'


def control_html(trace: list[dict[str, Any]]) -> str:
    """The changes made while the run ran (``fasteval ctl``: pauses, limits, requeues), escaped."""
    if not trace:
        return ""
    rows = "".join(
        f"<tr><td>{escape(str(e.get('at', '')))}</td><td>{escape(str(e.get('who', '')))}</td>"
        f"<td>{escape(str(e.get('command', '')))}</td><td>"
        + "<br>".join(escape(f"{c.get('what')}: {c.get('old')} → {c.get('new')}") for c in e.get("changes") or [])
        + "</td></tr>" for e in trace)
    return (f'<h2>Steered while it ran ({len(trace)} changes)</h2><p class="meta">Figures after a change were '
            f'measured under it (control.jsonl).</p><table class="control"><tr><th>when</th><th>who</th>'
            f"<th>command</th><th>old → new</th></tr>{rows}</table>")


def summary_page(summary: dict[str, Any]) -> str:
    return layout("fasteval: summary", summary_body(summary))


# ---- /jobs -----------------------------------------------------------------------------------

_JOB_COLS = (("task_id", "task"), ("model", "model"), ("suite", "suite"), ("setting", "setting"), ("seed", "seed"),
             ("status", "status"), ("score", "score"), ("error_kind", "error kind"), ("termination", "termination"),
             ("rounds", "rounds"), ("tool_calls", "tools"), ("latency_s", "latency s"))


def _query_args(q: JobQuery, **changes: Any) -> str:
    args = {"run": q.run, "model": q.model, "suite": q.suite, "setting": q.setting, "seed": q.seed,
            "status": q.status, "error_kind": q.error_kind, "score_min": q.score_min, "score_max": q.score_max,
            "q": q.q, "sort": q.sort, "desc": "1" if q.desc else None, "page": q.page, "per_page": q.per_page}
    args.update(changes)
    return urlencode({k: v for k, v in args.items() if v not in (None, "", False)})


def _score(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _select(name: str, values: list[Any], current: Any) -> str:
    opts = ['<option value="">all</option>'] + [
        f'<option value="{escape(str(v))}"{" selected" if str(v) == str(current) else ""}>{escape(str(v))}</option>'
        for v in values]
    return f'<label>{escape(name.replace("_", " "))}<select name="{name}">{"".join(opts)}</select></label>'


def jobs_page(result: dict[str, Any], facets: dict[str, list[Any]], runs: list[str], q: JobQuery) -> str:
    fields = [_select("run", list(runs), q.run)] + [_select(f, facets.get(f, []), getattr(q, f)) for f in FACETS]
    fields.append(f'<label>score ≥<input type="number" step="any" name="score_min" '
                  f'value="{"" if q.score_min is None else q.score_min}"></label>')
    fields.append(f'<label>score ≤<input type="number" step="any" name="score_max" '
                  f'value="{"" if q.score_max is None else q.score_max}"></label>')
    fields.append(f'<label>search task / question / answer<input type="search" name="q" '
                  f'value="{escape(q.q or "")}"></label>')
    if q.sort:
        fields.append(f'<input type="hidden" name="sort" value="{escape(q.sort)}">')
        if q.desc:
            fields.append('<input type="hidden" name="desc" value="1">')
    form = f'<form class="filters" method="get" action="/jobs">{"".join(fields)}<button>apply</button>' \
           f' <a href="/jobs">clear</a></form>'
    multi = len(runs) > 1
    head = ["<th>run</th>"] if multi else []
    for key, label in _JOB_COLS:
        desc = q.sort == key and not q.desc
        arrow = (" ▼" if q.desc else " ▲") if q.sort == key else ""
        head.append(f'<th><a href="/jobs?{escape(_query_args(q, sort=key, desc="1" if desc else None, page=1))}">'
                    f"{escape(label)}{arrow}</a></th>")
    body = []
    for r in result["rows"]:
        link = f'/job/{quote(r["job_id"])}?{urlencode({"run": r["run"]})}'
        body.append(
            f'<tr class="job" data-job="{escape(r["job_id"])}" data-status="{escape(r["status"])}">'
            + (f'<td>{escape(r["run"])}</td>' if multi else "")
            + f'<td><a href="{escape(link)}">{escape(r["task_id"])}</a></td><td>{escape(r["model"])}</td>'
            f'<td>{escape(r["suite"])}</td><td>{escape(r["setting"])}</td><td class="num">{r["seed"]}</td>'
            f'<td class="status-{escape(r["status"])}">{escape(r["status"])}</td>'
            f'<td class="num">{_score(r["score"])}</td>'
            f'<td title="{escape(r.get("error") or "")}">{escape(r.get("error_kind") or "")}</td>'
            f'<td>{escape(r.get("termination") or "")}</td><td class="num">{r["rounds"]}</td>'
            f'<td class="num">{r["tool_calls"]}</td><td class="num">{r["latency_s"]:.2f}</td></tr>')
    pager = (f'<div class="pager"><span id="total">{result["total"]}</span> jobs · page {result["page"]} of '
             f'{result["pages"]}'
             + (f' <a rel="prev" href="/jobs?{escape(_query_args(q, page=result["page"] - 1))}">prev</a>'
                if result["page"] > 1 else "")
             + (f' <a rel="next" href="/jobs?{escape(_query_args(q, page=result["page"] + 1))}">next</a>'
                if result["page"] < result["pages"] else "") + "</div>")
    table = f'<table class="jobs"><tr>{"".join(head)}</tr>{"".join(body)}</table>'
    return layout("fasteval: jobs", f"<h1>Jobs</h1>{form}{pager}{table}{pager}")


def error_page(status: int, message: str) -> str:
    return layout(f"fasteval: {status}", f'<h1>{status}</h1><p class="error-box">{escape(message)}</p>')
