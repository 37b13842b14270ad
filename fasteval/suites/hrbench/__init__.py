"""HR-Bench 4K / 8K: loader, cycle average and circular evaluation. Importing registers ``hrbench``."""

from fasteval.suites.hrbench.loader import load_hrbench, question_group
from fasteval.suites.hrbench.metrics import circular, cycle_average
from fasteval.suites.hrbench.suite import HRBench

__all__ = ["HRBench", "circular", "cycle_average", "load_hrbench", "question_group"]
