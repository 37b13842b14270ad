"""Routing across replicas in simulation: prefix-cache hit rate and throughput per policy.

    .venv/bin/python benchmarks/routing.py [--replicas 4] [--trajectories 128] [--rounds 8]
                                           [--concurrency 96] [--kv-tokens 150000] [--repeats 3] [--json]

R sim replicas (``python -m providers.sim --prefix-cache``, each its own process, started by
our supervisor) model a prefix cache each: an LRU of message-prefix hashes with a token
capacity, latency = decode + prefill of the prompt tokens not in the cache, at most
``--max-running`` requests at once (the rest wait, as in vLLM's scheduler). N multi-turn
trajectories (a shared system prompt, a unique ~2k-token first turn, then ``--rounds`` rounds
that each re-send the growing history) run C at a time through ``RoutedProvider``, once per
policy: round-robin, least-loaded (each request to the replica with fewest in flight),
sticky-least-loaded (our default), each without and with KV admission (``admission: kv``: each
replica's window follows its /metrics). The replicas restart between configurations so every
one starts cold. Figures: prefix-cache hit rate (cached prompt tokens / prompt tokens, from the
replicas' /metrics), trajectories/s and requests/s, and throughput relative to round-robin.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fasteval.core.job import job_context  # noqa: E402
from providers.base import ChatRequest  # noqa: E402
from providers.local import RoutedProvider, Router, ServerGroup, ServeSpec, parse_metrics  # noqa: E402
from providers.openai_compat import OpenAICompatProvider  # noqa: E402

POLICIES = ["round_robin", "least_loaded", "sticky"]
WORDS = "image crop zoom grid colour count rotate maze jigsaw spot region answer tool python".split()


def _text(rng: random.Random, tokens: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(tokens * 4 // 6))


async def one_trajectory(provider: RoutedProvider, i: int, a: argparse.Namespace, system: str) -> int:
    rng = random.Random(i)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": f"task {i}: " + _text(rng, a.first_turn_tokens)}]
    with job_context(f"t{i}"):
        for r in range(a.rounds):
            resp = await provider.chat(ChatRequest(messages=list(messages), seed=i))
            messages.append({"role": "assistant", "content": resp.content or ""})
            messages.append({"role": "user", "content": f"round {r}: " + _text(rng, a.turn_tokens)})
    return a.rounds


async def hit_rate(group: ServerGroup) -> tuple[float, int]:
    hits = queries = 0.0
    async with aiohttp.ClientSession() as s:
        for r in group.replicas:
            async with s.get(f"http://{r.host}:{r.port}/metrics") as resp:
                m = parse_metrics(await resp.text())
            hits += m.get("vllm:prefix_cache_hits_total", 0.0)
            queries += m.get("vllm:prefix_cache_queries_total", 0.0)
    return (hits / queries if queries else 0.0), int(queries)


async def run_config(policy: str, admission: str | None, a: argparse.Namespace, servers: Path) -> dict[str, Any]:
    command = ["{python}", "-m", "providers.sim", "--port", "{port}", "--model", "{served_model_name}:direct",
               "--prefix-cache", "--kv-tokens", str(a.kv_tokens), "--prefill-ms-per-ktok", str(a.prefill_ms_per_ktok),
               "--decode-ms", str(a.decode_ms), "--max-running", str(a.max_running)]
    spec = ServeSpec.from_config("bench", {"model": "sim", "command": command, "replicas": a.replicas,
                                           "startup_timeout_s": 60, "stop_timeout_s": 5})
    group = ServerGroup(spec, [str(i) for i in range(a.replicas)], servers)
    await group.start()
    router = Router(group, lambda url: OpenAICompatProvider(url, "bench", max_connections=4096),
                    policy=policy, admission=admission, initial_window=a.max_running)
    provider = RoutedProvider(router, "bench")
    system = _text(random.Random(-1), a.system_tokens)
    slots = asyncio.Semaphore(a.concurrency)

    async def bounded(i: int) -> int:
        async with slots:
            return await one_trajectory(provider, i, a, system)

    try:
        t0 = time.perf_counter()
        rounds = await asyncio.gather(*(bounded(i) for i in range(a.trajectories)))
        wall = time.perf_counter() - t0
        rate, prompt_tokens = await hit_rate(group)
    finally:
        await provider.close()
        await group.stop()
    return {"policy": policy, "admission": admission or "none", "wall_s": round(wall, 3),
            "trajectories_per_s": round(a.trajectories / wall, 2), "requests_per_s": round(sum(rounds) / wall, 1),
            "hit_rate": round(rate, 4), "prompt_tokens": prompt_tokens, "moved": router.moved}


async def main_async(a: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for admission in (None, "kv"):
            for policy in POLICIES:
                runs = [await run_config(policy, admission, a, Path(tmp)) for _ in range(a.repeats)]
                row = dict(runs[-1])
                for key in ("wall_s", "trajectories_per_s", "requests_per_s", "hit_rate"):
                    row[key] = round(statistics.median(r[key] for r in runs), 4)
                rows.append(row)
                if not a.json:
                    print(f"  {policy:13s} admission={admission or 'none':4s} hit rate {row['hit_rate']:.3f}  "
                          f"{row['trajectories_per_s']:7.2f} traj/s  {row['requests_per_s']:8.1f} req/s", flush=True)
    base = {r["admission"]: r["trajectories_per_s"] for r in rows if r["policy"] == "round_robin"}
    for r in rows:
        r["throughput_vs_round_robin"] = round(r["trajectories_per_s"] / base["none"], 3)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--trajectories", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=96)
    ap.add_argument("--system-tokens", type=int, default=500)
    ap.add_argument("--first-turn-tokens", type=int, default=2000)
    ap.add_argument("--turn-tokens", type=int, default=150)
    ap.add_argument("--kv-tokens", type=int, default=150_000, help="prefix-cache capacity per replica")
    ap.add_argument("--prefill-ms-per-ktok", type=float, default=100.0)
    ap.add_argument("--decode-ms", type=float, default=200.0)
    ap.add_argument("--max-running", type=int, default=16, help="running requests per replica (more wait)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.json:
        print(f"{a.replicas} sim replicas, {a.trajectories} trajectories x {a.rounds} rounds, concurrency "
              f"{a.concurrency}, KV {a.kv_tokens} tokens/replica, max running {a.max_running}/replica")
    rows = uvloop.run(main_async(a))
    if a.json:
        print(json.dumps({"config": vars(a), "rows": rows}, indent=2))
    else:
        for r in rows:
            print(f"{r['policy']:13s} admission={r['admission']:4s} hit={r['hit_rate']:.3f} "
                  f"x{r['throughput_vs_round_robin']:.2f} vs round-robin")


if __name__ == "__main__":
    main()
