"""Images on native wires: split our data URLs into (media type, base64) and sniff bytes.

The image resolver hands every provider a ``data:<mime>;base64,<data>`` string (encoded once,
shared by all requests). Anthropic and Gemini want the media type and the base64 text apart,
and accept only some formats; a mismatch is rejected by the real APIs, so we check it here
and fail the job with a readable reason instead of burning retries on a 400.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from providers.base import ProviderError

if TYPE_CHECKING:
    from providers.openai_compat import ImageResolver

NATIVE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def split_data_url(url: str, provider: str, accepted: frozenset[str] = NATIVE_MEDIA_TYPES) -> tuple[str, str]:
    """``(media_type, base64_text)`` of a data URL; bad_input when the provider cannot take it."""
    head, sep, data = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise ProviderError("bad_input", f"{provider} needs inline base64 images, got {url[:40]!r}")
    mime = head[5:-7].lower()
    if mime not in accepted:
        raise ProviderError("bad_input", f"{provider} does not accept {mime} images; set the setting's "
                            f"image_profile to jpeg85 or png_smart")
    return mime, data


def sniff_media_type(data: bytes) -> str | None:
    """The media type the bytes really are (JPEG, PNG, GIF, WebP), or None."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def sniff_base64(text: str) -> str | None:
    """Sniff the media type of base64 text from its first bytes only (no full decode)."""
    try:
        head = base64.b64decode(text[:64], validate=True)
    except (ValueError, TypeError):
        return None
    return sniff_media_type(head)


def object_args(arguments: str) -> dict[str, Any]:
    """Tool-call arguments as the object native APIs require; anything that is not one becomes {}."""
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class ImageParts:
    """A provider's image parts by ``(ref, profile)``, each built once from the resolver's data URL.

    Bounded: past 4096 entries it starts over (the encoder keeps the shared strings anyway). A
    part ``build`` refuses (a ProviderError) is not kept."""

    def __init__(self, build: Callable[[str], dict[str, Any]]) -> None:
        self._build = build
        self._parts: dict[tuple[str, str], dict[str, Any]] = {}

    async def get(self, resolver: ImageResolver | None, ref: str, profile: str) -> dict[str, Any]:
        part = self._parts.get((ref, profile))
        if part is None:
            if resolver is None:
                raise ProviderError("fatal", "request holds images but no image resolver is set")
            part = self._build(await resolver(ref, profile))
            if len(self._parts) > 4096:
                self._parts.clear()
            self._parts[(ref, profile)] = part
        return part
