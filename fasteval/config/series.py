"""A training run's checkpoints as one model entry: a series, expanded at load time.

A model entry whose ``serve.model`` is a glob (``/ckpts/run7/global_step_*``), or that carries a
``checkpoints:`` block, names every checkpoint a trainer wrote. It becomes one served model per
checkpoint, named ``<entry>@<step>``, in step order (``order: newest_first`` reverses it), so GPU
scheduling evaluates the run from its first step on. The config as written (the glob, not the
folders it matched) is what the manifest stores and the hash covers: a checkpoint that lands
later does not change the config, it only adds jobs, and resume runs exactly those.

The step is read from the folder names trainers write: HF Trainer ``checkpoint-N``, verl
``global_step_N`` (its HF files in ``actor/huggingface``), Megatron ``iter_000N``, and plain
``step-N`` / ``step_N``. When the checkpoints are LoRA adapters (``checkpoints.glob`` names them,
``serve.model`` their base), the sweep serves the base once with every adapter on it. A folder the glob matches that vLLM could not load is a config error
naming the folder and why (a missing weight file its index names, verl's config-only
``huggingface/`` folder, a Megatron distributed checkpoint); watch mode instead waits for it.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.options import Opt

CHECKPOINT_OPTIONS: dict[str, Opt] = {
    "glob": Opt("str", "checkpoint folders (default: serve.model, which may itself be a glob); relative to the config"),
    "every": Opt("int", "only steps that are multiples of this"),
    "last": Opt("int", "only the newest N checkpoints"),
    "min_step": Opt("int", "only steps at or above this"),
    "max_step": Opt("int", "only steps at or below this"),
    "order": Opt("str", "serve in step order (default) or newest first", choices=("step", "newest_first")),
    "marker": Opt("str", "watch mode: a checkpoint is complete once this file exists in its folder"),
}
"""The ``checkpoints:`` block of a model entry (checked by the strict config validator)."""

# ASCII digits only, the whole name (``fullmatch``): ``\d`` takes ``checkpoint-٣`` as step 3 and
# ``$`` a name ending in a newline; a trainer writes neither.
_STEP_NAMES = (re.compile(r"checkpoint-([0-9]+)"), re.compile(r"global_step_([0-9]+)"),
               re.compile(r"iter_([0-9]+)"), re.compile(r"step[-_]([0-9]+)"))
_HF_PLACES = ("", "actor/huggingface", "huggingface")
"""Where a step folder keeps its HF files: itself (HF Trainer), or verl's ``actor/huggingface``."""
_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
_WEIGHTS = ("*.safetensors", "*.bin")
_GLOB_CHARS = re.compile(r"[*?\[]")
SERIES_SEP = "@"


class SeriesError(ValueError):
    """A series that cannot be expanded (no checkpoint, a step that is not in a folder's name)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint of a series: its step, the folder the glob matched, and its HF files."""

    step: int
    folder: Path
    model_dir: Path
    adapter: bool = False
    """A LoRA adapter of the entry's ``serve.model`` (one server for the whole series)."""


@dataclass(frozen=True, slots=True)
class SeriesSpec:
    """A series entry, typed: where its checkpoints are and which of them to evaluate."""

    name: str
    pattern: str
    every: int | None = None
    last: int | None = None
    min_step: int | None = None
    max_step: int | None = None
    newest_first: bool = False
    marker: str | None = None

    @classmethod
    def of(cls, entry: dict[str, Any], base: Path) -> SeriesSpec | None:
        """The series an entry names, or None for a plain entry (one model)."""
        block = entry.get("checkpoints")
        serve = entry.get("serve")
        model = str(serve.get("model") or "") if isinstance(serve, dict) else ""
        if not isinstance(block, dict) and not _GLOB_CHARS.search(model):
            return None
        block = block if isinstance(block, dict) else {}
        pattern = str(block.get("glob") or model)
        if pattern and not Path(pattern).expanduser().is_absolute():
            pattern = str(base / pattern)
        return cls(name=str(entry.get("name")), pattern=str(Path(pattern).expanduser()), every=block.get("every"),
                   last=block.get("last"), min_step=block.get("min_step"), max_step=block.get("max_step"),
                   newest_first=block.get("order") == "newest_first", marker=block.get("marker"))

    def wanted(self, step: int) -> bool:
        """Whether a step passes the block's step filters (``last`` is applied to the whole list)."""
        return ((self.every is None or step % self.every == 0)
                and (self.min_step is None or step >= self.min_step)
                and (self.max_step is None or step <= self.max_step))

    def candidates(self) -> list[tuple[int, Path]]:
        """(step, folder) of every folder the glob matches that passes the filters, in step order."""
        found: dict[int, Path] = {}
        for hit in sorted(glob.glob(self.pattern)):
            folder = Path(hit)
            if not folder.is_dir():
                continue
            step = step_of(folder)
            if step is None:
                raise SeriesError(f"series {self.name}: no step in the folder name {str(folder)!r} (expected "
                                  "checkpoint-N, global_step_N, iter_N, step-N or step_N)")
            if step in found:
                raise SeriesError(f"series {self.name}: step {step} matched twice ({found[step]} and {folder})")
            if self.wanted(step):
                found[step] = folder
        steps = sorted(found)
        if self.last is not None:
            steps = steps[-self.last:] if self.last > 0 else []
        return [(s, found[s]) for s in steps]


def step_of(folder: Path) -> int | None:
    """The training step in a checkpoint folder's name, or in its parents' (``global_step_N/actor``)."""
    for part in reversed(folder.parts):
        for pattern in _STEP_NAMES:
            m = pattern.fullmatch(part)
            if m:
                return int(m.group(1))
    return None


def hf_folder(folder: Path) -> Path:
    """The folder that holds a step's HF files (config or adapter config), else the folder itself."""
    for place in _HF_PLACES:
        candidate = folder / place if place else folder
        if (candidate / "config.json").is_file() or (candidate / "adapter_config.json").is_file():
            return candidate
    return folder


def weight_files(model_dir: Path) -> tuple[list[Path], list[str]]:
    """(weight files present, names an index file lists that are missing)."""
    for index in _INDEXES:
        path = model_dir / index
        if path.is_file():
            try:
                names = sorted(set(orjson.loads(path.read_bytes()).get("weight_map", {}).values()))
            except (orjson.JSONDecodeError, AttributeError, OSError) as e:
                return [], [f"{index} (unreadable: {e})"]
            present = [model_dir / n for n in names if (model_dir / n).is_file()]
            return present, [n for n in names if not (model_dir / n).is_file()]
    return sorted(p for pattern in _WEIGHTS for p in model_dir.glob(pattern) if p.is_file()), []


def not_loadable(folder: Path) -> str | None:
    """Why vLLM could not load this checkpoint folder (None: it looks complete)."""
    model_dir = hf_folder(folder)
    if (model_dir / "adapter_config.json").is_file() and not (model_dir / "config.json").is_file():
        if not any((model_dir / f"adapter_model{s}").is_file() for s in (".safetensors", ".bin")):
            return "a LoRA adapter folder without adapter_model.safetensors"
        return None
    if not (model_dir / "config.json").is_file():
        if any(folder.glob("mp_rank_*")) or any(folder.glob("*.distcp")):
            return "a Megatron/torch distributed checkpoint, not HF files: convert it to HF format first"
        if any(folder.glob("**/model_world_size_*_rank_*.pt")):
            return "verl's sharded FSDP files only: merge them with `python -m verl.model_merger merge`"
        return "no config.json (not an HF checkpoint folder)"
    present, missing = weight_files(model_dir)
    if missing:
        return f"{len(missing)} weight file(s) its index names are missing (first: {missing[0]})"
    if not present:
        if (model_dir.parent / "fsdp_config.json").is_file() or model_dir.name == "huggingface":
            return ("verl saved config and tokenizer only: add 'hf_model' to checkpoint.save_contents, "
                    "or merge the shards with `python -m verl.model_merger merge`")
        return "no weight files (*.safetensors, *.bin)"
    return None


_MID_SAVE = ("no config.json (not an HF checkpoint folder)", "weight file(s) its index names are missing",
             "no weight files", "a LoRA adapter folder without")
"""What ``not_loadable`` says of a folder a save is still filling (the other reasons are formats vLLM
cannot load, which waiting does not cure)."""


def unfinished(spec: SeriesSpec, folder: Path, why: str | None, newest: bool) -> str | None:
    """Why a matched folder looks like a step its trainer is still writing (None: it does not).

    With a ``marker``, any folder without the marker file: a plain run never serves a step its
    trainer has not marked done, as watch mode does not. Without one, only the newest step, and only
    when it lacks what a save in progress lacks (its config, weight files): trainers save in step
    order, so an older incomplete step is broken, not unfinished, and stays a config error.
    """
    if spec.marker is not None and not (folder / spec.marker).exists():
        return f"no {spec.marker} yet (its trainer has not marked it done)"
    if spec.marker is None and newest and why is not None and any(m in why for m in _MID_SAVE):
        return f"{why}: taken for a step still being written"
    return None


def expand_series(spec: SeriesSpec, entry: dict[str, Any], ready: Callable[[Path], str | None] | None = None,
                  ) -> tuple[list[Checkpoint], list[str], list[str]]:
    """The checkpoints to evaluate, one line per matched folder that cannot be served (and why), and
    one per folder skipped as still being written (``unfinished``), each ``"<folder>: <why>"``.

    ``ready`` is watch mode's completeness test (sizes stable, a marker file): what it refuses
    waits, so nothing is refused. Without it (a plain run, ``config check``) a folder is served when
    it is loadable, skipped when ``unfinished``, else refused.
    """
    taken: list[Checkpoint] = []
    refused: list[str] = []
    waiting: list[str] = []
    found = spec.candidates()
    newest = max((step for step, _ in found), default=None)
    for step, folder in found:
        why = ready(folder) if ready is not None else not_loadable(folder)
        held = unfinished(spec, folder, why, step == newest) if ready is None else None
        if held is not None:
            waiting.append(f"{folder}: {held}")
        elif why is None:
            model_dir = hf_folder(folder).resolve()
            taken.append(Checkpoint(step, folder.resolve(), model_dir, adapter=is_adapter(model_dir)))
        elif ready is not None:
            waiting.append(f"{folder}: {why}")
        else:
            refused.append(f"{folder}: {why}")
    if taken and any(c.adapter for c in taken):
        base = str((entry.get("serve") or {}).get("model") or "")
        if not all(c.adapter for c in taken):
            raise SeriesError(f"series {spec.name}: LoRA adapters and full checkpoints in one series")
        if _GLOB_CHARS.search(base) or base == spec.pattern:
            raise SeriesError(f"series {spec.name}: these are LoRA adapters: name the base model in serve.model "
                              "and the adapters in checkpoints.glob")
        _check_lora_placeholder(spec, entry, taken)
    if spec.newest_first:
        taken.reverse()
    return taken, refused, waiting


def _check_lora_placeholder(spec: SeriesSpec, entry: dict[str, Any], adapters: list[Checkpoint]) -> None:
    """``{lora_modules}`` in a ``serve.command`` is ``name=path,name=path``: a path holding ',' or '='
    (``/ckpts/lr=1e-4,bs=32/checkpoint-100``) would reach the server as other adapters. Refused here,
    naming the folder; vLLM's own command (no ``serve.command``) passes such paths in its JSON form."""
    command = (entry.get("serve") or {}).get("command")
    if not isinstance(command, list) or not any("{lora_modules}" in str(part) for part in command):
        return
    for c in adapters:
        if "," in str(c.model_dir) or "=" in str(c.model_dir):
            raise SeriesError(f"series {spec.name}: the adapter folder {str(c.model_dir)!r} holds ',' or '=', which "
                              "{lora_modules} (name=path,...) cannot carry: rename or link the folder, or drop "
                              "serve.command (vLLM's default command passes it as JSON)")


def is_adapter(model_dir: Path) -> bool:
    """A PEFT LoRA adapter folder (served on its base model), not a full checkpoint."""
    return (model_dir / "adapter_config.json").is_file() and not (model_dir / "config.json").is_file()


def series_entry(entry: dict[str, Any], ckpt: Checkpoint) -> dict[str, Any]:
    """The model entry of one checkpoint: its own name, server folder and cache identity."""
    name = f"{entry['name']}{SERIES_SEP}{ckpt.step}"
    out = {k: v for k, v in entry.items() if k != "checkpoints"}
    out["name"] = name
    if ckpt.adapter:  # the base stays; the sweep serves every adapter of the series on one server
        out["serve"] = {**entry["serve"], "lora_modules": {name: str(ckpt.model_dir)}}
    else:
        out["serve"] = {**entry["serve"], "model": str(ckpt.model_dir)}
    if entry.get("endpoint_id"):
        out["endpoint_id"] = f"{entry['endpoint_id']}{SERIES_SEP}{ckpt.step}"
    return out


def series_of(model: str) -> tuple[str, int] | None:
    """(series, step) of a model name ``run7@2000``, or None for a model outside any series."""
    head, sep, tail = model.rpartition(SERIES_SEP)
    return (head, int(tail)) if sep and head and tail.isascii() and tail.isdigit() else None
