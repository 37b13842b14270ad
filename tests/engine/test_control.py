"""``fasteval ctl`` against a real running sweep: sim models behind a real HTTP server, the real socket."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from fasteval.engine.plan import Selectors
from fasteval.engine.run.sweep import SweepIncomplete
from fasteval.runfolder.control import CONTROL_SOCKET, read_trace
from fasteval.runfolder.index import open_index
from providers.sim import SimModel, SimServer
from providers.sim.spec import Faults
from tests.engine.control_support import ctl, records, socket_up, start, status, until, write_config


def _model(server: SimServer, name: str, **extra: object) -> dict[str, object]:
    return {"name": name, "provider": "openai", "base_url": server.base_url, "model": name, **extra}


async def _trajectory_requests(tmp: Path, *, pause: bool) -> tuple[int, dict[str, object]]:
    """Run one multi-round trajectory (tool calls, then the answer); with ``pause``, held mid-way."""
    server = SimServer([SimModel("agent", policy="tools", tool_uses=3, latency_ms=700)])
    await server.start()
    try:
        run_dir = tmp / "run"
        task = start(write_config(tmp, [_model(server, "agent")]), run_dir)
        if pause:
            await socket_up(run_dir, task)
            await until(lambda: server.requests >= 1, "the first model request")
            answer = await ctl(run_dir, "pause", now=True)
            assert answer["ok"] and answer["changes"][0]["new"] == "paused"
            st = await status(run_dir)
            assert st["jobs"]["in_flight"] == 1, "the trajectory ended before the pause: not a mid-run hold"
            assert st["paused"] == [{"scope": "all", "name": "", "now": True}]
            await until(lambda: server.in_flight == 0, "the request in flight at the pause")
            held_at = server.requests
            await asyncio.sleep(1.5)  # nothing may reach the model while held (a count, not a speed)
            assert server.requests == held_at
            assert (await status(run_dir))["jobs"]["in_flight"] == 1
            assert (await ctl(run_dir, "resume"))["changes"][0]["new"] == "running"
        res = await task
        rec = records(run_dir)
    finally:
        await server.stop()
    assert res.ok == 1 and len(rec) == 1
    return server.requests, rec[0]


@pytest.mark.slow
async def test_pause_now_holds_a_trajectory_and_resume_continues_it_with_the_same_requests(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, rec_plain = await _trajectory_requests(tmp_path / "a", pause=False)
    held, rec_held = await _trajectory_requests(tmp_path / "b", pause=True)
    assert plain == held >= 3  # a multi-round trajectory, asked no more and no less for the hold
    assert rec_held["rounds"] == rec_plain["rounds"] == plain
    assert rec_held["answer"] == rec_plain["answer"] and rec_held["termination"] == "answered"
    trace = read_trace(tmp_path / "b" / "run")
    assert [e["command"] for e in trace] == ["pause --now", "resume"]
    assert "uid 0" in trace[0]["who"] or f"uid {os.getuid()}" in trace[0]["who"]
    assert not (tmp_path / "b" / "run" / CONTROL_SOCKET).exists()  # removed when the sweep ended


@pytest.mark.slow
async def test_a_lowered_rpm_is_what_the_sim_then_sees(tmp_path: Path) -> None:
    server = SimServer([SimModel("fast", policy="direct", latency_ms=20)], record_arrivals=True)
    await server.start()
    try:
        run_dir = tmp_path / "run"
        cfg = write_config(tmp_path, [_model(server, "fast", limits={"concurrency": 4})], n_tasks=60, tools=False)
        task = start(cfg, run_dir)
        await socket_up(run_dir, task)
        await until(lambda: server.requests >= 8, "some requests at full speed")
        answer = await ctl(run_dir, "set", model="fast", values={"rpm": "5"})
        assert answer["ok"] and answer["changes"] == [{"what": "fast.rpm", "old": None, "new": 5.0}]
        arrivals = server.arrivals
        assert arrivals is not None
        at_set = len(arrivals)
        changed = asyncio.get_running_loop().time()
        await asyncio.sleep(2.0)
        # The budget counts from the change (unlimited requests are not tallied): within this minute
        # at most 5 new requests, plus those already sent when it changed (the endpoint's 4 slots).
        # Unlimited, ~100 more of the 120 jobs would have arrived in these 2 s.
        after = [t for t in arrivals[at_set:] if t >= changed]
        assert len(after) <= 5 + 4, after
        st = await status(run_dir)
        assert st["endpoints"]["fast"]["rpm"] == 5.0
        assert st["jobs"]["ok"] < 60
        # Raising it wakes the requests already waiting at once (they do not sleep out the minute).
        assert (await ctl(run_dir, "set", model="fast", values={"rpm": "off", "concurrency": "8"}))["ok"]
        res = await asyncio.wait_for(task, 60)
    finally:
        await server.stop()
    assert res.ok == 60
    trace = read_trace(run_dir)
    assert [c["what"] for e in trace for c in e["changes"]] == ["fast.rpm", "fast.rpm", "fast.concurrency"]
    assert trace[1]["changes"][0] == {"what": "fast.rpm", "old": 5.0, "new": None}


async def test_global_concurrency_moves_at_once_and_bad_values_are_refused(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", latency_ms=150)])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        task = start(write_config(tmp_path, [_model(server, "m")], n_tasks=40, run={"max_concurrency": 1},
                                  tools=False), run_dir)
        await socket_up(run_dir, task)
        assert (await ctl(run_dir, "set", values={"concurrency": "0"}, **{"global": True}))["error"].startswith(
            "concurrency must be a whole number >= 1")
        assert "no model 'nope'" in (await ctl(run_dir, "set", model="nope", values={"rpm": "1"}))["error"]
        assert "cannot set temperature" in (await ctl(run_dir, "set", model="m", values={"temperature": "1"}))["error"]
        answer = await ctl(run_dir, "set", values={"concurrency": "8"}, **{"global": True})
        assert answer["changes"] == [{"what": "global.concurrency", "old": 1, "new": 8}]
        await until(lambda: server.max_in_flight >= 2, "more than one request at once after the raise")
        assert (await status(run_dir))["global"]["concurrency"] == 8
        res = await task
    finally:
        await server.stop()
    assert res.ok == 40
    assert [e["command"] for e in read_trace(run_dir)] == ["set --global concurrency=8"]  # refusals change nothing


async def test_requeue_turns_errors_of_an_endpoint_that_came_back_into_ok_records(tmp_path: Path) -> None:
    # "flaky" refuses its first two requests (a key rotated, then fixed); "slow" hangs on its first
    # request, which keeps the sweep running until the requeued jobs are done.
    server = SimServer([SimModel("flaky", policy="direct", faults=Faults(schedule=["401", "401"])),
                        SimModel("slow", policy="direct", faults=Faults(schedule=["hang"], hang_s=3600))])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        cfg = write_config(tmp_path, [_model(server, "flaky"), _model(server, "slow")], n_tasks=2, tools=False)
        task = start(cfg, run_dir)
        await socket_up(run_dir, task)

        async def flaky(key: str, n: int) -> bool:
            return bool((await status(run_dir))["models"].get("flaky", {}).get(key) == n)

        await until(lambda: flaky("error", 2), "two error records of flaky")
        assert (await ctl(run_dir, "requeue", errors=True, kind="timeout"))["requeued"] == 0  # none of that kind
        answer = await ctl(run_dir, "requeue", errors=True, kind="auth", model="flaky")
        assert answer["ok"] and answer["requeued"] == 2
        await until(lambda: flaky("ok", 2), "the requeued jobs ok")
        assert (await status(run_dir))["models"]["flaky"]["requeued"] == 2
        cancelled = await ctl(run_dir, "cancel", model="slow")
        assert cancelled["cancelled"] == 1  # the hanging job: no record, a rerun runs it
        with pytest.raises(SweepIncomplete, match="drained or cancelled") as info:
            await task
        first = info.value.result
        assert (first.ok, first.errors, first.errors_by) == (3, 0, {})  # the requeued errors are taken back
        assert [r["status"] for r in records(run_dir) if r["model"] == "slow"] == ["ok"]  # its other job
        res = await start(cfg, run_dir)  # the exact resume: only slow's cancelled job runs
    finally:
        await server.stop()
    assert (res.ok, res.errors, res.skipped) == (1, 0, 3)
    with open_index(run_dir) as index:
        assert len(index.job_ids()) == 4 == len(index.job_ids(ok_only=True))  # one record per job, all ok
    assert sum(r["status"] == "error" for r in records(run_dir)) == 2  # the errors stay in the log
    assert [e["command"] for e in read_trace(run_dir)] == ["requeue --model flaky --kind auth --errors",
                                                          "cancel --model slow"]  # a requeue of nothing: no line


@pytest.mark.slow
async def test_drain_finishes_in_flight_starts_nothing_and_a_rerun_completes_exactly(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="tools", tool_uses=1, latency_ms=200)])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        cfg = write_config(tmp_path, [_model(server, "m")], n_tasks=12, run={"max_concurrency": 2})
        task = start(cfg, run_dir)
        await socket_up(run_dir, task)
        await until(lambda: server.requests >= 1, "the first jobs in flight")
        assert (await ctl(run_dir, "drain"))["ok"]
        with pytest.raises(SweepIncomplete, match="jobs not run; rerun to continue") as info:
            await task
        first = records(run_dir)
        assert 1 <= len(first) < 12 and all(r["status"] == "ok" for r in first)
        assert info.value.result.not_run == 12 - len(first)
        res = await start(cfg, run_dir)
    finally:
        await server.stop()
    assert (res.ok, res.skipped) == (12 - len(first), len(first))
    final = records(run_dir)
    assert len(final) == 12 == len({r["job_id"] for r in final})  # nothing run twice
    assert all(r["status"] == "ok" and r["termination"] == "answered" for r in final)


@pytest.mark.slow
async def test_pause_of_one_model_holds_its_jobs_while_the_others_run(tmp_path: Path) -> None:
    server = SimServer([SimModel("a", policy="direct", latency_ms=200), SimModel("b", policy="direct", latency_ms=200)])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        cfg = write_config(tmp_path, [_model(server, "a"), _model(server, "b")], n_tasks=10, tools=False,
                           run={"max_concurrency": 1})
        task = start(cfg, run_dir)
        await socket_up(run_dir, task)
        assert (await ctl(run_dir, "pause", model="b"))["ok"]
        at_pause = (await status(run_dir))["models"].get("b", {}).get("ok", 0)
        await until(lambda: _ok_of(run_dir, "a", 10), "model a finished")
        st = await status(run_dir)
        assert st["models"]["b"]["ok"] <= at_pause + 1  # at most the one in flight at the pause
        b = st["models"]["b"]
        assert b["held"] >= 1 and st["jobs"]["held"] == b["held"]
        assert b["to_run"] == 10 == b["ok"] + b["in_flight"] + b["held"] + b["waiting"]
        assert st["models"]["a"]["waiting"] == 0
        assert not task.done()  # held jobs keep the sweep alive
        assert "refused" not in str(await ctl(run_dir, "resume", model="b"))
        res = await task
    finally:
        await server.stop()
    assert res.ok == 20
    res = await start(cfg, run_dir, selectors=Selectors(models=["b"]))  # resumed: nothing left to run
    assert (res.ok, res.skipped) == (0, 10)


async def _ok_of(run_dir: Path, model: str, n: int) -> bool:
    return bool((await status(run_dir))["models"].get(model, {}).get("ok") == n)


@pytest.mark.slow
async def test_an_attempt_timeout_set_mid_run_turns_a_hang_into_a_retried_timeout(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="tools", tool_uses=1, latency_ms=500,
                                 faults=Faults(schedule=["ok", "hang"], hang_s=3600))])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        task = start(write_config(tmp_path, [_model(server, "m")]), run_dir)
        await socket_up(run_dir, task)
        await until(lambda: server.requests >= 1, "the first request")
        answer = await ctl(run_dir, "set", model="m", values={"attempt_timeout_s": "1"})
        assert answer["changes"] == [{"what": "m.attempt_timeout_s", "old": None, "new": 1.0}]
        res = await asyncio.wait_for(task, 120)  # without the cap the second request would hang for an hour
    finally:
        await server.stop()
    assert res.ok == 1 and server.by_outcome.get("hang") == 1
    assert records(run_dir)[0]["retries"] == 1


def test_to_run_per_model_is_the_plan_less_what_the_index_holds_within_the_selectors() -> None:
    from fasteval.engine.ledger import Ledger, already_done

    class Index:  # what the seed reads of the run index: its counts per model, suite, setting, seed
        def counts(self, by: object = (), **_: object) -> dict[tuple[object, ...], dict[str, int]]:
            assert by == ("model", "suite", "setting", "seed")
            return {("a", "demo", "tools", 0): {"ok": 3, "error": 1}, ("a", "demo", "tools", 1): {"ok": 2},
                    ("b", "other", "tools", 0): {"ok": 5}, ("gone", "demo", "tools", 0): {"ok": 9}}

    ledger = Ledger()
    done = already_done(Index(), {"a", "b"}, ([], [], ["0"]), keep_errors=False)
    ledger.seed(14, {"model": {"a": 10, "b": 4}, "suite": {"demo": 10, "other": 4}}, done)
    # seed 1 is not selected; b's records exceed its plan: never negative; a model not planned counts nowhere
    assert {m: t.to_run for m, t in ledger.models.items()} == {"a": 7, "b": 0}
    assert {s: t.to_run for s, t in ledger.suites.items()} == {"demo": 7, "other": 0}
    kept = Ledger()
    kept.seed(10, {"model": {"a": 10}}, already_done(Index(), {"a"}, (["demo"], [], []), keep_errors=True))
    assert kept.models["a"].to_run == 4


async def test_one_bad_value_applies_none_of_a_set(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", faults=Faults(schedule=["hang"], hang_s=3600))])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        task = start(write_config(tmp_path, [_model(server, "m")], tools=False), run_dir)
        await socket_up(run_dir, task)
        answer = await ctl(run_dir, "set", model="m", values={"rpm": "30", "max_attempts": "x"})
        assert not answer["ok"] and "max_attempts must be a whole number" in answer["error"]
        assert (await status(run_dir))["endpoints"]["m"]["rpm"] is None
        await ctl(run_dir, "set", model="m", values={"tpm": "9000"})
        st = await status(run_dir)
        assert st["endpoints"]["m"]["tpm"] == 9000.0
        await ctl(run_dir, "cancel", model="m")
        with pytest.raises(SweepIncomplete):
            await task
    finally:
        await server.stop()
    assert [e["command"] for e in read_trace(run_dir)] == ["set --model m tpm=9000", "cancel --model m"]
