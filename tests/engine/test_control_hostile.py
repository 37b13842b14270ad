"""Hostile ``fasteval ctl`` traffic against a real running sweep: absurd values, unknown suites,
raw and malformed requests, and a "sweep" that answers what no sweep of ours would.

The sweep is real (sim models behind a real HTTP server), the socket is real, and the CLI runs
as a subprocess where the test is about what the terminal shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from fasteval.engine.run.sweep import SweepIncomplete
from fasteval.runfolder.control import CONTROL_SOCKET, read_trace, socket_path
from providers.sim import SimModel, SimServer
from providers.sim.spec import Faults
from tests.engine.control_support import ctl, socket_up, start, status, write_config

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]
ROOT = Path(__file__).resolve().parents[2]


def _model(server: SimServer, name: str) -> dict[str, object]:
    return {"name": name, "provider": "openai", "base_url": server.base_url, "model": name}


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*FASTEVAL, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                cwd=ROOT)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _raw(run_dir: Path, payload: bytes) -> bytes:
    """Send bytes as they are (no client of ours in between) and read the one answer line."""
    with socket_path(run_dir) as path, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)  # the end of the request, newline or not
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


@pytest.mark.slow
async def test_values_past_any_limit_are_refused_and_status_keeps_answering(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", faults=Faults(schedule=["hang"], hang_s=3600))])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        task = start(write_config(tmp_path, [_model(server, "m")], tools=False), run_dir)
        await socket_up(run_dir, task)
        await status(run_dir)  # the models are up
        for values in ({"concurrency": str(10**24)}, {"max_attempts": str(10**20)}, {"rpm": "1e300"},
                       {"attempt_timeout_s": "1e30"}, {"total_budget_s": str(10**400)}):
            code, out, err = await _cli("ctl", str(run_dir), "set", "--model", "m",
                                        *(f"{k}={v}" for k, v in values.items()))
            assert code == 2 and "must be at most" in out and len(out.splitlines()) == 1, (values, out, err)
            assert "Traceback" not in err
        code, out, _ = await _cli("ctl", str(run_dir), "set", "--global", f"concurrency={10**24}")
        assert code == 2 and "concurrency must be at most 1,000,000" in out
        st = await status(run_dir)  # every status still answers: nothing absurd was applied
        assert st["endpoints"]["m"]["concurrency"] < 10**6 and st["endpoints"]["m"]["max_attempts"] < 1000
        # the largest values allowed are applied, answered and traced
        answer = await ctl(run_dir, "set", model="m", values={"concurrency": "1000000", "max_attempts": "1000"})
        assert answer["ok"] and answer["trace"]["changes"][0]["new"] == 1_000_000
        assert (await status(run_dir))["endpoints"]["m"]["max_attempts"] == 1000
        assert (await ctl(run_dir, "cancel", model="m"))["ok"]
        with pytest.raises(SweepIncomplete):
            await task
    finally:
        await server.stop()
    assert [e["command"] for e in read_trace(run_dir)] == ["set --model m concurrency=1000000 max_attempts=1000",
                                                            "cancel --model m"]


async def test_a_suite_that_does_not_exist_is_refused_like_a_model(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", faults=Faults(schedule=["hang"], hang_s=3600))])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        task = start(write_config(tmp_path, [_model(server, "m")], tools=False), run_dir)
        await socket_up(run_dir, task)
        answer = await ctl(run_dir, "pause", suite="no-such-suite")
        assert not answer["ok"] and answer["error"] == "no suite 'no-such-suite' in this sweep (suites: demo)"
        assert (await status(run_dir))["paused"] == []
        answer = await ctl(run_dir, "pause", suite="demo")
        assert answer["ok"] and answer["changes"][0]["what"] == "pause suite demo"
        assert (await ctl(run_dir, "cancel", model="m"))["ok"]
        with pytest.raises(SweepIncomplete):
            await task
    finally:
        await server.stop()
    assert [e["command"] for e in read_trace(run_dir)] == ["pause --suite demo", "cancel --model m"]


async def test_every_raw_request_gets_one_answer_line(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", faults=Faults(schedule=["hang"], hang_s=3600))])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        task = start(write_config(tmp_path, [_model(server, "m")], tools=False), run_dir)
        await socket_up(run_dir, task)
        await status(run_dir)
        requests = [b"not json\n", b"[1, 2]\n", b'{"command": "set", "model": "m", "values": {"rpm": {"x": 1}}}\n',
                    b'{"command": "set", "model": "m", "values": {"concurrency": 1e400}}\n',
                    b'{"command": "set", "global": true, "values": {"concurrency": 100000000000000000000000}}\n',
                    b'{"command": "set", "model": "m", "values": {"max_attempts": "100000000000000000000000"}}\n',
                    b'{"command": "pause", "model": {"a": [1]}}\n', b'{"command": "requeue", "errors": true, '
                    b'"model": 5}\n', b"{" * 100_000 + b"\n", b'{"command": "status"}']  # the last one: no newline
        for payload in requests:
            line = await asyncio.to_thread(_raw, run_dir, payload)
            answer = orjson.loads(line)
            assert line.count(b"\n") == 1 and isinstance(answer["ok"], bool), (payload[:80], line)
            assert answer["ok"] is (payload == requests[-1]), (payload[:80], answer)
        assert (await ctl(run_dir, "cancel", model="m"))["ok"]
        with pytest.raises(SweepIncomplete):
            await task
    finally:
        await server.stop()
    assert [e["command"] for e in read_trace(run_dir)] == ["cancel --model m"]


@contextlib.contextmanager
def _impostor(run_dir: Path, answer: bytes) -> Iterator[None]:
    """A socket at control.sock that answers ``answer`` to every request (a sweep of another version)."""
    run_dir.mkdir(exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with socket_path(run_dir) as path:
        listener.bind(path)
    listener.listen(4)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        listener.close()
        os.unlink(run_dir / CONTROL_SOCKET)


@pytest.mark.parametrize("answer", [b"hello\n", b"[1, 2]\n", b'{"status": {}}\n', b'{"ok": true, "status": {}}\n',
                                    b'{"ok": true, "status": {"jobs": "x", "global": 5}}\n',
                                    b'{"ok": true, "changes": 5}\n'])
@pytest.mark.slow
async def test_an_answer_ctl_cannot_read_is_one_line_and_exit_2(tmp_path: Path, answer: bytes) -> None:
    run_dir = tmp_path / "run"
    with _impostor(run_dir, answer):
        command = "pause" if b"changes" in answer else "status"
        code, out, err = await _cli("ctl", str(run_dir), command)
        assert code == 2, (code, out, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert err.startswith("error: the sweep in ") and "another fasteval version" in err
        code, out, err = await _cli("ctl", str(run_dir), command, "--json")
        assert "Traceback" not in err
        parsed: dict[str, Any] = orjson.loads(out)
        if b'"ok"' in answer:  # --json passes an answer object through as it came; the exit code follows "ok"
            assert code == 0 and parsed == orjson.loads(answer)
        else:
            assert code == 2
            assert parsed["ok"] is False and "another fasteval version" in parsed["error"]
