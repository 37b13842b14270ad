"""Hostile text on the terminal: every command that prints what an endpoint, a dataset or a run
folder wrote shows it literally (Rich markup off, control characters escaped) and keeps its exit code.

One real sweep against a real loopback endpoint whose answers, tool names, error bodies and the
dataset's task ids and task types carry markup (``[/bogus]``, ``[link=…]``), OSC 8 links, OSC 52
clipboard writes, a title change and a screen clear; then ``status``, ``report``, ``show``,
``run --dry-run`` and the end-of-run error table read it. A 401 with such a body under the live
panel (a real pty) must end the sweep with exit 3, not a traceback.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.core.exitcodes import EXIT_INCOMPLETE, EXIT_OK
from fasteval.view.data import JobQuery, RunSet
from tests.view.sweep_fixture import run_cli

ENDPOINT = Path(__file__).with_name("hostile_endpoint.py")
MARKUP = "[/bogus] [link=http://evil.example/]x[/link]"
ROW_TEXT = MARKUP + "\x1b]0;pwned\x07\x9b2J"


def assert_inert(out: str) -> None:
    """Nothing in ``out`` is a terminal control (Rich writes none to a pipe) or a markup failure."""
    assert "Traceback" not in out and "MarkupError" not in out, out[-3000:]
    bad = sorted({c for c in out if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 or c == "\u202e"})
    assert not bad, (bad, out[-3000:])


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(ENDPOINT)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{proc.stdout.readline().strip()}/v1"
    finally:
        proc.terminate()
        proc.wait(10)


def _config(tmp: Path, base_url: str) -> Path:
    rows = [{"id": f"[/id]\x1b]0;id\x07-{i}", "prompt": prompt, "answer": ROW_TEXT, "metadata": {"task_type": ROW_TEXT},
             **({"tools": ["calculator"]} if "TOOL" in prompt else {})}
            for i, prompt in enumerate(["plain question", "TOOL-ROW question", "ERROR-ROW question"])]
    data = tmp / "data.jsonl"
    data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    cfg = tmp / "hostile.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "hostile", "seeds": 1,
        "models": [{"name": "m[/x]", "provider": "openai", "model": "hostile", "base_url": base_url,
                    "api_key_env": "FE_HOSTILE_KEY"}],
        "suites": [{"name": "jsonl", "options": {"path": str(data)}}],
        "run": {"max_concurrency": 4, "fsync": "never",
                "breaker": {"failures": 1, "outage_budget_s": 1, "probe_initial_s": 0.2, "probe_max_s": 0.3}}}))
    return cfg


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory, endpoint: str) -> tuple[Path, Path, str]:
    tmp = tmp_path_factory.mktemp("hostile")
    cfg = _config(tmp, endpoint)
    run = tmp / "run"
    proc = run_cli("run", str(cfg), "--run-dir", str(run), "--no-progress", env={"FE_HOSTILE_KEY": "k"})
    assert proc.returncode == 1, proc.stderr[-3000:]  # finished, one job in error (the 400)
    return cfg, run, proc.stderr


def test_the_end_of_run_error_table_shows_the_body_literally(hostile_run: tuple[Path, Path, str]) -> None:
    _, _, stderr = hostile_run
    assert_inert(stderr)
    assert "[/bogus]" in stderr and "\\x1b]0;pwned-title\\x07" in stderr


@pytest.mark.parametrize("command", [["status"], ["status", "--format", "json"], ["report"],
                                     ["report", "--format", "json"]])
def test_status_and_report_print_hostile_fields_literally(hostile_run: tuple[Path, Path, str],
                                                          command: list[str]) -> None:
    _, run, _ = hostile_run
    proc = run_cli(*command[:1], str(run), *command[1:])
    assert proc.returncode == EXIT_OK, proc.stderr[-3000:]
    assert_inert(proc.stdout + proc.stderr)
    if command == ["report"]:
        assert "[/bogus]" in proc.stdout  # the task type, as written


@pytest.mark.slow
def test_show_prints_every_hostile_field_literally(hostile_run: tuple[Path, Path, str], tmp_path: Path) -> None:
    _, run, _ = hostile_run
    rows = RunSet([run]).jobs(JobQuery())["rows"]
    assert len(rows) == 3
    for row in rows:
        proc = run_cli("show", str(run), row["job_id"], "--images", str(tmp_path))
        assert proc.returncode == EXIT_OK, proc.stderr[-3000:]
        assert_inert(proc.stdout + proc.stderr)
        assert "[/id]\\x1b]0;id\\x07" in proc.stdout
    tool_job = next(r for r in rows if r["task_id"].endswith("-1"))
    shown = run_cli("show", str(run), tool_job["job_id"], "--images", str(tmp_path)).stdout
    assert "[/x]tool\\x1b]0;t\\x07" in shown  # the tool name the model chose, in a panel title


def test_dry_run_prints_hostile_task_ids_literally(hostile_run: tuple[Path, Path, str], tmp_path: Path) -> None:
    cfg, _, _ = hostile_run
    proc = run_cli("run", str(cfg), "--run-dir", str(tmp_path / "dry"), "--dry-run")
    assert proc.returncode == EXIT_OK, proc.stderr[-3000:]
    assert_inert(proc.stdout + proc.stderr)
    assert "[/id]\\x1b]0;id\\x07" in proc.stdout


def _under_pty(args: list[str], env: dict[str, str]) -> tuple[int, bytes]:
    """Run the CLI with a real terminal on stdin, stdout and stderr (so the live panel is on)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once, nothing of pytest runs here
        os.execve(sys.executable, [sys.executable, "-m", "fasteval.cli.main", *args], {**os.environ, **env})
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out


@pytest.mark.slow
def test_a_401_body_with_markup_leaves_the_live_panel_and_exit_3(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, str(ENDPOINT), "--auth"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base_url = f"http://127.0.0.1:{proc.stdout.readline().strip()}/v1"
        code, out = _under_pty(["run", str(_config(tmp_path, base_url)), "--run-dir", str(tmp_path / "run"),
                                "--no-preflight"], {"FE_HOSTILE_KEY": "k"})
    finally:
        proc.terminate()
        proc.wait(10)
    text = out.decode("utf-8", "replace")
    assert code == EXIT_INCOMPLETE, text[-3000:]
    assert "Traceback" not in text and "MarkupError" not in text
    # The panel draws with its own SGR colours; none of the body's sequences reach the terminal.
    for raw in ("\x1b]0;pwned-title", "\x1b]52;", "\x1b]8;;http://evil", "\x1b[2J", "\x9b"):
        assert raw not in text, raw
    assert "incomplete: endpoint m[/x]" in text and "\\x1b]0;pwned-title\\x07" in text
