"""Property: whatever a hostile batch provider does, a request is paid for a bounded number of times,
every job ends, and a batch that is not ours is never cancelled or adopted.

The provider is the sim's real batch API on loopback with its hostile switches (providers.sim.
hostile) drawn by hypothesis: garbage results (an HTML page, someone else's ids, a junk line),
duplicated and reordered lines, poll outages, status words nobody documents, lists that never
end, batches that expire, a crash between journaling a batch and creating it, and a colleague's
batch of the same size on the same key. Every wire: OpenAI chat, OpenAI Responses, Anthropic,
Gemini inline and Gemini file.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fasteval.runfolder.batch_journal import BatchJournal
from providers.base import ProviderError
from providers.batch.base import BatchSettings
from providers.sim import SimModel, SimServer
from providers.sim.hostile import RESULT_FAULTS, Hostile
from tests.engine.hostile_lane import WIRES, ask, colleague, stranded

JOBS = 3
RESUBMISSIONS = 2
SETTINGS = BatchSettings(gather_s=0.02, poll_s=0.01, max_resubmissions=RESUBMISSIONS)

hostile = st.builds(
    Hostile, results=st.sampled_from((None, *RESULT_FAULTS)), results_times=st.integers(0, 2),
    duplicate=st.booleans(), reorder=st.booleans(), outage=st.integers(0, 5), unknown_state=st.integers(0, 5),
    endless_list=st.booleans())


async def _play(wire: str, h: Hostile, *, expire: int, crash: bool, foreign: bool) -> None:
    server = SimServer([SimModel("m", policy="direct", options={"batch_api": {"turnaround_s": 0.02,
                                                                              "expire": expire}})])
    await server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp)
            theirs = await colleague(server, wire, JOBS) if foreign else None
            if crash:
                await stranded(run_dir, server, wire, JOBS)
            h.foreign = {theirs} if theirs else set()
            server.hostile = h
            out = await ask(run_dir, server, wire, JOBS, settings=SETTINGS, wait_s=60)
            journal = BatchJournal(run_dir)
            ours = set(journal.requests)
            paid = Counter(c for c in server.batch_apis.submitted if c in ours)
            assert all(isinstance(x, str | ProviderError) for x in out), out  # every job ended, with a clear error
            assert len(ours) == JOBS and max(paid.values(), default=0) <= 1 + RESUBMISSIONS, paid
            assert sum(paid.values()) <= JOBS * (1 + RESUBMISSIONS)
            assert not [t for t in h.touched if t.startswith("cancel")]  # nobody else's batch cancelled
            assert theirs not in {b.batch_id for b in journal.batches.values()}  # ...or adopted
    finally:
        await server.stop()


@pytest.mark.parametrize("wire", WIRES)
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(h=hostile, expire=st.integers(0, 3), crash=st.booleans(), foreign=st.booleans())
def test_a_hostile_batch_provider_is_paid_a_bounded_number_of_times(wire: str, h: Hostile, expire: int, crash: bool,
                                                                    foreign: bool) -> None:
    asyncio.run(_play(wire, h, expire=expire, crash=crash, foreign=foreign))
