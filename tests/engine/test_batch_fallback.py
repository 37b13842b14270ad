"""``batch: {fallback: interactive}``: a request whose batch expired is asked interactively at once,
at the full price, while the rest of the run keeps the batch discount (records, report, panel)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.core.job import job_context
from fasteval.core.pricing import Price, model_prices
from fasteval.engine.batch.batching import BatchLane
from fasteval.engine.ledger import Ledger
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.progress import ProgressDisplay
from fasteval.engine.run.sweep import Sweep
from fasteval.runfolder.batch_journal import BatchJournal
from fasteval.view.report import report
from providers.base import ChatRequest, ProviderError
from providers.batch.base import BatchSettings
from providers.batch.openai import OpenAIBatchWire
from providers.client import ModelClient
from providers.openai_compat import OpenAICompatProvider
from providers.registry import price_terms
from providers.retry import RetryPolicy
from providers.sim import SimModel, SimServer

PRICE = Price(1.0, 2.0)  # USD per million prompt / completion tokens (cache reads and writes at the input price)


def write(tmp: Path, batch: dict[str, Any], *, wire: str = "openai") -> Path:
    model = {"name": "m", "provider": "sim", "policy": "tools", "wire": wire,
             "price": {"input": PRICE.input, "output": PRICE.output},
             "batch": {"gather_s": 0.3, "poll_s": 0.05, **batch}, "batch_api": {"turnaround_s": 0.05, "expire": 1}}
    cfg = {"seeds": 1, "models": [model], "prices": {"batch_factor": {"sim": 0.5}},
           "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [160, 120]},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
           "run": {"max_concurrency": 16}}
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (run_dir / "records.jsonl").read_bytes().splitlines()]


def usd(prompt: int, completion: int) -> float:
    return (prompt * PRICE.input + completion * PRICE.output) / 1e6


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_an_expired_batch_falls_back_to_full_price_requests_and_the_rest_stays_half(
        tmp_path: Path, wire: str) -> None:
    cfg = load_config(write(tmp_path, {"fallback": "interactive"}, wire=wire))
    s = Sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    res = await s.run()
    assert res.ok == 3 and res.errors == 0
    journal = BatchJournal(tmp_path / "run")
    expired = next(iter(journal.batches.values()))
    assert len(journal.batches) >= 2  # the later rounds still rode in batches
    assert all(len(journal.requests[c].batches) == 1 for c in expired.ids)  # never put in a batch again
    fell_back = {journal.requests[c].job for c in expired.ids}
    expected = 0.0
    for rec in records(tmp_path / "run"):
        u, meta = rec["usage"], rec["metadata"]
        # The journal's own results say what each job's batches served: the record's batch_* part.
        served = [s.lanes["m"].wire.parse(journal.body(c)).usage for c, st in journal.requests.items()
                  if st.job == rec["job_id"] and st.ok]
        assert served and meta["batch_id"]
        bp, bc = sum(x.prompt_tokens for x in served), sum(x.completion_tokens for x in served)
        assert (u["batch_prompt_tokens"], u["batch_completion_tokens"]) == (bp, bc)
        if rec["job_id"] in fell_back:
            assert meta["batch_fallback"] == 1
            assert u["prompt_tokens"] > bp and u["completion_tokens"] > bc  # its first round was interactive
        else:
            assert "batch_fallback" not in meta
        expected += usd(u["prompt_tokens"], u["completion_tokens"]) - 0.5 * usd(bp, bc)
    assert fell_back
    rep = report(tmp_path / "run")
    assert rep["cost_usd"] == pytest.approx(expected, abs=1e-6)
    tokens = rep["rows"][0]["tokens"]
    assert rep["cost_usd"] > 0.5 * usd(tokens["prompt_tokens"], tokens["completion_tokens"]) + 1e-7
    for f in (tmp_path / "run").glob("index.sqlite*"):
        f.unlink()
    assert report(tmp_path / "run")["cost_usd"] == rep["cost_usd"]  # an index rebuilt from the records agrees
    panel = ProgressDisplay(Ledger(), s.clients, prices=model_prices(cfg.raw, price_terms), live=False)
    assert panel.total_cost() == pytest.approx(expected, abs=1e-6)  # the live panel prices it alike
    assert s.clients["m"].stats.batch_fallbacks == len(fell_back)


async def test_without_fallback_the_expired_requests_wait_for_another_batch(tmp_path: Path) -> None:
    s = Sweep(load_config(write(tmp_path, {})), RunOptions(run_dir=tmp_path / "run", progress=False))
    assert (await s.run()).ok == 3
    journal = BatchJournal(tmp_path / "run")
    expired = next(iter(journal.batches.values()))
    assert all(len(journal.requests[c].batches) == 2 for c in expired.ids)
    rep = report(tmp_path / "run")
    tokens = rep["rows"][0]["tokens"]
    assert rep["cost_usd"] == pytest.approx(0.5 * usd(tokens["prompt_tokens"], tokens["completion_tokens"]),
                                            abs=1e-6)
    assert not any("batch_fallback" in r["metadata"] for r in records(tmp_path / "run"))


@pytest.mark.parametrize("value", ["sometimes", True, 1, None])
def test_fallback_takes_only_batch_or_interactive(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ConfigError, match="batch.fallback"):
        load_config(write(tmp_path, {"fallback": value}))


async def test_a_rerun_falls_back_for_a_request_an_earlier_runs_batch_failed(tmp_path: Path) -> None:
    """The failure is in the journal, not in memory: the next process asks interactively, no new batch."""
    server = SimServer([SimModel("m", policy="direct", options={"batch_api": {"turnaround_s": 0.02, "expire": 1}})])
    await server.start()
    try:
        async def ask(settings: BatchSettings, retry: RetryPolicy, *, interactive: bool) -> list[str]:
            client = ModelClient("m", OpenAICompatProvider(server.base_url, "m"), retry=retry)
            lane = BatchLane("m", OpenAIBatchWire(OpenAICompatProvider(server.base_url, "m")),
                             BatchJournal(tmp_path), settings, retry=retry, stats=client.stats,
                             interactive=client.chat_interactive if interactive else None)

            async def job(i: int) -> str:
                with job_context(f"j{i}"):
                    return (await lane.chat(ChatRequest([{"role": "user", "content": f"q{i}"}]))).content or ""

            try:
                return list(await asyncio.gather(*(job(i) for i in range(3)), return_exceptions=False))
            finally:
                await lane.close()
                await client.close()
                assert client.stats.batch_fallbacks == (3 if interactive else 0)

        fast = {"gather_s": 0.05, "poll_s": 0.02}
        with pytest.raises(ProviderError, match="expired"):  # one attempt only: the expired batch fails the jobs
            await ask(BatchSettings(**fast, max_resubmissions=0), RetryPolicy(max_attempts=1), interactive=False)
        assert server.batch_apis.created == 1
        answers = await ask(BatchSettings(**fast, fallback="interactive"), RetryPolicy(max_attempts=1),
                            interactive=True)
        assert len(answers) == 3 and all(answers)
        assert server.batch_apis.created == 1  # nothing was put in a batch again
    finally:
        await server.stop()
