"""Scorers for one's own tasks: exact, contains, numeric, regex, choice, math, any_of and judge.

The ``jsonl`` suite names one per task or per suite entry; docs/own-tasks.md shows each.
"""

from fasteval.suites.scorers.base import Check, ScoreEnv, Scorer, Verdict
from fasteval.suites.scorers.registry import SCORER_NAMES, Scorers, ScorerSpec, parse_spec, scorer_class

__all__ = ["SCORER_NAMES", "Check", "ScoreEnv", "Scorer", "ScorerSpec", "Scorers", "Verdict", "parse_spec",
           "scorer_class"]
