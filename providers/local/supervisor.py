"""Starting, watching, restarting and stopping the server processes of locally served models.

One ``Replica`` is one server process (through the launcher, in its own process group, on a
free loopback port, with its own GPUs, or on a CPU node its own cores); a ``ServerGroup`` is a
served model's replicas. Whenever a replica ends, restarts or the sweep stops, its whole process
group is stopped, even when the launcher itself was killed (``kill -9`` of the pid in its state
file): the server under it must not keep its port, cores or GPU memory. Ready
means ``/health`` answers and ``/v1/models`` lists the served name. A replica that dies or stops
answering is restarted with backoff up to ``max_restarts``; after that the group is exhausted and
requests raise ``EndpointDown``, which the sweep turns into unrun jobs (exit 3), not errors.
Everything a replica does is visible in ``RUN/servers/<name>-<i>.log`` and ``.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from fasteval.core.redact import redact_text
from providers.breaker import EndpointDown
from providers.local.gpus import cpu_bind
from providers.local.launcher import group_members
from providers.local.metrics import PreprocessWatch, read_metrics
from providers.local.spec import ServeSpec, cache_root, hints_for

log = logging.getLogger("fasteval.engine.run.serving")
LOG_TAIL_LINES = 40
_HEALTH_FAILURES_BEFORE_RESTART = 3


class ServerStartError(RuntimeError):
    """A replica did not become ready: the message holds the command, the log tail and hints."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what or message.splitlines()[0]
        """The cause in one line, without the replica's label (callers add their own)."""


_ERROR_LINE = re.compile(r"(Error|Exception|error:|Traceback|Killed|Aborted|Segmentation fault)")
_OUR_LINES = ("launcher:", "=== fasteval:")


def last_error_line(tail: str) -> str | None:
    """The server's own last error line in a log tail (our launcher's lines excluded)."""
    for line in reversed(tail.splitlines()):
        text = line.strip()
        if text and not text.startswith(_OUR_LINES) and _ERROR_LINE.search(text) and text != "Traceback (most recent call last):":
            return text[:500]
    return None


def server_env(spec: ServeSpec, *, gpus: list[str], cpus: list[str], tmpdir: Path,
               values: dict[str, Any]) -> dict[str, str]:
    """The environment of one replica's server.

    vLLM and torch write caches outside the run folder by default (``~/.cache/vllm``,
    ``/tmp/torchinductor_<user>``, a ``/tmp/vllm_dist_<uuid>`` per start): their caches go to
    fasteval's cache folder (reused across runs: warm compiles), the per-start files to a
    temporary folder of this replica, removed when it stops. The user's own settings win.
    """
    env = dict(os.environ)
    root = cache_root()
    env.setdefault("VLLM_CACHE_ROOT", str(root / "vllm"))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "torchinductor"))
    env["TMPDIR"] = str(tmpdir)
    env["FASTEVAL_SERVER_TMPDIR"] = str(tmpdir)  # the launcher removes it, even when fasteval was killed
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    elif cpus:  # a CPU node: this replica's own cores, and its KV cache size
        env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_bind(cpus, spec.tensor_parallel_size)
        if spec.kv_cache_gib is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(spec.kv_cache_gib)
    env.update(spec.replica_env(values))
    return env


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Replica:
    """One server process of a served model, kept ready until stopped or out of restarts."""

    def __init__(self, spec: ServeSpec, index: int, gpus: list[str], servers_dir: Path,
                 host: str = "127.0.0.1", on_change: Any = None, cpus: list[str] | None = None) -> None:
        self.spec = spec
        self.index = index
        self.gpus = gpus
        self.cpus = list(cpus or [])
        self.host = host
        self.label = f"{spec.name}-{index}"
        self.log_path = servers_dir / f"{self.label}.log"
        self.state_path = servers_dir / f"{self.label}.json"
        self.tmp_dir: Path | None = None
        """The server's TMPDIR for this start: short (a unix socket path under it must fit in 107
        bytes, which a run folder's path may not), its own, and removed when the replica stops."""
        self.state = "pending"
        self.restarts = 0
        self.port = 0
        self.generation = 0
        self.command: list[str] = []
        self.started_at: str | None = None
        self.stopped_at: str | None = None
        self.last_error: str | None = None
        self.outstanding = 0
        """Requests the router has sent here and not had back (what a preprocessing-bound server hides)."""
        self.preprocessing = PreprocessWatch(self.label)
        self.warning: str | None = None
        """Said once, in run.log and on the live panel: the replica looks preprocessing-bound."""
        self.prefix_cache: dict[str, int] | None = None
        """vLLM's prefix-cache counters (token ``queries`` and ``hits`` since its last start), read as it stops."""
        self.ready = asyncio.Event()
        self._process: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        self._recovering: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._on_change = on_change
        self._servers_dir = servers_dir
        """Made when the replica first writes its state (a start), never by building it: ``config
        check`` builds the supervisors to place them and must leave no folder behind."""

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    # -- state -------------------------------------------------------------------------------
    def _set(self, state: str) -> None:
        self.state = state
        if state == "ready":
            self.ready.set()
        else:
            self.ready.clear()
        if state in ("stopped", "failed"):
            self.stopped_at = _now()
        self.write_state()
        if self._on_change is not None:
            self._on_change()

    def write_state(self) -> None:
        doc = {"name": self.spec.name, "replica": self.index, "pid": self.pid, "pgid": self.pid, "port": self.port,
               "base_url": self.base_url if self.port else None, "gpus": self.gpus, "cpus": self.cpus,
               "state": self.state,
               "restarts": self.restarts, "started_at": self.started_at, "stopped_at": self.stopped_at,
               "command": [redact_text(part) for part in self.command], "log": str(self.log_path),
               "last_error": self.last_error, "tmpdir": str(self.tmp_dir) if self.tmp_dir is not None else None}
        if self.prefix_cache is not None:
            doc["prefix_cache"] = self.prefix_cache
        self._servers_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".json.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # a leftover (or a planted link) is replaced, never written through
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        tmp.replace(self.state_path)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Spawn and wait until ready; raises ServerStartError (the replica is then stopped)."""
        self._set("starting")
        try:
            await self._spawn_and_wait()
        except ServerStartError as e:
            self.last_error = e.what
            await self._kill()
            self._set("failed")
            raise
        self._set("ready")
        self._watch = asyncio.create_task(self._watch_loop())

    async def _spawn_and_wait(self) -> None:
        self.port = free_port(self.host)
        self.command = self.spec.command_line(port=self.port, host=self.host, replica=self.index, cpus=self.cpus,
                                              gpus=self.gpus)
        self._remove_tmp()  # the last start's per-start files
        self.tmp_dir = Path(tempfile.mkdtemp(prefix=f"fasteval-{self.label[:40]}-"))
        env = server_env(self.spec, gpus=self.gpus, cpus=self.cpus, tmpdir=self.tmp_dir,
                         values=self.spec.placeholders(port=self.port, host=self.host, replica=self.index,
                                                       cpus=self.cpus, gpus=self.gpus))
        self.generation += 1
        self.started_at, self.stopped_at = _now(), None
        # O_NOFOLLOW: a servers/*.log planted as a link is refused (ELOOP), never appended to.
        with os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666),
                       "ab") as logf:
            logf.write(f"\n=== fasteval: start {self.label} generation {self.generation} at {self.started_at}: "
                       f"{redact_text(shlex.join(self.command))}\n".encode())
            logf.flush()
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "providers.local.launcher", "--grace", str(self.spec.stop_timeout_s),
                "--", *self.command, stdin=asyncio.subprocess.PIPE, stdout=logf, stderr=asyncio.subprocess.STDOUT,
                env=env, start_new_session=True)
        self.write_state()
        await self._wait_ready(time.monotonic() + self.spec.startup_timeout_s)

    async def _wait_ready(self, deadline: float) -> None:
        while True:
            if not self.alive():
                code = self._process.returncode if self._process is not None else None
                raise self._failure(f"the server exited during startup (code {code})")
            if await self._probe(ready=True):
                return
            if time.monotonic() > deadline:
                raise self._failure(f"the server was not ready after {self.spec.startup_timeout_s:g} s "
                                    f"(serve.startup_timeout_s)")
            await asyncio.sleep(0.25)

    def this_start_log(self) -> str:
        """The log tail of the current start only."""
        tail = log_tail(self.log_path)
        marker = tail.rfind("=== fasteval: start")
        return tail[tail.find("\n", marker) + 1:] if marker >= 0 else tail

    def log_error(self) -> str | None:
        """The server's own last error line since its current start (why it died, in its words)."""
        return last_error_line(self.this_start_log())

    def _failure(self, what: str) -> ServerStartError:
        tail = self.this_start_log()
        cause = last_error_line(tail)
        if cause:
            what = f"{what}: {cause}"
        hints = hints_for(tail)
        lines = [f"{self.label}: {what}", f"  command: {redact_text(shlex.join(self.command))}", f"  log: {self.log_path}",
                 f"  last {LOG_TAIL_LINES} log lines:", *("    " + line for line in tail.splitlines())]
        lines += [f"  hint: {h}" for h in hints]
        return ServerStartError("\n".join(lines), what)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5, sock_connect=2))
        return self._session

    async def _probe(self, ready: bool = False) -> bool:
        """Does /health answer (and, when ``ready``, does /v1/models list the served name)?"""
        root = f"http://{self.host}:{self.port}"
        try:
            async with self._http().get(f"{root}/health") as r:
                if r.status != 200:
                    return False
            if not ready:
                return True
            async with self._http().get(f"{root}/v1/models") as r:
                if r.status != 200:
                    return False
                data = orjson.loads(await r.read())
            return any(m.get("id") == self.spec.name for m in data.get("data") or [])
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError, AttributeError):
            return False

    async def healthy(self) -> bool:
        """A quick check after a failed request: is the process alive and answering?"""
        return self.alive() and await self._probe()

    async def _watch_loop(self) -> None:
        failures = 0
        while self.state == "ready":
            await asyncio.sleep(self.spec.health_interval_s)
            if self.state != "ready":
                return
            if not self.alive():
                cause = self.log_error()
                self.report_unhealthy("the server process exited" + (f": {cause}" if cause else ""))
                return
            failures = 0 if await self._probe() else failures + 1
            if failures >= _HEALTH_FAILURES_BEFORE_RESTART:
                self.report_unhealthy(f"/health failed {failures} times in a row")
                return
            if failures == 0 and self.warning is None:
                await self._check_preprocessing()

    async def _check_preprocessing(self) -> None:
        """Read /metrics beside the health check; warn once if the front end, not the engine, is the ceiling."""
        metrics = await read_metrics(self._http(), f"http://{self.host}:{self.port}/metrics")
        reason = self.preprocessing.observe(metrics, self.outstanding) if metrics is not None else None
        if reason is not None:
            self.warning = reason
            log.warning("%s", reason)
            if self._on_change is not None:
                self._on_change()

    async def _keep_prefix_cache_counters(self) -> None:
        """vLLM's counters die with the server: kept in the state file, a run's prefix-cache hit rate
        can still be read (and checked against the records' cached tokens) once its servers are gone."""
        metrics = await read_metrics(self._http(), f"http://{self.host}:{self.port}/metrics")
        if metrics is not None and "vllm:prefix_cache_queries_total" in metrics:
            self.prefix_cache = {"queries": int(metrics["vllm:prefix_cache_queries_total"]),
                                 "hits": int(metrics.get("vllm:prefix_cache_hits_total", 0.0))}

    def refund_restarts(self, n: int) -> None:
        """Deaths caused by one request (which then fails alone) do not count against max_restarts."""
        self.restarts = max(0, self.restarts - n)

    def report_unhealthy(self, reason: str) -> None:
        """Restart in the background (once, however many requests noticed the failure)."""
        if self.state != "ready" or (self._recovering is not None and not self._recovering.done()):
            return
        self._set("restarting")
        log.warning("%s: %s; restarting (restart %d of %d)", self.label, reason, self.restarts + 1,
                    self.spec.max_restarts)
        self._recovering = asyncio.create_task(self._recover(reason))

    async def _recover(self, reason: str) -> None:
        self.last_error = reason
        await self._kill(grace_s=5.0)
        while True:
            if self.restarts >= self.spec.max_restarts:
                self.last_error = f"{reason}; gave up after {self.restarts} restarts (serve.max_restarts)"
                log.error("%s: %s", self.label, self.last_error)
                self._set("failed")
                return
            self.restarts += 1
            await asyncio.sleep(min(60.0, self.spec.restart_backoff_s * 2 ** (self.restarts - 1)))
            if self.state != "restarting":  # stopped meanwhile
                return
            try:
                await self._spawn_and_wait()
            except ServerStartError as e:
                reason = e.what
                self.last_error = reason
                await self._kill(grace_s=5.0)
                continue
            self._set("ready")
            self._watch = asyncio.create_task(self._watch_loop())
            return

    async def _kill(self, grace_s: float | None = None) -> None:
        """Stop the launcher (it stops the server's group), then whatever of the group is left.

        The group outlives its leader: when the launcher was killed (``kill -9``) its server runs on
        under the same process group id (the launcher's pid, which the kernel does not reuse while
        the group has members), so the group is stopped here in any case, SIGTERM then SIGKILL.
        """
        proc = self._process
        if proc is None:
            return
        grace = self.spec.stop_timeout_s if grace_s is None else grace_s
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), grace + 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        await stop_group(proc.pid, grace)

    def _remove_tmp(self) -> None:
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None

    async def stop(self) -> None:
        if self.state in ("stopped", "pending"):
            return
        for task in (self._watch, self._recovering):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.state == "ready" and self.alive():
            await self._keep_prefix_cache_counters()
        await self._kill()
        if self._session is not None:
            await self._session.close()
        self._remove_tmp()
        if self.state != "failed":
            self._set("stopped")


async def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM every process left in group ``pgid``, SIGKILL whoever is still there after ``grace_s``."""
    if not group_members(pgid):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if not group_members(pgid):
            return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for _ in range(50):
        if not group_members(pgid):
            return
        await asyncio.sleep(0.1)


class ServerGroup:
    """A served model's replicas, started together and stopped together."""

    def __init__(self, spec: ServeSpec, gpus: list[str], servers_dir: Path, host: str = "127.0.0.1",
                 cpus: list[str] | None = None) -> None:
        self.spec = spec
        self.replicas = [Replica(spec, i, [], servers_dir, host, on_change=self._notify)
                         for i in range(spec.replicas)]
        self.gpus: list[str] = []
        self.cpus: list[str] = []
        self.assign(gpus, cpus)
        self.error: str | None = None
        self.launched = False
        self.started = asyncio.Event()
        self._changed = asyncio.Event()

    def assign(self, gpus: list[str], cpus: list[str] | None = None) -> None:
        """Hand the group its GPUs (each replica takes tensor_parallel_size of them) or, on a CPU
        node, its cores (split evenly between the replicas), before start."""
        self.gpus, self.cpus = list(gpus), list(cpus or [])
        n = self.spec.gpus_per_replica
        per = len(self.cpus) // len(self.replicas) if self.replicas else 0
        for i, r in enumerate(self.replicas):
            r.gpus = self.gpus[i * n:(i + 1) * n]
            r.cpus = self.cpus[i * per:(i + 1) * per]

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    @property
    def exhausted(self) -> bool:
        return self.error is not None or (self.launched and all(r.state in ("failed", "stopped")
                                                                 for r in self.replicas))

    async def start(self) -> None:
        """Start every replica; if one cannot start, stop the others and raise its ServerStartError."""
        self.launched = True
        # Replicas sharing a GPU start one at a time: vLLM's memory profiling is thrown off by a
        # neighbour that allocates at the same moment.
        shared = (len({g for r in self.replicas for g in r.gpus}) < sum(len(r.gpus) for r in self.replicas)
                  or len({c for r in self.replicas for c in r.cpus}) < sum(len(r.cpus) for r in self.replicas))
        try:
            if shared:
                results: list[BaseException | None] = []
                for r in self.replicas:
                    results.append(None)
                    try:
                        await r.start()
                    except ServerStartError as e:
                        results[-1] = e
                        break
            else:
                results = list(await asyncio.gather(*(r.start() for r in self.replicas), return_exceptions=True))
        finally:
            self.started.set()
        errors = [e for e in results if isinstance(e, BaseException)]
        if errors:
            await self.stop()
            self.error = str(errors[0])
            self._notify()
            raise errors[0]

    async def wait_ready(self) -> list[Replica]:
        """The ready replicas, waiting while some restart; EndpointDown when none is left."""
        if not self.started.is_set():  # first requests wait for every replica, so load spreads
            await self.started.wait()
        while True:
            ready = [r for r in self.replicas if r.ready.is_set()]
            if ready:
                return ready
            if self.exhausted:
                raise EndpointDown(self.spec.name, f"no server left: {(self.error or self._why()).splitlines()[0]}")
            await self._changed.wait()

    def changed(self) -> asyncio.Event:
        return self._changed

    def _why(self) -> str:
        return "; ".join(f"{r.label}: {r.last_error or r.state}" for r in self.replicas)

    async def stop(self) -> None:
        await asyncio.gather(*(r.stop() for r in self.replicas))
        self._notify()
