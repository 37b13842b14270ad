"""What the two tiny checkpoints share: the chat template, the tokenizer, the cache, and how a build is made.

Both are built on the spot from nothing downloaded (``calculator.py``: a Qwen2 that calls the
calculator; ``zoom.py``: an Idefics3 that zooms into images) by the vLLM venv's Python, which has
torch, transformers and tokenizers: ``ensure`` runs the recipe's file with it. That Python has
neither fasteval nor this repository on its path, so the recipes import only the standard library
at the top and this module as a sibling file.

A build is cached under ``~/.cache/fasteval/tiny-models/<name>-<key>/`` (``FASTEVAL_CACHE`` moves
the root) and reused while its key stands. The key names what the recipe trains, and
``tests/tiny_models/test_recipes.py`` records the digest of the recipe's source (its file and this
one) that the key was last reviewed at, and fails when the source changes: a change to what is
trained takes a new key (the next run trains anew, minutes of CPU), one that trains the same (a
comment, a helper moved) records the new digest and keeps the cached build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
"""Hermes tool-call markers: added as plain tokens, since vLLM's parser looks them up and they stay in the text."""

CHAT_TEMPLATE = r"""{%- macro body(c) -%}{%- if c is string -%}{{ c }}{%- else -%}{%- for p in c -%}{%- if p.type == 'text' -%}{{ p.text }}{%- elif p.type == 'image' or p.type == 'image_url' -%}<image>{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}
{%- set sys = messages[0].content if messages and messages[0].role == 'system' else '' -%}
{%- if tools -%}
<|im_start|>system
{{ body(sys) }}Tools: {{ tools | map(attribute='function.name') | join(', ') }}<|im_end|>
{% elif sys -%}
<|im_start|>system
{{ body(sys) }}<|im_end|>
{% endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}
{%- elif m.role == 'assistant' -%}
<|im_start|>assistant
{% if m.content %}{{ body(m.content) }}{% endif %}
{%- for tc in m.tool_calls or [] -%}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ body(m.content) }}
</tool_response><|im_end|>
{% else -%}
<|im_start|>{{ m.role }}
{{ body(m.content) }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}"""
"""ChatML with hermes tool calls; a message's content is text or a list of text and image parts (an
image becomes ``<image>``, which the VLM's processor expands into its tiles; the text model sees none)."""


def cache_root() -> Path:
    return Path(os.environ.get("FASTEVAL_CACHE") or Path.home() / ".cache" / "fasteval")


@dataclass(frozen=True, slots=True)
class Recipe:
    """One tiny checkpoint: where its build is cached, under which key, from which source."""

    name: str
    """The cache folder's prefix (``qwen2-calculator``)."""
    key: str
    """What the recipe trains: a new key, a new build."""
    source: Path
    """The recipe's file, run by the vLLM venv's Python to build it."""

    def cached_path(self) -> Path:
        return cache_root() / "tiny-models" / f"{self.name}-{self.key}"

    def source_digest(self) -> str:
        """Changes whenever the recipe's source does: its file and this shared one."""
        h = hashlib.sha256(self.source.read_bytes())
        h.update(Path(__file__).read_bytes())
        return h.hexdigest()[:16]


def ensure(recipe: Recipe, python: str, *, timeout_s: float) -> Path:
    """The cached checkpoint, built first (by ``python``, which must have torch) when missing."""
    path = recipe.cached_path()
    if (path / "DONE").exists():
        return path
    proc = subprocess.run([python, str(recipe.source.resolve()), "--out", str(path)], capture_output=True,
                          text=True, timeout=timeout_s)
    if proc.returncode != 0 or not (path / "DONE").exists():
        raise RuntimeError(f"building the tiny checkpoint {recipe.name} with {python} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return path


def byte_bpe(corpus: list[str], special: list[str], extra_special: list[str], vocab_size: int = 640) -> Any:
    """A byte-level BPE tokenizer trained on ``corpus``: digits split one by one (copying a number is
    easy), ``<|im_end|>`` its end, the hermes tool tokens and the chat template added."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d"), behavior="isolated"),  # one token per digit: copying is easy
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 additional_special_tokens=extra_special)
    hf.add_tokens(TOOL_TOKENS)  # not special: vLLM's hermes parser looks them up and they stay in the text
    hf.chat_template = CHAT_TEMPLATE
    return hf


def seeded_torch() -> None:
    """Torch as every build starts it: seed 0, and the training threads."""
    import torch

    torch.manual_seed(0)
    # one thread: on a shared, busy machine OpenMP threads spin against each other (10x slower steps)
    torch.set_num_threads(int(os.environ.get("FASTEVAL_TRAIN_THREADS", "1")))


def build_whole(out: Path, make: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """``make`` fills a fresh folder beside ``out`` and returns what it built; the folder then becomes
    ``out`` in one rename, so a reader never sees a half-built checkpoint."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=out.parent))
    try:
        info = make(work)
        (work / "DONE").write_text("")
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return info


def main(recipe: Recipe, what: str, build: Callable[[Path, int], dict[str, Any]], default_steps: int) -> int:
    """The recipe's command line: build into ``--out`` (default: the cache) and print what was built."""
    ap = argparse.ArgumentParser(description=f"build (and train) {what}")
    ap.add_argument("--out", help=f"checkpoint folder (default: the cache, {recipe.cached_path()})")
    ap.add_argument("--steps", type=int, default=default_steps)
    a = ap.parse_args()
    out = Path(a.out) if a.out else recipe.cached_path()
    info = build(out, a.steps)
    print(json.dumps({"path": str(out), **info}))
    return 0
