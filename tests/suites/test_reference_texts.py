"""The reference-text loader: exact strings from fixture reference repositories, read with ast/YAML.

The fixture repositories (tests/suites/reference_repos.py) have the reference harnesses' layout
and symbols with synthetic strings; every Python file raises SystemExit when run, so reading
them proves they are parsed, never imported or executed.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml
from reference_repos import FIXTURE_COMMIT, write_tirbench

from fasteval.cli.main import main
from fasteval.suites.data_fetch import FetchError, fetch_reference
from fasteval.suites.reference_texts import (
    ReferenceTextError,
    Template,
    TextSpec,
    load_text_book,
    parse_symbol,
    python_value,
    repo_commit,
    yaml_value,
)


def test_python_symbols_are_read_with_ast_never_run(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('''raise SystemExit("never")
A = "plain"
B = ("one " "two") + " three"
class K:
    def f(self, x):
        msg = "first"
        if x:
            msg = f"second {x!r:>5} {{braces}} {self.name}"
        cfg = {"items": [{"name": "a", "v": 1}, {"name": "b", "v": -2}]}
        def inner():
            msg = "inner scope"
        return msg
''')
    assert python_value(src, "A") == "plain"
    assert python_value(src, "B") == "one two three"
    assert python_value(src, "K.f.msg") == "first"
    second = python_value(src, "K.f.msg@1")
    assert isinstance(second, Template) and second.fields == ["x", "self.name"]
    assert second.render({"x": "hi", "self.name": "N"}) == f"second {'hi'!r:>5} {{braces}} N"
    assert second.source() == "second {x} {braces} {self.name}"
    assert python_value(src, "K.f.{name=b}.v") == -2
    assert python_value(src, "K.f.cfg.items[0]") == {"name": "a", "v": 1}
    with pytest.raises(LookupError):
        python_value(src, "K.f.msg@2")  # the nested function's assignment is not in f's scope
    with pytest.raises(ValueError):
        parse_symbol("K..!")


def test_yaml_key_paths(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump({"tools": [{"tool_schema": {"function": {"name": "z"}}}, {"name": "q"}]}))
    assert yaml_value(f, "tools[0].tool_schema.function.name") == "z"
    assert yaml_value(f, "tools.{name=q}") == {"name": "q"}
    with pytest.raises(LookupError):
        yaml_value(f, "tools[5]")


def test_format_templates_keep_escaped_braces() -> None:
    t = Template.from_format('Q: {question}\n{{"judge": "x"}}')
    assert t.fields == ["question"] and t.render({"question": "why"}) == 'Q: why\n{"judge": "x"}'
    with pytest.raises(KeyError, match="question"):
        t.render({})


def test_text_book_records_file_symbol_sha_and_commit(tmp_path: Path) -> None:
    repo = write_tirbench(tmp_path / "TIR-Bench")
    spec = TextSpec("demo.maze", "demo", "demo_prompts.py", "demo_prompt_maze", "ours")
    book = load_text_book("tirbench", [spec], "reference", repo, "fetch it")
    text = book.get("demo.maze")
    assert text == "\nSYNTH-DEMO maze: Q/R/E triples for {n} pieces\n"  # verbatim, {n} not a field
    m = book.manifest()
    assert m["reference_commit"] == FIXTURE_COMMIT == repo_commit(repo)
    assert m["texts"] == [{"name": "demo.maze", "role": "demo", "file": "demo_prompts.py", "symbol": "demo_prompt_maze",
                           "sha256": hashlib.sha256(text.encode()).hexdigest()}]
    own = load_text_book("tirbench", [spec], "own", None, "fetch it")
    assert own.get("demo.maze") == "ours" and own.manifest()["mode"] == "own"
    assert own.manifest()["texts"][0]["file"] is None


def test_missing_reference_files_say_how_to_get_them(tmp_path: Path) -> None:
    spec = TextSpec("x", "demo", "demo_prompts.py", "demo_prompt_maze", "ours")
    with pytest.raises(ReferenceTextError, match="fasteval data fetch tirbench-reference.*texts: own"):
        load_text_book("tirbench", [spec], "reference", tmp_path / "absent",
                       "fasteval data fetch tirbench-reference --dest data")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReferenceTextError, match="demo_prompts.py is missing"):
        load_text_book("tirbench", [spec], "reference", tmp_path / "empty", "fetch")
    repo = write_tirbench(tmp_path / "old")
    bad = TextSpec("x", "demo", "demo_prompts.py", "demo_prompt_gone", "ours")
    with pytest.raises(ReferenceTextError, match="demo_prompt_gone.*another commit"):
        load_text_book("tirbench", [bad], "reference", repo, "fetch")
    with pytest.raises(ReferenceTextError, match="texts must be one of"):
        load_text_book("tirbench", [spec], "theirs", repo, "fetch")


def test_a_reference_run_without_the_reference_repo_stops_at_load_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {"name": "t", "seeds": 1, "models": [{"name": "m", "provider": "sim", "policy": "direct"}],
           "suites": [{"name": "tirbench", "options": {"path": str(tmp_path), "fidelity": "reference",
                                                        "reference_repo": str(tmp_path / "nowhere")}}]}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code = main(["run", str(path), "--run-dir", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "reference repository" in err and "fasteval data fetch tirbench-reference" in err
    assert not (tmp_path / "run" / "records.jsonl").exists()


@pytest.mark.parametrize("suite,setting,expected", [
    ("tirbench", "no-tool", {"extractor_system", "extractor_question", "extractor_layout", "demo.maze"}),
    ("visualtoolbench", "with-tool", {"system.high", "judge", "tool.web_search", "tool.python_image_processing"}),
    ("vistahop", "search_crop", {"tool_system_prompt", "judge_system", "judge_user", "error.invalid_bbox",
                                 "tool.image_zoom_in_tool"}),
])
def test_suite_prompts_prints_every_text_with_its_source(
        suite: str, setting: str, expected: set[str], reference_repo_paths: dict[str, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    options = json.dumps({"reference_repo": str(reference_repo_paths[suite])})
    code = main(["suite", "prompts", suite, "--setting", setting, "--options", options, "--fidelity", "reference",
                 "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0
    texts = orjson.loads(out)["texts"]
    names = {t["name"] for t in texts}
    assert expected <= names
    roles = {"system_prompt", "tool_spec", "judge_prompt", "extractor_prompt", "demo", "tool_error"}
    for t in texts:
        assert set(t) == {"role", "name", "text", "source"} and t["role"] in roles and isinstance(t["text"], str)
        assert set(t["source"]) == {"file", "symbol"} and (reference_repo_paths[suite] / t["source"]["file"]).is_file()
        assert "SYNTH" in t["text"]
    if suite == "visualtoolbench":
        web = next(t for t in texts if t["name"] == "tool.web_search")
        assert json.loads(web["text"])["name"] == "google_search"
    code = main(["suite", "prompts", suite, "--options", '{"texts": "own"}', "--fidelity", "reference"])
    own = orjson.loads(capsys.readouterr().out)["texts"]
    assert code == 0 and all(t["source"] == {"own": True} and "SYNTH" not in t["text"] for t in own)


def test_suite_prompts_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suite", "prompts", "nosuch"]) == 2
    assert main(["suite", "prompts", "tirbench", "--setting", "nosuch"]) == 2
    assert main(["suite", "prompts", "tirbench", "--options", "[1]"]) == 2
    assert "error:" in capsys.readouterr().err


def test_data_fetch_clones_the_reference_at_the_pinned_commit(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    write_tirbench(upstream)
    import shutil

    shutil.rmtree(upstream / ".git")
    git = ["git", "-C", str(upstream), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(upstream)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (upstream / "later.txt").write_text("later")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "two"], check=True)
    dest = fetch_reference("tirbench-reference", tmp_path / "data", revision=first, url=str(upstream))
    assert dest == tmp_path / "data" / "reference" / "TIR-Bench"
    assert repo_commit(dest) == first and not (dest / "later.txt").exists()
    with pytest.raises(FetchError, match="by hand: git clone"):
        fetch_reference("tirbench-reference", tmp_path / "d2", url=str(tmp_path / "no-such-repo"))
    assert sys.executable  # the clone used git only, never a Python import of the repository


@pytest.mark.parametrize("source", ['P = "Q: {q:>50000000}"', 'P = f"Q: {q:>50000000}"', 'P = "{q:.99999999}"'])
def test_a_format_width_from_a_reference_file_is_bounded(tmp_path: Path, source: str) -> None:
    """``{q:>50000000}`` in a reference file would make every prompt 50 MB: refused at load."""
    (tmp_path / "prompts.py").write_text(source + "\n")
    spec = TextSpec("p", "prompt", "prompts.py", "P", "ours", kind="format")
    with pytest.raises(ReferenceTextError, match="at most 1000"):
        load_text_book("tirbench", [spec], "reference", tmp_path, "fetch")
    (tmp_path / "prompts.py").write_text('P = "Q: {q:>8} {{literal}}"\n')
    assert load_text_book("tirbench", [spec], "reference", tmp_path, "fetch").get("p").render({"q": "x"}) \
        == "Q:        x {literal}"


def test_a_reference_yaml_of_aliases_of_aliases_is_refused_unexpanded(tmp_path: Path) -> None:
    levels = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 7)]
    (tmp_path / "prompts.yaml").write_text("\n".join(levels) + "\nprompts: {judge: *l6}\n")
    spec = TextSpec("j", "judge", "prompts.yaml", "prompts.judge", {}, kind="data")
    with pytest.raises(ReferenceTextError, match="expands to more than"):
        load_text_book("tirbench", [spec], "reference", tmp_path, "fetch")


def test_a_reference_yaml_of_one_long_string_aliased_is_refused_by_its_text(tmp_path: Path) -> None:
    """Few values but megabytes once expanded: 200 KB aliased 100 times is 20 MB of text."""
    body = "s: &s " + "x" * 200_000 + "\ntools:\n" + "".join(f"  - {{name: t{i}, d: *s}}\n" for i in range(100))
    (tmp_path / "tools.yaml").write_text(body)
    spec = TextSpec("t", "tool_spec", "tools.yaml", "tools[0]", {}, kind="data")
    with pytest.raises(ReferenceTextError, match=r"expands to more than 4,194,304 characters of text"):
        load_text_book("tirbench", [spec], "reference", tmp_path, "fetch")
    (tmp_path / "tools.yaml").write_text("tools: [{name: t0, d: " + "y" * 5_000_000 + "}]\n")
    with pytest.raises(ReferenceTextError, match=r"too large for a reference text file"):
        load_text_book("tirbench", [spec], "reference", tmp_path, "fetch")
    (tmp_path / "tools.yaml").write_text("s: &s short\ntools:\n" + "  - {name: t0, d: *s}\n" * 100)
    assert load_text_book("tirbench", [spec], "reference", tmp_path, "fetch").get("t")["name"] == "t0"


def test_a_head_naming_a_path_out_of_git_records_no_commit(tmp_path: Path) -> None:
    """``ref: ../../secret`` would have recorded that file's first line as ``reference_commit``."""
    git = tmp_path / "repo" / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (tmp_path / "secret").write_text("hunter2-api-key\n")
    sha = "0123456789abcdef0123456789abcdef01234567"
    (git / "refs" / "heads" / "main").write_text(sha + "\n")
    for head, want in [("ref: refs/heads/main", sha), ("ref: ../../secret", None), (f"{sha}\n", sha),
                       ("ref: refs/../../../secret", None), ("not a commit", None)]:
        (git / "HEAD").write_text(head)
        assert repo_commit(tmp_path / "repo") == want, head
    (git / "refs" / "heads" / "main").write_text("hunter2-api-key\n")
    (git / "HEAD").write_text("ref: refs/heads/main")
    assert repo_commit(tmp_path / "repo") is None
