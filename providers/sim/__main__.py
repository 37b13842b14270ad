"""Run the sim server as its own process: ``python -m providers.sim --port P --model NAME:POLICY``.

Used by benchmarks so the model's CPU is not charged to the client under test, and as the
server binary of a locally served model (``serve.command``) in the supervisor's tests: the
startup and crash options below play the failures a real ``vllm serve`` has.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import orjson
import uvloop

from providers.sim.checkpoint import behaviour
from providers.sim.frontend import Frontend
from providers.sim.hostile import Hostile
from providers.sim.prefix_cache import PrefixCacheModel
from providers.sim.server import SimServer
from providers.sim.spec import SimModel


async def _serve(models: list[SimModel], a: argparse.Namespace) -> None:
    if a.startup_delay_s:
        await asyncio.sleep(a.startup_delay_s)
    if a.fail_at_start:
        print(a.fail_at_start, file=sys.stderr, flush=True)
        raise SystemExit(1)
    cache = None
    if a.prefix_cache:
        cache = PrefixCacheModel(capacity_tokens=a.kv_tokens, prefill_ms_per_ktok=a.prefill_ms_per_ktok,
                                 decode_ms=a.decode_ms, max_running=a.max_running)
    server = SimServer(models, port=a.port, prefix_cache=cache, die_after=a.die_after,
                       log_requests=a.log_requests, ready=not a.never_ready, die_on=a.die_on,
                       allowed_local_media_path=a.allowed_local_media_path, hostile=_hostile(a.hostile),
                       frontend=Frontend(a.preprocess_ms, a.api_server_count))
    server.metrics_extra = a.metrics_extra
    await server.start()
    print(orjson.dumps({"port": server.port}).decode(), flush=True)
    await asyncio.Event().wait()


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m providers.sim")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model", action="append", default=[], help="NAME[:POLICY]")
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--tool-uses", type=int, default=2)
    ap.add_argument("--batch-turnaround-s", type=float, default=0.2, help="seconds before a batch is processed")
    ap.add_argument("--allowed-local-media-path", default=None,
                    help="serve file:// images from under this folder (as vLLM's option of that name)")
    ap.add_argument("--startup-delay-s", type=float, default=0.0, help="wait before listening (a slow start)")
    ap.add_argument("--fail-at-start", metavar="MESSAGE", help="print MESSAGE to stderr and exit 1")
    ap.add_argument("--never-ready", action="store_true", help="/health answers 503 forever")
    ap.add_argument("--die-after", type=int, help="exit abruptly when request N+1 arrives")
    ap.add_argument("--die-on", metavar="TEXT", help="exit abruptly on every request whose body contains TEXT")
    ap.add_argument("--log-requests", action="store_true", help="one stdout line per request, naming its trajectory")
    ap.add_argument("--metrics-file", metavar="PATH", help="/metrics adds this file's lines to its own "
                    "(a server whose metrics are broken or hostile)")
    ap.add_argument("--prefix-cache", action="store_true", help="model a prefix cache (latency, /metrics)")
    ap.add_argument("--preprocess-ms", type=float, default=0.0,
                    help="milliseconds per image in the front end before the engine (vLLM's API server process)")
    ap.add_argument("--api-server-count", type=int, default=1, help="front-end processes preprocessing at once")
    ap.add_argument("--kv-tokens", type=int, default=200_000)
    ap.add_argument("--prefill-ms-per-ktok", type=float, default=20.0)
    ap.add_argument("--decode-ms", type=float, default=20.0)
    ap.add_argument("--max-running", type=int, default=64)
    ap.add_argument("--hostile", metavar="JSON", help="the batch APIs misbehave (providers.sim.hostile), e.g. "
                    "'{\"outage\": 8}' or '{\"results\": \"html\"}'")
    ap.add_argument("--reply-chars", type=int, default=0,
                    help="the models' default reply (policy direct's answer) this many characters long")
    ap.add_argument("--lora-modules", action="append", default=[], metavar="NAME=PATH[,NAME=PATH...]",
                    help="serve these names too, as vLLM serves LoRA adapters: the first model's policy, or the "
                         "one a PATH/policy file names")
    ap.add_argument("--checkpoint", metavar="FOLDER",
                    help="serve the first --model as the checkpoint in FOLDER behaves: its sim.json (policy, "
                         "misread_rate, tool_uses, latency_ms, seed; providers.sim.checkpoint writes one), as a "
                         "served model's weights decide its answers: a series of them draws a learning curve")
    a = ap.parse_args()
    a.metrics_extra = Path(a.metrics_file).read_text() if a.metrics_file else ""
    models = []
    first = (a.model or ["sim"])[0]
    for i, spec in enumerate((a.model or ["sim"]) + _adapters(a.lora_modules, first)):
        name, _, policy = spec.partition(":")
        model = SimModel(name=name, policy=policy or "tools", latency_ms=a.latency_ms, tool_uses=a.tool_uses,
                         options={"batch_api": {"turnaround_s": a.batch_turnaround_s}})
        if a.reply_chars > 0:
            model.default_reply = _filler(a.reply_chars)
        if i == 0 and a.checkpoint:
            _behave(model, Path(a.checkpoint))
        models.append(model)
    uvloop.run(_serve(models, a))


def _behave(model: SimModel, folder: Path) -> None:
    """Give ``model`` the behaviour its checkpoint folder's ``sim.json`` names (none: as it is)."""
    try:
        found = behaviour(folder)
    except ValueError as e:
        raise SystemExit(f"--checkpoint {folder}: {e}") from None
    for key, value in found.items():
        if key in ("policy", "tool_uses", "latency_ms", "seed"):
            setattr(model, key, value)
        else:
            model.options[key] = value


def _hostile(text: str | None) -> Hostile | None:
    if not text:
        return None
    try:
        return Hostile(**orjson.loads(text))
    except (orjson.JSONDecodeError, TypeError) as e:
        raise SystemExit(f"--hostile: expected a JSON object of Hostile's fields: {e}") from None


def _adapters(values: list[str], base: str) -> list[str]:
    """``NAME:POLICY`` for each ``NAME=PATH`` of ``--lora-modules`` (comma-separated, repeatable)."""
    out = []
    for item in (x for v in values for x in v.split(",") if x.strip()):
        name, _, path = item.partition("=")
        policy_file = Path(path) / "policy"
        try:
            named = behaviour(Path(path)).get("policy")
        except ValueError as e:
            raise SystemExit(f"--lora-modules {path}: {e}") from None
        policy = (named or (policy_file.read_text().strip() if policy_file.is_file() else "")
                  or base.partition(":")[2])
        out.append(f"{name}:{policy}")
    return out


def _filler(n: int) -> str:
    """Prose of ``n`` characters: a long answer (a benchmark's realistic response size)."""
    words = "the answer follows from the figure and the table as read above ".split()
    out: list[str] = []
    size = 0
    while size < n:
        w = words[len(out) % len(words)]
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


if __name__ == "__main__":
    main()
