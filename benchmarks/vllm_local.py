"""Locally served models on real vLLM, started and routed by our supervisor: on a GPU node, or on a
CPU node with vLLM's CPU build (``make vllm``; found on PATH or in ``.venv-vllm``).

    python benchmarks/vllm_local.py [--model PATH] [--requests 256] [--concurrency 32]
                                    [--input-len 512] [--output-len 128] [--json]
    python benchmarks/vllm_local.py --server-command "python -m providers.sim --port {port} \
        --model {served_model_name}:direct --prefix-cache"      # no vLLM: the other parts only

Not run in CI. On a CPU node (no GPU found) each of the 2 replicas gets half of the usable cores
and the model is the tiny calculator checkpoint (tests/tiny_models/calculator.py, cached).
Steps:

1. **A tiny model, built here** (unless ``--model PATH``; with a vllm binary here, the cached tiny
   calculator checkpoint, built by that venv's Python): a byte-level BPE tokenizer trained on
   the spot with ``tokenizers``, wrapped as a transformers fast tokenizer with a ChatML chat
   template that renders tools and ``<tool_call>`` blocks (hermes style), and a 2-layer Llama
   with random weights from a small ``LlamaConfig`` (transformers + torch; without torch the same
   tensors are written with numpy + safetensors). Nothing is downloaded.
2. **Servers through the supervisor**: ``ServerGroup`` starts 2 replicas of ``vllm serve`` (both
   on GPU 0 with half the memory each when only one GPU is visible) with
   ``--enable-auto-tool-choice --tool-call-parser hermes``: free ports, own process groups, logs.
3. **Harness vs vllm bench serve**: N chat requests of ``--input-len`` random-word tokens,
   ``max_tokens = --output-len`` with ``ignore_eos``, at concurrency C, sent by our ModelClient
   (retries, limits, accounting) to replica 0; then ``vllm bench serve`` (random dataset, same
   lengths, same N and C, openai-chat backend) against the same replica. Output tokens/s of each
   and their ratio (target >= 0.95).
4. **Prefix-cache hit rate**, sticky vs round-robin over the 2 replicas: multi-turn
   trajectories (a shared system prompt, tools offered, a long first turn, then rounds that
   re-send the history) through ``RoutedProvider``; hit rate = delta of
   ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total`` over both replicas.

Images (a vision-language checkpoint against ``vllm bench serve --dataset-name random-mm``):
benchmarks/vllm_images.py.

Exits 2 at once, with the reason, when vLLM (or, to build the model, transformers/tokenizers)
is missing, unless ``--server-command`` replaces the server.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fasteval.core.job import job_context  # noqa: E402
from providers.base import ChatRequest  # noqa: E402
from providers.client import ModelClient, RetryPolicy  # noqa: E402
from providers.local import RoutedProvider, Router, ServerGroup, ServeSpec, parse_metrics  # noqa: E402
from providers.local.gpus import detect_cpus, usable_cpus  # noqa: E402
from providers.local.spec import find_vllm  # noqa: E402
from providers.openai_compat import OpenAICompatProvider, Timeouts  # noqa: E402
from tests.tiny_models.calculator import ensure_checkpoint  # noqa: E402

NAME = "tiny-tools"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
WORDS = ("the image shows a grid of coloured tiles zoom into the region crop rotate count the spots answer "
         "with a number python tool call result left right top bottom maze path jigsaw piece colour").split()
CHAT_TEMPLATE = r"""{%- set sys = messages[0].content if messages and messages[0].role == 'system' else '' -%}
{%- if tools -%}
<|im_start|>system
{{ sys }}

# Tools

You may call one or more functions. Function signatures are within <tools></tools>:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

For each function call, return a json object within <tool_call></tool_call> tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif sys -%}
<|im_start|>system
{{ sys }}<|im_end|>
{% endif -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}
{%- elif m.role == 'assistant' -%}
<|im_start|>assistant
{% if m.content %}{{ m.content }}{% endif %}
{%- for tc in m.tool_calls or [] %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else -%}
<|im_start|>{{ m.role }}
{{ m.content if m.content is string else m.content | map(attribute='text') | join('') }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}"""
TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "image_zoom_in_tool", "description": "Zoom into a region of an image.",
    "parameters": {"type": "object", "properties": {"bbox_2d": {"type": "array", "items": {"type": "number"}},
                                                    "label": {"type": "string"}}, "required": ["bbox_2d"]}}}]


class CheckError(RuntimeError):
    """A precondition of the check failed (no vllm, a template that cannot render): exit 2 with its line."""


def run_in_work_dir(run: Any, a: argparse.Namespace) -> dict[str, Any] | None:
    """``run(a, folder)`` in ``--work-dir`` (kept) or a temporary folder; None after printing a CheckError."""
    try:
        if a.work_dir:
            Path(a.work_dir).mkdir(parents=True, exist_ok=True)
            result: dict[str, Any] = asyncio.run(run(a, Path(a.work_dir)))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                result = asyncio.run(run(a, Path(tmp)))
    except CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    return result


# -- 1. the tiny model ------------------------------------------------------------------------
def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build_tokenizer(path: Path, vocab_size: int = 2048) -> int:
    """Train a byte-level BPE here and save it as a transformers fast tokenizer; returns its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    corpus = [_words(rng, 48) + " " + " ".join("".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(16))
              + ' {"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [1, 2, 3, 4]}}' for _ in range(4000)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 additional_special_tokens=["<|im_start|>"])
    hf.add_tokens(TOOL_TOKENS)  # the hermes tool parser looks these up in the vocabulary
    hf.chat_template = CHAT_TEMPLATE
    hf.save_pretrained(path)
    rendered = hf.apply_chat_template([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                                       {"role": "assistant", "content": None, "tool_calls": [
                                           {"type": "function", "function": {"name": "image_zoom_in_tool",
                                                                             "arguments": '{"bbox_2d": [1, 2, 3, 4]}'}}]},
                                       {"role": "tool", "content": "ok"}], tools=TOOLS, tokenize=False,
                                      add_generation_prompt=True)
    if "<tool_call>" not in rendered or "<tools>" not in rendered or "<tool_response>" not in rendered:
        raise CheckError(f"the chat template did not render tools and tool calls:\n{rendered}")
    return len(hf)


def build_model(path: Path) -> dict[str, Any]:
    """Tokenizer + a 2-layer Llama with random weights in ``path`` (transformers; torch if present)."""
    from transformers import LlamaConfig

    path.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(path)
    vocab_padded = (vocab + 63) // 64 * 64
    sizes: dict[str, Any] = {"vocab_size": vocab_padded, "hidden_size": 256, "intermediate_size": 512,
                             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                             "max_position_embeddings": 8192, "tie_word_embeddings": True, "bos_token_id": None,
                             "eos_token_id": 2, "pad_token_id": 0, "torch_dtype": "bfloat16"}
    config = LlamaConfig(**sizes)
    if importlib.util.find_spec("torch") is not None:
        import torch
        from transformers import LlamaForCausalLM

        torch.manual_seed(0)
        LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
        how = "transformers LlamaForCausalLM (torch)"
    else:
        _numpy_llama(config, path)
        how = "numpy + safetensors (no torch here)"
    return {"path": str(path), "vocab": vocab, "weights": how, "params": _count_params(config)}


def _llama_shapes(c: Any) -> dict[str, tuple[int, ...]]:
    head = c.hidden_size // c.num_attention_heads
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (c.vocab_size, c.hidden_size),
                                          "model.norm.weight": (c.hidden_size,)}
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes |= {p + "self_attn.q_proj.weight": (c.hidden_size, c.hidden_size),
                   p + "self_attn.k_proj.weight": (c.num_key_value_heads * head, c.hidden_size),
                   p + "self_attn.v_proj.weight": (c.num_key_value_heads * head, c.hidden_size),
                   p + "self_attn.o_proj.weight": (c.hidden_size, c.hidden_size),
                   p + "mlp.gate_proj.weight": (c.intermediate_size, c.hidden_size),
                   p + "mlp.up_proj.weight": (c.intermediate_size, c.hidden_size),
                   p + "mlp.down_proj.weight": (c.hidden_size, c.intermediate_size),
                   p + "input_layernorm.weight": (c.hidden_size,), p + "post_attention_layernorm.weight": (c.hidden_size,)}
    return shapes


def _count_params(c: Any) -> int:
    total = 0
    for shape in _llama_shapes(c).values():
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def _numpy_llama(config: Any, path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    config.torch_dtype = "float16"
    rng = np.random.default_rng(0)
    tensors = {name: (np.ones(shape) if len(shape) == 1 else rng.normal(0, 0.02, shape)).astype(np.float16)
               for name, shape in _llama_shapes(config).items()}
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(path)


# -- 2. servers --------------------------------------------------------------------------------
def preflight(a: argparse.Namespace) -> None:
    # vLLM may live in another venv (the CPU build in .venv-vllm): its binary is what counts, not an import
    a.vllm = find_vllm()
    if a.server_command is None and a.vllm is None:
        raise CheckError("no vllm binary (not on PATH, no .venv-vllm/bin/vllm): `make vllm` installs the CPU "
                         "build, or pass --server-command to run the other parts against another server")
    if a.model is None and a.vllm is not None:
        return  # the tiny calculator checkpoint, built (cached) by the vLLM venv's Python
    if a.model is None:
        missing = [m for m in ("transformers", "tokenizers", "jinja2") if importlib.util.find_spec(m) is None]
        if missing:
            raise CheckError(f"building the tiny model needs {', '.join(missing)} (pip install {' '.join(missing)}), "
                             f"or pass --model PATH")


def _gpus() -> list[str]:
    from providers.local import detect_gpus

    return detect_gpus("auto")


def make_group(a: argparse.Namespace, model_path: str, servers: Path) -> ServerGroup:
    gpus = _gpus()
    if not gpus:  # a CPU node: vLLM's CPU build, one replica per half of the usable cores
        serve_cpu: dict[str, Any] = {
            "model": model_path, "replicas": 2, "startup_timeout_s": a.startup_timeout_s, "max_restarts": 0,
            "command": [a.vllm] if a.server_command is None else shlex.split(a.server_command),
            "args": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-num-seqs",
                     str(a.max_num_seqs), "--enable-prefix-caching", "--dtype", "float32", *shlex.split(a.vllm_args)],
            "max_model_len": a.max_model_len, "kv_cache_gib": a.kv_cache_gib}
        if a.server_command is not None:
            serve_cpu.pop("args")
            serve_cpu.pop("kv_cache_gib")
        cores = usable_cpus(detect_cpus())
        return ServerGroup(ServeSpec.from_config(NAME, serve_cpu), [], servers, cpus=cores[: len(cores) // 2 * 2])
    shared = len(gpus) < 2
    serve: dict[str, Any] = {
        "model": model_path, "replicas": 2, "startup_timeout_s": a.startup_timeout_s, "max_restarts": 0,
        "args": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-num-seqs", str(a.max_num_seqs),
                 "--enable-prefix-caching", *shlex.split(a.vllm_args)],
        "max_model_len": a.max_model_len, "gpu_memory_utilization": 0.4 if shared else 0.85,
    }
    if a.server_command is not None:
        serve = {"model": model_path, "replicas": 2, "startup_timeout_s": a.startup_timeout_s, "max_restarts": 0,
                 "command": shlex.split(a.server_command)}
    spec = ServeSpec.from_config(NAME, serve)
    placement = [gpus[0], gpus[0]] if shared and gpus else gpus[:2]
    return ServerGroup(spec, placement, servers)


# -- 3. harness vs vllm bench serve -------------------------------------------------------------
def prompts(a: argparse.Namespace, tokenizer: str | None) -> list[str]:
    """Random-word prompts of exactly ``--input-len`` tokens when the tokenizer loads (as vllm bench's)."""
    rng = random.Random(1)
    texts = [_words(rng, a.input_len) for _ in range(a.requests)]
    if tokenizer is None:
        return texts
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception:  # no transformers, or a server-side tokenizer only: word counts are close enough
        return texts
    return [str(tok.decode(tok.encode(t, add_special_tokens=False)[: a.input_len])) for t in texts]


async def harness_throughput(base_url: str, a: argparse.Namespace, tokenizer: str | None) -> dict[str, Any]:
    provider = OpenAICompatProvider(base_url, NAME, extra_body={"ignore_eos": True},
                                    timeouts=Timeouts(read_s=600, attempt_s=900))
    client = ModelClient(NAME, provider, concurrency=a.concurrency, retry=RetryPolicy(max_attempts=3))
    texts = await asyncio.to_thread(prompts, a, tokenizer)

    async def one(text: str) -> int:
        resp = await client.chat(ChatRequest(messages=[{"role": "user", "content": text}],
                                             params={"max_tokens": a.output_len, "temperature": 0.0}))
        return resp.usage.completion_tokens

    await asyncio.gather(*(one(p) for p in texts[: a.concurrency]))  # warm-up, not timed
    t0 = time.perf_counter()
    tokens = await asyncio.gather(*(one(p) for p in texts))
    wall = time.perf_counter() - t0
    await client.close()
    return {"output_tokens": sum(tokens), "wall_s": round(wall, 3), "output_throughput": round(sum(tokens) / wall, 1),
            "requests": a.requests, "concurrency": a.concurrency}


def vllm_bench(base_url: str, tokenizer: str, a: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    root = base_url.removesuffix("/v1")
    cmd = [a.vllm, "bench", "serve", "--backend", "openai-chat", "--base-url", root, "--endpoint",
           "/v1/chat/completions", "--model", NAME, "--tokenizer", tokenizer, "--dataset-name", "random",
           "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len), "--num-prompts",
           str(a.requests), "--max-concurrency", str(a.concurrency), "--ignore-eos", "--save-result",
           "--result-dir", str(out_dir), "--result-filename", "bench.json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise CheckError(f"vllm bench serve failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    data = json.loads((out_dir / "bench.json").read_text())
    return {"output_throughput": round(float(data["output_throughput"]), 1), "completed": data.get("completed"),
            "output_tokens": data.get("total_output_tokens"), "wall_s": data.get("duration"),
            "command": shlex.join(cmd)}


# -- 4. prefix-cache hit rate, sticky vs round-robin ------------------------------------------
async def cache_counters(group: ServerGroup) -> tuple[float, float]:
    hits = queries = 0.0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
        for r in group.replicas:
            async with s.get(f"http://{r.host}:{r.port}/metrics") as resp:
                m = parse_metrics(await resp.text())
            hits += m.get("vllm:prefix_cache_hits_total", m.get("vllm:gpu_prefix_cache_hits_total", 0.0))
            queries += m.get("vllm:prefix_cache_queries_total", m.get("vllm:gpu_prefix_cache_queries_total", 0.0))
    return hits, queries


async def hit_rate(group: ServerGroup, policy: str, a: argparse.Namespace, salt: int) -> dict[str, Any]:
    router = Router(group, lambda url: OpenAICompatProvider(url, NAME, extra_body={"ignore_eos": True},
                                                            timeouts=Timeouts(read_s=600, attempt_s=900)),
                    policy=policy)
    client = ModelClient(NAME, RoutedProvider(router, f"local:{NAME}"), concurrency=a.concurrency)
    system = f"run {salt}: " + _words(random.Random(salt), 200)

    async def one(i: int) -> None:
        rng = random.Random(salt * 100_000 + i)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                          {"role": "user", "content": _words(rng, a.input_len)}]
        with job_context(f"{salt}-{i}"):
            for _ in range(a.rounds):
                resp = await client.chat(ChatRequest(messages=list(messages), tools=TOOLS,
                                                     params={"max_tokens": 32, "temperature": 0.0}))
                messages.append({"role": "assistant", "content": resp.content or ""})
                messages.append({"role": "user", "content": _words(rng, 40)})

    h0, q0 = await cache_counters(group)
    slots = asyncio.Semaphore(a.concurrency)

    async def bounded(i: int) -> None:
        async with slots:
            await one(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(bounded(i) for i in range(a.trajectories)))
    wall = time.perf_counter() - t0
    h1, q1 = await cache_counters(group)
    await client.close()
    return {"policy": policy, "hit_rate": round((h1 - h0) / (q1 - q0), 4) if q1 > q0 else None,
            "trajectories_per_s": round(a.trajectories / wall, 2), "by_replica": router.stats()["by_replica"]}


async def run_check(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"server": "vllm" if a.server_command is None else a.server_command}
    if a.model is None and a.vllm is not None:
        t0 = time.perf_counter()
        path = await asyncio.to_thread(ensure_checkpoint, str(Path(a.vllm).with_name("python")))
        result["model"] = {"path": str(path), "recipe": "tests/tiny_models/calculator.py",
                           "build_s": round(time.perf_counter() - t0, 1)}
        model_path = str(path)
    elif a.model is None:
        t0 = time.perf_counter()
        result["model"] = await asyncio.to_thread(build_model, work / "tiny-model")
        result["model"]["build_s"] = round(time.perf_counter() - t0, 1)
        model_path = result["model"]["path"]
    else:
        model_path = a.model
        result["model"] = {"path": a.model}
    group = make_group(a, model_path, work / "servers")
    t0 = time.perf_counter()
    try:
        await group.start()
        result["startup_s"] = round(time.perf_counter() - t0, 1)
        result["replicas"] = [{"url": r.base_url, "gpus": r.gpus, "log": str(r.log_path)} for r in group.replicas]
        if not a.skip_throughput:
            ours = await harness_throughput(group.replicas[0].base_url, a, a.tokenizer or model_path)
            result["harness"] = ours
            if a.vllm is not None:  # also against --server-command's server, when a vllm binary is here
                bench = await asyncio.to_thread(vllm_bench, group.replicas[0].base_url, a.tokenizer or model_path,
                                                a, work)
                result["vllm_bench_serve"] = bench
                # a --server-command server may answer without honouring ignore_eos (the sim): no output, no ratio
                result["ratio_harness_vs_vllm_bench"] = (round(ours["output_throughput"] / bench["output_throughput"], 3)
                                                         if bench["output_throughput"] else None)
            else:
                result["vllm_bench_serve"] = "skipped: no vllm binary here for `vllm bench serve`"
        result["prefix_cache"] = [await hit_rate(group, policy, a, salt)
                                  for salt, policy in enumerate(("round_robin", "sticky"), start=1)]
    finally:
        await group.stop()
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a real checkpoint folder (or hub id in the local cache) instead of the tiny one")
    ap.add_argument("--tokenizer", help="tokenizer for vllm bench serve (default: the model's)")
    ap.add_argument("--server-command", help="serve.command template replacing `vllm serve` (e.g. our sim)")
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--trajectories", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--max-num-seqs", type=int, default=128)
    ap.add_argument("--kv-cache-gib", type=int, default=1, help="per replica on a CPU node")
    ap.add_argument("--startup-timeout-s", type=float, default=600)
    ap.add_argument("--vllm-args", default="", help="extra `vllm serve` arguments, one string")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--work-dir", help="keep the model, logs and results here (default: a temporary folder)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        preflight(a)
    except CheckError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    result = run_in_work_dir(run_check, a)
    if result is None:
        return 2
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"model: {result['model']}\nstartup: {result.get('startup_s')} s for 2 replicas")
        if "harness" in result:
            print(f"harness: {result['harness']['output_throughput']} output tok/s at concurrency {a.concurrency}")
            bench = result["vllm_bench_serve"]
            print(f"vllm bench serve: {bench if isinstance(bench, str) else bench['output_throughput']}")
            if "ratio_harness_vs_vllm_bench" in result:
                print(f"ratio harness / vllm bench serve: {result['ratio_harness_vs_vllm_bench']} (target >= 0.95)")
        for row in result["prefix_cache"]:
            print(f"prefix-cache hit rate, {row['policy']}: {row['hit_rate']} ({row['trajectories_per_s']} traj/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
