"""What an open model's image processor will do to an image, so we send no pixels it throws away.

Qwen-VL servers resize every image with ``smart_resize`` (sides multiples of patch x merge,
area within [min_pixels, max_pixels]) before the vision encoder sees it. A 6944x9280 page sent
as is costs encoding, base64, transfer and server decoding, only to be shrunk to ~1 MP. With a
model's ``image_resize`` switch we downsize to exactly the processor's target first; an image
already in range is left alone (the server's own resize of it is then a no-op or a rounding).

Idefics3 / SmolVLM processors instead scale every image so its longest edge is ``size.longest_edge``
(then cut it into tiles of ``max_image_size``); we shrink to that same size, rounded as they
round, so the server's resize is a no-op and the tile count (the prompt tokens) is unchanged.

``image_resize: auto`` reads the rule from the served checkpoint's own ``preprocessor_config.json``
(``processor_from_checkpoint``) instead of asking the user to name a preset.

It is a fidelity switch, not a silent default: our resampling (libvips lanczos3) is not the
server's (PIL bicubic), so pixels differ slightly. The resolved values are recorded in the
run manifest and the config hash covers the switch.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fasteval.images.decode import ImageError
from fasteval.images.ops import smart_resize

_SHRINK_AT_MOST = 0.9


@dataclass(slots=True, frozen=True)
class ProcessorResize:
    """One processor's resize rule: Qwen's smart_resize with these parameters, or (``longest_edge``
    set) Idefics3's scale of the longest edge to exactly that many pixels."""

    name: str
    factor: int
    min_pixels: int
    max_pixels: int
    longest_edge: int | None = None

    def target(self, width: int, height: int) -> tuple[int, int] | None:
        """(width, height) to send, or None when the image should go as it is.

        Only a real shrink is applied (at most 90% of the pixels): sending an image the server
        will enlarge costs fewer bytes than enlarging it ourselves, and re-encoding to save a
        rounding to the patch grid would cost more than it saves.
        """
        if self.longest_edge is not None:
            h, w = longest_edge_size(height, width, self.longest_edge)
            return (w, h) if w * h <= _SHRINK_AT_MOST * width * height else None
        try:
            h, w = smart_resize(height, width, factor=self.factor, min_pixels=self.min_pixels,
                                max_pixels=self.max_pixels)
        except ImageError:
            return None  # an aspect ratio the server refuses: let it say so
        if w * h > _SHRINK_AT_MOST * width * height:
            return None
        return w, h

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


# From the models' preprocessor configs: patch 14 x merge 2 for Qwen2/2.5-VL, 16 x 2 for Qwen3-VL.
PROCESSOR_PRESETS: dict[str, ProcessorResize] = {
    "qwen2_vl": ProcessorResize("qwen2_vl", 28, 56 * 56, 28 * 28 * 1280),
    "qwen2_5_vl": ProcessorResize("qwen2_5_vl", 28, 56 * 56, 12_845_056),
    "qwen3_vl": ProcessorResize("qwen3_vl", 32, 65_536, 16_777_216),
}


_MAX_IMAGE_SIZE = 4096
"""Idefics3's absolute cap on a side after its longest-edge scale (transformers' MAX_IMAGE_SIZE)."""


def longest_edge_size(height: int, width: int, longest_edge: int) -> tuple[int, int]:
    """(height, width) Idefics3's processor scales an image to: the longest edge to ``longest_edge``,
    the other by the aspect ratio truncated and rounded up to even, then under 4096 a side.
    Sent at this size, the processor computes the same size again (no resize, same tiles)."""
    aspect = width / height
    if width >= height:
        width, height = longest_edge, int(longest_edge / aspect)
        height += height % 2
    else:
        height, width = longest_edge, int(longest_edge * aspect)
        width += width % 2
    height, width = max(height, 1), max(width, 1)
    aspect = width / height
    if width >= height and width > _MAX_IMAGE_SIZE:
        width, height = _MAX_IMAGE_SIZE, int(_MAX_IMAGE_SIZE / aspect)
    elif height > width and height > _MAX_IMAGE_SIZE:
        height, width = _MAX_IMAGE_SIZE, int(_MAX_IMAGE_SIZE * aspect)
    return max(height, 1), max(width, 1)


_LONGEST_EDGE_PROCESSORS = ("Idefics3ImageProcessor", "SmolVLMImageProcessor")
_SMART_RESIZE_PROCESSORS = ("Qwen2VLImageProcessor", "Qwen2_5_VLImageProcessor", "Qwen3VLImageProcessor")


def processor_from_checkpoint(folder: Path) -> ProcessorResize:
    """The resize rule a checkpoint's own ``preprocessor_config.json`` describes (``image_resize: auto``),
    or the ``image_processor`` of its ``processor_config.json`` (where transformers 5 saves it).

    Idefics3 / SmolVLM: ``size.longest_edge`` (``max_image_size.longest_edge`` when it does not
    split images). Qwen2/2.5/3-VL: ``patch_size`` x ``merge_size`` and ``min_pixels`` /
    ``max_pixels`` (or ``size.shortest_edge`` / ``size.longest_edge``, newer transformers' names).
    Raises ValueError naming what is missing or unknown.
    """
    path = folder / "preprocessor_config.json"
    nested = folder / "processor_config.json"
    if not path.exists() and nested.exists():
        path = nested  # transformers 5 saves the image processor inside the processor's config
    try:
        cfg = json.loads(_read_small(path))
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"image_resize: auto reads {path}, which cannot be read ({e})") from None
    if isinstance(cfg, dict) and path is nested:
        cfg = cfg.get("image_processor")
    if not isinstance(cfg, dict):
        raise ValueError(f"image_resize: auto: {path} holds no image processor config")
    kind = str(cfg.get("image_processor_type", "")).removesuffix("Fast").removesuffix("Pil")
    size: dict[str, Any] = cfg["size"] if isinstance(cfg.get("size"), dict) else {}
    try:
        if kind in _LONGEST_EDGE_PROCESSORS:
            tile: dict[str, Any] = cfg["max_image_size"] if isinstance(cfg.get("max_image_size"), dict) else {}
            edge = size["longest_edge"] if cfg.get("do_image_splitting", True) else tile["longest_edge"]
            return ProcessorResize(kind, 1, 1, _MAX_IMAGE_SIZE ** 2,
                                   longest_edge=_positive(edge, "longest_edge", path, _MAX_IMAGE_SIZE))
        if kind in _SMART_RESIZE_PROCESSORS:
            factor = (_positive(cfg["patch_size"], "patch_size", path, _MAX_FACTOR)
                      * _positive(cfg.get("merge_size", 2), "merge_size", path, _MAX_FACTOR))
            low = _positive(cfg.get("min_pixels") or size["shortest_edge"], "min_pixels", path, _MAX_PIXELS)
            high = _positive(cfg.get("max_pixels") or size["longest_edge"], "max_pixels", path, _MAX_PIXELS)
            if low > high:
                raise ValueError(f"image_resize: auto: {path} has min_pixels {low} above max_pixels {high}")
            return ProcessorResize(kind, factor, low, high)
    except KeyError as e:
        raise ValueError(f"image_resize: auto: {path} ({kind}) has no {e}") from None
    known = ", ".join(_LONGEST_EDGE_PROCESSORS + _SMART_RESIZE_PROCESSORS)
    raise ValueError(f"image_resize: auto does not know the image processor {kind or '(none named)'!r} "
                     f"in {path} (known: {known}); name a preset or factor/min_pixels/max_pixels instead")


_CONFIG_MAX_BYTES = 1 << 20
"""A processor config is a few hundred bytes; past a MiB it is not one (and is not read)."""
_MAX_FACTOR = 1024
"""patch_size and merge_size (14 and 2 for Qwen2.5-VL, 16 and 2 for Qwen3-VL)."""
_MAX_PIXELS = 1 << 32
"""min_pixels and max_pixels: past four gigapixels no processor means it (Qwen3-VL's max is 2**24)."""


def _read_small(path: Path) -> str:
    """A checkpoint's config file as text: a regular file (a link to one, as the Hugging Face cache
    makes, is fine) of at most ``_CONFIG_MAX_BYTES``. A FIFO would block the load and /dev/zero
    would never end: both are refused before a byte is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > _CONFIG_MAX_BYTES:
            raise ValueError(f"{st.st_size} bytes, more than a processor config's {_CONFIG_MAX_BYTES}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(_CONFIG_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _CONFIG_MAX_BYTES:
        raise ValueError(f"more than {_CONFIG_MAX_BYTES} bytes")
    return data.decode("utf-8", "replace")


def _positive(raw: Any, key: str, path: Path | None = None, limit: int | None = None) -> int:
    """A positive integer of a checkpoint's config, and at most ``limit``: an absurd size would
    overflow the resize arithmetic (or the manifest's JSON) instead of meaning anything."""
    where = f" in {path}" if path is not None else ""
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise ValueError(f"image_resize: auto: {key} must be a positive integer, got {_brief(raw)}{where}")
    if limit is not None and raw > limit:
        raise ValueError(f"image_resize: auto: {key} {_brief(raw)}{where} is past any processor's ({limit:,} at most)")
    return raw


def _brief(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else f"<an integer of {value.bit_length()} bits>"
    return text if len(text) <= 80 else text[:77] + "..."


def processor_resize(value: Any, checkpoint: Path | None = None) -> ProcessorResize | None:
    """Parse a model's ``image_resize`` entry: a preset name, or a mapping with ``processor``
    (a preset, optional) and ``factor`` / ``min_pixels`` / ``max_pixels`` overrides
    (e.g. vLLM's ``--mm-processor-kwargs '{"max_pixels": ...}'``), or ``auto``: the rule read
    from ``checkpoint`` (a served model's local folder). Raises ValueError naming what is wrong."""
    if value is None or value is False:
        return None
    if value == "auto":
        if checkpoint is None or not checkpoint.is_dir():
            raise ValueError("image_resize: auto reads the checkpoint's preprocessor_config.json, so it needs "
                             "serve.model to be a local checkpoint folder"
                             + (f" ({checkpoint} is not one)" if checkpoint is not None else ""))
        return processor_from_checkpoint(checkpoint)
    if isinstance(value, str):
        value = {"processor": value}
    if not isinstance(value, dict):
        raise ValueError(f"image_resize must be a preset name or a mapping, got {value!r}")
    unknown = set(value) - {"processor", "factor", "min_pixels", "max_pixels"}
    if unknown:
        raise ValueError(f"image_resize: unknown keys {sorted(unknown)} "
                         "(known: processor, factor, min_pixels, max_pixels)")
    name = value.get("processor")
    if name is not None and name not in PROCESSOR_PRESETS:
        raise ValueError(f"image_resize: unknown processor {name!r}; known: auto, {', '.join(PROCESSOR_PRESETS)}")
    base = PROCESSOR_PRESETS[name] if name else None
    nums: dict[str, int] = {}
    for key in ("factor", "min_pixels", "max_pixels"):
        raw = value.get(key, getattr(base, key) if base else None)
        if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
            raise ValueError(f"image_resize: {key} must be a positive integer"
                             + ("" if base else " (or name a processor preset)") + f", got {_brief(raw)}")
        limit = _MAX_FACTOR * _MAX_FACTOR if key == "factor" else _MAX_PIXELS
        if raw > limit:
            raise ValueError(f"image_resize: {key} {_brief(raw)} is past any processor's ({limit:,} at most)")
        nums[key] = raw
    if nums["min_pixels"] > nums["max_pixels"]:
        raise ValueError(f"image_resize: min_pixels {nums['min_pixels']} exceeds max_pixels {nums['max_pixels']}")
    return ProcessorResize(name or "custom", nums["factor"], nums["min_pixels"], nums["max_pixels"])
