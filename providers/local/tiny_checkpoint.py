"""A tiny Qwen2 checkpoint that calls the ``calculator`` tool: real vLLM serving without a real model.

Built on the spot, nothing downloaded: a byte-level BPE tokenizer trained here with ``tokenizers``
(digits split one by one, ``<tool_call>`` and ``<tool_response>`` in the vocabulary), a hermes-style
chat template, and a 2-layer Qwen2 (hidden 128, ~0.6 M parameters) trained for a couple of minutes
on the CPU on synthetic dialogues, so that a real ``vllm serve --tool-call-parser hermes`` returns
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

The checkpoint is cached under ``~/.cache/fasteval/tiny-models/<recipe hash>/`` (``FASTEVAL_CACHE``
moves the root): the hash covers this file, so a changed recipe builds anew and an unchanged one
is reused. Building needs torch, transformers and tokenizers — the vLLM venv has them — so the
project side (``ensure_checkpoint``) runs this file with that venv's Python:

    .venv-vllm/bin/python providers/local/tiny_checkpoint.py [--out DIR] [--steps N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RECIPE_VERSION = 2
DEFAULT_STEPS = 500
SAVE_STEPS = (20, 200)
"""Intermediate steps saved under ``steps/checkpoint-N`` (the final step is saved as the checkpoint)."""
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
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

CHAT_TEMPLATE = r"""{%- macro text(c) -%}{{ c if c is string else c | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') }}{%- endmacro -%}
{%- set sys = messages[0].content if messages and messages[0].role == 'system' else '' -%}
{%- if tools -%}
<|im_start|>system
{{ text(sys) }}Tools: {{ tools | map(attribute='function.name') | join(', ') }}<|im_end|>
{% elif sys -%}
<|im_start|>system
{{ text(sys) }}<|im_end|>
{% endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}
{%- elif m.role == 'assistant' -%}
<|im_start|>assistant
{% if m.content %}{{ text(m.content) }}{% endif %}
{%- for tc in m.tool_calls or [] -%}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ text(m.content) }}
</tool_response><|im_end|>
{% else -%}
<|im_start|>{{ m.role }}
{{ text(m.content) }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}"""


def recipe_hash() -> str:
    """Changes whenever this recipe does (the file's bytes and its version)."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(str(RECIPE_VERSION).encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("FASTEVAL_CACHE") or Path.home() / ".cache" / "fasteval")


def cached_path() -> Path:
    return cache_root() / "tiny-models" / f"qwen2-calculator-{recipe_hash()}"


def ensure_checkpoint(python: str, *, timeout_s: float = 1200.0) -> Path:
    """The cached checkpoint, built first (by ``python``, which must have torch) when missing."""
    path = cached_path()
    if (path / "DONE").exists():
        return path
    proc = subprocess.run([python, str(Path(__file__).resolve()), "--out", str(path)], capture_output=True,
                          text=True, timeout=timeout_s)
    if proc.returncode != 0 or not (path / "DONE").exists():
        raise RuntimeError(f"building the tiny checkpoint with {python} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return path


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
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    corpus = []
    for _ in range(3000):
        messages, tools, target = dialogue(rng)
        corpus.append(json.dumps(messages) + json.dumps(CALCULATOR if tools else "") + target)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d"), behavior="isolated"),  # one token per digit: copying is easy
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 additional_special_tokens=["<|im_start|>"])
    hf.add_tokens(TOOL_TOKENS)  # not special: vLLM's hermes parser looks them up and they stay in the text
    hf.chat_template = CHAT_TEMPLATE
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
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    # one thread: on a shared, busy machine OpenMP threads spin against each other (10x slower steps)
    torch.set_num_threads(int(os.environ.get("FASTEVAL_TRAIN_THREADS", "1")))
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=out.parent))
    try:
        hf = build_tokenizer(work)
        config = Qwen2Config(vocab_size=(len(hf) + 63) // 64 * 64, hidden_size=128, intermediate_size=384,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=4096, tie_word_embeddings=True, rope_theta=10000.0,
                             bos_token_id=None, eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id,
                             torch_dtype="float32")
        model = Qwen2ForCausalLM(config)
        info: dict[str, Any] = {"recipe": recipe_hash(), "params": sum(p.numel() for p in model.parameters())}
        info |= train(model, hf, steps, sys.stderr, save=work / "steps")
        info["check"] = check(model, hf)
        model.generation_config = GenerationConfig(eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id)
        model.save_pretrained(work, safe_serialization=True)
        (work / "recipe.json").write_text(json.dumps(info, indent=2))
        (work / "DONE").write_text("")
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)  # whole or not at all: a reader never sees a half-built checkpoint
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description="build (and train) the tiny calculator-calling Qwen2 checkpoint")
    ap.add_argument("--out", help=f"checkpoint folder (default: the cache, {cached_path()})")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    a = ap.parse_args()
    out = Path(a.out) if a.out else cached_path()
    info = build(out, a.steps)
    print(json.dumps({"path": str(out), **info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
