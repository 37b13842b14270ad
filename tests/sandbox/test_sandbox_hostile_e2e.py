"""Issue 8, items 9-12 end to end: hostile code through ``fasteval tool run`` and through a real
``fasteval run`` sweep with one sandbox worker, whose sim model sends the code (``scripted``).

A host process started with a fake ``--api-key`` runs throughout: no output may contain the key.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from tests.sandbox import hostile

FASTEVAL = str(Path(sys.executable).parent / "fasteval")
pytestmark = pytest.mark.skipif(not Path(FASTEVAL).exists(), reason="the fasteval command is not installed")


@pytest.fixture(scope="module")
def host_with_key() -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "--api-key", hostile.FAKE_KEY])
    yield
    proc.kill()
    proc.wait()


def _tool_run(code: str, out: Path) -> tuple[int, dict[str, object], str]:
    cmd = [FASTEVAL, "tool", "run", "python_interpreter", "--fidelity", "fixed", "--out", str(out),
           "--args", orjson.dumps({"code": code}).decode()]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, (orjson.loads(p.stdout) if p.returncode == 0 else {}), p.stdout + p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(hostile.HOSTILE))
def test_tool_run_survives_hostile_code(name: str, tmp_path: Path, host_with_key: None) -> None:
    rc, res, raw = _tool_run(hostile.HOSTILE[name], tmp_path / "out")
    assert rc == 0, raw
    assert hostile.FAKE_KEY not in raw
    assert len(raw) < 60_000  # the 50 MB exception included
    assert "FORGED" not in raw and "PATCHED" not in raw
    if name == "huge":
        assert res["status"] == "error" and str(res["error"]).startswith("ValueError: EEE")
    if name == "proc":
        assert "1 processes visible" in str(res.get("output"))


def _call(code: str) -> str:
    return "<tool_call>" + orjson.dumps({"name": "python_interpreter", "arguments": {"code": code}}).decode() + "</tool_call>"


@pytest.mark.slow
def test_sweep_with_one_worker_keeps_innocent_jobs_exact(tmp_path: Path, host_with_key: None) -> None:
    innocents = [f"innocent-{k}" for k in range(3, 9)]
    names = [*sorted(hostile.HOSTILE), *innocents]
    rows = [{"id": n, "prompt": f"RUN {n} NOW", "answer": "x", "tools": ["python_interpreter"]} for n in names]
    data = tmp_path / "tasks.jsonl"
    data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    script = [{"match": f"RUN {n} NOW", "reply": _call(hostile.HOSTILE[n])} for n in sorted(hostile.HOSTILE)]
    script += [{"match": f"RUN innocent-{k} NOW", "reply": _call(hostile.innocent(k))} for k in range(3, 9)]
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "models": [{"name": "sim", "provider": "sim", "policy": "scripted", "script": script}],
        "suites": [{"name": "jsonl", "options": {"path": str(data)},
                    "settings": [{"name": "default", "tool_protocol": "text", "max_rounds": 2, "fidelity": "fixed"}]}],
        "run": {"sandbox": {"workers": 1}, "max_concurrency": 2},
    }))  # fmt: skip
    p = subprocess.run([FASTEVAL, "run", str(cfg), "--run-dir", str(tmp_path / "run"), "--no-progress"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode in (0, 1), p.stdout + p.stderr
    raw = (tmp_path / "run" / "records.jsonl").read_bytes()
    assert hostile.FAKE_KEY.encode() not in raw
    records = {r["task_id"]: r for r in map(orjson.loads, raw.splitlines())}
    assert set(records) == set(names)
    for k in range(3, 9):
        calls = records[f"innocent-{k}"]["trajectory"]["tool_calls"]
        assert len(calls) >= 1  # the sim reads the tool's reply as a new user turn: one call per job
        for c in calls:
            assert c["status"] == "ok", c
            assert orjson.loads(c["output"])["stdout"] == hostile.innocent_stdout(k), c
    huge_line = next(line for line in raw.splitlines() if b'"huge"' in line)
    assert len(huge_line) < 100_000
    proc_calls = records["proc"]["trajectory"]["tool_calls"]
    assert all("1 processes visible" in orjson.loads(c["output"])["stdout"] for c in proc_calls)
