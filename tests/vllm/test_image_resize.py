"""``image_resize: auto`` against the real server: the pre-resized image costs the prompt tokens the
original does (the server's resize became a no-op), for sizes up to 8K, with fewer bytes on the wire."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pyvips

from fasteval.images import ImageEncoder
from fasteval.images.processor import processor_from_checkpoint
from fasteval.runfolder.blobs import BlobStore
from tests.vllm.conftest import env, fasteval, vlm_serve_block, wait_for, write_sweep

SIZES = [(300, 200), (1000, 700), (700, 1300), (4000, 500), (2048, 1536), (4000, 3000), (8192, 4608)]


def noisy_png(width: int, height: int) -> bytes:
    """A photo-like image (noise compresses badly, as photos do), with one red square."""
    img = pyvips.Image.gaussnoise(width, height, mean=150, sigma=30).cast("uchar").bandjoin([150, 150][:2])
    img = img.draw_rect([220, 30, 30], width // 3, height // 3, max(8, width // 40), max(8, height // 40), fill=True)
    return bytes(img.write_to_buffer(".png"))


def chat(base: str, url: bytes) -> tuple[dict[str, Any], float, int]:
    """(usage, seconds to the one-token reply, request bytes) for one image and a question."""
    body = b"".join([b'{"model": "tiny", "max_tokens": 1, "temperature": 0, "messages": [{"role": "user", '
                     b'"content": [{"type": "image_url", "image_url": {"url": "', url,
                     b'"}}, {"type": "text", "text": "What colour is the mark in [300, 300, 400, 400]?"}]}]}'])
    req = urllib.request.Request(f"{base}/chat/completions", data=body, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as resp:
        doc = orjson.loads(resp.read())
    return doc["usage"], time.perf_counter() - start, len(body)


def test_auto_resized_images_cost_the_tokens_of_the_originals(tmp_path: Path, vllm: str, vlm_checkpoint: Path) -> None:
    config = write_sweep(tmp_path, vlm_serve_block(vlm_checkpoint, vllm, images=2), [{"id": "x", "prompt": "x"}])
    run_dir = tmp_path / "serve"
    proc = subprocess.Popen(fasteval("serve", str(config), "--model", "tiny", "--run-dir", str(run_dir)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().split(": ", 1)[1].split()[0]  # "tiny-0: URL (cpus ..., log ...)"

        def ready() -> bool:
            path = run_dir / "servers" / "tiny-0.json"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            return path.exists() and orjson.loads(path.read_bytes())["state"] == "ready"

        wait_for(ready, 900, "the server")
        rule = processor_from_checkpoint(vlm_checkpoint)
        blobs = BlobStore(tmp_path / "blobs")
        encoder = ImageEncoder(blobs)
        figures = []
        try:
            for w, h in SIZES:
                ref = blobs.put(noisy_png(w, h))
                original = asyncio.run(encoder.image_url(ref, "original"))
                resized = asyncio.run(encoder.image_url(ref, "original", processor=rule))
                plain, plain_s, plain_bytes = chat(base, original)
                auto, auto_s, auto_bytes = chat(base, resized)
                assert auto["prompt_tokens"] == plain["prompt_tokens"], (w, h, plain, auto)
                assert max(w, h) <= 128 or auto_bytes < plain_bytes, (w, h)  # shrunk where the server shrinks
                figures.append(f"{w}x{h}: {plain['prompt_tokens']} tokens, {plain_bytes / 1e6:.2f} -> "
                               f"{auto_bytes / 1e6:.3f} MB, {plain_s:.2f} -> {auto_s:.2f} s to the first token")
        finally:
            encoder.close()
        print("\n".join(figures))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
