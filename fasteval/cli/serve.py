"""``fasteval serve CONFIG --model NAME``: one served model's servers, started as a sweep would.

For debugging a chat template or a tool parser by hand: the same command line, GPUs, logs and
state files (under ``RUN/servers/``) as in a sweep; prints the base URLs and stops the servers
on Ctrl-C or SIGTERM (and, through the launcher, if this process is killed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

import uvloop

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.core.exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean
from fasteval.engine.serving import serve_specs
from providers.local import (
    GpuConfigError,
    GpuPool,
    ServeConfigError,
    ServerGroup,
    ServerStartError,
    detect_gpus,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="start one served model's servers as a sweep would (Ctrl-C stops them)")
    p.add_argument("config")
    p.add_argument("--model", required=True, help="the model (or role) name in the config")
    p.add_argument("--run-dir", help="where servers/ logs and state files go (default runs/serve-NAME)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(a: argparse.Namespace) -> int:
    run_dir = Path(a.run_dir or Path("runs") / f"serve-{a.model}")
    try:
        cfg = load_config(a.config)
        specs = serve_specs(cfg, run_dir)
        if a.model not in specs:
            raise ConfigError(f"{a.config}: no served model or role named {a.model!r} (served: {sorted(specs)})")
        spec = specs[a.model]
        gpus = GpuPool(detect_gpus(cfg.run.get("gpus", "auto"))).take(spec.gpus_needed)
        if gpus is None:
            raise GpuConfigError(f"model {a.model} needs {spec.gpus_needed} GPU(s); this node has fewer (run.gpus)")
    except (ConfigError, ServeConfigError, GpuConfigError) as e:
        print(f"error: {clean(e)}", file=sys.stderr)
        return EXIT_USAGE
    return uvloop.run(_serve(ServerGroup(spec, gpus, run_dir / "servers")))


async def _serve(group: ServerGroup) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.create_task(group.start())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            return EXIT_INTERRUPTED
        try:
            starting.result()
        except ServerStartError as e:
            print(f"error: {clean(e)}", file=sys.stderr)
            return EXIT_USAGE
        for r in group.replicas:
            print(f"{r.label}: {r.base_url} (gpus {','.join(r.gpus) or '-'}, log {r.log_path})", flush=True)
        print("serving; Ctrl-C stops the servers", file=sys.stderr, flush=True)
        await stopping
        return EXIT_OK
    finally:
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError, ServerStartError):
            await starting
        await group.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
