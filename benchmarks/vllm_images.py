"""Image mode of benchmarks/vllm_local.py: our harness against ``vllm bench serve --dataset-name
random-mm`` on the same vision-language server, with the same requests.

    python benchmarks/vllm_images.py [--model PATH] [--requests 64] [--concurrency 8] [--input-len 64]
                                     [--output-len 32] [--image-side 224] [--repeats 3] [--json]

Not run in CI. One replica of ``vllm serve`` started by our supervisor (on a CPU node the tiny
zooming Idefics3 of tests/tiny_models/zoom.py, cached, on the usable cores; on a GPU node
``--model`` on GPU 0). Both sides send N chat requests at concurrency C, each one user message
holding ``--input-len`` tokens of random text then one ``--image-side``² image of random pixels
as a base64 JPEG data URL (what random-mm makes: PIL's JPEG of uniform noise), with
``max_tokens = --output-len`` and ``ignore_eos``, and no sampling parameters (the server's
defaults, as vllm bench sends none):

* **ours**: the images stored in a blob store as a suite's images are, turned into data URLs by
  the sweep's image encoder (``original`` profile: the JPEG bytes as they are) inside the
  request path, sent by ModelClient (retries, limits, accounting) over OpenAICompatProvider;
* **vllm bench serve** (``openai-chat`` backend, ``random-mm`` dataset, one image per request of
  that shape, same lengths, same N and C), which makes its images before its clock starts.

The sides alternate ``--repeats`` times after one warm-up; medians of request throughput and
their ratio (target >= 0.95). Prompt and output tokens per request are printed for both, as the
server counted them, to show the requests match; for ours also this process's CPU per request. Exits 2 when no vllm binary is found.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import random
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.vllm_local import CheckError, run_in_work_dir  # noqa: E402
from fasteval.engine.run.clients import image_resolver  # noqa: E402
from fasteval.images.blob_encoder import ImageEncoder  # noqa: E402
from fasteval.runfolder.blobs import BlobStore  # noqa: E402
from providers.base import ChatRequest  # noqa: E402
from providers.client import ModelClient, RetryPolicy  # noqa: E402
from providers.local import ServerGroup, ServeSpec, detect_gpus  # noqa: E402
from providers.local.gpus import detect_cpus, usable_cpus  # noqa: E402
from providers.local.spec import find_vllm  # noqa: E402
from providers.openai_compat import OpenAICompatProvider, Timeouts  # noqa: E402

NAME = "tiny-vlm"
WORDS = ("a grey image with one coloured square in a cell of a four by four grid zoom into the box and say "
         "which colour it is red green blue yellow row column top left right bottom").split()




def noise_jpeg(rng: Any, side: int) -> bytes:
    """What random-mm sends: uniform random pixels, saved by PIL as a JPEG with its defaults."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype="uint8")).save(buf, format="JPEG")
    return buf.getvalue()


async def exact_prompts(base_url: str, n: int, tokens: int) -> list[str]:
    """Random-word texts cut to ``tokens`` tokens by the server's own tokenizer (/tokenize, /detokenize)."""
    rng = random.Random(1)
    root = base_url.removesuffix("/v1")
    out = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        for _ in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(tokens * 2))
            async with s.post(f"{root}/tokenize", json={"model": NAME, "prompt": text,
                                                        "add_special_tokens": False}) as r:
                ids = (await r.json())["tokens"][:tokens]
            async with s.post(f"{root}/detokenize", json={"model": NAME, "tokens": ids}) as r:
                out.append(str((await r.json())["prompt"]))
    return out


class Harness:
    """Our side: the images in a blob store, encoded per request by the sweep's image encoder."""

    def __init__(self, base_url: str, a: argparse.Namespace, work: Path, texts: list[str]) -> None:
        import numpy as np

        self.a, self.texts = a, iter(texts)
        self.blobs = BlobStore(work / "blobs")
        self.base_url = base_url
        self.rng = np.random.default_rng(0)

    def fresh_images(self, n: int) -> list[str]:
        """New images for each pass, as vllm bench draws with a new seed: nothing cached from the last."""
        return [self.blobs.put(noise_jpeg(self.rng, self.a.image_side)) for _ in range(n)]

    async def run(self, n: int) -> dict[str, Any]:
        refs = await asyncio.to_thread(self.fresh_images, n)
        texts = [next(self.texts) for _ in range(n)]
        encoder = ImageEncoder(self.blobs)
        provider = OpenAICompatProvider(self.base_url, NAME, extra_body={"ignore_eos": True},
                                        timeouts=Timeouts(read_s=600, attempt_s=900),
                                        image_resolver=image_resolver(encoder))
        client = ModelClient(NAME, provider, concurrency=self.a.concurrency, retry=RetryPolicy(max_attempts=3))

        async def one(i: int) -> tuple[int, int]:
            content = [{"type": "text", "text": texts[i]}, {"type": "image", "image": refs[i]}]
            resp = await client.chat(ChatRequest(messages=[{"role": "user", "content": content}],
                                                 params={"max_tokens": self.a.output_len}, image_profile="original"))
            return resp.usage.prompt_tokens, resp.usage.completion_tokens

        t0, cpu0 = time.perf_counter(), time.process_time()
        usage = await asyncio.gather(*(one(i) for i in range(n)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        await client.close()
        encoder.close()
        # this process's CPU (the encoder's threads included) per request: what ours costs beside the server
        return {"request_throughput": round(n / wall, 3), "wall_s": round(wall, 2),
                "client_cpu_ms_per_request": round(1000 * cpu / n, 2),
                "prompt_tokens_per_request": round(sum(p for p, _ in usage) / n, 1),
                "output_tokens_per_request": round(sum(c for _, c in usage) / n, 1)}


def bench_command(a: argparse.Namespace, base_url: str, tokenizer: str, out_dir: Path) -> list[str]:
    side = a.image_side
    return [a.vllm, "bench", "serve", "--backend", "openai-chat", "--base-url", base_url.removesuffix("/v1"),
            "--endpoint", "/v1/chat/completions", "--model", NAME, "--tokenizer", tokenizer,
            "--dataset-name", "random-mm", "--random-input-len", str(a.input_len),
            "--random-output-len", str(a.output_len), "--random-range-ratio", "0",
            "--random-mm-base-items-per-request", "1", "--random-mm-num-mm-items-range-ratio", "0",
            "--random-mm-limit-mm-per-prompt", '{"image": 1, "video": 0}',
            "--random-mm-bucket-config", f"{{({side}, {side}, 1): 1.0}}", "--num-prompts", str(a.requests),
            "--max-concurrency", str(a.concurrency), "--ignore-eos", "--disable-tqdm", "--save-result",
            "--result-dir", str(out_dir), "--result-filename", "bench.json"]


def vllm_bench(cmd: list[str], out_dir: Path, seed: int) -> dict[str, Any]:
    """One pass, with a new seed: its texts and images must not be cached from the last pass."""
    proc = subprocess.run([*cmd, "--seed", str(seed)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise CheckError(f"vllm bench serve failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    data = json.loads((out_dir / "bench.json").read_text())
    done = max(1, int(data["completed"]))
    return {"request_throughput": round(float(data["request_throughput"]), 3),
            "wall_s": round(float(data["duration"]), 2),
            "prompt_tokens_per_request": round(int(data["total_input_tokens"]) / done, 1),
            "output_tokens_per_request": round(int(data["total_output_tokens"]) / done, 1)}


def make_group(a: argparse.Namespace, model: str, servers: Path) -> ServerGroup:
    """One replica: on a CPU node the usable cores and the tiny VLM's arguments, on a GPU node GPU 0."""
    args = ["--max-model-len", str(a.max_model_len), "--max-num-seqs", str(a.max_num_seqs),
            "--limit-mm-per-prompt", '{"image": 1}', *shlex.split(a.vllm_args)]
    serve: dict[str, Any] = {"model": model, "command": [a.vllm], "startup_timeout_s": a.startup_timeout_s,
                             "max_restarts": 0}
    gpus = detect_gpus("auto")
    if gpus:
        return ServerGroup(ServeSpec.from_config(NAME, {**serve, "args": args}), gpus[:1], servers)
    spec = ServeSpec.from_config(NAME, {**serve, "args": [*args, "--dtype", "float32"], "kv_cache_gib": 1})
    return ServerGroup(spec, [], servers, cpus=usable_cpus(detect_cpus()))


async def run_check(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if a.model is None:
        from tests.tiny_models.zoom import ensure_checkpoint

        t0 = time.perf_counter()
        a.model = str(await asyncio.to_thread(ensure_checkpoint, str(Path(a.vllm).with_name("python"))))
        result["model_build_s"] = round(time.perf_counter() - t0, 1)
    result["model"] = a.model
    group = make_group(a, a.model, work / "servers")
    t0 = time.perf_counter()
    try:
        await group.start()
        result["startup_s"] = round(time.perf_counter() - t0, 1)
        url = group.replicas[0].base_url
        texts = await exact_prompts(url, a.concurrency + a.requests * a.repeats, a.input_len)
        harness = Harness(url, a, work, texts)
        result["warm_up"] = await harness.run(a.concurrency)  # the server's first images compile kernels
        cmd = bench_command(a, url, a.tokenizer or a.model, work)
        ours: list[dict[str, Any]] = []
        theirs: list[dict[str, Any]] = []
        for rep in range(a.repeats):  # alternating, so a noisy neighbour hurts both sides alike
            ours.append(await harness.run(a.requests))
            theirs.append(await asyncio.to_thread(vllm_bench, cmd, work, 100 + rep))
    finally:
        await group.stop()
    med_ours = statistics.median(r["request_throughput"] for r in ours)
    med_theirs = statistics.median(r["request_throughput"] for r in theirs)
    result |= {"harness": ours, "vllm_bench_serve": theirs, "command": shlex.join(cmd),
               "median_request_throughput": {"harness": med_ours, "vllm_bench_serve": med_theirs},
               "ratio_harness_vs_vllm_bench": round(med_ours / med_theirs, 3)}
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a vision-language checkpoint folder instead of the tiny one")
    ap.add_argument("--tokenizer", help="tokenizer for vllm bench serve (default: the model's)")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--image-side", type=int, default=224)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--startup-timeout-s", type=float, default=900)
    ap.add_argument("--vllm-args", default="", help="extra `vllm serve` arguments, one string")
    ap.add_argument("--work-dir", help="keep logs and results here (default: a temporary folder)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    a.vllm = find_vllm()
    if a.vllm is None:
        print("error: no vllm binary (not on PATH, no .venv-vllm/bin/vllm): `make vllm`", file=sys.stderr)
        return 2
    result = run_in_work_dir(run_check, a)
    if result is None:
        return 2
    if a.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"model: {result['model']}; startup {result['startup_s']} s")
    for side in ("harness", "vllm_bench_serve"):
        rows = result[side]
        print(f"{side}: {result['median_request_throughput'][side]} req/s (median of "
              f"{', '.join(str(r['request_throughput']) for r in rows)}); {rows[0]['prompt_tokens_per_request']} "
              f"prompt + {rows[0]['output_tokens_per_request']} output tokens per request")
    print(f"ratio harness / vllm bench serve: {result['ratio_harness_vs_vllm_bench']} (target >= 0.95)")
    print(f"vllm bench serve command: {result['command']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
