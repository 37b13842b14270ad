"""TIRBench.score: extraction through the extractor role, then the reference rules."""

from __future__ import annotations

from pathlib import Path

from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import ScoreContext, Setting
from fasteval.suites.tirbench import TIRBench
from providers.base import ChatRequest, ChatResponse


class ScriptedExtractor:
    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return ChatResponse(content=self.replies.pop(0))


def _suite_and_tasks(release: Path, blobs: BlobStore, **options: object) -> tuple[TIRBench, dict[str, Task]]:
    suite = TIRBench({"path": str(release), **options}, blobs)
    return suite, {t.id: t for t in suite.load() if isinstance(t, Task)}


def _answered(text: str | None) -> Trajectory:
    return Trajectory(answers=[text])


async def test_extracts_then_scores_choice(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs)
    extractor = ScriptedExtractor("grey")
    ctx = ScoreContext(blobs=blobs, services={"extractor": extractor})
    score = await suite.score(tasks["101"], _answered("It is mostly grey, so D."), Setting("no-tool"), ctx)
    assert score.value == 1.0 and score.error is None
    assert score.details["extracted"] == "grey" and score.details["task_type"] == "color"
    assert score.details["rule"] == "choice" and score.details["extraction_attempts"] == 1
    sent = extractor.requests[0].messages[1]["content"][0]["text"]
    assert "Model response: It is mostly grey, so D." in sent and sent.endswith("Extracted answer: ")


async def test_jigsaw_partial_credit_through_score(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs)
    ctx = ScoreContext(blobs=blobs, services={"extractor": ScriptedExtractor("2, 1, 3, 4")})
    score = await suite.score(tasks["102"], _answered("2 1 3 4"), Setting("no-tool"), ctx)
    assert score.value == 0.5


async def test_ocr_skips_extraction_and_honours_fidelity(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs)
    ctx = ScoreContext(blobs=blobs)  # no extractor needed for ocr
    reply = _answered("The rotated word is mobi")
    reference = await suite.score(tasks["104"], reply, Setting("no-tool", fidelity="reference"), ctx)
    fixed = await suite.score(tasks["104"], reply, Setting("no-tool", fidelity="fixed"), ctx)
    assert (reference.value, fixed.value) == (1.0, 0.0)
    assert reference.details["extracted"] is None


async def test_unusable_extractions_become_judge_error_not_zero_under_fixed(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs)
    ctx = ScoreContext(blobs=blobs, services={"extractor": ScriptedExtractor("", " ", "")})
    score = await suite.score(tasks["105"], _answered("72 F"), Setting("no-tool", fidelity="fixed"), ctx)
    assert score.value is None and score.error is not None and score.error.startswith("judge_error:")
    assert score.details["extractor_replies"] == ["", " ", ""]


async def test_missing_extractor_is_a_judge_error(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs)
    score = await suite.score(tasks["105"], _answered("72"), Setting("no-tool"), ScoreContext(blobs=blobs))
    assert score.value is None and score.error is not None and "extractor" in score.error


async def test_raw_extraction_mode_scores_the_answer_text(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs, extraction="raw")
    score = await suite.score(tasks["103"], _answered("[2, 5, 9]"), Setting("no-tool"), ScoreContext(blobs=blobs))
    assert score.value is not None and abs(score.value - 2 / 3) < 1e-9
    assert score.details["extraction_source"] == "raw"


async def test_no_final_answer_scores_zero(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs)
    score = await suite.score(tasks["105"], _answered(None), Setting("tool"), ScoreContext(blobs=blobs))
    assert score.value == 0.0 and score.details["no_response"] is True


async def test_reference_extraction_failure_scores_an_empty_extraction(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs)
    ctx = ScoreContext(blobs=blobs, services={"extractor": ScriptedExtractor("", " ", "")})
    score = await suite.score(tasks["105"], _answered("72 F"), Setting("no-tool", fidelity="reference"), ctx)
    assert score.error is None and score.value == 0.0 and score.details["extracted"] == ""
    assert "unusable extractor reply after 3 attempts" in score.details["extraction_failed"]
    forced = TIRBench({"path": str(release), "extraction_failure": "error"}, blobs)
    ctx = ScoreContext(blobs=blobs, services={"extractor": ScriptedExtractor("", " ", "")})
    err = await forced.score(tasks["105"], _answered("72 F"), Setting("no-tool", fidelity="reference"), ctx)
    assert err.value is None and err.error is not None and err.error.startswith("judge_error:")


async def test_reference_texts_are_sent_verbatim(release: Path, blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs, fidelity="reference")
    extractor = ScriptedExtractor("D")
    ctx = ScoreContext(blobs=blobs, services={"extractor": extractor})
    score = await suite.score(tasks["101"], _answered("grey, D"), Setting("no-tool", fidelity="reference"), ctx)
    assert score.value == 1.0
    system, user = extractor.requests[0].messages
    assert system["content"][0]["text"] == " SYNTH extractor system line."  # leading space kept
    question = tasks["101"].turns[0].text
    assert user["content"][0]["text"] == (
        f"SYNTH-DEMO color: Q/R/E triples for {{n}} pieces\n\nSYNTH-Q<<{question}>>\n\nSYNTH-R<<grey, D>>"
        "\n\nSYNTH-EXTRACTED: ")
    manifest = suite.text_manifest()
    assert manifest is not None and manifest["mode"] == "reference"
    assert {t["name"] for t in manifest["texts"]} >= {"demo.color", "extractor_system", "extractor_layout"}
    own, _ = _suite_and_tasks(release, blobs, fidelity="reference", texts="own")
    own_manifest = own.text_manifest()
    assert own_manifest is not None and own_manifest["mode"] == "own"


async def test_scoring_is_bounded_so_a_pathological_answer_cannot_hang_a_job(release: Path,
                                                                            blobs: BlobStore) -> None:
    suite, tasks = _suite_and_tasks(release, blobs, scoring_timeout_s=0)
    ctx = ScoreContext(blobs=blobs, services={"extractor": ScriptedExtractor("72")})
    score = await suite.score(tasks["105"], _answered("72"), Setting("no-tool"), ctx)
    assert (score.value, score.error, score.details["scoring_timeout_s"]) == (0.0, None, 0)
