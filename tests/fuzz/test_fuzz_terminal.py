"""Fuzzing the terminal printers with generated hostile strings: Rich markup, escape sequences
(OSC 0/8/52, CSI, C1), bidi overrides and random text in every field they print.

Whatever the text, printing never raises, nothing it holds reaches the terminal as a control
character (Rich's own colours aside), no markup is interpreted (no link appears) and the text is
still there to read, escaped.
"""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from fasteval.cli.slurm import status_lines
from fasteval.core.terminal import clean, json_text, plain
from fasteval.engine.ledger import Ledger
from fasteval.engine.run.progress import ProgressDisplay
from fasteval.view.data import RunSet
from fasteval.view.show import ImageSaver, render_job

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

FRAGMENTS = ["[/bogus]", "[link=http://evil.example/]", "[/link]", "[bold red]", "[", "]", "\\", "\x1b]0;title\x07",
             "\x1b]8;;http://evil.example/\x1b\\", "\x1b]52;c;aGk=\x07", "\x1b[2J", "\x1b[31m", "\x9b31m", "\x9d0;t\x9c",
             "\r", "\n", "\t", "\x00", "\x7f", "\u202e", "\u2066", "é", "表", "🙂", ":smile:", "{x}", "%s"]
hostile = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=12).map("".join)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _inert(out: str) -> None:
    """Only Rich's own SGR colour codes may remain; no OSC (title, link, clipboard), no C1."""
    rest = SGR.sub("", out)
    assert not CONTROL.search(rest.replace("\n", "")), repr(out)
    assert "\x1b]" not in out


def _consoles() -> list[tuple[Console, io.StringIO]]:
    out = []
    for colour in (False, True):
        buf = io.StringIO()
        out.append((Console(file=buf, force_terminal=colour, width=100, color_system="truecolor" if colour else None),
                    buf))
    return out


@FUZZ
@given(hostile)
def test_clean_leaves_no_control_character_and_is_stable(text: str) -> None:
    line, block = clean(text), clean(text, block=True)
    assert not CONTROL.search(line) and "\n" not in line and "\t" not in line
    assert not CONTROL.search(block.replace("\n", "").replace("\t", ""))
    assert clean(line) == line and clean(block, block=True) == block
    assert block.count("\n") == text.count("\n")


@pytest.mark.slow
@FUZZ
@given(hostile, hostile, hostile)
def test_tables_and_text_print_hostile_cells_literally(a: str, b: str, c: str) -> None:
    for console, buf in _consoles():
        t = Table(title=plain(a))
        t.add_column(plain(b))
        t.add_column("x")
        t.add_row(plain(c), plain(a, block=True))
        console.print(t)
        console.print(plain(b, block=True))
        console.print(Syntax(json_text({"k": a, b: [c]}), "json"))
        _inert(buf.getvalue())
    # markup is not interpreted: what was written is what is shown
    buf = io.StringIO()
    Console(file=buf, width=10_000).print(plain(a))
    assert buf.getvalue().rstrip("\n").rstrip() == clean(a).rstrip()


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | hostile,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile, inner, max_size=3),
                    max_leaves=10))
def test_json_text_round_trips_and_prints_no_control(value: Any) -> None:
    text = json_text(value)
    assert orjson.loads(text) == value
    assert not CONTROL.search(text.replace("\n", ""))


@pytest.mark.slow
@FUZZ
@given(st.dictionaries(hostile, st.dictionaries(st.sampled_from(["in_flight", "limit", "waiting", "requests"]),
                                                hostile | st.integers(0, 99)), max_size=4))
def test_the_live_panel_renders_hostile_names_and_states(rows: dict[str, dict[str, Any]]) -> None:
    display = ProgressDisplay(Ledger(planned=3), {}, live=False, extra_rows=lambda: rows)
    for console, buf in _consoles():
        console.print(display.table())
        _inert(buf.getvalue())
    _inert(display.line())


def _record(texts: list[str], number: Any) -> dict[str, Any]:
    a, b, c, d = (texts * 4)[:4]
    call = {"id": a, "type": "function", "function": {"name": b, "arguments": orjson.dumps({"code": c}).decode()}}
    log = {"id": a, "name": b, "args": {"code": c, d: a}, "status": d, "output": c, "error": a, "latency_s": number,
           "images": ["0" * 64]}
    return {"job_id": a, "model": b, "suite": c, "setting": d, "task_id": a, "seed": number, "status": b, "score": number,
            "termination": c, "error": d, "error_kind": a, "answer": b, "score_details": {a: b, "reference": c},
            "usage": {a: number}, "metadata": {"task_type": d},
            "trajectory": {"messages": [{"role": a, "content": b},
                                        {"role": "user", "content": [{"type": "text", "text": c}, {"x": d}]},
                                        {"role": "assistant", "content": None, "tool_calls": [call]},
                                        {"role": "tool", "tool_call_id": a, "content": d}],
                           "tool_calls": [log]}}


RUN = Path(tempfile.mkdtemp(prefix="fasteval-fuzz-show-"))
(RUN / "manifest.json").write_text("{}")
(RUN / "blobs").mkdir(exist_ok=True)


@pytest.mark.slow
@FUZZ
@given(st.lists(hostile, min_size=1, max_size=4), st.none() | st.integers(-10**6, 10**6) | st.floats() | hostile)
def test_show_renders_hostile_records_literally(texts: list[str], number: Any) -> None:
    runs = RunSet([RUN])
    job = {"run": "r", "record": _record(texts, number), "reference": texts[0]}
    for console, buf in _consoles():
        render_job(console, job, ImageSaver(runs, next(iter(runs.runs)), RUN / "out"))
        _inert(buf.getvalue())


@FUZZ
@given(hostile, hostile)
def test_slurm_status_lines_are_inert(state: str, last: str) -> None:
    st_ = {"shards": [{"shard": 0, "slurm_state": state, "started": False, "last_log_line": last}],
           "merge": {"slurm_state": state, "job_id": last, "merged": False}}
    for line in status_lines(st_):
        assert not CONTROL.search(line) and "\n" not in line
