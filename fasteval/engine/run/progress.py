"""Live progress: jobs done/error/total, in-flight per endpoint, retries, backoff, tokens, ETA.

On a terminal it is a rich Live panel refreshed a few times a second; elsewhere (CI, logs) it
prints one plain line every ``interval_s``. Either way it reads the run's ledger and the
endpoints' counters, and never blocks jobs.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from fasteval.core.pricing import BATCH_TOKENS, TOKEN_KINDS, Price, cost_usd
from fasteval.core.terminal import clean, plain
from fasteval.engine.ledger import Ledger
from providers import AdaptiveLimit, ModelClient

log = logging.getLogger(__name__)


def _money(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def _fmt_eta(eta: float | None) -> str:
    if eta is None:
        return "—"
    m, s = divmod(int(eta), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"


class ProgressDisplay:
    """Renders the ledger and the endpoint limiters; extra limiters come as callables."""

    def __init__(self, ledger: Ledger, clients: dict[str, ModelClient],
                 extra: dict[str, Callable[[], dict[str, Any]]] | None = None, *,
                 live: bool | None = None, interval_s: float = 10.0,
                 extra_rows: Callable[[], dict[str, dict[str, Any]]] | None = None,
                 prices: dict[str, Price | None] | None = None, global_cap: AdaptiveLimit | None = None,
                 notes: Callable[[], str] | None = None) -> None:
        self.ledger = ledger
        self.prices = prices or {}
        self.clients = clients
        self.extra = extra or {}
        self.extra_rows = extra_rows
        self.live = sys.stderr.isatty() if live is None else live
        self.interval_s = interval_s
        self.global_cap = global_cap
        """The sweep's in-flight slots (``ctl set global`` moves them): an endpoint's effective limit is
        the smaller of its own and theirs."""
        self.notes = notes
        """A line about steering (``fasteval ctl``: paused parts, drains, requeues), empty when none."""
        self._task: asyncio.Task[None] | None = None
        self.console = Console(stderr=True)

    def _limit(self, cl: ModelClient) -> int:
        return min(cl.limit.limit, self.global_cap.limit) if self.global_cap is not None else cl.limit.limit

    @staticmethod
    def _state(cl: ModelClient) -> str:
        return cl.breaker.describe() if cl.breaker is not None else "up"

    def _cost(self, name: str, cl: ModelClient) -> float | None:
        price = self.prices.get(name)
        if price is None:
            return None
        s = cl.stats  # the batch_* parts pay the batch factor, the rest (interactive fallbacks too) full price
        return cost_usd({k: getattr(s, k) for k in (*TOKEN_KINDS, *BATCH_TOKENS)}, price)

    def total_cost(self) -> float | None:
        costs = [c for c in (self._cost(n, cl) for n, cl in self.clients.items()) if c is not None]
        return sum(costs) if costs else None

    def table(self) -> Table:
        c = self.ledger
        total = self.total_cost()
        spent = f" cost ${total:.2f}" if total is not None else ""
        note = self.notes() if self.notes is not None else ""
        title = Text(f"jobs {c.finished}/{c.total} (ok {c.ok}, error {c.error}, "
                     f"resumed {c.resumed}, in flight {c.in_flight}) ETA {_fmt_eta(c.eta_s())}{spent}")
        if note:  # names from the config: literal text, never markup
            title.append("\n" + clean(note), style="yellow")
        t = Table(title=title, title_justify="left")
        for col in ("endpoint", "in flight", "limit", "waiting", "requests", "retries", "429s", "backoff s", "tokens",
                    "cost $", "state"):
            t.add_column(col, justify="right" if col not in ("endpoint", "state") else "left")
        for name, cl in self.clients.items():
            s = cl.stats
            t.add_row(plain(name), str(cl.limit.in_flight), str(self._limit(cl)), str(cl.limit.waiting), str(s.requests),
                      str(s.retries), str(s.rate_limited), f"{s.backoff_s:.1f}",
                      str(s.prompt_tokens + s.completion_tokens), _money(self._cost(name, cl)), plain(self._state(cl)))
        rows = {name: fn() for name, fn in self.extra.items()}
        if self.extra_rows is not None:
            rows.update(self.extra_rows())
        for name, st in rows.items():
            t.add_row(plain(name), plain(st.get("in_flight", "")), plain(st.get("limit", st.get("size", ""))),
                      plain(st.get("waiting", "")), plain(st.get("requests", st.get("calls", ""))), "", "", "", "", "")
        return t

    def line(self) -> str:
        c = self.ledger
        total = self.total_cost()
        parts = [f"jobs {c.finished}/{c.total} ok={c.ok} error={c.error} in_flight={c.in_flight} "
                 f"eta={_fmt_eta(c.eta_s())}" + (f" cost=${total:.2f}" if total is not None else "")]
        note = self.notes() if self.notes is not None else ""
        if note:
            parts.append(note)
        for name, cl in self.clients.items():
            s = cl.stats
            state = self._state(cl)
            parts.append(f"{name}: {cl.limit.in_flight}/{self._limit(cl)} req={s.requests} retries={s.retries} "
                         f"backoff={s.backoff_s:.1f}s tok={s.prompt_tokens + s.completion_tokens}"
                         + ("" if state == "up" else f" {state}"))
        rows = {name: fn() for name, fn in self.extra.items()}
        if self.extra_rows is not None:
            rows.update(self.extra_rows())
        for name, st in rows.items():
            parts.append(f"{name}: {st.get('in_flight', '?')}/{st.get('limit', st.get('size', '?'))} "
                         f"waiting={st.get('waiting', 0)}")
        return clean(" | ".join(parts))  # the state holds an endpoint's words (an error body)

    async def _run(self) -> None:
        if self.live:
            with Live(self.table(), console=self.console, refresh_per_second=4, transient=False) as live:
                while True:
                    await asyncio.sleep(0.25)
                    live.update(self.table())
        else:
            while True:
                await asyncio.sleep(self.interval_s)
                print(self.line(), file=sys.stderr, flush=True)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            except Exception:  # the panel only shows counters: its failure must not change the sweep's exit
                log.exception("the progress display failed")
            self._task = None
        if not self.live:
            print(self.line(), file=sys.stderr, flush=True)
