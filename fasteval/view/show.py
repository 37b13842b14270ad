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

from fasteval.view.data import EXTENSIONS, NotFound, RunSet


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
                return f"[image {ref[:12]}… missing from the blob store]"
            self.out.mkdir(parents=True, exist_ok=True)
            dest = self.out / f"{len(self.saved) + 1:02d}-{ref[:12]}.{EXTENSIONS.get(ctype, 'bin')}"
            shutil.copyfile(src, dest)
            self.saved[ref] = dest
        return f"[image] {self.saved[ref]}"


def _content(content: Any, save: ImageSaver) -> list[RenderableType]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content)]
    out: list[RenderableType] = []
    for p in content if isinstance(content, list) else [content]:
        if isinstance(p, dict) and p.get("type") == "image" and isinstance(p.get("image"), str):
            out.append(Text(save(p["image"]), style="magenta"))
        elif isinstance(p, dict) and p.get("type") == "text":
            out.append(Text(str(p.get("text", ""))))
        else:
            out.append(Text(orjson.dumps(p).decode()))
    return out


def _args(args: Any) -> list[RenderableType]:
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return [Text(args)]
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        rest = {k: v for k, v in args.items() if k != "code"}
        out: list[RenderableType] = [Syntax(args["code"], "python", line_numbers=False, word_wrap=True)]
        if rest:
            out.append(Text(orjson.dumps(rest).decode()))
        return out
    return [Syntax(orjson.dumps(args, option=orjson.OPT_INDENT_2).decode(), "json", word_wrap=True)]


def _call(log: dict[str, Any] | None, name: str, args: Any, save: ImageSaver) -> Panel:
    if log is None:
        return Panel(Group(*_args(args)), title=f"{name} (not executed)", border_style="yellow")
    parts = _args(log.get("args", args))
    if log.get("output"):
        parts.append(Text(str(log["output"]), style="dim"))
    if log.get("error"):
        parts.append(Text(f"error: {log['error']}", style="red"))
    parts += [Text(save(ref), style="magenta") for ref in log.get("images") or []]
    style = "green" if log.get("status") == "ok" else "red"
    return Panel(Group(*parts), title=f"{name} · {log.get('status')} · {float(log.get('latency_s') or 0):.3f} s",
                 border_style=style, title_align="left")


def render_job(console: Console, job: dict[str, Any], save: ImageSaver) -> None:
    rec = job["record"]
    traj = rec.get("trajectory") or {}
    head = Table.grid(padding=(0, 2))
    for k in ("run", "job_id", "model", "suite", "setting", "task_id", "seed", "status", "score", "termination",
              "rounds", "tool_calls", "latency_s", "error_kind", "error"):
        v = job["run"] if k == "run" else rec.get(k)
        if v is not None:
            head.add_row(Text(k, style="bold"), Text(str(v)))
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
        console.print(Panel(Group(*parts), title=role, title_align="left",
                            border_style={"user": "blue", "assistant": "white", "tool": "cyan"}.get(role, "yellow")))
    console.print(Text.assemble(("answer: ", "bold"), str(rec.get("answer"))))
    if job.get("reference") is not None:
        console.print(Text.assemble(("reference: ", "bold"), str(job["reference"])))
    if rec.get("score_details"):
        console.print(Text("score details:", style="bold"))
        console.print_json(orjson.dumps(rec["score_details"]).decode())
    console.print(Text.assemble(("usage: ", "bold"), orjson.dumps(rec.get("usage") or {}).decode()))
    if save.saved:
        console.print(Text(f"{len(save.saved)} image(s) saved under {save.out}", style="bold magenta"))
