"""The HR-Bench suite (``version: 4k|8k``): 800 rows = 200 questions × 4 option rotations.

Three reference scorers (``scorer``):

- ``vlmevalkit`` (default): VLMEvalKit's ``HRBenchDataset.evaluate``: ``can_infer`` then the
  judge fallback per row (``judge``: exact_matching or a role), and the cycle average.
- ``official``: the HR-Bench repository's own evaluation: every row judged yes/no by an LLM
  through the ``judge`` role (default ``judge``; official_judge.py), the fork's prompt.
- ``lmms-eval``: lmms-eval's hrbench task: its prompt, its old ``can_infer``, its GPT judge
  through the ``judge`` role (default ``judge``; lmms_judge.py), and its cycle average.

Options are never reshuffled (the rotations already are); under both fidelities the report
gives the official cycle average beside circular evaluation, where a question counts only when
all its rotations are right.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fasteval.core.options import Opt
from fasteval.core.types import Task
from fasteval.suites.base import LoadError, ScoreContext, Setting, register_suite
from fasteval.suites.hrbench.lmms_judge import lmms_option, lmms_prompt, lmms_texts
from fasteval.suites.hrbench.loader import VERSIONS, load_hrbench, question_group
from fasteval.suites.hrbench.metrics import circular, cycle_average, lmms_cycle_average
from fasteval.suites.hrbench.official_judge import official_texts, official_verdict
from fasteval.suites.mcq import aggregate as agg
from fasteval.suites.mcq.judge import EXACT_MATCHING, vlmevalkit_option
from fasteval.suites.mcq.matching import MatcherVersion, can_infer, fixed_choice
from fasteval.suites.mcq.prediction_file import index_key, read_predictions
from fasteval.suites.mcq.suite import ChoiceSuite, Scored, common_options
from fasteval.suites.mcq.tables import letter_options
from fasteval.suites.reference_texts import TextBook

SCORERS = ("vlmevalkit", "official", "lmms-eval")
JUDGED = ("official", "lmms-eval")
"""Scorers with their own judge (not VLMEvalKit's fallback): ``judge`` names its role, default "judge"."""
DEFAULT_JUDGE_ROLE = "judge"


def _by_seed(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[int(r.get("seed", 0))].append(r)
    return out


def _scorer(records: list[dict[str, Any]]) -> str:
    return next((str(r["score_details"].get("scorer")) for r in records if r.get("score_details")), SCORERS[0])


def _tables(rows: list[dict[str, Any]], fidelity: str, scorer: str = SCORERS[0]) -> dict[str, Any]:
    def hit(r: Mapping[str, Any]) -> float:
        return agg.item_value(r, fidelity)

    def cat(r: Mapping[str, Any]) -> str:
        return agg.meta(r, "category") or ""

    # The reference number is averaged as the chosen scorer averages it.
    average = lmms_cycle_average if fidelity == "reference" and scorer == "lmms-eval" else cycle_average
    cyc = average(rows, hit, lambda r: agg.meta(r, "cycle") or "", cat)
    circ = circular(rows, hit, lambda r: agg.meta(r, "question_group") or str(r.get("task_id")), cat)
    return {"average": cyc["average"], "by_cycle": cyc["by_cycle"], "circular": circ}


def _over_seeds(per_seed: dict[int, dict[str, Any]], pick: str, key: str) -> dict[str, Any]:
    values = [t[pick].get(key) for t in per_seed.values() if t[pick].get(key) is not None]
    if not values:
        return {"mean": None, "std": None}
    mean, std = agg.mean_std([float(v) for v in values])
    return {"mean": mean, "std": std}


@register_suite
class HRBench(ChoiceSuite):
    """HR-Bench 4K / 8K: 200 questions × 4 option rotations; cycle average and circular accuracy.

    Options: ``common_options`` plus ``version`` (4k | 8k).
    """

    name = "hrbench"
    scorers = SCORERS
    vlmevalkit_layout = "ImageMCQDataset"
    shuffles = False
    option_defaults = {"version": "4k"}
    options_schema = {**common_options("hrbench", SCORERS),
                      "version": Opt("str", "4k or 8k (default 4k)", choices=VERSIONS),
                      "judge": Opt("str", "vlmevalkit: exact_matching (default) or the role of VLMEvalKit's fallback "
                                   "judge; official, lmms-eval: the role of their judge (default judge)"),
                      "reference_repo": Opt("path", "checkout holding the reference texts: VLMEvalKit (scorer "
                                            "vlmevalkit), HR-Bench (official), lmms-eval (lmms-eval)")}

    def __init__(self, options: dict[str, Any], blobs: Any) -> None:
        judged = str(options.get("scorer", SCORERS[0])) in JUDGED
        # The judged scorers bring their own judge and texts: VLMEvalKit's fallback stays off.
        super().__init__({**options, "judge": EXACT_MATCHING} if judged else options, blobs)
        self.options = options
        self.version = str(options.get("version", self.option_defaults["version"]))
        if self.version not in VERSIONS:
            raise ValueError(f"hrbench: version must be one of {VERSIONS}, got {self.version!r}")
        self.official_book: TextBook | None = None
        self.lmms_book: TextBook | None = None
        if judged:
            self.judge_role = str(options.get("judge") or DEFAULT_JUDGE_ROLE)
            if self.scorer == "official" and self.judge_role == EXACT_MATCHING:
                raise ValueError("hrbench: scorer official judges every row with an LLM; option 'judge' must name "
                                 f"a judge role (default {DEFAULT_JUDGE_ROLE!r}), not exact_matching")
        if self.scorer == "official":
            self.official_book = official_texts(options, self.fidelity)
            if self.fidelity == "reference":
                self.prompt_book = self.official_book  # the fork's build_prompt, same layout as VLMEvalKit's
        elif self.scorer == "lmms-eval":
            self.lmms_book = lmms_texts(options, self.fidelity)

    def _books(self) -> list[TextBook]:
        books = super()._books()
        return [*books, *(b for b in (self.official_book, self.lmms_book) if b is not None and b not in books)]

    def prompt_text(self, task: Task, options: dict[str, str], setting: Setting) -> str:
        if self.lmms_book is not None and setting.fidelity == "reference":
            return lmms_prompt(self.lmms_book, task.turns[0].text, options)
        return super().prompt_text(task, options, setting)

    def load(self) -> Iterator[Task | LoadError]:
        return load_hrbench(self.path, self.blobs, version=self.version, limit=self.limit)

    async def reference_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                              ctx: ScoreContext, draw_key: str) -> Scored:
        if self.official_book is not None:
            return await self._official_score(task, response, options, gold, ctx)
        if self.lmms_book is not None:
            return await self._lmms_score(task, response, options, gold, ctx)
        judge = ctx.services.get(self.judge_role) if self.judge_book else None
        matched = await vlmevalkit_option("" if response is None else response, options, task.turns[0].text,
                                          judge=judge, texts=self.judge_book, version=self.matcher,
                                          draw_key=draw_key)
        details: dict[str, Any] = {"letter": matched.letter, "matched": matched.how}
        if matched.judge_replies:
            details["judge_replies"] = matched.judge_replies
        if self.judge_book and judge is None:
            details["judge_missing"] = True
        return Scored(1.0 if matched.letter == gold else 0.0, details)

    async def _official_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                              ctx: ScoreContext) -> Scored:
        assert self.official_book is not None
        judge = ctx.services.get(self.judge_role)
        if judge is None:
            return Scored(None, {"matched": "judge"}, f"judge_error: no {self.judge_role!r} role "
                          "(HR-Bench's evaluation judges every row)")
        verdict = await official_verdict(judge, self.official_book, task.turns[0].text, options, gold, response)
        return Scored(verdict.value, {"matched": "judge", **verdict.details}, verdict.error)

    async def _lmms_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                          ctx: ScoreContext) -> Scored:
        assert self.lmms_book is not None
        judge = ctx.services.get(self.judge_role) if self.judge_role != EXACT_MATCHING else None
        judged = await lmms_option(judge, self.lmms_book, task.turns[0].text, options, response)
        details: dict[str, Any] = {"letter": judged.letter, "matched": judged.how}
        if judged.replies:
            details["judge_replies"] = judged.replies
        if judged.letter is None:
            return Scored(None, details, judged.error)
        return Scored(1.0 if judged.letter.lower() == gold.lower() else 0.0, details)

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Per fidelity: the official cycle average (all / single / cross) and circular accuracy,
        each mean ± std over seeds; each seed's average, and each cycle's accuracy (mean over seeds)."""
        scorer = _scorer(records)
        per_seed = {f: {s: _tables(rows, f, scorer) for s, rows in sorted(_by_seed(records).items())}
                    for f in agg.FIDELITIES}
        out: dict[str, Any] = {"errors": agg.errors(records)}
        for pick in ("average", "circular"):
            rows: dict[str, dict[str, Any]] = {}
            for k in ("all", "single", "cross"):
                row: dict[str, Any] = {}
                for f in agg.FIDELITIES:
                    stats = _over_seeds(per_seed[f], pick, k)
                    row[f], row[f"{f}_std"] = stats["mean"], stats["std"]
                rows[k] = row
            out[pick] = rows
        for f in agg.FIDELITIES:
            out[f"{f}_average"], out[f"{f}_circular"] = out["average"]["all"][f], out["circular"]["all"][f]
        ref, fixed = out["reference_average"], out["fixed_average"]
        out["gap"] = None if ref is None or fixed is None else fixed - ref
        out["per_seed"] = {f: {str(s): t["average"].get("all") for s, t in per_seed[f].items()}
                           for f in agg.FIDELITIES}
        cycles = sorted({c for f in agg.FIDELITIES for t in per_seed[f].values() for c in t["by_cycle"]})
        out["by_cycle"] = {c: {f: agg.mean_std([t["by_cycle"].get(c, {}).get("all", 0.0)
                                                 for t in per_seed[f].values()])[0] for f in agg.FIDELITIES}
                           for c in cycles}
        return out

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        """VLMEvalKit's HR-Bench prediction file: items by ``index``, the cycle average as
        ``overall`` / ``by_category`` / ``by_cycle``, and circular accuracy beside them."""
        if str(options.get("scorer", SCORERS[0])) in JUDGED:
            raise ValueError(f"score-file calls no model, and scorer {options['scorer']} judges rows with one: "
                             "rescore with a run (fasteval rescore) or use scorer vlmevalkit")
        if str(options.get("judge", EXACT_MATCHING)) != EXACT_MATCHING:
            raise ValueError("score-file calls no model: use judge exact_matching")
        version: MatcherVersion = options.get("matcher", "upstream")
        rows = []
        for row in read_predictions(Path(path)):
            choices = dict(zip("ABCDEFGHIJ", letter_options(row), strict=False))
            pred = "nan" if row["was_empty"] and fidelity == "reference" else row["prediction"]
            letter = (can_infer(pred, choices, version) or "Z") if fidelity == "reference" else fixed_choice(
                pred, choices)[0]
            rows.append({"key": index_key(row), "hit": 1.0 if letter == str(row.get("answer", "")).strip() else 0.0,
                         "cycle": str(row.get("cycle_category", "")), "category": str(row.get("category", "")),
                         "group": question_group(str(row.get("image_path", "")), str(row.get("question", "")),
                                                 list(choices.values()))})
        if not rows:
            raise ValueError(f"{path}: no predictions")
        cyc = cycle_average(rows, lambda r: float(r["hit"]), lambda r: str(r["cycle"]), lambda r: str(r["category"]))
        circ = circular(rows, lambda r: float(r["hit"]), lambda r: str(r["group"]), lambda r: str(r["category"]))
        avg = cyc["average"]
        return {"items": {r["key"]: r["hit"] for r in rows}, "overall": avg["all"],
                "by_category": {k: avg[k] for k in ("single", "cross")},
                "by_cycle": cyc["by_cycle"], "circular": circ}
