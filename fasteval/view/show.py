"""``fasteval show``: one trajectory in the terminal, for an SSH session on a GPU node.

Text goes through rich (code highlighted); a terminal cannot show the images, so each one is
copied out of the blob store under a real extension and its path printed for ``scp`` or an
image viewer.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from fasteval.core.terminal import clean, json_text, plain
from fasteval.view.data import EXTENSIONS, NotFound, RunSet
from fasteval.view.shape import seconds, viewable


class ImageSaver:
    """Copies blobs to ``out/<n>-<ref12>.<ext>`` on first use and returns the path."""

    def __init__(self, runs: RunSet, run: str, out: Path) -> None:
        self.runs, self.run, self.out = runs, run, out
        self.saved: dict[str, Path] = {}

    def __call__(self, ref: str) -> str:
        if ref not in self.saved:
            try:
                src, ctype = self.runs.blob_path(self.run, ref)
            except NotFound:
                return f"[image {clean(ref[:12])}… missing from the blob store]"
            self.out.mkdir(parents=True, exist_ok=True)
            dest = self.out / f"{len(self.saved) + 1:02d}-{ref[:12]}.{EXTENSIONS.get(ctype, 'bin')}"
            shutil.copyfile(src, dest)
            self.saved[ref] = dest
        return f"[image] {self.saved[ref]}"


def _content(content: Any, save: ImageSaver) -> list[RenderableType]:
    if content is None:
        return []
    if isinstance(content, str):
        return [plain(content, block=True)]
    out: list[RenderableType] = []
    for p in content if isinstance(content, list) else [content]:
        if isinstance(p, dict) and p.get("type") == "image" and isinstance(p.get("image"), str):
            out.append(plain(save(p["image"]), style="magenta"))
        elif isinstance(p, dict) and p.get("type") == "text":
            out.append(plain(p.get("text", ""), block=True))
        else:
            out.append(plain(json_text(p, indent=False)))
    return out


def _args(args: Any) -> list[RenderableType]:
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return [plain(args, block=True)]
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        rest = {k: v for k, v in args.items() if k != "code"}
        out: list[RenderableType] = [Syntax(clean(args["code"], block=True), "python", line_numbers=False,
                                            word_wrap=True)]
        if rest:
            out.append(plain(json_text(rest, indent=False)))
        return out
    return [Syntax(json_text(args), "json", word_wrap=True)]


def _call(log: dict[str, Any] | None, name: str, args: Any, save: ImageSaver) -> Panel:
    if log is None:
        return Panel(Group(*_args(args)), title=plain(f"{name} (not executed)"), border_style="yellow")
    parts = _args(log.get("args", args))
    if log.get("output"):
        parts.append(plain(log["output"], block=True, style="dim"))
    if log.get("error"):
        parts.append(plain(f"error: {log['error']}", block=True, style="red"))
    parts += [plain(save(str(ref)), style="magenta") for ref in log.get("images") or []]
    style = "green" if log.get("status") == "ok" else "red"
    return Panel(Group(*parts), title=plain(f"{name} · {log.get('status')} · {seconds(log.get('latency_s'))}"),
                 border_style=style, title_align="left")


def render_job(console: Console, job: dict[str, Any], save: ImageSaver) -> None:
    rec = viewable(job["record"])
    traj = rec["trajectory"]
    head = Table.grid(padding=(0, 2))
    for k in ("run", "job_id", "model", "suite", "setting", "task_id", "seed", "status", "score", "termination",
              "rounds", "tool_calls", "latency_s", "error_kind", "error"):
        v = job["run"] if k == "run" else rec.get(k)
        if v is not None:
            head.add_row(Text(k, style="bold"), plain(v, block=True))
    console.print(head)
    logs = {str(t.get("id")): t for t in traj.get("tool_calls") or []}
    for m in traj.get("messages") or []:
        role = str(m.get("role"))
        parts = _content(m.get("content"), save)
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            parts.append(_call(logs.get(str(tc.get("id"))), str(fn.get("name")), fn.get("arguments"), save))
        if role == "tool":
            log = logs.get(str(m.get("tool_call_id")))
            if log is not None and m.get("content") == log.get("output"):
                parts = [Text("(output shown with the call above)", style="dim")]
        console.print(Panel(Group(*parts), title=plain(role), title_align="left",
                            border_style={"user": "blue", "assistant": "white", "tool": "cyan"}.get(role, "yellow")))
    console.print(Text.assemble(("answer: ", "bold"), plain(rec.get("answer"), block=True)))
    if job.get("reference") is not None:
        console.print(Text.assemble(("reference: ", "bold"), plain(job["reference"], block=True)))
    if rec.get("score_details"):
        console.print(Text("score details:", style="bold"))
        # Not print_json: Rich re-parses and re-dumps the JSON, undoing json_text's escapes.
        console.print(Syntax(json_text(rec["score_details"]), "json", word_wrap=True))
    console.print(Text.assemble(("usage: ", "bold"), plain(json_text(rec.get("usage") or {}, indent=False))))
    if save.saved:
        console.print(plain(f"{len(save.saved)} image(s) saved under {save.out}", style="bold magenta"))
