"""Two dependencies we replaced, measured against ours in the same run.

    .venv/bin/pip install -e '.[bench]'          # aiosqlite and tenacity: used only here
    .venv/bin/python benchmarks/replaced_deps.py [--repeats 3] [--quick] [--json]

1. The cache store: ``cache.Cache`` (our batched SQLite worker: one thread hop and one transaction
   per batch) against aiosqlite doing the same get/put workload (one thread hop per statement, each
   put its own transaction), on real SQLite files with the same schema, pragmas (WAL, NORMAL sync)
   and value codec (orjson + zstd above 1 KiB), under the same event loop. Figures: ops/s, p50/p99
   latency per operation as its caller sees it, and process CPU per operation (all threads).
2. The retry layer: ``providers.retry.retry_call`` against tenacity's ``@retry`` (AsyncRetrying),
   configured to the same policy (6 attempts, 900 s budget, jittered exponential backoff, Retry-After,
   retry only the retryable kinds, shrink the AIMD window on 429). Figures: overhead per call on the
   success path and per retried call, and a behaviour table from scripted failure sequences.

Every figure is a median over ``--repeats`` runs; ratios are ours / theirs from the same run. The
machine this runs on is usually shared, so read ratios rather than absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache import Cache  # noqa: E402
from cache._store import Codec, connect, decode_value, encode_value, prepare, write_rows  # noqa: E402
from providers.base import ProviderError  # noqa: E402
from providers.limits import AdaptiveLimit  # noqa: E402
from providers.retry import MODEL_RETRYABLE, RetryPolicy, backoff_delay, retry_call  # noqa: E402

try:
    import aiosqlite
    import tenacity
except ImportError as exc:  # one line, not a traceback: this benchmark's extra is not installed
    sys.exit(f"replaced_deps.py needs the bench extra ({exc.name} is missing): "
             "pip install -e '.[bench]'")

COMPRESS_THRESHOLD = 1024
PREFILL = 4000
MISS_SHARE = 0.1
WORDS = ("image crop zoom bbox chart table figure answer model tool search page result the of and "
         "a to in is for on with as by at from that this region detail object left right top").split()


# -- the cache workload ------------------------------------------------------------------------------

def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choices(WORDS, k=n_words))


def _value(rng: random.Random, ns: str) -> Any:
    """What the cache really holds: search hits (~2 KB JSON), page text (~10 KB), verdicts (~200 B)."""
    if ns == "search":
        return {"results": [{"title": _text(rng, 8), "url": f"https://example.org/{rng.getrandbits(40):x}",
                             "snippet": _text(rng, 30)} for _ in range(8)]}
    if ns == "page":
        return _text(rng, 1600)
    return {"verdict": rng.choice(["correct", "incorrect"]), "reason": _text(rng, 25)}


def _key(ns: str, i: int) -> str:
    return hashlib.sha256(f"{ns}/{i}".encode()).hexdigest()


NAMESPACES = ("search", "page", "judge")


@dataclass(slots=True)
class Op:
    put: bool
    ns: str
    key: str
    value: Any = None
    present: bool = True


def _workload(kind: str, n_ops: int, seed: int) -> list[Op]:
    """``read``: gets of stored keys (10% misses); ``write``: puts of new keys; ``mixed``: 80/20.

    Values are a realistic mix (search, page, judge in turn); a ``-small`` kind uses only the ~200 B
    verdicts, where the cost per statement rather than the codec decides.
    """
    rng = random.Random(seed)
    small = kind.endswith("-small")
    kind = kind.removesuffix("-small")
    ops: list[Op] = []
    for j in range(n_ops):
        ns = "judge" if small else NAMESPACES[j % 3]
        is_put = kind == "write" or (kind == "mixed" and rng.random() < 0.2)
        if is_put:
            ops.append(Op(True, ns, _key(ns, 10_000_000 + seed * 1_000_000 + j), _value(rng, ns)))
        elif rng.random() < MISS_SHARE:
            ops.append(Op(False, ns, _key(ns, 50_000_000 + j), present=False))
        else:
            ops.append(Op(False, ns, _key(ns, rng.randrange(PREFILL))))
    return ops


def _prefill(path: Path) -> None:
    """The stored entries every scenario starts from, written once before any clock starts."""
    prepare(path)
    rng = random.Random(7)
    conn = connect(path)
    try:
        rows = [(ns, _key(ns, i), encode_value(_value(rng, ns))) for i in range(PREFILL) for ns in NAMESPACES]
        write_rows(conn, Codec(COMPRESS_THRESHOLD), rows)
    finally:
        conn.close()


class Store:
    """The two contenders behind one face: get returns the decoded value or None; put awaits the commit."""

    async def open(self, path: Path) -> None: ...
    async def get(self, ns: str, key: str) -> Any: ...
    async def put(self, ns: str, key: str, value: Any) -> None: ...
    async def close(self) -> None: ...


class OurStore(Store):
    """``cache.Cache`` exactly as a run uses it (reader thread + writer thread, batched)."""

    def __init__(self) -> None:
        self.cache: Cache | None = None

    async def open(self, path: Path) -> None:
        self.cache = await Cache(path, compress_threshold=COMPRESS_THRESHOLD).open()

    async def get(self, ns: str, key: str) -> Any:
        assert self.cache is not None
        return await self.cache.get(ns, key)

    async def put(self, ns: str, key: str, value: Any) -> None:
        assert self.cache is not None
        if not await self.cache.put(ns, key, value):
            raise RuntimeError("put not committed")

    async def close(self) -> None:
        assert self.cache is not None
        await self.cache.close()


class AiosqliteStore(Store):
    """The same schema and codec on aiosqlite, written the way its docs show: a reader and a writer
    connection (as ours has), one ``execute`` per operation, autocommit so each put commits alone."""

    def __init__(self) -> None:
        self.reader: aiosqlite.Connection | None = None
        self.writer: aiosqlite.Connection | None = None
        self.codec = Codec(COMPRESS_THRESHOLD)

    async def _connect(self, path: Path) -> aiosqlite.Connection:
        db = await aiosqlite.connect(path, timeout=30, isolation_level=None)
        await db.execute("PRAGMA busy_timeout=30000")
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        return db

    async def open(self, path: Path) -> None:
        self.reader = await self._connect(path)
        self.writer = await self._connect(path)

    async def get(self, ns: str, key: str) -> Any:
        assert self.reader is not None
        rows = list(await self.reader.execute_fetchall(
            "SELECT kind, codec, value FROM entries WHERE namespace = ? AND key = ?", (ns, key)))
        if not rows:
            return None
        kind, c, blob = rows[0]
        return decode_value(kind, self.codec.unpack(c, blob))

    async def put(self, ns: str, key: str, value: Any) -> None:
        assert self.writer is not None
        enc = encode_value(value)
        c, blob = self.codec.pack(enc)
        await self.writer.execute(
            "INSERT OR REPLACE INTO entries (namespace, key, kind, codec, size, created, value) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (ns, key, enc.kind, c, len(enc.data), time.time(), blob))

    async def close(self) -> None:
        for db in (self.reader, self.writer):
            if db is not None:
                await db.close()


async def _drive(store: Store, ops: list[Op], concurrency: int) -> dict[str, float]:
    """Run ``ops`` from ``concurrency`` tasks; check every answer so a fast wrong store cannot win."""
    lat: list[float] = []
    wrong = 0
    it = iter(ops)

    async def worker() -> None:
        nonlocal wrong
        for op in it:
            t0 = time.perf_counter()
            if op.put:
                await store.put(op.ns, op.key, op.value)
            else:
                got = await store.get(op.ns, op.key)
                wrong += (got is None) == op.present
            lat.append(time.perf_counter() - t0)

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if wrong:
        raise AssertionError(f"{type(store).__name__}: {wrong} lookups answered wrongly")
    lat.sort()
    return {"ops_per_s": len(ops) / wall, "p50_ms": lat[len(lat) // 2] * 1e3,
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, "cpu_us_per_op": cpu / len(ops) * 1e6}


STORES: dict[str, Callable[[], Store]] = {"ours": OurStore, "aiosqlite": AiosqliteStore}


async def bench_cache(folder: Path, scenarios: list[tuple[str, int, int]], rep: int) -> dict[str, dict[str, float]]:
    """Each scenario on a fresh, identically prefilled file per store; the store that goes first alternates."""
    out: dict[str, dict[str, float]] = {}
    template = folder / "template.sqlite"
    await asyncio.to_thread(_prefill, template)
    for kind, concurrency, n_ops in scenarios:
        ops = _workload(kind, n_ops, seed=rep)
        names = list(STORES) if rep % 2 == 0 else list(reversed(STORES))
        for name in names:
            path = folder / f"{name}-{kind}-{concurrency}-{rep}.sqlite"
            await asyncio.to_thread(shutil.copyfile, template, path)  # checkpointed: no -wal to copy
            store = STORES[name]()
            await store.open(path)
            try:
                out[f"{kind}/c{concurrency}/{name}"] = await _drive(store, ops, concurrency)
            finally:
                await store.close()
    return out


# -- the retry layer -------------------------------------------------------------------------------

Sleep = Callable[[float], Awaitable[None]]
Attempt = Callable[[], Awaitable[int]]
Runner = Callable[[Attempt], Awaitable[int]]


class Recorder:
    """A sleep that records the delays it was asked for and returns at once (no wall time spent)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def ours_runner(policy: RetryPolicy, sleep: Sleep, window: AdaptiveLimit) -> Runner:
    """``retry_call`` as ``ModelClient`` calls it (there the window shrinks in ``_attempt``)."""
    def run(attempt: Attempt) -> Awaitable[int]:
        return retry_call(policy, attempt, error_type=ProviderError, retryable=MODEL_RETRYABLE,
                          window=window, sleep=sleep)
    return run


def tenacity_runner(policy: RetryPolicy, sleep: Sleep, window: AdaptiveLimit) -> Runner:
    """tenacity's ``@retry``, decorated once as a method would be, and the glue our policy needs."""

    def wait(state: tenacity.RetryCallState) -> float:  # glue 1: Retry-After, else our jittered 2^n
        exc = state.outcome.exception() if state.outcome is not None else None
        return backoff_delay(policy, state.attempt_number, getattr(exc, "retry_after", None))

    def retryable(exc: BaseException) -> bool:  # glue 2: our taxonomy
        return isinstance(exc, ProviderError) and exc.kind in MODEL_RETRYABLE

    def after(state: tenacity.RetryCallState) -> None:  # glue 3: the AIMD window (last failure included)
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, ProviderError) and exc.kind == "rate_limit":
            window.on_rate_limit()

    @tenacity.retry(stop=tenacity.stop_after_attempt(policy.max_attempts)
                    | tenacity.stop_after_delay(policy.total_budget_s),
                    wait=wait, retry=tenacity.retry_if_exception(retryable), after=after, reraise=True,
                    sleep=sleep)
    async def run(attempt: Attempt) -> int:
        return await attempt()
    return run


RUNNERS: dict[str, Callable[[RetryPolicy, Sleep, AdaptiveLimit], Runner]] = {
    "ours": ours_runner, "tenacity": tenacity_runner}


def _scripted(kinds: list[str]) -> Attempt:
    """An attempt that fails with the given kinds in order, then succeeds."""
    calls = iter(kinds)

    async def attempt() -> int:
        kind = next(calls, None)
        if kind is None:
            return 1
        raise ProviderError(kind, "scripted", retry_after=7.0 if kind == "rate_limit" else None)  # type: ignore[arg-type]
    return attempt


async def _ok() -> int:
    return 1


async def _per_call_us(run: Runner | None, make: Callable[[], Attempt], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        attempt = make()
        await (attempt() if run is None else run(attempt))
    return (time.perf_counter() - t0) / n * 1e6


async def bench_retry(n_calls: int) -> dict[str, float]:
    """Success-path overhead (minus a bare await) and the cost of a call that retries 3 times."""
    out: dict[str, float] = {"bare_await_us": await _per_call_us(None, lambda: _ok, n_calls)}
    for name, factory in RUNNERS.items():
        run = factory(RetryPolicy(), Recorder(), AdaptiveLimit(64))
        out[f"{name}_success_overhead_us"] = await _per_call_us(run, lambda: _ok, n_calls) - out["bare_await_us"]
        out[f"{name}_3_retries_us"] = await _per_call_us(
            run, lambda: _scripted(["transient", "timeout", "bad_response"]), n_calls // 4)
    # tenacity with no options at all: how much of its cost is its own machinery, not our glue.
    @tenacity.retry()
    async def bare(attempt: Attempt) -> int:
        return await attempt()

    out["tenacity_no_options_success_overhead_us"] = (await _per_call_us(bare, lambda: _ok, n_calls)
                                                      - out["bare_await_us"])
    return out


BEHAVIOURS: list[tuple[str, list[str]]] = [
    ("429 (Retry-After 7 s), 503, ok", ["rate_limit", "transient"]),
    ("auth error", ["auth"]),
    ("fatal (bad request)", ["fatal"]),
    ("always 503", ["transient"] * 20),
    ("always 429 (Retry-After 7 s)", ["rate_limit"] * 20),
]


async def behaviour() -> list[dict[str, Any]]:
    """What each layer does with the same scripted failures: attempts, delays asked, window after."""
    rows: list[dict[str, Any]] = []
    for label, kinds in BEHAVIOURS:
        row: dict[str, Any] = {"case": label}
        for name, factory in RUNNERS.items():
            sleep, window, script = Recorder(), AdaptiveLimit(64), _scripted(kinds)
            attempts = 0

            async def counted(script: Attempt = script) -> int:
                nonlocal attempts
                attempts += 1
                return await script()

            try:
                await factory(RetryPolicy(), sleep, window)(counted)
                outcome = "ok"
            except ProviderError as e:
                outcome = e.kind
            row[name] = {"outcome": outcome, "attempts": attempts, "window": window.limit,
                         "delays": [round(d, 1) for d in sleep.delays]}
        rows.append(row)
    return rows


async def budget_check() -> dict[str, int]:
    """A 0.3 s total budget with real 0.05-0.2 s sleeps: each must stop on the budget, before 6 attempts."""
    policy = RetryPolicy(total_budget_s=0.3, base_delay_s=0.1, max_delay_s=0.2)
    out: dict[str, int] = {}
    for name, factory in RUNNERS.items():
        attempts = 0

        async def failing() -> int:
            nonlocal attempts
            attempts += 1
            raise ProviderError("transient", "down")

        try:
            await factory(policy, asyncio.sleep, AdaptiveLimit(64))(failing)
        except ProviderError:
            pass
        out[name] = attempts
    return out


# -- driver ------------------------------------------------------------------------------------------

def _median(samples: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in samples[0].items():
        out[k] = _median([s[k] for s in samples]) if isinstance(v, dict) else statistics.median(s[k] for s in samples)
    return out


async def main(repeats: int, quick: bool, as_json: bool) -> None:
    scale = 4 if quick else 1
    scenarios = [("read", 1, 2000 // scale), ("read", 500, 20000 // scale), ("write", 1, 1000 // scale),
                 ("write", 500, 10000 // scale), ("mixed", 500, 20000 // scale),
                 ("read-small", 500, 20000 // scale), ("write-small", 500, 10000 // scale)]
    cache_runs, retry_runs = [], []
    with tempfile.TemporaryDirectory(prefix="fasteval-replaced-deps-") as tmp:
        for rep in range(repeats):
            folder = Path(tmp) / f"rep{rep}"
            await asyncio.to_thread(folder.mkdir)
            cache_runs.append(await bench_cache(folder, scenarios, rep))
            await asyncio.to_thread(shutil.rmtree, folder)  # each repeat starts on fresh files
            retry_runs.append(await bench_retry(20000 // scale))
    cache_fig, retry_fig = _median(cache_runs), _median(retry_runs)
    ratios = {}
    for kind, concurrency, n in scenarios:
        name = f"{kind}/c{concurrency}"
        ours, theirs = cache_fig[f"{name}/ours"], cache_fig[f"{name}/aiosqlite"]
        per_run = sorted(r[f"{name}/ours"]["ops_per_s"] / r[f"{name}/aiosqlite"]["ops_per_s"] for r in cache_runs)
        ratios[name] = {
            "ops": n, "ops_per_s": ours["ops_per_s"] / theirs["ops_per_s"], "p50": ours["p50_ms"] / theirs["p50_ms"],
            "p99": ours["p99_ms"] / theirs["p99_ms"], "cpu_per_op": ours["cpu_us_per_op"] / theirs["cpu_us_per_op"],
            "ops_per_s_range": [per_run[0], per_run[-1]]}
    out: dict[str, Any] = {
        "repeats": repeats, "loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
        "versions": {"aiosqlite": getattr(aiosqlite, "__version__", "?"),
                     "tenacity": _version("tenacity"), "sqlite": __import__("sqlite3").sqlite_version},
        "cache": cache_fig, "cache_ratios_ours_over_aiosqlite": ratios, "retry": retry_fig,
        "retry_behaviour": await behaviour(), "retry_budget_attempts": await budget_check()}
    if as_json:
        print(orjson.dumps(out).decode())
        return
    _print(out)


def _version(dist: str) -> str:
    from importlib.metadata import version
    return version(dist)


def _print(out: dict[str, Any]) -> None:
    v = out["versions"]
    print(f"replaced dependencies: medians of {out['repeats']} runs, loop {out['loop']}, SQLite {v['sqlite']}, "
          f"aiosqlite {v['aiosqlite']}, tenacity {v['tenacity']}")
    print("\n1. cache store: ours (batched worker) vs aiosqlite (one hop per statement); ratio = ours/aiosqlite")
    print(f"  {'workload':<19}{'store':<11}{'ops/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'CPU µs/op':>11}")
    for scenario, r in out["cache_ratios_ours_over_aiosqlite"].items():
        kind, concurrency = scenario.split("/c")
        for name in STORES:
            f = out["cache"][f"{scenario}/{name}"]
            print(f"  {f'{kind} c={concurrency}':<19}{name:<11}{f['ops_per_s']:>10,.0f}{f['p50_ms']:>9.3f}"
                  f"{f['p99_ms']:>9.3f}{f['cpu_us_per_op']:>11.1f}")
        lo, hi = r["ops_per_s_range"]
        print(f"  {'':<19}{'ratio':<11}{r['ops_per_s']:>9.2f}x{r['p50']:>8.2f}x{r['p99']:>8.2f}x"
              f"{r['cpu_per_op']:>10.2f}x   ({r['ops']:,} ops; ops/s ratio per run {lo:.2f}-{hi:.2f})")
    rf = out["retry"]
    print("\n2. retry layer: ours (providers.retry.retry_call) vs tenacity @retry, same policy")
    print(f"  bare await of the attempt          {rf['bare_await_us']:8.2f} µs")
    for name in RUNNERS:
        print(f"  {name:<9} success-path overhead    {rf[f'{name}_success_overhead_us']:8.2f} µs/call"
              f"   a call that retries 3x: {rf[f'{name}_3_retries_us']:8.1f} µs")
    print(f"  tenacity @retry() with no options  {rf['tenacity_no_options_success_overhead_us']:8.2f} µs/call "
          "(its own machinery, before any glue)")
    print(f"  ratio tenacity/ours: success overhead "
          f"{rf['tenacity_success_overhead_us'] / rf['ours_success_overhead_us']:.1f}x, "
          f"3 retries {rf['tenacity_3_retries_us'] / rf['ours_3_retries_us']:.1f}x")
    print("  behaviour on scripted failures (attempts, outcome, delays asked for, AIMD window 64 ->):")
    for row in out["retry_behaviour"]:
        cells = "   ".join(f"{n}: {row[n]['attempts']}x {row[n]['outcome']}, delays {row[n]['delays']}, "
                           f"window {row[n]['window']}" for n in RUNNERS)
        print(f"    {row['case']:<30} {cells}")
    b = out["retry_budget_attempts"]
    print(f"  0.3 s total budget, always 503: attempts ours {b['ours']}, tenacity {b['tenacity']} (max 6)")
    print("  tenacity needs three pieces of glue for this (a wait for Retry-After, a predicate for our kinds,\n"
          "  an `after` hook for the window); ours has them built in.")


def _run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=3, help="runs to take the median of (default 3)")
    parser.add_argument("--quick", action="store_true", help="a quarter of the operations (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    _run(main(max(1, args.repeats), args.quick, args.json))
