"""The run index's aggregates: per model × suite × setting × seed (and status, error kind, termination,
task type), the counts and sums that status, the leaderboard, the ledger and the report read
without touching a job's row.

They live in the index's own table ``agg`` and are kept by SQLite triggers on ``jobs``: every
change of a job's row (the writer's upsert, a reader's catch-up, a merge's bulk insert, a row that
stops being counted) subtracts the old row's contribution and adds the new one in the same
transaction, so a ``kill -9`` can never leave them half-applied. A build from scratch drops the
triggers and computes the table with one ``GROUP BY`` at the end (``recompute_sql``), as it does
with the secondary indexes.

Scores are summed **exactly**: each is split in SQL into two integer limbs (multiples of 2**-31
and of 2**-62), and integer sums do not depend on the order rows arrive, so a mean is the exact
mean rounded once (``mean_of_sum``), the same whether it comes from here, from a per-task
``GROUP BY`` or from the records read one by one. A score the limbs cannot hold (512 or more, or
one with bits below 2**-62, which only values under 2**-9 can have) is counted in ``score_odd``
(and a score that is not a whole number in ``score_frac``, so a group of 0/1 scores is summed plainly)
and its group's scores are read row by row instead. Latencies are summed in whole microseconds
(``latency_us``, each clamped to [0, 10**9] s and rounded half up), so their mean is exact too. The sum of squares of scores is a
plain float sum, for a spread (no reader shows it as exact).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from fasteval.core.headline import exact_mean as exact_mean_of
from fasteval.runfolder.index_rows import BATCH_TOKEN_COLUMNS, INT_MAX, INT_MIN

COUNTED = "coalesce({r}.superseded, 0) = 0"
"""Which rows of ``jobs`` count (``{r}`` is NEW, OLD or the table): the current ones, not the rows a
changed config superseded (kept, readable by their job id, counted by nothing)."""

KEY = ("model", "suite", "setting", "seed", "status", "error_kind", "termination", "task_type")
"""The aggregates' grouping: every dimension a reader of counts filters or groups by."""
NULLABLE = frozenset({"model", "suite", "setting", "error_kind", "termination", "task_type"})
"""Stored encoded (a primary key column cannot be NULL): NULL as '' and a value v as '=' || v.
The names too: a hand-edited record without a model is still a row the readers count."""
INT_SUMS = ("tool_calls", "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens",
            *BATCH_TOKEN_COLUMNS, "image_tokens")
"""Integer columns summed as they are."""
VALUES = ("n", "scored", "score_a", "score_b", "score_odd", "score_frac", "score_sq", "latency_us", *INT_SUMS)

# Integer sums are declared without a type: SQLite turns a sum past 2**63 (only hostile values
# get there) into a REAL and, without an INTEGER affinity, keeps it one, so a reader sees that the
# group overflowed (even after later subtractions) and sums its rows instead.
_TYPES = {"score_sq": "REAL", **dict.fromkeys(INT_SUMS, "")}
_MAX_LATENCY_S = 1e9
"""Latencies are summed clamped to [0, 10**9] s: in microseconds a group's sum then never overflows."""
_SCALE = float(1 << 31)
_ODD_ABOVE = 512.0
"""|score| from here on is summed row by row: a limb sum stays under 2**63 for 2**23 rows of a group."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agg(" + ", ".join(f"{k} {'INTEGER' if k == 'seed' else 'TEXT'} NOT NULL" for k in KEY)
    + ", " + ", ".join(f"{v} {_TYPES.get(v, 'INTEGER')} NOT NULL DEFAULT 0" for v in VALUES)
    + f", PRIMARY KEY ({', '.join(KEY)})) WITHOUT ROWID",
)
TRIGGERS = ("jobs_agg_insert", "jobs_agg_delete", "jobs_agg_update")


def _key_expr(col: str, r: str) -> str:
    return f"coalesce('=' || {r}.{col}, '')" if col in NULLABLE else f"{r}.{col}"


def _limbs(score: str) -> tuple[str, str, str]:
    """SQL for the limbs a and b of a score and whether it is odd.

    ``score * 2**31`` is exact in binary floating point, and so is its remainder's: the limbs hold
    the score exactly wherever ``odd`` is 0.
    """
    p = f"{score} * {_SCALE!r}"
    rest = f"({p} - CAST({p} AS INTEGER)) * {_SCALE!r}"
    odd = f"({rest} != CAST({rest} AS INTEGER) OR abs({score}) >= {_ODD_ABOVE!r})"
    return f"CAST({p} AS INTEGER)", f"CAST({rest} AS INTEGER)", odd


def _contributions(r: str) -> dict[str, str]:
    """Each aggregate column's contribution of the row ``r`` (NEW, OLD or the table itself).

    An odd score adds 0 to both limbs, so their sums never overflow.
    """
    scored = f"{r}.ok = 1 AND {r}.score IS NOT NULL"
    a, b, odd = _limbs(f"{r}.score")
    return {"n": "1", "scored": f"({scored})",
            "score_a": f"CASE WHEN {scored} AND NOT {odd} THEN {a} ELSE 0 END",
            "score_b": f"CASE WHEN {scored} AND NOT {odd} THEN {b} ELSE 0 END",
            "score_odd": f"CASE WHEN {scored} THEN {odd} ELSE 0 END",
            "score_frac": f"CASE WHEN {scored} AND {r}.score != CAST({r}.score AS INTEGER) THEN 1 ELSE 0 END",
            "score_sq": f"CASE WHEN {scored} THEN {r}.score * {r}.score ELSE 0.0 END",
            "latency_us": f"CAST(min(max(coalesce({r}.latency_s, 0.0), 0.0), {_MAX_LATENCY_S!r}) * 1000000.0 + 0.5 "
                          "AS INTEGER)",
            **{c: f"coalesce({r}.{c}, 0)" for c in INT_SUMS}}


def _add(r: str, where: str) -> str:
    """An upsert adding the row ``r`` to its group (``where``: when it counts)."""
    contrib = _contributions(r)
    keys = ", ".join(_key_expr(k, r) for k in KEY)
    return (f"INSERT INTO agg({', '.join(KEY)}, {', '.join(VALUES)}) SELECT {keys}, "
            f"{', '.join(contrib[v] for v in VALUES)} WHERE {where} "
            f"ON CONFLICT({', '.join(KEY)}) DO UPDATE SET " + ", ".join(f"{v} = {v} + excluded.{v}" for v in VALUES))


def _subtract(r: str, where: str) -> list[str]:
    """Statements taking the row ``r`` out of its group (and the group out when it empties)."""
    contrib = _contributions(r)
    match = " AND ".join(f"{k} = {_key_expr(k, r)}" for k in KEY)
    return [f"UPDATE agg SET {', '.join(f'{v} = {v} - ({contrib[v]})' for v in VALUES)} WHERE {match} AND {where}",
            f"DELETE FROM agg WHERE {match} AND n <= 0"]


def trigger_sql() -> list[str]:
    """The three triggers that keep ``agg`` equal to a GROUP BY over the counted rows of ``jobs``."""
    new, old = COUNTED.format(r="NEW"), COUNTED.format(r="OLD")
    return [
        f"CREATE TRIGGER IF NOT EXISTS jobs_agg_insert AFTER INSERT ON jobs WHEN {new} BEGIN {_add('NEW', 'true')}; END",
        f"CREATE TRIGGER IF NOT EXISTS jobs_agg_delete AFTER DELETE ON jobs WHEN {old} BEGIN "
        + "; ".join(_subtract("OLD", "true")) + "; END",
        "CREATE TRIGGER IF NOT EXISTS jobs_agg_update AFTER UPDATE ON jobs BEGIN "
        + "; ".join(_subtract("OLD", old)) + f"; {_add('NEW', new)}; END",
    ]


def recompute_sql() -> str:
    """One GROUP BY over the counted rows: what the triggers would have left (a build from scratch).

    SQLite's ``sum`` fails past 2**63 and ``total`` is a float: an integer sum is taken from
    ``total`` while that is exact (under 2**53) and left a REAL past it, which readers take as an
    overflowed group whose rows they sum themselves.
    """
    contrib = _contributions("jobs")
    keys = [_key_expr(k, "jobs") for k in KEY]

    def summed(v: str) -> str:
        if v == "score_sq":
            return f"total({contrib[v]})"
        if v in INT_SUMS:
            t = f"total({contrib[v]})"
            return f"CASE WHEN abs({t}) < {float(1 << 53)!r} THEN CAST({t} AS INTEGER) ELSE {t} END"
        return f"sum({contrib[v]})"
    return (f"INSERT INTO agg({', '.join(KEY)}, {', '.join(VALUES)}) SELECT {', '.join(keys)}, "
            f"{', '.join(summed(v) for v in VALUES)} "
            f"FROM jobs NOT INDEXED WHERE {COUNTED.format(r='jobs')} GROUP BY {', '.join(keys)}")


# ---- reading -------------------------------------------------------------------------------

def encode(col: str, value: Any) -> Any:
    """A filter value as the aggregates store it."""
    if col not in NULLABLE:
        return value
    return "" if value is None else f"={value}"


def decode(col: str, value: Any) -> Any:
    if col not in NULLABLE:
        return value
    return None if value == "" else str(value)[1:]


def where(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """A WHERE clause over the aggregates' key for ``filters`` (a value, or a list of values)."""
    clauses, params = [], []
    for col, value in filters.items():
        if value is None or col == "superseded":  # (0: the current rows, all the aggregates hold)
            continue
        if isinstance(value, list | tuple | set | frozenset):
            values = [encode(col, v) for v in value]
            clauses.append(f"{col} IN ({', '.join('?' * len(values))})")
            params.extend(values)
        else:
            clauses.append(f"{col} = ?")
            params.append(encode(col, value))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def exact_value(a: int, b: int) -> int:
    """The exact sum of scores whose limb sums are ``a`` and ``b``, in units of 2**-62."""
    return (int(a) << 31) + int(b)


def mean_of_sum(total: int | Fraction, n: int) -> float:
    """The exact mean of values whose exact sum is ``total`` (units of 2**-62 when an int), rounded once."""
    if isinstance(total, Fraction):
        return float(total / n)
    return total / (n << 62)  # int / int is correctly rounded in Python


def mean_of(values: Sequence[float]) -> float:
    """The exact mean of ``values`` rounded once: what every reader of scores reports (the one
    rule, ``fasteval.core.headline.exact_mean``)."""
    return exact_mean_of(values)


def saturated(value: Any) -> int:
    """An integer sum as a reader may use it, clamped to 64 bits (a sum SQLite turned REAL past 2**63 too)."""
    if isinstance(value, int):
        return min(max(value, INT_MIN), INT_MAX)
    return INT_MAX if value >= INT_MAX else INT_MIN if value <= INT_MIN else int(value)


def covers(columns: Iterable[str], filters: dict[str, Any]) -> bool:
    """Can the aggregates answer a read grouped by ``columns`` under ``filters``? They count current
    rows: a read that asks for superseded ones (``superseded=None``: all; ``1``) reads the rows."""
    if "superseded" in filters and filters["superseded"] != 0:
        return False
    return set(columns).issubset(KEY) and all(v is None or k in KEY or k == "superseded" for k, v in filters.items())


def counts(db: Any, by: Sequence[str], filters: dict[str, Any]) -> dict[tuple[Any, ...], dict[str, int]]:
    """Counted jobs per group of ``by``: {key: {status: n}} (``RunIndex.counts`` off the aggregates)."""
    cond, params = where(filters)
    cols = ", ".join(["status", *by])
    out: dict[tuple[Any, ...], dict[str, int]] = {}
    for status, *key, n in db.execute(f"SELECT {cols}, sum(n) FROM agg{cond} GROUP BY {cols}", params):
        group = out.setdefault(tuple(decode(c, v) for c, v in zip(by, key, strict=True)), {})
        group[status] = group.get(status, 0) + int(n)
    return out


def sums(db: Any, columns: Sequence[str], filters: dict[str, Any]) -> tuple[int, ...] | None:
    """Counted jobs under ``filters`` and the sum of each integer column; None when a group's sum
    passed 64 bits (a REAL: the caller sums the rows themselves, exactly)."""
    cond, params = where(filters)
    totals = [0] * (len(columns) + 1)
    for row in db.execute(f"SELECT {', '.join(('n', *columns))} FROM agg{cond}", params):
        for i, v in enumerate(row):
            if not isinstance(v, int):
                return None
            totals[i] += v
    return tuple(saturated(t) for t in totals)


def group_rows(db: Any, filters: dict[str, Any]) -> list[dict[str, Any]]:
    """The aggregate rows under ``filters``, keys decoded (the report folds them per group)."""
    cond, params = where(filters)
    cols = (*KEY, *VALUES)
    return [{c: decode(c, v) for c, v in zip(cols, r, strict=True)}
            for r in db.execute(f"SELECT {', '.join(cols)} FROM agg{cond}", params)]


def per_task(db: Any, model: str, suite: str, setting: str, whole_scores: bool = False) -> Any:
    """One group's scored jobs per task, in task-id order, off the key index alone (it covers them):
    (task_id, n, limb sum a, limb sum b, odd values, max score, min score).

    ``whole_scores``: the caller knows (``score_frac`` and ``score_odd`` of the group are 0) that every
    score is a whole number under 512, whose float sum is exact: limb a is then the plain sum
    times 2**31 and nothing is split (a third of the cost of a row).
    """
    if whole_scores:
        sums = f"CAST(total(score) AS INTEGER) * {1 << 31}, 0, 0"
    else:
        a, b, odd = _limbs("score")
        sums = f"sum(CASE WHEN {odd} THEN 0 ELSE {a} END), sum(CASE WHEN {odd} THEN 0 ELSE {b} END), sum({odd})"
    # Only scored rows are read, so the limbs need no condition, and every column read is in the key
    # index (status and score included): no row of the table is looked up.
    return db.execute(f"SELECT task_id, count(*), {sums}, max(score), min(score) "
                      "FROM jobs INDEXED BY jobs_key WHERE superseded = 0 AND model = ? AND suite = ? AND setting = ? "
                      "AND status = 'ok' AND score IS NOT NULL GROUP BY task_id ORDER BY task_id",
                      (model, suite, setting))


def scores(db: Any, filters: dict[str, Any]) -> list[float]:
    """The scores of the scored jobs under ``filters`` (jobs columns): the fallback for odd values."""
    clauses = [f"{k} = ?" if v is not None else f"{k} IS NULL" for k, v in filters.items()]
    params = [v for v in filters.values() if v is not None]
    sql = " AND ".join(["ok = 1", "score IS NOT NULL", COUNTED.format(r="jobs"), *clauses])
    return [float(r[0]) for r in db.execute(f"SELECT score FROM jobs WHERE {sql}", params)]


def add_sql(source: str) -> str:
    """Add another index's aggregates (attached as ``source``) into ``agg``, group by group."""
    cols = ", ".join((*KEY, *VALUES))
    return (f"INSERT INTO agg({cols}) SELECT {cols} FROM {source}.agg WHERE true ON CONFLICT({', '.join(KEY)}) "
            "DO UPDATE SET " + ", ".join(f"{v} = {v} + excluded.{v}" for v in VALUES))
