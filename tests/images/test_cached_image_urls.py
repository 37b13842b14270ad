"""Once an image is encoded, later requests take its URL from the cache without a coroutine, and a
request body built that way is the same bytes as one built through the awaited path."""

from __future__ import annotations

from pathlib import Path

import pyvips

from fasteval.config.endpoint import EndpointSpec
from fasteval.engine.run.clients import image_resolver
from fasteval.images import ImageEncoder
from fasteval.runfolder.blobs import BlobStore
from providers.base import ChatRequest
from providers.openai_compat import OpenAICompatProvider


def _png(side: int) -> bytes:
    image = (pyvips.Image.xyz(side, side)[0] * 7 % 256).cast("uchar").bandjoin([0, 128])
    data: bytes = image.write_to_buffer(".png")
    return data


async def test_cached_urls_are_the_awaited_urls_and_only_after_encoding(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    ref = blobs.put(_png(200))
    encoder = ImageEncoder(blobs)
    try:
        for spec in ({}, {"local_media": True}):
            urls = image_resolver(encoder, spec=EndpointSpec.of("m", {"provider": "sim", **spec}))
            assert urls.cached(ref, "original") is None  # nothing is computed by asking
            url = await urls(ref, "original")
            assert urls.cached(ref, "original") is url
            assert urls.cached(ref, "jpeg85") is None  # another profile is another URL
            assert url.startswith(b"file://" if spec else b"data:image/png;base64,")
    finally:
        encoder.close()


async def test_bodies_from_cached_urls_match_the_awaited_path(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    small, large = blobs.put(_png(24)), blobs.put(_png(300))  # one serialised inline, one shared
    encoder = ImageEncoder(blobs)
    urls = image_resolver(encoder)

    async def awaited_only(ref: str, profile: str) -> bytes:  # a resolver with no cache to read
        return await urls(ref, profile)

    fast = OpenAICompatProvider("http://127.0.0.1:9/v1", "m", image_resolver=urls)
    slow = OpenAICompatProvider("http://127.0.0.1:9/v1", "m", image_resolver=awaited_only)
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "image": large},
                                             {"type": "image", "image": small}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "image", "image": small}, {"type": "text", "text": "and"}]}]
    try:
        request = ChatRequest(messages=messages, seed=1)
        first = b"".join(await fast.build_body(request))  # encodes: the awaited path
        assert urls.cached(large, "original") is not None
        again = b"".join(await fast.build_body(request))  # every URL from the cache
        reference = b"".join(await slow.build_body(request))
        assert first == again == reference
        assert again.count(b"data:image/png;base64,") == 3 and b'"type":"image"' not in again
    finally:
        await fast.close()
        await slow.close()
        encoder.close()
