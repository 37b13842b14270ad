"""``fasteval serve CONFIG --model NAME``: one served model's servers, started as a sweep would.

For debugging a chat template or a tool parser by hand: the same command line, GPUs (or cores),
logs and state files (under ``RUN/servers/``) as in a sweep; prints the base URLs (again after a
restart, which picks a new port) and stops the servers
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

from fasteval.cli.commands import HELP
from fasteval.cli.common import print_error
from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.core.exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from fasteval.engine.run.serving import Serving, serve_specs
from providers import (
    GpuConfigError,
    GpuPool,
    Replica,
    ServeConfigError,
    ServerGroup,
    ServerStartError,
    detect_gpus,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help=HELP["serve"])
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
        serving = Serving(cfg, run_dir)
        serving.preflight()
        if serving.cpu_node:
            cores = GpuPool(serving.cores.all).take(serving.cores_needed(a.model))
            gpus: list[str] = []
            if cores is None:
                raise GpuConfigError(f"model {a.model} needs {serving.cores_needed(a.model)} core(s); "
                                     f"this node has fewer")
        else:
            cores = []
            taken = GpuPool(detect_gpus(cfg.run.gpus)).take(spec.gpus_needed)
            if taken is None:
                raise GpuConfigError(f"model {a.model} needs {spec.gpus_needed} GPU(s); this node has fewer (run.gpus)")
            gpus = taken
    except (ConfigError, ServeConfigError, GpuConfigError) as e:
        print_error(e)
        return EXIT_USAGE
    return uvloop.run(_serve(ServerGroup(spec, gpus, run_dir / "servers", cpus=cores)))


def _where(r: Replica) -> str:
    return f"cpus {','.join(r.cpus)}" if r.cpus else f"gpus {','.join(r.gpus) or '-'}"


async def _announce(group: ServerGroup) -> None:
    """One line per replica whenever it becomes ready at a new address (a restart picks a new port)."""
    shown: dict[int, tuple[int, str]] = {}
    while True:
        changed = group.changed()
        for i, r in enumerate(group.replicas):
            if r.ready.is_set() and shown.get(i, (0, ""))[0] != r.generation:
                again = i in shown
                shown[i] = (r.generation, r.base_url)
                print(f"{r.label}: {r.base_url} ({_where(r)}, log {r.log_path})"
                      + (f" (restarted, restart {r.restarts})" if again else ""), flush=True)
        await changed.wait()


async def _serve(group: ServerGroup) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    announcing: asyncio.Task[None] | None = None
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
            print_error(e)
            return EXIT_USAGE
        announcing = asyncio.create_task(_announce(group))
        await asyncio.sleep(0)
        print("serving; Ctrl-C stops the servers", file=sys.stderr, flush=True)
        await stopping
        return EXIT_OK
    finally:
        if announcing is not None:
            announcing.cancel()
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError, ServerStartError):
            await starting
        await group.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
