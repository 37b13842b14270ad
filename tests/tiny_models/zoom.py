"""A tiny Idefics3 vision-language checkpoint that zooms before it answers: real images through vLLM.

Idefics3 (SmolVLM's architecture) is one of the vision-language models vLLM's CPU build serves
without torchvision (transformers falls back to its PIL image processor). Built on the spot,
nothing downloaded: a byte-level BPE tokenizer trained here (digits split, ``<image>`` and
Idefics3's tile tokens, the hermes tool tokens), the ChatML template both tiny checkpoints share
(``recipe.py``: content may be a list of text and image parts, tool messages included), a
SigLIP-style vision tower (hidden 64, 2 layers, patch 8 on 64 px tiles, pixel shuffle 2: 16 tokens a
tile) and a 2-layer Llama (hidden 128).
Images are resized to 128 px on the longest edge and cut into 64 px tiles plus a global view, so a
square image costs 4 + 1 tiles (about 95 prompt tokens).

The task, where a crop helps: a 512 px image of one flat grey with one small coloured square
(red, green, blue or yellow; 18-32 px, 4-8 px once the server shrinks the whole image) in one
cell of a 4 x 4 grid, and a prompt naming the cell (``What colour is the mark in row 2, column 3?``).
What it learnt, trained on the CPU for a few minutes:

* tools offered and the last message a user question: ``image_zoom_in_tool`` on that cell's box
  in 0-1000 coordinates (``[500, 250, 750, 500]``). (A first recipe named an arbitrary box by its
  four numbers, to be copied into the call: 300 steps learnt the call's form and the colours but
  copied no box right, so the box is now one of 16);
* the last message the crop (inside the tool message, or in the user message that follows it
  when tool messages carry no images): the colour's name;
* a later question in the same conversation: the same again (a second zoom, a third image).

Every conversation is rendered by the checkpoint's own chat template, then the processor
expands each ``<image>`` into its tiles: exactly what vLLM does with a chat request. The
checkpoint is cached under ``~/.cache/fasteval/tiny-models/idefics3-zoom-<key>/`` (the key and its
guard: ``recipe.py``); a few intermediate steps are kept beside it as ``checkpoint-N`` folders (whole
HF checkpoints).

    .venv-vllm/bin/python tests/tiny_models/zoom.py [--out DIR] [--steps N]
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # imported by the tests and benchmarks (the repository's root on sys.path)
    from tests.tiny_models import recipe
except ImportError:  # run as a script by the vLLM venv's Python: this folder is on sys.path
    import recipe  # type: ignore[no-redef]

RECIPE = recipe.Recipe("idefics3-zoom", key="d17b5fd6085a8739", source=Path(__file__))
"""The key is the file hash of the recipe before it moved here (its cached builds stay valid)."""
DEFAULT_STEPS = 300
SAVE_AT = (50, 150)
"""Intermediate steps saved as ``checkpoint-N`` (the final one is the checkpoint itself)."""
IMAGE_SIDE = 512
TILE, PATCH, LONGEST_EDGE = 64, 8, 128
IMAGE_SEQ_LEN = (TILE // PATCH) ** 2 // 4
COLOURS: dict[str, tuple[int, int, int]] = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (30, 60, 220),
                                            "yellow": (235, 215, 20)}
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<fake_token_around_image>", "<global-img>",
           "<end_of_utterance>"] + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
ZOOM_TEXT = "Here is the zoomed image:"
"""fasteval's image_zoom_in_tool output text; the crop follows it."""
TOOL_IMAGES_TEXT = "Images returned by the tool call above:"
"""The user message that carries the crop when tool messages take no images (fasteval's wording)."""
ZOOM: dict[str, Any] = {"type": "function", "function": {
    "name": "image_zoom_in_tool", "description": "Zoom in on a region of the image.",
    "parameters": {"type": "object", "properties": {"bbox_2d": {"type": "array", "items": {"type": "number"}}},
                   "required": ["bbox_2d"]}}}

def ensure_checkpoint(python: str, *, timeout_s: float = 1800.0) -> Path:
    """The cached checkpoint, built first (by ``python``, which must have torch) when missing."""
    return recipe.ensure(RECIPE, python, timeout_s=timeout_s)


# -- the task --------------------------------------------------------------------------------------
GRID = 4
"""The image is read as GRID x GRID cells; a question names one by row and column."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One task image: a flat grey square of IMAGE_SIDE px with one coloured square in one cell."""

    grey: int
    x: int
    y: int
    side: int
    colour: str
    row: int
    col: int
    """The cell holding the mark, from 1 (top / left)."""

    @property
    def box(self) -> tuple[int, int, int, int]:
        """The cell in 0-1000 coordinates: the box to zoom into."""
        step = 1000 // GRID
        return (self.col - 1) * step, (self.row - 1) * step, self.col * step, self.row * step

    def question(self) -> str:
        return f"What colour is the mark in row {self.row}, column {self.col}?"


def mark(rng: random.Random, grey: int | None = None) -> Mark:
    """A random mark (18-32 px, 4-8 px once the server shrinks the whole image) inside a random cell."""
    side = rng.randint(18, 32)
    row, col = rng.randint(1, GRID), rng.randint(1, GRID)
    cell = IMAGE_SIDE // GRID
    x = (col - 1) * cell + rng.randint(8, cell - 8 - side)
    y = (row - 1) * cell + rng.randint(8, cell - 8 - side)
    return Mark(grey if grey is not None else rng.randint(150, 230), x, y, side, rng.choice(sorted(COLOURS)), row, col)


def second_mark(rng: random.Random, first: Mark) -> Mark:
    """Another mark on the same image (same grey), in another cell."""
    while True:
        second = mark(rng, first.grey)
        if (second.row, second.col) != (first.row, first.col):
            return second


def _pixels(m: Mark) -> Any:
    import numpy as np

    img = np.full((IMAGE_SIDE, IMAGE_SIDE, 3), m.grey, dtype=np.uint8)
    img[m.y:m.y + m.side, m.x:m.x + m.side] = COLOURS[m.colour]
    return img


def _crop(m: Mark, pixels: Any) -> Any:
    """fasteval's reference crop, near enough: the box, enlarged to at least 256 px a side."""
    from PIL import Image

    img = Image.fromarray(pixels)
    x1, y1, x2, y2 = (int(v / 1000 * IMAGE_SIDE) for v in m.box)
    region = img.crop((x1, y1, x2, y2))
    scale = max(1.0, 256 / min(region.size))
    return region.resize((round(region.width * scale), round(region.height * scale)), Image.Resampling.BICUBIC)


def _zoom_call(m: Mark, i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": "image_zoom_in_tool", "arguments": json.dumps({"bbox_2d": list(m.box)})}}]}


def _crop_messages(i: int, in_tool: bool) -> list[dict[str, Any]]:
    if in_tool:
        return [{"role": "tool", "tool_call_id": f"call_{i}",
                 "content": [{"type": "text", "text": ZOOM_TEXT}, {"type": "image"}]}]
    return [{"role": "tool", "tool_call_id": f"call_{i}", "content": ZOOM_TEXT},
            {"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_TEXT}, {"type": "image"}]}]


def _call_text(m: Mark) -> str:
    """The assistant's zoom call as the model writes it (vLLM's hermes parser reads it back)."""
    return (f'<tool_call>\n{{"name": "image_zoom_in_tool", "arguments": '
            f'{json.dumps({"bbox_2d": list(m.box)})}}}\n</tool_call>')


def dialogue(rng: random.Random) -> tuple[list[dict[str, Any]], list[Any], list[tuple[int, str]]]:
    """(a whole conversation, its images in order, (message index, text) of every assistant reply).

    Images are ``{"type": "image"}`` parts, as vLLM hands an OpenAI ``image_url`` to a template.
    Each reply is a target the loss is computed on, from the conversation before it.
    """
    in_tool = rng.random() < 0.5
    first = mark(rng)
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.2:
        messages.append({"role": "system", "content": "You are a careful assistant."})
    messages.append({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": first.question()}]})
    image = _pixels(first)
    asked = [first]
    if rng.random() < 0.3:  # a second question on the same image: a history with a crop to carry, a second zoom
        second = second_mark(rng, first)
        image[second.y:second.y + second.side, second.x:second.x + second.side] = COLOURS[second.colour]
        asked.append(second)
    images: list[Any] = [image]
    targets: list[tuple[int, str]] = []
    for i, m in enumerate(asked):
        if i:
            messages.append({"role": "user", "content": m.question()})
        targets.append((len(messages), _call_text(m)))
        messages.append(_zoom_call(m, i))
        messages += _crop_messages(i, in_tool)
        images.append(_crop(m, image))
        targets.append((len(messages), m.colour))
        messages.append({"role": "assistant", "content": m.colour})
    return messages, images, targets


# -- building -------------------------------------------------------------------------------------
def build_processor(path: Path, vocab_size: int = 640) -> Any:
    from transformers import Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    rng = random.Random(0)
    corpus = []
    for _ in range(2000):
        m = mark(rng)
        corpus.append(json.dumps([m.question(), ZOOM_TEXT, TOOL_IMAGES_TEXT, "You are a careful assistant.",
                                  "Tools: image_zoom_in_tool", {"bbox_2d": list(m.box)}]) + m.colour)
    hf = recipe.byte_bpe(corpus, SPECIAL, SPECIAL[1:2] + SPECIAL[3:], vocab_size)
    images = Idefics3ImageProcessorPil(size={"longest_edge": LONGEST_EDGE}, max_image_size={"longest_edge": TILE},
                                       do_image_splitting=True)
    proc = Idefics3Processor(image_processor=images, tokenizer=hf, image_seq_len=IMAGE_SEQ_LEN,
                             chat_template=recipe.CHAT_TEMPLATE)
    proc.save_pretrained(path)
    return proc


def _render(proc: Any, messages: list[dict[str, Any]], images: list[Any], prompt: bool) -> Any:
    text = proc.apply_chat_template(messages, tools=[ZOOM], tokenize=False, add_generation_prompt=prompt)
    n = sum(1 for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image")
    return proc(text=[text], images=[images[:n]] if n else None, return_tensors="pt")


def _example(proc: Any, messages: list[dict[str, Any]], images: list[Any],
             targets: list[tuple[int, str]]) -> dict[str, Any] | None:
    """Token ids of the whole conversation (every ``<image>`` expanded to its tiles), its pixels, and a
    loss weight per token: each reply weighs the same (a colour word as much as a 40-token call).

    A reply starts where the template's generation prompt for the conversation before it ends, as
    at serving time; None if the whole conversation does not tokenize as those prefixes do."""
    enc = _render(proc, messages, images, prompt=False)
    ids = enc["input_ids"][0].tolist()
    weights = [0.0] * len(ids)
    eos = proc.tokenizer.eos_token_id
    for index, text in targets:
        start = len(_render(proc, messages[:index], images, prompt=True)["input_ids"][0])
        want = proc.tokenizer.encode(text, add_special_tokens=False) + [eos]
        if ids[start:start + len(want)] != want:
            return None
        for k in range(start, start + len(want)):
            weights[k] = 1.0 / len(want)
    return {"ids": ids, "weights": weights, "pixels": enc["pixel_values"][0]}


def _batch(proc: Any, batch: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    width = max(len(e["ids"]) for e in batch)
    tiles = max(e["pixels"].shape[0] for e in batch)
    x = torch.full((len(batch), width), proc.tokenizer.pad_token_id)
    w = torch.zeros((len(batch), width))
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    # all-zero tiles are padding to Idefics3 (it drops them before the vision tower)
    pixels = torch.zeros((len(batch), tiles, *batch[0]["pixels"].shape[1:]))
    for i, e in enumerate(batch):
        ids = e["ids"]
        x[i, :len(ids)] = torch.tensor(ids)
        w[i, :len(ids)] = torch.tensor(e["weights"])
        mask[i, :len(ids)] = 1
        pixels[i, :e["pixels"].shape[0]] = e["pixels"]
    return {"input_ids": x, "attention_mask": mask, "pixel_values": pixels, "weights": w}


def _loss(model: Any, batch: dict[str, Any]) -> Any:
    """Cross-entropy on the replies only, each reply weighing the same."""
    import torch

    weights = batch.pop("weights")
    logits = model(**batch).logits[:, :-1]
    per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                  batch["input_ids"][:, 1:].reshape(-1), reduction="none")
    w = weights[:, 1:].reshape(-1)
    return (per_token * w).sum() / w.sum()


def train(model: Any, proc: Any, steps: int, work: Path, log: Any) -> dict[str, Any]:
    import torch

    rng = random.Random(1)
    data = [e for _ in range(500) if (e := _example(proc, *dialogue(rng))) is not None]
    print(f"{len(data)} conversations", file=log, flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    pick = random.Random(2)
    model.train()
    t0 = time.perf_counter()
    loss_v = float("nan")
    for step in range(1, steps + 1):
        loss = _loss(model, _batch(proc, pick.sample(data, 8)))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        loss_v = float(loss.detach())
        if step % 20 == 0 or step == steps:
            print(f"step {step} loss {loss_v:.4f} ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
        if step in SAVE_AT and step < steps:
            _save(model, proc, work / f"checkpoint-{step}", {"step": step, "loss": round(loss_v, 4)})
            model.train()
    model.eval()
    return {"steps": steps, "final_loss": round(loss_v, 4), "train_s": round(time.perf_counter() - t0, 1)}


def check(model: Any, proc: Any, n: int = 24) -> dict[str, Any]:
    """Greedy decoding of every reply of held-out conversations: how often it comes out exactly."""
    import torch

    rng = random.Random(99)
    good = {"zoom": [0, 0], "colour": [0, 0]}
    for _ in range(n):
        messages, images, targets = dialogue(rng)
        for index, text in targets:
            enc = _render(proc, messages[:index], images, prompt=True)
            ids = enc["input_ids"]
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     pixel_values=enc["pixel_values"], max_new_tokens=96, do_sample=False,
                                     eos_token_id=proc.tokenizer.eos_token_id, pad_token_id=proc.tokenizer.pad_token_id)
            reply = proc.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
            kind = "zoom" if text.startswith("<tool_call>") else "colour"
            good[kind][0] += reply.strip() == text.strip()
            good[kind][1] += 1
    return {k: {"exact": v[0], "of": v[1]} for k, v in good.items()}


def _save(model: Any, proc: Any, path: Path, info: dict[str, Any]) -> None:
    model.save_pretrained(path, safe_serialization=True)
    proc.save_pretrained(path)
    (path / "recipe.json").write_text(json.dumps({"recipe": RECIPE.key, **info}, indent=2))


def build(out: Path, steps: int = DEFAULT_STEPS) -> dict[str, Any]:
    recipe.seeded_torch()

    def make(work: Path) -> dict[str, Any]:
        from transformers import GenerationConfig, Idefics3Config, Idefics3ForConditionalGeneration

        proc = build_processor(work)
        tok = proc.tokenizer
        text = {"model_type": "llama", "vocab_size": (len(tok) + 63) // 64 * 64, "hidden_size": 128,
                "intermediate_size": 384, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "max_position_embeddings": 4096, "rope_theta": 10000.0, "tie_word_embeddings": True,
                "bos_token_id": None, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
        vision = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                  "image_size": TILE, "patch_size": PATCH}
        config = Idefics3Config(vision_config=vision, text_config=text, scale_factor=2,
                                image_token_id=tok.convert_tokens_to_ids("<image>"), tie_word_embeddings=True,
                                pad_token_id=tok.pad_token_id)
        config.eos_token_id = tok.eos_token_id
        model = Idefics3ForConditionalGeneration(config)
        info: dict[str, Any] = {"recipe": RECIPE.key, "params": sum(p.numel() for p in model.parameters())}
        info |= train(model, proc, steps, work, sys.stderr)
        info["check"] = check(model, proc)
        model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        _save(model, proc, work, info)
        return info

    return recipe.build_whole(out, make)


if __name__ == "__main__":
    sys.exit(recipe.main(RECIPE, "the tiny zooming Idefics3 checkpoint", build, DEFAULT_STEPS))
