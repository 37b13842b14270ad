"""Each TIR-Bench scoring rule, branch by branch, reference quirks included."""

from __future__ import annotations

import threading

import pytest

from fasteval.suites.tirbench.scoring import (
    classify_string,
    clean_extraction,
    digit_runs,
    edit_distance,
    first_n_squared_run,
    first_number_pair,
    judge_by_answer_type,
    judge_choice,
    judge_float,
    judge_int,
    judge_jigsaw,
    judge_ocr,
    judge_spot_difference,
    judge_word_search,
    nearest_choice,
    overall_accuracy,
    positional_accuracy,
    score_item,
    scoring_rule,
    set_iou,
)

PROMPT = "What colour is the car? A. red B. green C. blue D. white"


def test_clean_extraction_drops_stars_and_none() -> None:
    assert clean_extraction(None) == ""
    assert clean_extraction("  **B**  ") == "B"


@pytest.mark.parametrize(
    ("answer", "kind"),
    [("B", 1), ("CD", 1), ("是", 1), ("72", 2), (" 7 ", 2), ("0.25", 3), ("1e3", 3), ("[2, 5]", 4), ("", 4)],
)
def test_classify_string_matches_reference_types(answer: str, kind: int) -> None:
    assert classify_string(answer) == kind


def test_edit_distance_and_nearest_choice_tie_goes_to_first() -> None:
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "A") == 1
    assert nearest_choice("Answer: B") == "A"  # "A" in "Answer" ties with "B"; the first wins
    assert nearest_choice("xyz") == "A"
    assert nearest_choice("(C)") == "C"


class TestJudgeChoice:
    def test_exact_letter(self) -> None:
        assert judge_choice("B", "B", PROMPT) == 1.0
        assert judge_choice("C", "B", PROMPT) == 0.0

    def test_extracted_label_is_dropped(self) -> None:
        assert judge_choice("Extracted answer: D", "D", PROMPT) == 1.0

    def test_option_text_maps_to_its_letter(self) -> None:
        assert judge_choice("blue", "C", PROMPT) == 1.0
        assert judge_choice("white", "D", PROMPT) == 1.0
        # "(D) grey" is none of the reference's "X. t", "X.t", "X t", "Xt" forms: no mapping.
        assert judge_choice("grey", "D", "(A) red (D) grey") == 0.0

    def test_anything_snaps_to_nearest_letter(self) -> None:
        assert judge_choice("(C)", "C", PROMPT) == 1.0
        # Reference quirk: a non-answer still snaps to a letter, here "A".
        assert judge_choice("no answer", "A", "(A) x (B) y") == 1.0

    def test_gold_letter_outside_a_to_j_scores_zero(self) -> None:
        assert judge_choice("K", "K", "K. maybe") == 0.0
        assert judge_choice("是", "是", "是 or 否") == 0.0

    def test_multi_letter_needs_sorted_equality(self) -> None:
        assert judge_choice("DC", "CD", PROMPT) == 1.0
        assert judge_choice("C, D", "CD", PROMPT) == 0.0  # no separators allowed
        assert judge_choice("C", "CD", PROMPT) == 0.0


class TestJudgeInt:
    def test_letters_and_label_are_removed(self) -> None:
        assert judge_int("Extracted answer: 12 apples", "12") == 1.0
        assert judge_int("13", "12") == 0.0

    def test_math_verify_fallback(self) -> None:
        assert judge_int("\\boxed{12}", "12") == 1.0
        assert judge_int("12.0", "12") == 1.0
        assert judge_int("twelve", "12") == 0.0

    def test_fallback_works_off_the_main_thread(self) -> None:
        out: list[float] = []
        t = threading.Thread(target=lambda: out.append(judge_int("24/2", "12")))
        t.start()
        t.join()
        assert out == [1.0]


class TestJudgeFloat:
    def test_exact_float_equality(self) -> None:
        assert judge_float("0.30", "0.3") == 1.0
        assert judge_float("0.299", "0.3") == 0.0
        assert judge_float("3.4 bar", "3.4") == 1.0

    def test_math_verify_fallback(self) -> None:
        assert judge_float("3/10", "0.3") == 1.0
        assert judge_float("", "0.3") == 0.0


class TestJudgeOcr:
    def test_case_sensitive_substring_of_raw_response(self) -> None:
        assert judge_ocr("The text says: Hello world", "Hello", "data/ocr/1.jpg", "fixed") == 1.0
        assert judge_ocr("The text says: hello world", "Hello", "data/ocr/1.jpg", "fixed") == 0.0

    def test_list_response_uses_first_element_and_none_scores_zero(self) -> None:
        assert judge_ocr(["Hello", "nothing"], "Hello", "x.jpg", "fixed") == 1.0
        assert judge_ocr(["nothing", "Hello"], "Hello", "x.jpg", "fixed") == 0.0
        assert judge_ocr(None, "Hello", "x.jpg", "fixed") == 0.0

    def test_file_name_overrides_only_under_reference(self) -> None:
        assert judge_ocr("it reads mobi", "MOBI", "data/ocr/60.jpg", "reference") == 1.0
        assert judge_ocr("it reads mobi", "MOBI", "data/ocr/60.jpg", "fixed") == 0.0
        assert judge_ocr("buenos aires", "AIRES", "data/ocr/62.jpg", "reference") == 1.0
        assert judge_ocr("buenos aires", "AIRES", "data/ocr/62.jpg", "fixed") == 0.0

    def test_override_is_a_substring_test_so_160_matches(self) -> None:
        assert judge_ocr("mobi", "other", "data/ocr/160.jpg", "reference") == 1.0


class TestWordSearch:
    def test_integer_gold_uses_judge_int(self) -> None:
        assert judge_word_search("2 times", "2") == 1.0

    def test_first_pair_must_match(self) -> None:
        assert first_number_pair("at 4 , 7") == (4, 7)
        assert first_number_pair("row 4, col 7") is None  # the comma must sit between the digits
        assert judge_word_search("[4, 7]", "[4, 7]") == 1.0
        assert judge_word_search("[4,7] or [5, 8]", "[4, 7]") == 1.0
        assert judge_word_search("[7, 4]", "[4, 7]") == 0.0

    def test_unparseable_extraction_scores_zero(self) -> None:
        assert judge_word_search("row four", "[4, 7]") == 0.0


class TestSpotDifference:
    def test_integer_gold_is_a_count(self) -> None:
        assert judge_spot_difference("3 differences", "3") == 1.0

    def test_set_iou(self) -> None:
        assert digit_runs("[3, 6, 14]") == [3, 6, 14]
        assert judge_spot_difference("[2, 5]", "[5, 2]") == 1.0
        assert judge_spot_difference("[2, 5, 9]", "[2, 5]") == pytest.approx(2 / 3)
        assert judge_spot_difference("patches 2 and 7", "[2, 5]") == pytest.approx(1 / 3)

    def test_two_empty_sets_score_one(self) -> None:
        assert set_iou([], []) == 1.0
        assert judge_spot_difference("none", "[]") == 1.0


class TestJigsaw:
    def test_positional_accuracy_gives_partial_credit(self) -> None:
        assert positional_accuracy([1, 2, 3, 4], [1, 2, 4, 3]) == 0.5
        assert judge_jigsaw("2, 1, 4, 3", "2, 1, 4, 3", 2) == 1.0
        assert judge_jigsaw("Order: 2, 1, 3, 4.", "2, 1, 4, 3", 2) == 0.5

    def test_first_run_with_n_squared_numbers_full_width_commas(self) -> None:
        assert first_n_squared_run("3x3: 1，2，3，4 then 4, 3, 2, 1", 2) == [1, 2, 3, 4]
        assert first_n_squared_run("1, 2, 3", 2) is None

    def test_no_run_or_bad_difficulty_scores_zero(self) -> None:
        assert judge_jigsaw("1, 2, 3", "1, 2, 3, 4", 2) == 0.0
        assert judge_jigsaw("1, 2, 3, 4", "1, 2, 3, 4", None) == 0.0
        assert judge_jigsaw("1, 2, 3, 4", "1, 2, 3, 4", "2") == 0.0
        assert judge_jigsaw("1, 2, 3, 4", "1, 2, 3, 4", 2.0) == 1.0


def test_answer_type_four_scores_zero() -> None:
    assert judge_by_answer_type("[1, 2]", "[1, 2]", "") == 0.0


class TestScoreItem:
    def test_dispatch_by_task_type(self) -> None:
        meta = {"prompt": PROMPT, "image_1": "data/x.jpg", "difficulty": 2}
        assert score_item("color", "long text", "**blue**", "C", "fixed", meta) == 1.0
        assert score_item("instrument", "", "72", 72, "fixed", meta) == 1.0
        assert score_item("word_search", "", "[1, 2]", "[1, 2]", "fixed", meta) == 1.0
        assert score_item("spot_difference", "", "1, 9", "[1, 2]", "fixed", meta) == pytest.approx(1 / 3)
        assert score_item("jigsaw", "", "1, 2, 4, 3", "1, 2, 3, 4", "fixed", meta) == 0.5

    def test_ocr_ignores_extraction_and_uses_response(self) -> None:
        assert score_item("ocr", "it says Hi", None, "Hi", "fixed", {"image_1": "a.jpg"}) == 1.0
        assert score_item("ocr", "nothing", "Hi", "Hi", "fixed", {"image_1": "a.jpg"}) == 0.0

    def test_none_extraction_counts_as_empty(self) -> None:
        assert score_item("math", "", None, "12", "fixed", {}) == 0.0

    def test_unknown_task_type_falls_back_to_answer_type(self) -> None:
        assert score_item("synth_count", "", "5", "5", "fixed", {}) == 1.0

    def test_scoring_rule_names(self) -> None:
        assert scoring_rule("word_search", "[1, 2]") == "pair"
        assert scoring_rule("spot_difference", 3) == "int"
        assert scoring_rule("math", "0.5") == "float"
        assert scoring_rule("maze", "[1]") == "invalid_answer"


def test_overall_accuracy_is_mean_with_fractions() -> None:
    assert overall_accuracy([1.0, 0.0, 0.5, 2 / 3]) == pytest.approx((1 + 0.5 + 2 / 3) / 4)
    with pytest.raises(ValueError):
        overall_accuracy([])
