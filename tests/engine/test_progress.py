"""The progress line tells the truth: effective limits, an endpoint's state, no early ETA."""

from __future__ import annotations

import time

from fasteval.engine.ledger import Ledger
from fasteval.engine.run.progress import ProgressDisplay
from providers.breaker import BreakerPolicy, CircuitBreaker, EndpointUnreachable
from providers.client import ModelClient
from providers.limits import AdaptiveLimit
from providers.openai_compat import OpenAICompatProvider


def test_no_eta_until_enough_jobs_finished() -> None:
    c = Ledger(planned=1000, started_at=time.monotonic() - 60)
    c.ok = 3
    assert c.eta_s() is None  # three quick finishers say nothing about a thousand jobs
    c.ok = 100
    eta = c.eta_s()
    assert eta is not None and 400 < eta < 700
    fresh = Ledger(planned=10, started_at=time.monotonic())
    fresh.ok = 9
    assert fresh.eta_s() is None  # under 5 s of history


async def test_line_shows_effective_limit_and_why_an_endpoint_is_down() -> None:
    breaker = CircuitBreaker("m (http://127.0.0.1:9/v1)", BreakerPolicy(failures=1))
    client = ModelClient("m", OpenAICompatProvider("http://127.0.0.1:9/v1", "m"), concurrency=256, breaker=breaker)
    display = ProgressDisplay(Ledger(planned=10), {"m": client}, live=False, global_cap=AdaptiveLimit(16))
    assert "m: 0/16 " in display.line() and "down" not in display.line()
    breaker.on_failure(EndpointUnreachable("connection refused (127.0.0.1:9)"))
    line = display.line()
    assert "down since " in line and "connection refused (127.0.0.1:9)" in line
    table = display.table()
    assert [col.header for col in table.columns][-1] == "state"
    await client.close()


def test_the_steering_note_is_on_the_line_and_the_panel_title_as_literal_text() -> None:
    from rich.console import Console

    note = "paused: model [red]x[/red] (now); limits set: m.rpm=5"
    display = ProgressDisplay(Ledger(planned=10), {}, live=False, notes=lambda: note)
    assert note in display.line()
    console = Console(record=True, width=200)
    console.print(display.table())
    assert "[red]x[/red]" in console.export_text()  # printed as written, never parsed as markup
    assert "paused" not in ProgressDisplay(Ledger(planned=10), {}, live=False).line()
