"""The check behind ``make test-slow`` (tests/suite_split.py) names a test that neither half of the suite runs."""

from __future__ import annotations

from pathlib import Path

from tests.suite_split import check

_TREE = {
    "pytest.ini": "[pytest]\nmarkers =\n    slow: slow\n    gpu: gpu\n",
    "t/test_a.py": "import pytest\n\ndef test_quick():\n    pass\n\n@pytest.mark.slow\ndef test_long():\n    pass\n\n"
                   "@pytest.mark.slow\n@pytest.mark.gpu\ndef test_long_on_a_gpu():\n    pass\n",
}


def _tree(tmp_path: Path) -> Path:
    for rel, text in _TREE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_halves_that_cover_the_suite_pass_and_one_that_drops_a_test_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert check(["-m", "not slow"], ["-m", "slow"], root) == []
    assert check(["-m", "not slow"], ["-m", "slow and not gpu"], root) == [
        "in neither `make test` nor `make test-slow`: t/test_a.py::test_long_on_a_gpu"]
    assert check(["-m", "not gpu"], ["-m", "slow"], root) == [
        "in both `make test` and `make test-slow`: t/test_a.py::test_long"]
