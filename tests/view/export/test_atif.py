"""``fasteval export --format atif``: every trajectory valid against the published ATIF-v1.8 schema.

Two independent checks of each file: the JSON Schema of Harbor's own models
(``atif-v1.8.schema.json``: ``harbor.models.trajectories.Trajectory.model_json_schema()`` of the
``harbor`` 0.25.0 wheel on PyPI, the RFC 0001 reference implementation; Harbor needs Python 3.12, so
its schema text is vendored here, unedited) and the ``atif`` package's pydantic models (ATIF-v1.8
with the RFC's rules a schema cannot say: sequential step ids, observations that answer a call of
their step, agent-only fields on agent steps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from atif import Trajectory

from fasteval.view.export import export_run
from tests.view.export.support import latest_records

pytestmark = pytest.mark.slow  # one real sweep per module or session, then the library's reader

SCHEMA = json.loads((Path(__file__).parent / "atif-v1.8.schema.json").read_text())


@pytest.fixture(scope="module")
def atif_dir(run_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("atif") / "traj"
    export_run(run_folder, "atif", out)
    return out


def _load(atif_dir: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in atif_dir.glob("*.json")}


def test_every_trajectory_validates_against_harbors_schema_and_the_atif_models(run_folder: Path,
                                                                                atif_dir: Path) -> None:
    recs = {r["job_id"]: r for r in latest_records(run_folder)}
    files = _load(atif_dir)
    assert set(files) == set(recs)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for job_id, doc in files.items():
        errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, (job_id, errors[:3])
        Trajectory.model_validate(doc)
        rec = recs[job_id]
        assert doc["schema_version"] == "ATIF-v1.8" and doc["session_id"] == job_id
        extra = doc["extra"]
        assert (extra["model"], extra["suite"], extra["setting"], extra["task_id"], extra["seed"]) == (
            rec["model"], rec["suite"], rec["setting"], rec["task_id"], rec["seed"])
        assert (extra["status"], extra["score"], extra["config_hash"]) == (rec["status"], rec["score"],
                                                                          extra["config_hash"])
        final = doc["final_metrics"]
        assert (final["total_prompt_tokens"], final["total_completion_tokens"]) == (
            rec["usage"]["prompt_tokens"], rec["usage"]["completion_tokens"])
        metrics = [s["metrics"] for s in doc["steps"] if "metrics" in s]
        if metrics:  # each request's tokens on its step; together, the job's
            assert sum(m["prompt_tokens"] for m in metrics) == rec["usage"]["prompt_tokens"]
            assert sum(m["completion_tokens"] for m in metrics) == rec["usage"]["completion_tokens"]
            assert len(metrics) == rec["rounds"]
    listing = [json.loads(line) for line in (atif_dir / "index.jsonl").read_text().splitlines()]
    assert {row["job_id"] for row in listing} == set(recs)


def test_native_and_text_protocol_calls_carry_their_observations_and_images(atif_dir: Path) -> None:
    files = _load(atif_dir).values()
    priced = [d for d in files if d["extra"]["model"] == "sim-oracle" and d["extra"]["status"] == "ok"
              and d["extra"]["suite"] == "tir-synth"]
    assert priced and all(d["final_metrics"]["total_cost_usd"] > 0 for d in priced)
    native = [s for d in files if d["extra"]["setting"] == "zoom" and d["extra"]["model"] == "sim-tools"
              for s in d["steps"] if s.get("tool_calls")]
    assert native
    for step in native:
        call = step["tool_calls"][0]
        assert call["function_name"] == "image_zoom_in_tool" and call["extra"]["status"] == "ok"
        result = step["observation"]["results"][0]
        assert result["source_call_id"] == call["tool_call_id"]
        crops = [p for r in step["observation"]["results"] if isinstance(r["content"], list) for p in r["content"]
                 if p["type"] == "image"]
        assert crops, "the zoom tool's crop is in the observation"
        assert (atif_dir / crops[0]["source"]["path"]).is_file()
    text = [d for d in files if d["extra"]["setting"] == "deepeyes" and d["extra"]["model"] == "sim-tools"]
    assert text
    for doc in text:  # DeepEyes' <tool_call> text: the call from the log, its <tool_response> as the observation
        step = next(s for s in doc["steps"] if s.get("tool_calls"))
        assert "<tool_call>" in step["message"] and step["tool_calls"][0]["function_name"] == "image_zoom_in_tool"
        result = step["observation"]["results"][0]
        assert result["source_call_id"] == step["tool_calls"][0]["tool_call_id"]
        assert "<tool_response>" in json.dumps(result["content"])
        assert [s["source"] for s in doc["steps"]] == ["system", "user", "agent", "agent"]
        assert doc["extra"]["scores"].keys() == {"fasteval", "reference", "fixed"}
    first_user = next(s for d in files for s in d["steps"] if s["source"] == "user")
    image = next(p for p in first_user["message"] if p["type"] == "image")
    assert image["source"]["media_type"] in ("image/png", "image/jpeg")


def test_a_two_turn_job_has_two_user_steps_and_errors_are_still_trajectories(atif_dir: Path) -> None:
    files = list(_load(atif_dir).values())
    two = [d for d in files if d["extra"]["suite"] == "demo" and d["extra"]["model"] == "sim-tools"
           and sum(1 for s in d["steps"] if s["source"] == "user") == 2]
    assert two
    errors = [d for d in files if d["extra"]["status"] == "error"]
    assert errors and all(d["extra"]["error_kind"] == "fatal" and d["steps"] for d in errors)
