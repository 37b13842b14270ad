"""Option order per seed: so a model that always answers "A" scores chance, not 100%.

The order is a pure function of (task id, seed), drawn with ``random.Random`` seeded by a
string (stable across processes and Python versions), and recorded on every record.
"""

from __future__ import annotations

import random

from fasteval.suites.mcq.tables import LETTERS


def option_order(task_id: str, seed: int, n: int, *, pin_last: bool = False) -> list[int]:
    """A permutation of range(n): position i shows original option order[i]. ``pin_last`` keeps
    the last option last (MME-RealWorld's "the image does not feature ..." E)."""
    head = list(range(n - 1 if pin_last and n > 1 else n))
    random.Random(f"option-order|{task_id}|{seed}").shuffle(head)
    return head + ([n - 1] if pin_last and n > 1 else [])


def shown(options: list[str], order: list[int]) -> dict[str, str]:
    """Letter -> option text as shown under ``order``."""
    return {LETTERS[i]: options[j] for i, j in enumerate(order)}


def gold_letter(answer_index: int, order: list[int]) -> str:
    """The letter the gold option gets under ``order``."""
    return LETTERS[order.index(answer_index)]
