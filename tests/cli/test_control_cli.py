"""``fasteval ctl`` from the command line: no sweep, a stale socket, another user, --json, the trace shown."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from fasteval.core.errors import ControlRefused
from fasteval.engine.run.sweep import SweepIncomplete
from fasteval.runfolder.control import CONTROL_SOCKET, read_trace, socket_path
from fasteval.runfolder.index import open_index
from providers.sim import SimModel, SimServer
from tests.engine.control_support import ctl, socket_up, start, until, write_config

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]
ROOT = Path(__file__).resolve().parents[2]


async def fasteval(*args: str, user: str | None = None) -> tuple[int, str, str]:
    """The real CLI in a subprocess (as another user through setpriv when ``user`` is given)."""
    cmd = [*FASTEVAL, *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups", *cmd]
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                cwd=ROOT)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _why_user_cannot_run_us(user: str) -> str | None:
    """Why ``user`` cannot run this checkout's interpreter and fasteval (None when it can): we are not
    root, or the checkout (or the venv) sits inside a folder only its owner may enter, as a home
    folder or ``mktemp -d`` often is."""
    try:
        proc = subprocess.run(["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups", sys.executable,
                               "-c", "import fasteval.cli.main"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:  # no setpriv, or the interpreter hung
        return f"setpriv failed: {e}"
    if proc.returncode == 0:
        return None
    last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return f"user {user} cannot run {sys.executable} in {ROOT} ({last[:200]})"


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder another user can reach (pytest's tmp_path is 0700): for the second-user test, which
    skips, saying why, where that user cannot run this checkout at all."""
    why = _why_user_cannot_run_us("nobody")
    if why is not None:
        pytest.skip(why)
    path = Path(tempfile.mkdtemp(prefix="fasteval-ctl-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


def _dead_socket(run_dir: Path) -> None:
    """What a sweep killed with -9 leaves: a bound socket file nobody listens on."""
    with socket_path(run_dir) as path:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()


async def test_no_sweep_and_a_stale_socket_are_said_clearly(tmp_path: Path) -> None:
    code, out, err = await fasteval("ctl", str(tmp_path / "nope"), "status")
    assert code == 2 and "no such run folder" in err
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    code, out, err = await fasteval("ctl", str(run_dir), "pause", "--json")
    assert code == 2 and orjson.loads(out)["running"] is False and "no sweep is running" in orjson.loads(out)["error"]
    _dead_socket(run_dir)
    code, _, err = await fasteval("ctl", str(run_dir), "status")
    assert code == 2 and "stale" in err and err.count("\n") == 1


async def test_a_sweep_replaces_a_stale_socket_and_refuses_a_live_one(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", faults=_hang_first())])  # keeps the first sweep running
    await server.start()
    try:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        _dead_socket(run_dir)
        cfg = write_config(tmp_path, [{"name": "m", "provider": "openai", "base_url": server.base_url, "model": "m"}],
                           n_tasks=6, tools=False, run={"max_concurrency": 1})
        first = start(cfg, run_dir)
        await socket_up(run_dir, first)
        await until(lambda: server.requests >= 1, "the first sweep at work")
        second = start(cfg, run_dir)
        with pytest.raises(ControlRefused, match="another sweep is running"):
            await second
        assert (await ctl(run_dir, "status"))["ok"]  # the first one still answers
        assert (await ctl(run_dir, "cancel", model="m"))["cancelled"] == 1
        with pytest.raises(SweepIncomplete):
            await first
    finally:
        await server.stop()
    assert not (run_dir / CONTROL_SOCKET).exists()


async def test_another_user_is_refused_even_through_a_loosened_socket(open_dir: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", faults=_hang_first())])
    await server.start()
    try:
        run_dir = open_dir / "run"
        cfg = write_config(open_dir, [{"name": "m", "provider": "openai", "base_url": server.base_url, "model": "m"}],
                           tools=False)
        task = start(cfg, run_dir)
        await socket_up(run_dir, task)
        run_dir.chmod(0o755)
        assert (run_dir / CONTROL_SOCKET).stat().st_mode & 0o777 == 0o600
        code, _, err = await fasteval("ctl", str(run_dir), "pause", user="nobody")
        assert code == 2 and "permission denied" in err  # 0600: the kernel says no
        (run_dir / CONTROL_SOCKET).chmod(0o666)  # someone loosened it: SO_PEERCRED still says no
        code, out, _ = await fasteval("ctl", str(run_dir), "pause", "--json", user="nobody")
        answer = orjson.loads(out)
        assert code == 2 and answer["ok"] is False and "refused" in answer["error"] and "nobody" in answer["error"]
        st = await ctl(run_dir, "status")
        assert st["status"]["paused"] == [] and read_trace(run_dir) == []
        assert (await ctl(run_dir, "cancel", model="m"))["cancelled"] == 1
        with pytest.raises(Exception, match="drained or cancelled"):
            await task
    finally:
        await server.stop()


def _hang_first() -> object:
    from providers.sim.spec import Faults

    return Faults(schedule=["hang"], hang_s=3600)


@pytest.mark.slow
async def test_status_json_and_table_and_the_trace_in_status_and_report(tmp_path: Path) -> None:
    # A run folder path longer than a Unix socket's 108 bytes still gets its socket in place.
    run_dir = tmp_path / ("deep-" * 20) / "run"
    assert len(str(run_dir / CONTROL_SOCKET)) > 108
    server = SimServer([SimModel("m[red]", policy="direct", faults=_hang_first())])
    await server.start()
    try:
        cfg = write_config(tmp_path, [{"name": "m[red]", "provider": "openai", "base_url": server.base_url,
                                       "model": "m[red]"}], n_tasks=2, tools=False)
        task = start(cfg, run_dir)
        await socket_up(run_dir, task)
        code, out, _ = await fasteval("ctl", str(run_dir), "set", "--model", "m[red]", "rpm=600", "concurrency=3")
        assert code == 0 and "m[red].rpm: None -> 600.0" in out and "m[red].concurrency: 256 -> 3" in out
        # #39 item 12: the answer says the change lasts this sweep, and a resume takes the config's.
        assert "(for this sweep: a resume starts from the config's limits" in out, out
        code, out, _ = await fasteval("ctl", str(run_dir), "status", "--json")
        st = orjson.loads(out)
        assert code == 0 and st["status"]["endpoints"]["m[red]"]["rpm"] == 600.0
        assert st["trace"][0]["command"] == "set --model m[red] rpm=600 concurrency=3"
        code, out, _ = await fasteval("ctl", str(run_dir), "status")
        assert code == 0 and "m[red]" in out and "changes (control.jsonl):" in out
        code, _, err = await fasteval("ctl", str(run_dir), "set", "--model", "m[red]", "rpm")
        assert code == 2 and "expected KEY=VALUE" in err
        await ctl(run_dir, "cancel", model="m[red]")
        with pytest.raises(Exception, match="drained or cancelled"):
            await task
    finally:
        await server.stop()
    assert not (run_dir / CONTROL_SOCKET).exists()
    code, out, _ = await fasteval("status", str(run_dir))
    assert code == 0 and "steered while it ran (2 changes" in out and "cancel --model m[red]" in out
    code, out, _ = await fasteval("report", str(run_dir), "--format", "json")
    assert [e["command"] for e in orjson.loads(out)["control"]] == ["set --model m[red] rpm=600 concurrency=3",
                                                                  "cancel --model m[red]"]


async def test_a_folder_that_cannot_hold_the_socket_costs_the_steering_not_the_sweep(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run_dir = tmp_path / "run"
    (run_dir / f".{CONTROL_SOCKET}.{os.getpid()}").mkdir(parents=True)  # in the way of the socket's bind
    cfg = write_config(tmp_path, [{"name": "m", "provider": "sim", "policy": "direct"}], n_tasks=2, tools=False)
    res = await start(cfg, run_dir)
    assert res.ok == 2 and not (run_dir / CONTROL_SOCKET).exists()
    assert "no control channel for this sweep" in caplog.text


@pytest.mark.slow
async def test_ctrl_c_while_jobs_are_held_exits_130_and_the_rerun_runs_them(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "a", "provider": "sim", "policy": "direct"},
                                  {"name": "b", "provider": "sim", "policy": "direct", "latency_ms": 1000}],
                       n_tasks=6, tools=False, run={"max_concurrency": 1})
    run_dir = tmp_path / "run"
    proc = await asyncio.create_subprocess_exec(*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress",
                                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        await until(lambda: (run_dir / CONTROL_SOCKET).exists(), "the sweep's socket")
        assert (await ctl(run_dir, "pause", model="b"))["ok"]

        async def held() -> bool:
            return bool((await ctl(run_dir, "status"))["status"]["jobs"]["held"] >= 1)

        await until(held, "b's jobs held")
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130, err.decode()
    assert not (run_dir / CONTROL_SOCKET).exists()
    code, _, err_text = await fasteval("run", str(cfg), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err_text
    with open_index(run_dir) as index:
        assert len(index.job_ids(ok_only=True)) == 12


async def test_status_while_the_sweep_starts_says_so_and_what_it_is_doing(tmp_path: Path) -> None:
    """A served judge whose server waits for a gate file holds the start for as long as the test likes."""
    import yaml

    from tests.providers.local.conftest import make_checkpoint, serve_block

    gate = tmp_path / "gate"
    held = serve_block(make_checkpoint(tmp_path / "ckpt"))
    held["command"] = ["sh", "-c", f'while [ ! -e "{gate}" ]; do sleep 0.05; done; exec "{{python}}" -m providers.sim '
                                   '--port {port} --model "{served_model_name}:direct"']
    cfg = write_config(tmp_path, [{"name": "m", "provider": "sim", "policy": "direct"}], n_tasks=2, tools=False,
                       run={"gpus": [0]})
    raw = yaml.safe_load(cfg.read_text())
    raw["roles"] = {"judge": {"provider": "vllm", "serve": held}}
    cfg.write_text(yaml.safe_dump(raw))
    run_dir = tmp_path / "run"
    task = start(cfg, run_dir)
    try:
        await socket_up(run_dir, task)

        async def serving() -> bool:
            return "judge" in str((await ctl(run_dir, "status"))["status"].get("starting"))

        await until(serving, "the start waiting on the served judge")
        code, out, _ = await fasteval("ctl", str(run_dir), "status")
        assert code == 0 and "starting: starting served models (judge)" in out, out
        assert "jobs: 2 planned, none started yet" in out and "global concurrency" not in out
        code, out, _ = await fasteval("ctl", str(run_dir), "set", "--model", "m", "rpm=5")
        assert code == 2 and "refused: the sweep is still starting (starting served models (judge)" in out
        assert (await ctl(run_dir, "pause", model="m"))["ok"]  # kept while starting: takes hold when jobs start
        gate.touch()

        async def parked() -> bool:
            st = (await ctl(run_dir, "status"))["status"]
            return "starting" not in st and st["jobs"]["held"] == 2

        await until(parked, "m's jobs parked by the pause sent while the sweep was starting")
        code, out, _ = await fasteval("ctl", str(run_dir), "status")
        assert code == 0 and "starting:" not in out and "global concurrency: 0/" in out and "paused: model m" in out
        assert (await ctl(run_dir, "resume", model="m"))["ok"]
        res = await asyncio.wait_for(task, 120)
    finally:
        gate.touch()
        if not task.done():
            task.cancel()
    assert res.ok == 2
