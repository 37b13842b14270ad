"""``notify:``: a loopback receiver and real commands are told when a sim sweep ends or goes wrong,
each event once, with no key or record text, and no notifier changes the run's exit code."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from fasteval.cli.main import main
from fasteval.config.load import load_config
from fasteval.config.notify import NotifySpec
from fasteval.core.errors import ConfigError
from fasteval.engine.steer.notify import Health, Notifier

SECRET = "sk-notify-test-0123456789abcdef"


class Receiver:
    """An aiohttp server on 127.0.0.1 in its own thread, keeping every JSON body posted to it."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        started = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _serve(self, started: threading.Event) -> None:
        async def hook(request: web.Request) -> web.Response:
            self.events.append(json.loads(await request.read()))
            return web.json_response({"ok": True})

        async def start() -> web.AppRunner:
            app = web.Application()
            app.router.add_post("/hook", hook)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = runner.addresses[0][1]
            return runner

        asyncio.set_event_loop(self.loop)
        self.runner = self.loop.run_until_complete(start())
        started.set()
        self.loop.run_forever()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def write_config(tmp: Path, notify: dict[str, Any], schedule: list[str] | None = None) -> Path:
    model = {"name": "sim-direct", "provider": "sim", "policy": "direct", "latency_ms": 20,
             "faults": {"schedule": schedule or []}}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "notified", "seeds": [0, 1], "models": [model],
        "suites": [{"name": "demo", "options": {"n_tasks": 6, "seed": 0}, "settings": [{"name": "direct", "tools": []}]}],
        "run": {"max_concurrency": 2}, "notify": notify}))
    return path


def run(tmp: Path, config: Path) -> int:
    return main(["run", str(config), "--run-dir", str(tmp / "run"), "--no-progress"])


def recorder(tmp: Path, name: str = "events.jsonl") -> list[str]:
    """A real command appending its stdin (and whether it saw the key) to a file."""
    code = ("import os, sys; data = sys.stdin.buffer.read(); "
            f"open({str(tmp / name)!r}, 'ab').write(data + b'\\t' + str('NOTIFY_TEST_API_KEY' in os.environ)"
            ".encode() + b'\\n')")
    return [sys.executable, "-c", code]


def test_a_finished_sweep_is_posted_and_run_once_with_its_exit_code(
        tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_TEST_API_KEY", SECRET)
    config = write_config(tmp_path, {"url": receiver.url, "command": recorder(tmp_path)})
    assert run(tmp_path, config) == 0
    assert [e["event"] for e in receiver.events] == ["sweep_finished"]
    event = receiver.events[0]
    assert event["exit_code"] == 0 and event["sweep"] == "notified"
    assert event["summary"]["ok"] == 12 and event["summary"]["errors"] == 0
    body, saw_key = (tmp_path / "events.jsonl").read_bytes().rstrip(b"\n").split(b"\t")
    assert json.loads(body) == event
    assert saw_key == b"False"  # the command does not inherit key-like variables
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    prompts = [p["text"] for r in records for m in r["trajectory"]["messages"] if m["role"] == "user"
               for p in m["content"] if p.get("type") == "text"]
    text = json.dumps(event)
    assert prompts and SECRET not in text and not any(p[:40] in text for p in prompts)


def test_errors_above_the_rate_are_told_once_without_their_text(tmp_path: Path, receiver: Receiver) -> None:
    config = write_config(tmp_path, {"url": receiver.url, "error_rate": 0.25, "min_jobs": 4, "check_s": 0.05},
                          schedule=["400"] * 6)
    assert run(tmp_path, config) == 1  # jobs ended in error: the run says so, the notifier does not change it
    kinds = [e["event"] for e in receiver.events]
    assert kinds.count("error_rate") == 1 and kinds[-1] == "sweep_finished"
    rate = next(e for e in receiver.events if e["event"] == "error_rate")
    assert rate["error_rate"] > 0.25 and rate["threshold"] == 0.25
    finished = receiver.events[-1]
    assert finished["exit_code"] == 1 and finished["summary"]["errors"] == 6
    assert all(isinstance(n, int) for kinds in finished["summary"]["errors_by_kind"].values() for n in kinds.values())
    assert "400" not in json.dumps(finished["summary"]["errors_by_kind"])  # kinds and counts, no messages


def test_a_filling_disk_is_told_during_the_run(tmp_path: Path, receiver: Receiver) -> None:
    config = write_config(tmp_path, {"url": receiver.url, "disk_free_gb": 1e12, "check_s": 0.05})
    assert run(tmp_path, config) == 0
    kinds = [e["event"] for e in receiver.events]
    assert kinds.count("disk_low") == 1 and kinds[-1] == "sweep_finished"


@pytest.mark.parametrize("command", [
    [sys.executable, "-c", "import time; time.sleep(60)"],   # hangs: abandoned after timeout_s
    ["sh", "-c", "sleep 60 & wait"],                         # hangs in a child of its own
    [sys.executable, "-c", "raise SystemExit(3)"],           # fails
    ["/nonexistent/notifier"],                               # missing
])
def test_a_broken_command_never_changes_the_outcome(tmp_path: Path, command: list[str]) -> None:
    config = write_config(tmp_path, {"command": command, "timeout_s": 0.5})
    assert run(tmp_path, config) == 0


def test_an_unreachable_url_never_changes_the_outcome(tmp_path: Path, receiver: Receiver) -> None:
    dead = receiver.url.replace("/hook", "/missing")  # 404
    config = write_config(tmp_path, {"url": dead, "command": recorder(tmp_path), "timeout_s": 2})
    assert run(tmp_path, config) == 0
    assert (tmp_path / "events.jsonl").exists()  # the other notifier still ran


def test_a_sweep_that_cannot_start_is_told_too(tmp_path: Path, receiver: Receiver) -> None:
    config = write_config(tmp_path, {"url": receiver.url})
    raw = yaml.safe_load(config.read_text())
    raw["models"] = [{"name": "down", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}]
    config.write_text(yaml.safe_dump(raw))
    assert run(tmp_path, config) == 2  # preflight: nothing ran
    assert [(e["event"], e["exit_code"]) for e in receiver.events] == [("sweep_finished", 2)]


def test_an_endpoint_that_stays_down_is_told_during_the_run_then_the_incomplete_end(
        tmp_path: Path, receiver: Receiver) -> None:
    config = write_config(tmp_path, {"url": receiver.url, "endpoint_down_min": 0.005, "check_s": 0.05})
    raw = yaml.safe_load(config.read_text())
    raw["models"] = [{"name": "gone", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                      "retry": {"max_attempts": 1}}]
    raw["run"]["breaker"] = {"failures": 1, "outage_budget_s": 1.5, "probe_initial_s": 0.1, "probe_max_s": 0.2}
    config.write_text(yaml.safe_dump(raw))
    code = main(["run", str(config), "--run-dir", str(tmp_path / "run"), "--no-progress", "--no-preflight"])
    assert code == 3  # incomplete: the endpoint was given up on
    kinds = [e["event"] for e in receiver.events]
    assert kinds == ["endpoint_down", "sweep_finished"]
    down, finished = receiver.events
    assert down["endpoint"] == "gone"
    assert finished["exit_code"] == 3 and finished["summary"]["down"] == ["gone"]
    assert "127.0.0.1:9" not in json.dumps(receiver.events)  # names, not addresses


def test_an_endpoint_down_is_told_once_per_endpoint(tmp_path: Path, receiver: Receiver) -> None:
    notifier = Notifier(NotifySpec(url=receiver.url, endpoint_down_min=10), "s", tmp_path)

    async def checks() -> None:
        await notifier.check(Health(done=1, errors=0, down_s={"a": 599}), None)
        await notifier.check(Health(done=1, errors=0, down_s={"a": 601, "b": 700}), None)
        await notifier.check(Health(done=1, errors=0, down_s={"a": 900, "b": 900}), None)

    asyncio.run(checks())
    assert sorted((e["endpoint"], e["down_min"]) for e in receiver.events) == [("a", 10.0), ("b", 11.7)]


def test_notify_is_typed_at_load_and_not_part_of_the_run_identity(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"command": ["true"], "error_rate": 0.5, "disk_free_gb": None})
    cfg = load_config(config)
    assert cfg.notify == NotifySpec(command=("true",), error_rate=0.5, disk_free_gb=None)
    other = write_config(tmp_path, {"url": "https://example.invalid/x"})
    assert load_config(other).hash() == cfg.hash()  # a new notifier does not make a run folder "changed"
    bad = write_config(tmp_path, {"url": "ftp://x", "error_rate": 2})
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    assert "notify.url" in str(e.value) and "notify.error_rate" in str(e.value)


def _interrupted_run(tmp: Path, config: Path, after_records: int) -> tuple[int, str]:
    """``fasteval run`` as a real process, sent SIGINT (Ctrl-C) once ``after_records`` more records are in."""
    import signal
    import subprocess
    import time

    records = tmp / "run" / "records.jsonl"
    before = len(records.read_bytes().splitlines()) if records.exists() else 0
    proc = subprocess.Popen([sys.executable, "-m", "fasteval.cli.main", "run", str(config), "--run-dir",
                             str(tmp / "run"), "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while not records.exists() or len(records.read_bytes().splitlines()) < before + after_records:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, err


def test_a_ctrl_c_sweep_says_how_many_jobs_did_not_run(tmp_path: Path, receiver: Receiver) -> None:
    config = write_config(tmp_path, {"url": receiver.url})
    raw = yaml.safe_load(config.read_text())
    raw["models"][0]["latency_ms"] = 150
    raw["suites"][0]["options"]["n_tasks"] = 30  # 60 jobs, two at a time: Ctrl-C comes early
    config.write_text(yaml.safe_dump(raw))
    for attempt in (1, 2):  # the second resumes the first: what it skips is not "not run"
        code, err = _interrupted_run(tmp_path, config, after_records=4)
        assert code == 130, err
        finished = receiver.events[-1]
        assert finished["event"] == "sweep_finished" and len(receiver.events) == attempt
        s = finished["summary"]
        assert s["interrupted"] is True and s["ok"] >= 4 and s["errors"] == 0
        assert s["not_run"] > 0 and s["ok"] + s["already_done"] + s["not_run"] == 60, s
        assert f"{s['not_run']} not run (of 60)" in err  # the terminal's summary line says the same
    records = (tmp_path / "run" / "records.jsonl").read_bytes().splitlines()
    assert receiver.events[-1]["summary"]["already_done"] + receiver.events[-1]["summary"]["ok"] == len(records)
