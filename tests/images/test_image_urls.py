"""What a request sends for an image: one shared data URL, file:// URLs of the blob store for
models that declare ``local_media``, and the processor-aware resize of ``image_resize``.

Requests go through the real provider to a real HTTP server on loopback that records bodies;
the sim server checks file:// URLs the way vLLM's ``--allowed-local-media-path`` does.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import orjson
import pytest
import yaml
from aiohttp import web
from PIL import Image

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError, ModelConfigError
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.clients import build_client, image_resolver
from fasteval.engine.run.sweep import run_sweep
from fasteval.images import ImageEncoder, processor_resize, smart_resize
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.records import read_manifest
from providers.base import ChatRequest, ProviderError
from providers.client import RetryPolicy
from providers.openai_compat import OpenAICompatProvider
from providers.sim import SimModel, SimServer


def _jpeg(width: int, height: int, seed: int = 0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buf, "JPEG", quality=80)
    return buf.getvalue()


class Recorder:
    """A real chat-completions endpoint that keeps the parsed bodies it receives."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(orjson.loads(await request.read()))
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "ok"},
                                               "finish_reason": "stop"}], "usage": {}})

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"  # type: ignore[union-attr]

    def image_urls(self) -> list[str]:
        return [p["image_url"]["url"] for b in self.bodies for m in b["messages"]
                if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image_url"]


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    rec = Recorder()
    await rec.start()
    yield rec
    assert rec.runner is not None
    await rec.runner.cleanup()


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


async def _send(recorder: Recorder, blobs: BlobStore, spec: dict[str, Any], refs: list[str],
                profile: str = "original") -> list[str]:
    encoder = ImageEncoder(blobs)
    ep = EndpointSpec.of("m", {"provider": "openai", "base_url": recorder.url, **spec})
    client = build_client("m", ep, sim_base_url=None, resolver=image_resolver(encoder, spec=ep))
    try:
        content = [{"type": "image", "image": r} for r in refs] + [{"type": "text", "text": "look"}]
        await client.chat(ChatRequest(messages=[{"role": "user", "content": content}], image_profile=profile))
    finally:
        await client.close()
        encoder.close()
    return recorder.image_urls()


def _file_path(url: str) -> Path:
    parsed = urlparse(url)
    assert parsed.scheme == "file"
    return Path(unquote(parsed.path))


async def test_file_urls_only_for_models_that_declare_local_media(recorder: Recorder, blobs: BlobStore) -> None:
    photo = _jpeg(64, 48)
    ref = blobs.put(photo)
    [url] = await _send(recorder, blobs, {}, [ref])
    assert url.startswith("data:image/jpeg;base64,") and base64.b64decode(url.split(",", 1)[1]) == photo
    recorder.bodies.clear()
    [url] = await _send(recorder, blobs, {"local_media": True}, [ref])
    path = _file_path(url)
    # the original blob itself, inside the blob store: nothing was base64-encoded
    assert path == blobs.path(ref).resolve() and path.is_relative_to(blobs.root.resolve())


async def test_file_urls_of_reencoded_images_name_new_blobs_in_the_store(recorder: Recorder,
                                                                         blobs: BlobStore) -> None:
    ref = blobs.put(_jpeg(80, 60))
    [url] = await _send(recorder, blobs, {"local_media": True}, [ref], profile="png_smart")
    path = _file_path(url)
    assert path.is_relative_to(blobs.root.resolve()) and path != blobs.path(ref).resolve()
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and path.name == blobs.put(data)  # content-addressed


async def test_sim_refuses_file_urls_without_or_outside_the_allowed_root(tmp_path: Path, blobs: BlobStore) -> None:
    ref = blobs.put(_jpeg(32, 32))
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(_jpeg(32, 32, seed=1))
    escape = blobs.root / "link.jpg"
    os.symlink(outside, escape)
    cases = [(None, blobs.path(ref).as_uri(), "without --allowed-local-media-path"),
             (blobs.root, outside.as_uri(), "must be a subpath"),
             (blobs.root, escape.as_uri(), "must be a subpath"),  # a symlink out of the root
             (blobs.root, (blobs.root / "missing.jpg").as_uri(), "does not exist"),
             (blobs.root, blobs.path(ref).as_uri(), None)]
    for root, url, refusal in cases:
        sim = SimServer([SimModel("m", policy="direct")], allowed_local_media_path=root)
        await sim.start()
        provider = OpenAICompatProvider(sim.base_url, "m")
        body = {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "hi"}]}]}
        try:
            session = provider._get_session()
            async with session.post(f"{sim.base_url}/chat/completions", data=orjson.dumps(body)) as resp:
                text = await resp.text()
                if refusal is None:
                    assert resp.status == 200, text
                else:
                    assert resp.status == 400 and refusal in text and len(text) < 1000
        finally:
            await provider.close()
            await sim.stop()


async def test_concurrent_first_requests_share_one_base64(blobs: BlobStore) -> None:
    ref = blobs.put(_jpeg(400, 300))
    enc = ImageEncoder(blobs)
    try:
        urls = await asyncio.gather(*(enc.image_url(ref, "original") for _ in range(32)))
        assert enc.stats.misses == 1
        assert all(u is urls[0] for u in urls)  # one object shared by every request, not 32 copies
    finally:
        enc.close()


async def test_processor_resize_sends_what_the_model_will_see(recorder: Recorder, blobs: BlobStore) -> None:
    big, small = _jpeg(900, 600), _jpeg(200, 150, seed=2)
    refs = [blobs.put(big), blobs.put(small)]
    spec = {"image_resize": {"processor": "qwen2_5_vl", "max_pixels": 200_000}}
    urls = await _send(recorder, blobs, spec, refs)
    sizes = [Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))).size for u in urls]
    h, w = smart_resize(600, 900, factor=28, min_pixels=3136, max_pixels=200_000)
    assert sizes[0] == (w, h) and w * h <= 200_000 and w % 28 == 0 and h % 28 == 0
    # an image the processor keeps goes byte for byte as it was
    assert base64.b64decode(urls[1].split(",", 1)[1]) == small
    # without the switch nothing is resized
    recorder.bodies.clear()
    urls = await _send(recorder, blobs, {}, refs[:1])
    assert base64.b64decode(urls[0].split(",", 1)[1]) == big


def test_image_resize_config_is_checked() -> None:
    assert processor_resize("qwen3_vl") is not None and processor_resize(None) is None
    resolved = processor_resize({"processor": "qwen2_5_vl", "max_pixels": 1_003_520})
    assert resolved is not None and (resolved.factor, resolved.max_pixels) == (28, 1_003_520)
    for bad, reason in [("qwen9", "unknown processor"), ({"factor": 28}, "min_pixels"),
                        ({"processor": "qwen2_vl", "max_pixel": 5}, "unknown keys"),
                        ({"processor": "qwen2_vl", "min_pixels": 10, "max_pixels": 5}, "exceeds")]:
        with pytest.raises(ModelConfigError, match=reason):
            image_resolver(None, spec=EndpointSpec.of("m", {"provider": "sim", "image_resize": bad}))


async def test_local_media_and_image_resize_end_to_end_with_the_sim(tmp_path: Path) -> None:
    """The demo suite against a sim that reads file:// images only from the run's blob store:
    answers are right only if the sim read the crops; the manifest records the resize switch."""
    run_dir = tmp_path / "run"
    (run_dir / "blobs").mkdir(parents=True)
    sim = SimServer([SimModel("sim-tools", policy="tools")], allowed_local_media_path=run_dir / "blobs")
    await sim.start()
    cfg = {"seeds": [0],
           "models": [{"name": "local", "provider": "openai", "base_url": sim.base_url, "model": "sim-tools",
                       "local_media": True, "image_resize": {"processor": "qwen2_5_vl", "max_pixels": 1_003_520}}],
           "suites": [{"name": "demo", "options": {"n_tasks": 4, "image_size": [320, 240]},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"],
                                     "max_rounds": 6}]}]}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    try:
        res = await run_sweep(load_config(path), RunOptions(run_dir=run_dir, progress=False))
    finally:
        await sim.stop()
    assert (res.ok, res.errors) == (4, 0)
    recs = [orjson.loads(line) for line in (run_dir / "records.jsonl").read_bytes().splitlines()]
    assert all(r["score"] == 1.0 for r in recs)
    assert sim.local_media_images >= 4 * 4  # every request carried its images as file:// URLs
    manifest = read_manifest(run_dir)
    assert manifest is not None
    assert manifest["image_resize"] == {"local": {"name": "qwen2_5_vl", "factor": 28, "min_pixels": 3136,
                                                  "max_pixels": 1_003_520}}


async def test_a_refused_file_url_is_a_clear_error_not_a_retry_storm(tmp_path: Path, blobs: BlobStore) -> None:
    ref = blobs.put(_jpeg(32, 32))
    sim = SimServer([SimModel("m", policy="direct")])  # no allowed local media path
    await sim.start()
    encoder = ImageEncoder(blobs)
    ep = EndpointSpec.of("m", {"provider": "sim", "local_media": True, "retry": {"max_attempts": 3}})
    client = build_client("m", ep, sim_base_url=sim.base_url, resolver=image_resolver(encoder, spec=ep))
    client.retry = RetryPolicy(max_attempts=3, base_delay_s=0.01)
    try:
        with pytest.raises(ProviderError) as err:
            await client.chat(ChatRequest(messages=[{"role": "user", "content": [{"type": "image", "image": ref}]}]))
        assert err.value.kind == "fatal" and "allowed-local-media-path" in str(err.value)
        assert client.stats.requests == 1
    finally:
        await client.close()
        encoder.close()
        await sim.stop()


def test_image_keys_are_declared_in_the_strict_config(tmp_path: Path) -> None:
    model = {"name": "m", "provider": "vllm", "base_url": "http://127.0.0.1:9/v1", "local_media": True,
             "image_resize": {"processor": "qwen2_5_vl", "max_pixels": 1_003_520}, "limits": {"max_body_mb": 256}}
    cfg = {"models": [model], "suites": [{"name": "demo", "options": {"n_tasks": 1}}]}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert load_config(path).models[0].images.local_media is True
    model["image_resise"] = "qwen2_5_vl"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="image_resize"):
        load_config(path)
