"""MME-RealWorld (full, Lite, CN): loader, the three reference scorers, score-file.
Importing registers ``mme-realworld``."""

from fasteval.suites.mme_realworld.loader import fine_category, load_mme_realworld
from fasteval.suites.mme_realworld.scoring import official_letter, reference_verdict, vlmevalkit_letter
from fasteval.suites.mme_realworld.suite import MMERealWorld

__all__ = ["MMERealWorld", "fine_category", "load_mme_realworld", "official_letter", "reference_verdict",
           "vlmevalkit_letter"]
