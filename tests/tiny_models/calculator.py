"""A tiny Qwen2 checkpoint that calls the ``calculator`` tool: real vLLM serving without a real model.

Built on the spot, nothing downloaded: a byte-level BPE tokenizer trained here with ``tokenizers``
(digits split one by one, ``<tool_call>`` and ``<tool_response>`` in the vocabulary), the hermes-style
chat template both tiny checkpoints share (``recipe.py``), and a 2-layer Qwen2 (hidden 128, ~0.6 M
parameters) trained for a couple of minutes on the CPU on synthetic dialogues, so that a real ``vllm serve --tool-call-parser hermes`` returns
real parsed tool calls. What it learnt:

* tools offered and the last message a user's: ``calculator`` with the expression the user wrote
  (``What is 12 + 7?`` -> ``{"expression": "12 + 7"}``);
* the last message a tool result: the result, copied (``19``) — so a turn is two rounds, and a
  multi-turn task re-sends a growing history (prefix-cache hits);
* ``Stay silent.``: a long run of blank lines (whitespace-only output, cut at a small max_tokens);
* anything else without tools: ``no tool``.

Random weights never emit a tool call, and ``tool_choice: required`` does not help (vLLM does not
constrain the arguments of a non-strict tool), hence the training.

Training also saves the steps in ``SAVE_STEPS`` as HF Trainer would, ``steps/checkpoint-N/`` inside
the checkpoint (the last step is the checkpoint itself): a training run's series whose score rises
with the step, for the series and watch-mode tests.

The checkpoint is cached under ``~/.cache/fasteval/tiny-models/qwen2-calculator-<key>/``
(``FASTEVAL_CACHE`` moves the root; the key and its guard: ``recipe.py``). Building needs torch,
transformers and tokenizers — the vLLM venv has them — so the tests (``ensure_checkpoint``) run this
file with that venv's Python:

    .venv-vllm/bin/python tests/tiny_models/calculator.py [--out DIR] [--steps N]
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

try:  # imported by the tests and benchmarks (the repository's root on sys.path)
    from tests.tiny_models import recipe
except ImportError:  # run as a script by the vLLM venv's Python: this folder is on sys.path
    import recipe  # type: ignore[no-redef]

RECIPE = recipe.Recipe("qwen2-calculator", key="cc26ae25352f5302", source=Path(__file__))
"""The key is the file hash of the recipe before it moved here (its cached builds stay valid)."""
DEFAULT_STEPS = 500
SAVE_STEPS = (20, 200)
"""Intermediate steps saved under ``steps/checkpoint-N`` (the final step is saved as the checkpoint)."""
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SILENT_PROMPT = "Stay silent."
SILENT_REPLY = "\n \n" * 48
CALCULATOR: dict[str, Any] = {"type": "function", "function": {
    "name": "calculator",
    "description": ("Evaluate an arithmetic expression. Supports + - * / % ** ^ (power), parentheses, "
                    "and sqrt, sin, cos, tan, log, exp of one argument."),
    "parameters": {"type": "object",
                   "properties": {"expression": {"type": "string", "description": "e.g. '(3 + 4) * 2'"}},
                   "required": ["expression"]}}}
"""The tool as fasteval's calculator describes itself (its spec is what a sweep sends)."""

def ensure_checkpoint(python: str, *, timeout_s: float = 1200.0) -> Path:
    """The cached checkpoint, built first (by ``python``, which must have torch) when missing."""
    return recipe.ensure(RECIPE, python, timeout_s=timeout_s)


# -- the synthetic dialogues --------------------------------------------------------------------
def _expression(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(0, 999), rng.randint(0, 99)
    op = rng.choice("+-*")
    value = a + b if op == "+" else a - b if op == "-" else a * b
    return f"{a} {op} {b}", value


_ASKS = ["What is {e}?", "Compute {e}.", "Use the calculator: {e}", "{e} = ?", "Please work out {e}.",
         "Now: {e}"]


def _call(expr: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": "calculator", "arguments": json.dumps({"expression": expr})}}]}


def _result(expr: str, value: int) -> dict[str, Any]:
    # the calculator's own output format (orjson, no spaces)
    out = json.dumps({"result": value, "expression": expr, "status": "success"}, separators=(",", ":"))
    return {"role": "tool", "tool_call_id": "call_0", "content": out}


def dialogue(rng: random.Random) -> tuple[list[dict[str, Any]], bool, str]:
    """(messages before the target, tools offered, the target assistant text)."""
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.3:
        messages.append({"role": "system", "content": "You are a careful assistant."})
    kind = rng.random()
    if kind < 0.1:
        return messages + [{"role": "user", "content": SILENT_PROMPT}], rng.random() < 0.5, SILENT_REPLY
    if kind < 0.2:
        expr, _ = _expression(rng)
        return messages + [{"role": "user", "content": rng.choice(_ASKS).format(e=expr)}], False, "no tool"
    for _ in range(rng.choice([0, 0, 1])):  # an earlier finished turn: history to carry
        expr, value = _expression(rng)
        messages += [{"role": "user", "content": rng.choice(_ASKS).format(e=expr)}, _call(expr),
                     _result(expr, value), {"role": "assistant", "content": str(value)}]
    expr, value = _expression(rng)
    messages.append({"role": "user", "content": rng.choice(_ASKS).format(e=expr)})
    if rng.random() < 0.5:
        return messages, True, (f'<tool_call>\n{{"name": "calculator", "arguments": '
                                f'{json.dumps({"expression": expr})}}}\n</tool_call>')
    return messages + [_call(expr), _result(expr, value)], True, str(value)


# -- building -------------------------------------------------------------------------------------
def build_tokenizer(path: Path, vocab_size: int = 640) -> Any:
    rng = random.Random(0)
    corpus = []
    for _ in range(3000):
        messages, tools, target = dialogue(rng)
        corpus.append(json.dumps(messages) + json.dumps(CALCULATOR if tools else "") + target)
    hf = recipe.byte_bpe(corpus, SPECIAL, ["<|im_start|>"], vocab_size)
    hf.save_pretrained(path)
    return hf


def _examples(hf: Any, n: int, seed: int) -> list[tuple[list[int], int]]:
    """Token ids of whole dialogues, and where the target (the loss) starts."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        messages, tools, target = dialogue(rng)
        prompt = hf.apply_chat_template(messages, tools=[CALCULATOR] if tools else None, tokenize=False,
                                        add_generation_prompt=True)
        ids = hf.encode(prompt, add_special_tokens=False)
        out.append((ids + hf.encode(target, add_special_tokens=False) + [hf.eos_token_id], len(ids)))
    return out


def step_checkpoints(path: Path) -> dict[int, Path]:
    """The saved training steps of a built checkpoint, step -> folder (the last step: the checkpoint)."""
    found = {int(p.name.split("-", 1)[1]): p for p in (path / "steps").glob("checkpoint-*")
             if p.name.split("-", 1)[1].isdigit()}
    info = json.loads((path / "recipe.json").read_text())
    return {**found, int(info["steps"]): path}


def _save_step(model: Any, hf: Any, folder: Path) -> None:
    """An HF Trainer-like step folder: weights, config and tokenizer."""
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig(eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id)
    model.save_pretrained(folder, safe_serialization=True)
    hf.save_pretrained(folder)


def train(model: Any, hf: Any, steps: int, log: Any, save: Path | None = None) -> dict[str, Any]:
    import torch

    data = _examples(hf, 6000, seed=1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    rng = random.Random(2)
    model.train()
    t0 = time.perf_counter()
    loss_v = float("nan")
    for step in range(steps):
        batch = rng.sample(data, 16)
        width = max(len(ids) for ids, _ in batch)
        x = torch.full((len(batch), width), hf.pad_token_id)
        y = torch.full((len(batch), width), -100)
        for i, (ids, start) in enumerate(batch):
            x[i, :len(ids)] = torch.tensor(ids)
            y[i, start:len(ids)] = torch.tensor(ids[start:])
        loss = model(input_ids=x, labels=y).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        loss_v = float(loss.detach())
        if save is not None and step + 1 in SAVE_STEPS and step + 1 < steps:
            model.eval()
            _save_step(model, hf, save / f"checkpoint-{step + 1}")
            model.train()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step} loss {loss_v:.4f} ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    model.eval()
    return {"steps": steps, "final_loss": round(loss_v, 4), "train_s": round(time.perf_counter() - t0, 1)}


def check(model: Any, hf: Any) -> dict[str, Any]:
    """Greedy decoding on held-out dialogues: how often the target comes out exactly."""
    import torch

    rng = random.Random(99)
    good = 0
    n = 40
    for _ in range(n):
        messages, tools, target = dialogue(rng)
        prompt = hf.apply_chat_template(messages, tools=[CALCULATOR] if tools else None, tokenize=False,
                                        add_generation_prompt=True)
        ids = torch.tensor([hf.encode(prompt, add_special_tokens=False)])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=64, do_sample=False, eos_token_id=hf.eos_token_id,
                                 pad_token_id=hf.pad_token_id)
        text = hf.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        good += text.strip() == target.strip()
    return {"exact": good, "of": n}


def build(out: Path, steps: int = DEFAULT_STEPS) -> dict[str, Any]:
    recipe.seeded_torch()

    def make(work: Path) -> dict[str, Any]:
        from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

        hf = build_tokenizer(work)
        config = Qwen2Config(vocab_size=(len(hf) + 63) // 64 * 64, hidden_size=128, intermediate_size=384,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=4096, tie_word_embeddings=True, rope_theta=10000.0,
                             bos_token_id=None, eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id,
                             torch_dtype="float32")
        model = Qwen2ForCausalLM(config)
        info: dict[str, Any] = {"recipe": RECIPE.key, "params": sum(p.numel() for p in model.parameters())}
        info |= train(model, hf, steps, sys.stderr, save=work / "steps")
        info["check"] = check(model, hf)
        model.generation_config = GenerationConfig(eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id)
        model.save_pretrained(work, safe_serialization=True)
        (work / "recipe.json").write_text(json.dumps(info, indent=2))
        return info

    return recipe.build_whole(out, make)


if __name__ == "__main__":
    sys.exit(recipe.main(RECIPE, "the tiny calculator-calling Qwen2 checkpoint", build, DEFAULT_STEPS))
