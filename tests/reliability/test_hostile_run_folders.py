"""Run folders are input we did not write (issue 21, items 6, 7 and 11).

A run folder shared on a cluster or mailed as a tarball may hold an image reference that is a
path, a blob or a records file that is a symbolic link, a foreign ``index.sqlite``, or a manifest
whose judge points somewhere else. Nothing outside the folder is read into a report, written,
truncated or created; rescore does not send a key to an endpoint nobody confirmed; and a new
run folder is private (0700, files 0600) unless ``--shared-run-dir``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml
from aiohttp import web

from tests.reliability.loopback import LoopbackServer

CONFIG = {"name": "hostile", "seeds": 1,
          "models": [{"name": "sim-tools", "provider": "sim", "policy": "tools"}],
          "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48]},
                      "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"], "max_rounds": 4}]}],
          "run": {"max_concurrency": 4}}


def cli(*args: str, umask: int | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fasteval.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})},
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished sim run (made once): each test works on its own copy."""
    root = tmp_path_factory.mktemp("source")
    cfg = root / "sweep.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    r = cli("run", str(cfg), "--run-dir", str(root / "run"), "--no-progress", "--no-preflight", umask=0o022)
    assert r.returncode == 0, r.stderr[-2000:]
    return root


@pytest.fixture
def run(finished_run: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "a"
    shutil.copytree(finished_run, dest, symlinks=True)
    return dest / "run"


def _blobs(run_dir: Path) -> list[Path]:
    return sorted(p for p in (run_dir / "blobs").rglob("*") if p.is_file())


def _secret(tmp_path: Path) -> tuple[Path, bytes]:
    data = b"\x89PNG\r\n\x1a\n" + b"TOP-SECRET-SHADOW-CONTENTS" * 4
    path = tmp_path / "secret.png"
    path.write_bytes(data)
    return path, data


@pytest.mark.slow
def test_an_image_reference_that_is_a_path_is_not_embedded_in_the_html_report(run: Path, tmp_path: Path) -> None:
    _, secret = _secret(tmp_path)
    refs = {p.name for p in _blobs(run)}
    text = (run / "records.jsonl").read_bytes()
    for ref in refs:  # run/blobs/../../../secret.png is tmp_path/secret.png
        text = text.replace(ref.encode(), b"../../secret.png")
    (run / "records.jsonl").write_bytes(text)
    out = tmp_path / "report.html"
    r = cli("index", "rebuild", str(run))
    assert r.returncode == 0, r.stderr
    r = cli("report", str(run), "--html", str(out), "--examples", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    html = out.read_text()
    assert base64.b64encode(secret).decode()[:40] not in html
    assert "refused (not an image of this run" in html


def test_a_blob_that_is_a_symbolic_link_is_neither_embedded_nor_served(run: Path, tmp_path: Path) -> None:
    secret_path, secret = _secret(tmp_path)
    blobs = _blobs(run)
    for blob in blobs:
        blob.unlink()
        blob.symlink_to(secret_path)
    out = tmp_path / "report.html"
    r = cli("report", str(run), "--html", str(out), "--examples", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert base64.b64encode(secret).decode()[:40] not in out.read_text()

    from aiohttp.test_utils import TestClient, TestServer

    from fasteval.view.app import make_app
    from fasteval.view.data import RunSet

    async def fetch() -> int:
        runs = RunSet([run])
        client = TestClient(TestServer(make_app(runs), host="127.0.0.1"))
        await client.start_server()
        try:
            resp = await client.get(f"/blob/{next(iter(runs.runs))}/{blobs[0].name}")
            assert secret not in await resp.read()
            return resp.status
        finally:
            await client.close()
            runs.close()

    assert asyncio.run(fetch()) == 404


def test_resume_never_truncates_or_appends_to_the_target_of_a_records_symlink(run: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_bytes(b"line one\nan unterminated last line")  # what repair_tail would cut
    before = target.read_bytes()
    (run / "records.jsonl").unlink()
    (run / "records.jsonl").symlink_to(target)
    r = cli("run", str(run.parent / "sweep.yaml"), "--run-dir", str(run), "--no-progress", "--no-preflight")
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "records.jsonl is a symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert target.read_bytes() == before


def test_a_dangling_records_symlink_creates_no_file_outside_the_run_folder(run: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "created.jsonl"
    target.parent.mkdir()
    (run / "records.jsonl").unlink()
    (run / "records.jsonl").symlink_to(target)
    r = cli("run", str(run.parent / "sweep.yaml"), "--run-dir", str(run), "--no-progress", "--no-preflight")
    assert r.returncode == 2, r.stderr[-2000:]
    assert not target.exists()


@pytest.mark.parametrize("name", ["index.sqlite", "run.log"])
def test_an_index_or_log_symlink_is_refused_with_one_line(run: Path, tmp_path: Path, name: str) -> None:
    target = tmp_path / f"other-{name}"
    if name == "index.sqlite":
        db = sqlite3.connect(target)
        db.execute("CREATE TABLE precious(x)")
        db.commit()
        db.close()
    else:
        target.write_text("someone else's log\n")
    before = target.read_bytes()
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(target)
    command = ("status", str(run)) if name == "index.sqlite" else (
        "run", str(run.parent / "sweep.yaml"), "--run-dir", str(run), "--no-progress", "--no-preflight")
    r = cli(*command)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert f"{name} is a symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert target.read_bytes() == before
    assert not Path(f"{target}-wal").exists()


def test_a_foreign_or_old_schema_index_is_rebuilt_by_status_and_report(run: Path) -> None:
    for schema in ("CREATE TABLE jobs(job_id TEXT PRIMARY KEY, model TEXT, status TEXT)",  # an older schema
                   "CREATE TABLE jobs(id INTEGER PRIMARY KEY, payload BLOB)"):  # another tool's file
        (run / "index.sqlite").unlink()
        for suffix in ("-wal", "-shm"):
            (run / f"index.sqlite{suffix}").unlink(missing_ok=True)
        db = sqlite3.connect(run / "index.sqlite")
        db.execute(schema)
        db.execute("CREATE TABLE meta(k TEXT, v TEXT)")
        db.commit()
        db.close()
        for command in (("status", str(run), "--format", "json"), ("report", str(run), "--format", "json")):
            r = cli(*command)
            assert r.returncode == 0, (schema, command, r.stderr[-2000:])
            assert "no such column" not in r.stderr
        assert orjson.loads(cli("status", str(run), "--format", "json").stdout)["done"] == 2


def test_a_new_run_folder_is_private_unless_shared(finished_run: Path, tmp_path: Path) -> None:
    source = finished_run / "run"
    for path in (source, *source.rglob("*")):
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))  # made under umask 022: still private
    assert stat.S_IMODE(source.stat().st_mode) == 0o700
    assert stat.S_IMODE((source / "records.jsonl").stat().st_mode) == 0o600
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    r = cli("run", str(cfg), "--run-dir", str(tmp_path / "shared"), "--no-progress", "--no-preflight",
            "--shared-run-dir", umask=0o022)
    assert r.returncode == 0, r.stderr[-2000:]
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "shared" / "records.jsonl").stat().st_mode) == 0o644


class CountingJudge(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        return web.json_response({"error": {"message": "no"}}, status=400)


async def test_rescore_without_config_does_not_send_the_key_to_a_manifest_url(run: Path) -> None:
    judge = CountingJudge()
    await judge.start()
    try:
        manifest = orjson.loads((run / "manifest.json").read_bytes())
        manifest["config"]["roles"] = {"judge": {"provider": "openai", "base_url": f"{judge.url}/v1",
                                                 "model": "j", "api_key_env": "HOSTILE_JUDGE_KEY"}}
        (run / "manifest.json").write_bytes(orjson.dumps(manifest))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "fasteval.cli.main", "rescore", str(run),
            env={**os.environ, "HOSTILE_JUDGE_KEY": "judge-key-5e2d9a"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    finally:
        await judge.stop()
    assert proc.returncode == 2, err.decode()[-2000:]
    assert judge.url in err.decode() and "--trust-manifest" in err.decode() and "--config" in err.decode()
    assert judge.requests == 0


def test_serve_state_files_keep_registered_secrets_out(tmp_path: Path) -> None:
    from fasteval.core.redact import add_secrets, clear_secrets
    from providers.local.spec import ServeSpec
    from providers.local.supervisor import Replica

    add_secrets(["serve-secret-81f3c2a9"])
    try:
        replica = Replica(ServeSpec.from_config("m", {"model": "x", "command": ["srv", "{port}"]}), 0, [],
                          tmp_path / "servers")
        replica.command = ["srv", "--header", "X-Token: serve-secret-81f3c2a9"]
        replica.write_state()
    finally:
        clear_secrets()
    text = (tmp_path / "servers" / "m-0.json").read_text()
    assert "serve-secret-81f3c2a9" not in text and "X-Token" in text


def test_a_planted_manifest_temp_link_is_replaced_not_written_through(run: Path, tmp_path: Path) -> None:
    target = tmp_path / "bashrc"
    target.write_text("someone's file\n")
    (run / "manifest.json.tmp").symlink_to(target)
    r = cli("run", str(run.parent / "sweep.yaml"), "--run-dir", str(run), "--no-progress", "--no-preflight")
    assert r.returncode == 0, r.stderr[-2000:]
    assert target.read_text() == "someone's file\n"
    assert not (run / "manifest.json").is_symlink() and orjson.loads((run / "manifest.json").read_bytes())
