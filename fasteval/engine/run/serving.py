"""The sweep's side of locally served models: GPU scheduling, server lifecycle and job admission.

Served models (``serve:`` in a model or role entry) need ``tensor_parallel_size × replicas``
GPUs each; on a node with no GPU (or ``run.gpus: none``) they run vLLM's CPU build instead, each
replica on cores of its own (``serve.cpus``, default the usable cores split evenly). Role models (a local judge) start first and stay up for the whole sweep. Evaluated
models start in config order as GPUs allow; a model's jobs run while its servers are up, and
when its last job is done its servers stop and the next model starts. Jobs of a model that is
not up yet are held back by the sweep's launcher (``admission``), so waiting jobs never fill
the global in-flight cap while the running model's jobs wait behind them. A model whose servers
fail to start or run out of restarts leaves its remaining jobs unrun: the sweep finishes the
rest and exits 3.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from fasteval.config.endpoint import EndpointSpec
from fasteval.config.load import SweepConfig
from fasteval.core.exitcodes import RunIncomplete
from fasteval.engine.identity import checkpoint_identities, lora_groups
from fasteval.runfolder.names import BLOBS
from providers import (
    GpuPool,
    Provider,
    RoutedProvider,
    Router,
    ServeConfigError,
    ServerGroup,
    ServerStartError,
    ServeSpec,
    detect_cpus,
    detect_gpus,
    missing_vllm_message,
    usable_cpus,
)

log = logging.getLogger("fasteval.engine.run.serving")


def is_served(ep: EndpointSpec) -> bool:
    return ep.serve is not None


def serve_specs(cfg: SweepConfig, run_dir: Path) -> dict[str, ServeSpec]:
    """ServeSpecs of every server, by name: served models and roles (roles under their role name),
    and one per LoRA series (under the series' name) serving its base with all its adapters."""
    shared = lora_groups(cfg)
    out: dict[str, ServeSpec] = {}
    for name, entry in [(m.name, m) for m in cfg.models] + list(cfg.roles.items()):
        if entry.serve is None:
            continue
        group = shared.get(name, name)
        if group in out:  # one more adapter of a LoRA series
            out[group].lora_modules.update(entry.serve.get("lora_modules") or {})
            continue
        spec = ServeSpec.from_config(group, entry.serve)
        spec.lora_modules = dict(spec.lora_modules)
        if entry.images.local_media and spec.allowed_local_media_path is None:
            spec.allowed_local_media_path = str((run_dir / BLOBS).resolve())
        out[group] = spec
    return out


class Serving:
    """Servers of one sweep: which model may run jobs now, and their providers."""

    def __init__(self, cfg: SweepConfig, run_dir: Path) -> None:
        self.specs = serve_specs(cfg, run_dir)
        self.group_of = {m.name: g for m in cfg.models if (g := lora_groups(cfg).get(m.name, m.name))
                         in self.specs} | {r: r for r in cfg.roles if r in self.specs}
        """Model (or role) name -> the server it runs on: its own, or its LoRA series' shared one."""
        self.roles = {r for r in cfg.roles if r in self.specs}
        self.order = list(dict.fromkeys(self.group_of[m.name] for m in cfg.models if m.name in self.group_of))
        self.pool = GpuPool(detect_gpus(cfg.run.gpus))
        self.cpu_node = not self.pool.all
        self.cores = GpuPool(usable_cpus(detect_cpus()) if self.cpu_node else [])
        self.identity = checkpoint_identities(cfg)
        self.servers_dir = run_dir / "servers"
        self.groups = {name: ServerGroup(spec, [], self.servers_dir) for name, spec in self.specs.items()}
        self.routers: dict[str, Router] = {}
        self.expected = dict.fromkeys(self.specs, 0)
        self.state = dict.fromkeys(self.specs, "waiting")  # waiting | starting | up | done | failed
        self.failures: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()

    @classmethod
    def from_config(cls, cfg: SweepConfig, run_dir: Path) -> Serving | None:
        entries = list(cfg.models) + list(cfg.roles.values())
        return cls(cfg, run_dir) if any(is_served(e) for e in entries) else None

    def cores_per_replica(self, name: str) -> int:
        """On a CPU node: a replica's cores (serve.cpus, else the usable cores split evenly between
        this model's replicas and the served roles' replicas, which run beside it)."""
        spec = self.specs[name]
        if spec.cpus is not None:
            return spec.cpus
        sharing = spec.replicas + (0 if name in self.roles else sum(self.specs[r].replicas for r in self.roles))
        return max(1, len(self.cores.all) // max(1, sharing))

    def cores_needed(self, name: str) -> int:
        return self.cores_per_replica(name) * self.specs[name].replicas

    def _take(self, name: str) -> tuple[list[str], list[str]] | None:
        """(GPUs, cores) for a model's replicas, or None while they are taken by another model."""
        if not self.cpu_node:
            gpus = self.pool.take(self.specs[name].gpus_needed)
            return None if gpus is None else (gpus, [])
        cores = self.cores.take(self.cores_needed(name))
        return None if cores is None else ([], cores)

    def _give(self, name: str) -> None:
        self.pool.give(self.groups[name].gpus)
        self.cores.give(self.groups[name].cpus)

    def placement(self) -> list[str]:
        """What will run where, one line per served model (``config check`` prints them)."""
        lines = []
        for name, spec in self.specs.items():
            binary = spec.vllm_binary() if spec.command is None else spec.command[0]
            what = f"{spec.replicas} replica(s) of {binary or 'vllm (not found)'}"
            if self.cpu_node:
                per = self.cores_per_replica(name)
                kv = f", KV cache {spec.kv_cache_gib} GiB each" if spec.kv_cache_gib is not None else ""
                lines.append(f"served {name}: {what} on the CPU (no GPU here), {per} core(s) each "
                             f"from cores {','.join(self.cores.all)}{kv}")
            else:
                lines.append(f"served {name}: {what}, {spec.tensor_parallel_size} GPU(s) each "
                             f"from GPUs {','.join(self.pool.all)}")
        return lines

    def preflight(self) -> None:
        """Refuse a config whose served models cannot fit on this node (before anything runs)."""
        for name, spec in self.specs.items():
            binary = spec.vllm_binary() if spec.command is None else None
            if spec.command is None and (binary is None or shutil.which(binary) is None):
                raise ServeConfigError(missing_vllm_message(name, cpu_node=self.cpu_node))
        if self.cpu_node:
            have_cores = len(self.cores.all)
            roles_cores = sum(self.cores_needed(r) for r in self.roles)
            for name in self.specs:
                need = self.cores_needed(name) + (0 if name in self.roles else roles_cores)
                if need > have_cores:
                    raise ServeConfigError(
                        f"model {name} needs {need} core(s) on this CPU node (serve.cpus × replicas"
                        + (", with the served roles" if roles_cores and name not in self.roles else "")
                        + f"), but {have_cores} are usable ({','.join(self.cores.all)}); lower serve.cpus or replicas")
            return
        have = len(self.pool.all)
        roles_need = sum(self.specs[r].gpus_needed for r in self.roles)
        for name, spec in self.specs.items():
            need = spec.gpus_needed + (0 if name in self.roles else roles_need)
            if need > have:
                found = f"{have} GPU(s) ({', '.join(self.pool.all)})" if have else "no GPU"
                raise ServeConfigError(
                    f"model {name} needs {spec.gpus_needed} GPU(s) (tensor_parallel_size × replicas)"
                    + (f" next to {roles_need} for served roles" if roles_need and name not in self.roles else "")
                    + f", but this node has {found}; set run.gpus or lower the sizes")

    def provider(self, name: str, make: Callable[[str], Provider], *, tool_message_images: bool) -> RoutedProvider:
        """The provider a ModelClient uses; it waits for the servers, which start later."""
        group = self.group_of[name]
        spec = self.specs[group]
        router = Router(self.groups[group], make, policy=spec.routing, admission=spec.admission)
        self.routers.setdefault(group, router)
        return RoutedProvider(router, self.endpoint_name(name), tool_message_images=tool_message_images)

    def endpoint_name(self, name: str) -> str:
        """Stable across ports and restarts (the model cache still hits), new for a new checkpoint."""
        return f"local:{name}@{self.identity[name]['fingerprint']}"

    # -- the sweep's launcher asks these -----------------------------------------------------
    def served(self, model: str) -> bool:
        return model in self.group_of

    def expect(self, model: str, n: int = 1) -> None:
        """``n`` more unfinished jobs of this model are in the plan."""
        if model in self.group_of:
            self.expected[self.group_of[model]] += n

    def admission(self, model: str) -> str:
        """``run`` (servers up), ``defer`` (not up yet) or ``skip`` (servers failed).

        Jobs wait while the servers start, outside any job: a job's ``latency_s`` must not
        include the minute a server takes to start.
        """
        state = self.state[self.group_of[model]]
        if state == "up":
            return "run"
        return "skip" if state in ("failed", "done") else "defer"

    async def wait_change(self) -> None:
        await self._changed.wait()

    async def track(self, model: str, job: Coroutine[Any, Any, None]) -> None:
        """Run one job of a served model; its last job stops the model's servers."""
        model = self.group_of[model]  # a LoRA series' server stops after the last job of all its steps
        try:
            await job
        finally:
            self.forget(model)

    def forget(self, model: str) -> None:
        """One job of this model is over (run, or dropped by ``fasteval ctl drain``): its last stops the servers."""
        if model in self.expected:
            self.expected[model] -= 1
            group = self.groups[model]
            if self.state[model] == "up" and group.exhausted:  # restarts used up: free its GPUs
                self.failures.append(f"{model}: servers exhausted ({group.error or 'out of restarts'})")
                self._spawn(self._stop(model, "failed"))
            if self.expected[model] <= 0 and model not in self.roles and self.state[model] in ("starting", "up"):
                self._spawn(self._stop(model, "done"))
            elif self.expected[model] <= 0 and self.state[model] == "waiting":  # drained before it started
                self.state[model] = "done"
                self._notify()

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the served roles (waiting until ready), then as many evaluated models as fit."""
        self.preflight()
        for role in self.roles:
            gpus, cores = self._take(role) or ([], [])
            self.groups[role].assign(gpus, cores)
            self.state[role] = "starting"
            try:
                await self.groups[role].start()
            except ServerStartError as e:  # nothing could be scored: stop before any job (exit 3)
                self.state[role] = "failed"
                raise RunIncomplete(f"incomplete: the served role {role} did not start\n{e}") from None
            self.state[role] = "up"
        self._admit()

    def _admit(self) -> None:
        for name in self.order:
            if self.state[name] != "waiting":
                continue
            if self.expected[name] <= 0:
                self.state[name] = "done"
                continue
            taken = self._take(name)
            if taken is None:
                continue  # a smaller model further down may still fit
            self.groups[name].assign(*taken)
            self.state[name] = "starting"
            self._spawn(self._start(name))
        self._notify()

    async def _start(self, name: str) -> None:
        try:
            await self.groups[name].start()
        except ServerStartError as e:
            self.state[name] = "failed"
            self.failures.append(str(e))
            print(f"error: {e}", file=sys.stderr, flush=True)
            self._give(name)
            self._admit()
            return
        if self.state[name] == "starting":
            self.state[name] = "up"
            self._notify()

    async def _stop(self, name: str, final: str) -> None:
        self.state[name] = final
        await self.groups[name].stop()
        self._give(name)
        self._admit()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def close(self) -> None:
        """Stop every server (normal end, Ctrl-C, errors): no process is left behind."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        # evaluated models first, then the roles (a judge outlives the models it judges)
        for names in ([n for n in self.groups if n not in self.roles], sorted(self.roles)):
            await asyncio.gather(*(self.groups[n].stop() for n in names if self.groups[n].launched),
                                 return_exceptions=True)
        for name, state in self.state.items():
            if state in ("starting", "up"):
                self.state[name] = "done"

    def notes(self) -> str:
        """The live panel's line about servers: replicas whose front end looks like the ceiling (once each)."""
        warned = [rep.label for group in self.groups.values() for rep in group.replicas if rep.warning]
        return (f"preprocessing-bound: {', '.join(warned)} (raise serve.api_server_count; see run.log)"
                if warned else "")

    def rows(self) -> dict[str, dict[str, Any]]:
        """Progress-panel rows: one per server with its state, GPUs, restarts and load."""
        out: dict[str, dict[str, Any]] = {}
        for name, group in self.groups.items():
            if not group.launched:
                out[f"server {name} [{self.state[name]}]"] = {"in_flight": "", "limit": "", "requests": ""}
                continue
            routes = {id(r.replica): r for r in self.routers[name].routes} if name in self.routers else {}
            for rep in group.replicas:
                route = routes.get(id(rep))
                where = f"cpu {','.join(rep.cpus)}" if rep.cpus else f"gpu {','.join(rep.gpus) or '-'}"
                out[f"server {rep.label} [{rep.state}] {where} restarts {rep.restarts}"] = {
                    "in_flight": route.in_flight if route else "", "limit": (route.window or "") if route else "",
                    "requests": route.sent if route else ""}
        return out
