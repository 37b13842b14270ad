"""HTML for one trajectory (``/job/<id>``, report examples) and for one task across models.

Every message is shown in order; each assistant tool call is joined with its logged execution
(status, latency, error, returned images) by call id, and code arguments are highlighted with
pygments (already installed with rich). Images are thumbnails whose ``src`` comes from the
caller: a blob URL in the live viewer, a size-capped data URI in the static report.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from fasteval.view.pages import layout, value_table
from fasteval.view.shape import seconds, viewable

ImageSrc = Callable[[str], str | None]
"""Maps an image reference to an ``src`` (None: not shown, e.g. over the report's size cap)."""


def highlight(code: str, lang: str) -> str:
    from pygments import highlight as pyg_highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import JsonLexer, PythonLexer

    lexer = PythonLexer() if lang == "python" else JsonLexer()
    html: str = pyg_highlight(code, lexer, HtmlFormatter(cssclass="hl", wrapcode=True))
    return html


def images_html(refs: list[str], src: ImageSrc) -> str:
    out = []
    for ref in refs:
        s = src(ref)
        if s is None:
            out.append(f'<span class="meta">[image {escape(ref[:12])}… left out: over the size cap]</span>')
        else:
            # Lazy only for URLs: a data URI is already in the page, and lazy would leave it unrendered.
            lazy = "" if s.startswith("data:") else ' loading="lazy"'
            out.append(f'<img class="thumb"{lazy} src="{escape(s)}" alt="image {escape(ref[:12])}" '
                       f'data-ref="{escape(ref)}">')
    return f'<div class="images">{"".join(out)}</div>' if out else ""


def _content_html(content: Any, src: ImageSrc) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return f'<div class="text">{escape(content)}</div>'
    parts, refs = [], []
    for p in content if isinstance(content, list) else [content]:
        if isinstance(p, dict) and p.get("type") == "image" and isinstance(p.get("image"), str):
            refs.append(p["image"])
        elif isinstance(p, dict) and p.get("type") == "text":
            if refs:
                parts.append(images_html(refs, src))
                refs = []
            parts.append(f'<div class="text">{escape(str(p.get("text", "")))}</div>')
        else:
            parts.append(f"<pre>{escape(orjson.dumps(p).decode())}</pre>")
    if refs:
        parts.append(images_html(refs, src))
    return "".join(parts)


def _pretty_output(text: str) -> str:
    """A tool's output; JSON outputs (the sandbox's stdout/stderr object) shown field by field."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return f'<pre class="output">{escape(text)}</pre>'
    if isinstance(obj, dict) and all(isinstance(v, str | int | float | bool | None | list) for v in obj.values()):
        rows = "".join(f"<tr><th>{escape(str(k))}</th><td><pre>{escape(str(v))}</pre></td></tr>"
                       for k, v in obj.items() if v not in ("", [], None))
        return f'<table class="kv output">{rows}</table>'
    return f'<pre class="output">{escape(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())}</pre>'


def _args_html(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return f"<pre>{escape(args)}</pre>"
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        rest = {k: v for k, v in args.items() if k != "code"}
        extra = highlight(orjson.dumps(rest, option=orjson.OPT_INDENT_2).decode(), "json") if rest else ""
        return f'<div class="code">{highlight(args["code"], "python")}</div>{extra}'
    return highlight(orjson.dumps(args, option=orjson.OPT_INDENT_2).decode(), "json")


def toolcall_html(call_id: str, name: str, args: Any, log: dict[str, Any] | None, src: ImageSrc) -> str:
    if log is None:
        return (f'<div class="toolcall"><b>{escape(name)}</b> <span class="meta">{escape(call_id)} · '
                f"not executed</span>{_args_html(args)}</div>")
    status = str(log.get("status"))
    err = log.get("error")
    return (f'<div class="toolcall {escape(status)}" data-call="{escape(call_id)}"><b>{escape(name)}</b> '
            f'<span class="meta">{escape(call_id)} · turn {escape(str(log.get("turn", 0)))} '
            f'round {escape(str(log.get("round", 0)))} · '
            f'<span class="status-{escape(status)}">{escape(status)}</span> · '
            f'{escape(seconds(log.get("latency_s")))}</span>'
            f"{_args_html(log.get('args', args))}"
            + (f'<div class="error-box">{escape(str(err))}</div>' if err else "")
            + (f"<div><b>output</b>{_pretty_output(str(log.get('output')))}</div>" if log.get("output") else "")
            + (f"<div><b>images returned</b>{images_html(log.get('images') or [], src)}</div>"
               if log.get("images") else "")
            + (f"<details><summary>logged facts</summary>{value_table(log['extra'])}</details>"
               if log.get("extra") else "")
            + "</div>")


def _reasoning_html(native: Any) -> str:
    """The reasoning summary a provider kept on the turn (``native.summary``); the provider's own
    items (encrypted reasoning, signatures) are never shown."""
    summary = native.get("summary") if isinstance(native, dict) else None
    if not isinstance(summary, str) or not summary:
        return ""
    return f'<details class="reasoning"><summary>reasoning summary</summary><div class="text">{escape(summary)}</div></details>'


def messages_html(traj: dict[str, Any], src: ImageSrc) -> str:
    logs = {str(t.get("id")): t for t in traj.get("tool_calls") or []}
    shown: set[str] = set()
    out = []
    for i, m in enumerate(traj.get("messages") or []):
        role = str(m.get("role"))
        body = [_reasoning_html(m.get("native")), _content_html(m.get("content"), src)]
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            cid = str(tc.get("id"))
            shown.add(cid)
            body.append(toolcall_html(cid, str(fn.get("name")), fn.get("arguments"), logs.get(cid), src))
        label = role
        if role == "tool":
            cid = str(m.get("tool_call_id"))
            label = f"tool result ({cid})"
            log = logs.get(cid)
            if log is not None and isinstance(m.get("content"), str) and m["content"] == log.get("output"):
                body = ['<span class="meta">the output shown with the call above</span>']
        out.append(f'<div class="msg {escape(role)}" data-index="{i}"><div class="role">{escape(label)}</div>'
                   f'{"".join(body)}</div>')
    # Calls the log holds but no message shows (e.g. rejected before they were sent back).
    for cid, log in logs.items():
        if cid not in shown:
            out.append(toolcall_html(cid, str(log.get("name")), log.get("args"), log, src))
    return "".join(out)


def job_body(job: dict[str, Any], src: ImageSrc, *, live: bool = True) -> str:
    rec = viewable(job["record"])
    traj = rec["trajectory"]
    facts = {k: rec.get(k) for k in ("job_id", "model", "suite", "setting", "task_id", "seed", "status", "score",
                                     "termination", "rounds", "tool_calls", "latency_s", "retries")}
    facts["run"] = job["run"]
    if traj.get("termination_reason"):
        facts["termination_reason"] = traj["termination_reason"]
    compare = (f' · <a href="/compare?{urlencode({"task": rec.get("task_id")})}">this task across models and '
               f"seeds</a>" if live else "")
    ref = job.get("reference")
    ref_html = (f'<pre class="reference">{escape(ref if isinstance(ref, str) else orjson.dumps(ref).decode())}</pre>'
                if ref is not None else '<p class="meta">not recorded by this suite</p>')
    answers = traj.get("answers") or []
    usage_rows = [{"turn": i, **u} for i, u in enumerate(traj.get("usage_by_turn") or [])]
    return (
        f'<article class="job" data-job="{escape(str(rec.get("job_id")))}">'
        f'<h1>{escape(str(rec.get("task_id")))} <span class="meta">{escape(str(rec.get("model")))} · '
        f'{escape(str(rec.get("setting")))} · seed {escape(str(rec.get("seed")))}</span></h1>'
        f'<p class="meta">{escape(str(rec.get("suite")))}{compare}</p>'
        + (f'<div class="error-box"><b>{escape(str(rec.get("error_kind")))}</b>: {escape(str(rec.get("error")))}</div>'
           if rec.get("error") else "")
        + f"{value_table(facts)}<h2>Trajectory</h2>{messages_html(traj, src)}"
        f'<h2>Answer</h2><pre class="answer">{escape(str(rec.get("answer")))}</pre>'
        + (f"<p class=\"meta\">per turn: {escape(', '.join(str(a) for a in answers))}</p>" if len(answers) > 1 else "")
        + f"<h2>Reference answer</h2>{ref_html}"
        f"<h2>Score details</h2>{value_table(rec.get('score_details') or {})}"
        f"<h2>Usage and timing</h2>{value_table(rec.get('usage') or {})}"
        + (value_table({"usage by turn": usage_rows}) if usage_rows else "")
        + f"<h2>Metadata</h2>{value_table(rec.get('metadata') or {})}</article>")


def job_page(job: dict[str, Any], src: ImageSrc) -> str:
    return layout(f"fasteval: {viewable(job['record']).get('task_id')}", job_body(job, src))


def _final_images(rec: dict[str, Any]) -> list[str]:
    refs: list[str] = []
    for t in viewable(rec)["trajectory"]["tool_calls"]:
        refs += t["images"]
    return refs[-4:]


def compare_page(data: dict[str, Any], src_of: Callable[[str], ImageSrc]) -> str:
    """The question once, then one card per model × setting × seed."""
    jobs = data["jobs"]
    first = viewable(jobs[0]["record"])
    question = next((m for m in first["trajectory"]["messages"] if m.get("role") == "user"), None)
    cards = []
    for j in jobs:
        rec = viewable(j["record"])
        link = f'/job/{quote(str(rec.get("job_id")))}?{urlencode({"run": j["run"]})}'
        cards.append(
            f'<div class="card" data-model="{escape(str(rec.get("model")))}">'
            f'<b><a href="{escape(link)}">{escape(str(rec.get("model")))} · {escape(str(rec.get("setting")))} · '
            f'seed {escape(str(rec.get("seed")))}</a></b> <span class="meta">{escape(j["run"])}</span>'
            + value_table({k: v for k, v in (
                ("status", rec.get("status")), ("score", rec.get("score")), ("answer", rec.get("answer")),
                ("reference", j.get("reference")), ("termination", rec.get("termination")),
                ("rounds", rec.get("rounds")), ("tool calls", rec.get("tool_calls")),
                ("error", rec.get("error"))) if v is not None})
            + images_html(_final_images(rec), src_of(j["run"])) + "</div>")
    q_html = _content_html(question.get("content"), src_of(jobs[0]["run"])) if question else ""
    body = (f"<h1>Task {escape(data['task_id'])}</h1><h2>Question</h2>"
            f'<div class="msg user">{q_html}</div><h2>{len(jobs)} trajectories</h2>'
            f'<div class="grid">{"".join(cards)}</div>')
    return layout(f"fasteval: compare {data['task_id']}", body)
