"""V* Bench: loader, suite and score-file. Importing this package registers the ``vstar`` suite."""

from fasteval.suites.vstar.loader import load_vstar
from fasteval.suites.vstar.reference_file import score_reference_file
from fasteval.suites.vstar.suite import VStar

__all__ = ["VStar", "load_vstar", "score_reference_file"]
