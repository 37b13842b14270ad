"""What an open model's image processor will do to an image, so we send no pixels it throws away.

Qwen-VL servers resize every image with ``smart_resize`` (sides multiples of patch x merge,
area within [min_pixels, max_pixels]) before the vision encoder sees it. A 6944x9280 page sent
as is costs encoding, base64, transfer and server decoding, only to be shrunk to ~1 MP. With a
model's ``image_resize`` switch we downsize to exactly the processor's target first; an image
already in range is left alone (the server's own resize of it is then a no-op or a rounding).

It is a fidelity switch, not a silent default: our resampling (libvips lanczos3) is not the
server's (PIL bicubic), so pixels differ slightly. The resolved values are recorded in the
run manifest and the config hash covers the switch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from fasteval.images.decode import ImageError
from fasteval.images.ops import smart_resize

_SHRINK_AT_MOST = 0.9


@dataclass(slots=True, frozen=True)
class ProcessorResize:
    """One processor's resize rule: Qwen's smart_resize with these parameters."""

    name: str
    factor: int
    min_pixels: int
    max_pixels: int

    def target(self, width: int, height: int) -> tuple[int, int] | None:
        """(width, height) to send, or None when the image should go as it is.

        Only a real shrink is applied (at most 90% of the pixels): sending an image the server
        will enlarge costs fewer bytes than enlarging it ourselves, and re-encoding to save a
        rounding to the patch grid would cost more than it saves.
        """
        try:
            h, w = smart_resize(height, width, factor=self.factor, min_pixels=self.min_pixels,
                                max_pixels=self.max_pixels)
        except ImageError:
            return None  # an aspect ratio the server refuses: let it say so
        if w * h > _SHRINK_AT_MOST * width * height:
            return None
        return w, h

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# From the models' preprocessor configs: patch 14 x merge 2 for Qwen2/2.5-VL, 16 x 2 for Qwen3-VL.
PROCESSOR_PRESETS: dict[str, ProcessorResize] = {
    "qwen2_vl": ProcessorResize("qwen2_vl", 28, 56 * 56, 28 * 28 * 1280),
    "qwen2_5_vl": ProcessorResize("qwen2_5_vl", 28, 56 * 56, 12_845_056),
    "qwen3_vl": ProcessorResize("qwen3_vl", 32, 65_536, 16_777_216),
}


def processor_resize(value: Any) -> ProcessorResize | None:
    """Parse a model's ``image_resize`` entry: a preset name, or a mapping with ``processor``
    (a preset, optional) and ``factor`` / ``min_pixels`` / ``max_pixels`` overrides
    (e.g. vLLM's ``--mm-processor-kwargs '{"max_pixels": ...}'``). Raises ValueError naming
    what is wrong."""
    if value is None or value is False:
        return None
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
        raise ValueError(f"image_resize: unknown processor {name!r}; known: {', '.join(PROCESSOR_PRESETS)}")
    base = PROCESSOR_PRESETS[name] if name else None
    nums: dict[str, int] = {}
    for key in ("factor", "min_pixels", "max_pixels"):
        raw = value.get(key, getattr(base, key) if base else None)
        if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
            raise ValueError(f"image_resize: {key} must be a positive integer"
                             + ("" if base else " (or name a processor preset)") + f", got {raw!r}")
        nums[key] = raw
    if nums["min_pixels"] > nums["max_pixels"]:
        raise ValueError(f"image_resize: min_pixels {nums['min_pixels']} exceeds max_pixels {nums['max_pixels']}")
    return ProcessorResize(name or "custom", nums["factor"], nums["min_pixels"], nums["max_pixels"])
