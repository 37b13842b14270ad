"""API keys echoed back by an upstream never reach records, logs or the terminal.

A loopback upstream answers every request with a 400 whose body repeats the credentials it was
sent (the Authorization header, Serper's X-API-KEY), for a model endpoint, a judge and a
retrieval tool alike. After a real ``fasteval run`` no file of the run folder and no line of
its output holds any of the keys, while the masked errors are still on the records.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import orjson
import pyvips
import yaml
from aiohttp import web

from fasteval.core.redact import (
    MASK,
    RedactingFilter,
    add_secrets,
    clear_secrets,
    redact_bytes,
    redact_text,
    secret_env_names,
)
from tests.reliability.loopback import LoopbackServer

KEYS = {"REL_MODEL_KEY": "model-key-7f3a9c2e51", "REL_JUDGE_KEY": "judge-key-0b8d4e6f22",
        "REL_SEARCH_KEY": "search-key-93c1a7d5e4"}


class EchoUpstream(LoopbackServer):
    """Rejects everything with a 400 that quotes the request's credentials back."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        super().__init__()

    async def handle(self, request: web.Request) -> web.Response:
        creds = request.headers.get("Authorization") or request.headers.get("X-API-KEY") or ""
        self.seen.append(creds)
        body = {"error": {"message": f"invalid request; your credentials were {creds!r} "
                                     f"(headers {dict(request.headers)})"}}
        return web.json_response(body, status=400)


def _dataset(tmp: Path) -> Path:
    root = tmp / "vistahop"
    root.mkdir()
    pyvips.Image.black(32, 24, bands=3).write_to_file(str(root / "a.png"))
    rows = [{"prompt": [{"role": "user", "content": f"<image>{q}"}], "reward_model": {"ground_truth": "gold"},
             "image": ["a.png"]} for q in ("please search this", "please judge this")]
    path = root / "data.jsonl"
    path.write_text("\n".join(orjson.dumps(r).decode() for r in rows) + "\n")
    return path


def _config(tmp: Path, url: str) -> Path:
    search_call = '<tool_call>{"name": "web_search", "arguments": {"query": "x"}}</tool_call>'
    cfg = {
        "seeds": 1,
        "models": [
            {"name": "echo-model", "provider": "openai", "base_url": f"{url}/v1", "model": "m",
             "api_key_env": "REL_MODEL_KEY"},
            {"name": "sim-agent", "provider": "sim", "policy": "scripted",
             "script": [{"match": "search this", "reply": search_call},
                        {"match": "judge this", "reply": "<answer>not the gold</answer>"}]},
        ],
        "roles": {"judge": {"provider": "openai", "base_url": f"{url}/v1", "model": "j",
                            "api_key_env": "REL_JUDGE_KEY"}},
        # Our wording (no reference checkout in the subprocess) and no level fields in the rows.
        "suites": [{"name": "vistahop", "options": {"path": str(_dataset(tmp)), "texts": "own",
                                                     "require_levels": False}, "settings": [
            {"name": "search", "tools": ["web_search"], "max_rounds": 2, "tool_protocol": "text",
             "options": {"direct": False, "judge_on_max_rounds": False, "judge_retries": 1,
                         "tool_options": {"web_search": {"backend": "serper", "base_url": f"{url}/serper",
                                                         "api_key_env": "REL_SEARCH_KEY", "attempts": 1}}}}]}],
        "run": {"max_concurrency": 4},
    }
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


async def test_echoed_keys_of_model_judge_and_search_tool_are_redacted_everywhere(tmp_path: Path) -> None:
    upstream = EchoUpstream()
    await upstream.start()
    try:
        run_dir = tmp_path / "run"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "fasteval.cli.main", "run", str(_config(tmp_path, upstream.url)),
            "--run-dir", str(run_dir), "--no-progress", "--no-preflight", env={**os.environ, **KEYS},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    finally:
        await upstream.stop()
    # every credential really went out and came back in a 400 body
    for key in KEYS.values():
        assert any(key in s for s in upstream.seen), (key, upstream.seen)
    records = [orjson.loads(ln) for ln in (run_dir / "records.jsonl").read_bytes().splitlines()]
    assert len(records) == 4
    text = (run_dir / "records.jsonl").read_text()
    assert "HTTP 400" in text and MASK in text  # the errors are kept, masked
    assert any(r["error_kind"] == "judge_error" for r in records)
    assert any(c.get("status") == "error" for r in records for c in r["trajectory"]["tool_calls"])
    for key in KEYS.values():
        assert key.encode() not in out + err
        for f in run_dir.rglob("*"):
            if f.is_file():
                assert key.encode() not in f.read_bytes(), f


def test_configured_env_names_are_found_anywhere_in_a_config() -> None:
    raw = {"models": [{"api_key_env": "A"}], "roles": {"judge": {"api_key_env": "B"}},
           "suites": [{"settings": [{"options": {"tool_options": {"web_search": {"api_key_env": "C"}}}}]}]}
    assert secret_env_names(raw) == {"A", "B", "C"}


def test_values_and_token_shapes_are_masked_in_text_bytes_and_log_lines(tmp_path: Path) -> None:
    clear_secrets()
    add_secrets(["s3cr3t-value-long", "short"])
    try:
        assert redact_text("x s3cr3t-value-long y") == f"x {MASK} y"
        assert redact_text("short") == "short"  # too short to be a key: masking would hit words
        assert redact_text("Authorization: Bearer abcdefghijk.lmn") == f"Authorization: Bearer {MASK}"
        assert redact_text("key sk-proj-ABCDEFGHIJKLMNOP end") == f"key {MASK} end"
        assert redact_text("the bearer of news, sk-1") == "the bearer of news, sk-1"  # not token-shaped
        assert redact_bytes(b'{"e": "s3cr3t-value-long"}') == b'{"e": "***"}'
        log_file = tmp_path / "run.log"
        handler = logging.FileHandler(log_file)
        handler.addFilter(RedactingFilter())
        logger = logging.getLogger("test-redaction")
        logger.addHandler(handler)
        try:
            logger.error("upstream said %s", "Bearer s3cr3t-value-long")
            try:
                raise ValueError("boom s3cr3t-value-long")
            except ValueError:
                logger.exception("failed")
        finally:
            logger.removeHandler(handler)
            handler.close()
        logged = log_file.read_text()
        assert "s3cr3t" not in logged and "boom ***" in logged and "upstream said Bearer ***" in logged
    finally:
        clear_secrets()


async def test_a_tool_error_shown_to_the_model_is_redacted(tmp_path: Path) -> None:
    from fasteval.core.types import Task, Turn
    from fasteval.engine.run.agent import AgentEnv, execute_tool
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.tools.base import ToolContext, make_tool
    from providers.base import ToolCallRequest

    clear_secrets()
    add_secrets(["tool-echoed-secret-1234"])
    try:
        blobs = BlobStore(tmp_path / "blobs")
        env = AgentEnv(client=None, suite=None, setting=None,  # type: ignore[arg-type]
                       tools={"calculator": make_tool("calculator")}, blobs=blobs)
        ctx = ToolContext(blobs=blobs, task=Task(id="t", turns=[Turn(text="")]), images=[])
        call = ToolCallRequest(id="c", name="calculator", arguments='{"expression": "tool-echoed-secret-1234 + 1"}')
        result, _, _ = await execute_tool(call, env, ctx)
        assert result.status == "error" and MASK in result.output
        assert "tool-echoed-secret-1234" not in result.output + str(result.error)
    finally:
        clear_secrets()
