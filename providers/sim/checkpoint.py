"""Checkpoints the sim serves: a training run tried offline, step by step.

A real checkpoint's weights decide how the served model answers; a sim checkpoint's ``sim.json``
does: ``{"policy": "tools", "misread_rate": 0.4}``. ``python -m providers.sim --checkpoint {model}``
as a series' ``serve.command`` (docs/sim.md, "A training run on the sim") serves each step as its
folder says, so ``--watch``, the learning curve and ``compare --series`` can be tried without a
GPU or a trainer. ``python -m providers.sim.checkpoint FOLDER --misread-rate R`` plays the trainer:
it writes a folder in the HF layout a series expects (``config.json``, one ``model.safetensors``
holding no tensor), the ``sim.json``, and last the marker file a trainer writes when a save is done.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path
from typing import Any

import orjson

BEHAVIOUR_FILE = "sim.json"
BEHAVIOUR_KEYS: dict[str, type | tuple[type, ...]] = {
    "policy": str, "misread_rate": (int, float), "tool_uses": int, "latency_ms": (int, float), "seed": int}
"""What a checkpoint's ``sim.json`` may set (a served sim model's options of the same names)."""


def behaviour(folder: Path) -> dict[str, Any]:
    """The behaviour ``folder/sim.json`` names ({} without one); ValueError says what is wrong."""
    path = folder / BEHAVIOUR_FILE
    if not path.is_file():
        return {}
    try:
        found = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e})") from None
    if not isinstance(found, dict):
        raise ValueError(f"{path} must hold a JSON object")
    for key, value in found.items():
        kind = BEHAVIOUR_KEYS.get(key)
        if kind is None:
            raise ValueError(f"{path}: unknown key {key!r} (known: {', '.join(BEHAVIOUR_KEYS)})")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"{path}: {key} has the wrong type ({type(value).__name__})")
    rate = found.get("misread_rate")
    if rate is not None and not 0 <= rate <= 1:
        raise ValueError(f"{path}: misread_rate must be between 0 and 1")
    return found


def _empty_safetensors() -> bytes:
    """A valid safetensors file with no tensor: an 8-byte header length, then its JSON header."""
    header = orjson.dumps({"__metadata__": {"format": "pt", "written_by": "providers.sim.checkpoint"}})
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header


def write_checkpoint(folder: Path, behave: dict[str, Any], marker: str | None = "trainer_state.json") -> Path:
    """A checkpoint folder the sim serves as ``behave`` says; the marker file is written last."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_bytes(orjson.dumps({"model_type": "fasteval-sim"}))
    (folder / "model.safetensors").write_bytes(_empty_safetensors())
    (folder / BEHAVIOUR_FILE).write_bytes(orjson.dumps(behave, option=orjson.OPT_INDENT_2))
    behaviour(folder)  # what was asked must be what a server reads back
    if marker:
        (folder / marker).write_bytes(orjson.dumps({"trainer": "providers.sim.checkpoint"}))
    return folder


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m providers.sim.checkpoint",
                                 description="Write a checkpoint folder the sim serves (a fake trainer's save).")
    ap.add_argument("folder", help="e.g. runs/ckpts/run7/checkpoint-500")
    ap.add_argument("--policy", default="tools", help="the sim policy it answers with (default tools)")
    ap.add_argument("--misread-rate", type=float, default=0.0,
                    help="policy tools: how often it misreads what it zoomed into, 0..1 (training lowers it)")
    ap.add_argument("--tool-uses", type=int, help="policy tools: tool calls before answering off the demo task")
    ap.add_argument("--marker", default="trainer_state.json",
                    help="the file written last, as a trainer marks a save done ('' for none)")
    a = ap.parse_args()
    behave: dict[str, Any] = {"policy": a.policy, "misread_rate": a.misread_rate}
    if a.tool_uses is not None:
        behave["tool_uses"] = a.tool_uses
    try:
        print(write_checkpoint(Path(a.folder), behave, a.marker or None))
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
