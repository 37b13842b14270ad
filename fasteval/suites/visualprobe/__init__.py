"""VisualProbe (Mini-o3): loader, the judge (Mini-o3's reading and ours), Avg@k. Importing registers
``visualprobe``."""

from fasteval.suites.visualprobe.judge import fixed_reading, judge_answer, reference_reading
from fasteval.suites.visualprobe.loader import load_visualprobe
from fasteval.suites.visualprobe.suite import VisualProbe

__all__ = ["VisualProbe", "fixed_reading", "judge_answer", "load_visualprobe", "reference_reading"]
