"""``fasteval batches cancel`` applies rescore's rule to the manifest (a ``base_url`` that would get a
key needs ``--config`` or ``--trust-manifest``) and prints the provider's words escaped."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web

from fasteval.runfolder.records import write_manifest
from tests.reliability.loopback import LoopbackServer

KEY = "sk-cancel-test-0123456789abcdef"
HOSTILE = "\x1b]52;c;SGVsbG8=\x07\x1b[2J\x1b]0;owned\x07"


class Hostile(LoopbackServer):
    """Answers every call 400 with escape sequences and the key it was sent in the body."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request.path)
        body = {"error": {"message": f"{HOSTILE} no such batch; your key {request.headers.get('Authorization')}"}}
        return web.json_response(body, status=400)


@pytest.fixture
async def hostile() -> Any:
    s = Hostile()
    await s.start()
    yield s
    await s.stop()


def run_folder(tmp: Path, base_url: str) -> Path:
    """A run folder as a `--no-wait` run leaves it: a manifest, and one created batch in the journal."""
    run_dir = tmp / "run"
    (run_dir / "batches").mkdir(parents=True)
    model = {"name": "bm", "provider": "openai", "model": "gpt", "base_url": base_url,
             "api_key_env": "FE_CANCEL_KEY", "batch": {"gather_s": 0.1, "poll_s": 0.1}}
    write_manifest(run_dir, {"config": {"models": [model], "suites": []}})
    events = [{"e": "begin", "local": "fe1", "lane": "bm", "at": 1.0, "map": [["fe_a", "j0", 0]]},
              {"e": "created", "local": "fe1", "id": "batch_1"}]
    (run_dir / "batches" / "journal.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return run_dir


async def cancel(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FE_CANCEL_KEY": KEY}
    return await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "fasteval.cli.main", "batches", "cancel",
                                                    *args, "--poll-s", "0.05"],
                                   capture_output=True, text=True, timeout=120, env=env)


async def test_a_manifest_endpoint_with_a_key_is_refused_until_trusted(tmp_path: Path, hostile: Hostile) -> None:
    run_dir = run_folder(tmp_path, f"{hostile.url}/v1")
    refused = await cancel(str(run_dir))
    assert refused.returncode == 2, refused.stderr
    assert f"bm: {hostile.url}/v1 (with the key in $FE_CANCEL_KEY)" in refused.stderr
    assert "--trust-manifest" in refused.stderr and hostile.seen == []  # no request, no key sent


async def test_the_providers_words_are_printed_escaped_and_redacted(tmp_path: Path, hostile: Hostile) -> None:
    run_dir = run_folder(tmp_path, f"{hostile.url}/v1")
    out = await cancel(str(run_dir), "--trust-manifest")
    assert out.returncode == 0, out.stderr
    assert hostile.seen and "cancelling" in out.stderr and "failed" in out.stderr
    for raw in ("\x1b", "\x07", KEY):
        assert raw not in out.stderr and raw not in out.stdout
    assert "\\x1b]52;c;" in out.stderr  # shown, as text


async def test_a_config_given_replaces_the_manifests_endpoints(tmp_path: Path, hostile: Hostile) -> None:
    run_dir = run_folder(tmp_path, "http://127.0.0.1:9/v1")  # tampered: a port nobody listens on
    cfg = {"models": [{"name": "bm", "provider": "openai", "model": "gpt", "base_url": f"{hostile.url}/v1",
                       "api_key_env": "FE_CANCEL_KEY", "batch": True}],
           "suites": [{"name": "demo"}]}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(cfg))
    out = await cancel(str(run_dir), "--config", str(tmp_path / "sweep.yaml"))
    assert out.returncode == 0, out.stderr
    assert hostile.seen and hostile.seen[0].endswith("/cancel"), out.stderr  # the config's endpoint
