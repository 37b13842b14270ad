"""Few-shot demonstration blocks for TIR-Bench answer extraction, one per task type.

Our own examples, written in the reference ``demo_prompts.py`` layout (a header line, then
"Question / Model response / Extracted answer" triples) and covering the same answer formats:
a letter (or letters) for multiple choice, an integer, a float, "[r, c]", an integer list and
a comma-separated permutation. ``ocr`` has none: it is scored on the raw response.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADER = (
    "Please read the following example. Then extract the answer from the model response "
    "and type it at the end of the prompt."
)


@dataclass(frozen=True, slots=True)
class Demo:
    """One worked example: what was asked, what the model said, what the extractor should write."""

    question: str
    response: str
    extracted: str


def render_block(demos: tuple[Demo, ...]) -> str:
    """The header and the triples, separated by blank lines as the reference blocks are."""
    parts = [HEADER]
    for d in demos:
        parts.append(f"Question: {d.question}\n\nModel response: {d.response}\n\nExtracted answer: {d.extracted}")
    return "\n\n".join(parts)


_LETTER_DEMOS = (
    Demo(
        "Which option is closest to the share of the picture covered by the blue kite? "
        "Select from the following choices. (A) 4% (B) 12% (C) 20% (D) 28%",
        "The kite occupies a modest region near the top; measuring its mask against the frame gives "
        "roughly one eighth of the area, so **the answer is (B) 12%**.",
        "B",
    ),
    Demo(
        "Which of these hex codes matches the swatch in the lower-left corner? "
        "(A) #3A7F1C (B) #3A1C7F (C) #7F3A1C (D) #1C7F3A",
        "Sampling the swatch pixels gives an average RGB of (58, 28, 127), which is #3A1C7F.\n\n"
        "Final answer: B. #3A1C7F",
        "B",
    ),
    Demo(
        "Select every statement that is true for the chart. "
        "A. The red bar is tallest B. The blue bar is shortest C. Green exceeds 40 D. Red equals green",
        "Reading the bars: red is the tallest (A holds) and green reaches 45 (C holds); "
        "the shortest is yellow, and red and green differ. So the true ones are C and A.",
        "AC",
    ),
)

_INT_DEMOS = (
    Demo(
        "How many triangles with all three vertices on marked points can be seen in the figure? "
        "Answer with a single integer, such as 1, 2, 3.",
        "Counting the small triangles (6), the ones made of two pieces (3) and the large outline (1), "
        "there are 10 triangles in total.",
        "10",
    ),
    Demo(
        "图中一共有多少个红色的正方形？回答一个整数，例如1，2，3。",
        "仔细数一下：第一行有3个，第二行有2个，第三行有2个，所以一共是**7**个红色正方形。",
        "7",
    ),
)

_FLOAT_DEMOS = (
    Demo(
        "What is the reading of the pressure gauge in bar? Answer with one decimal place, like 1.5.",
        "The needle sits two minor ticks past the 3 mark, and each minor tick is 0.2 bar, "
        "so the gauge reads about **3.4 bar**.",
        "3.4",
    ),
)

_BLOCKS: dict[str, tuple[Demo, ...]] = {
    "color": _LETTER_DEMOS[1:2] + _LETTER_DEMOS[0:1] + (
        Demo(
            "What fraction of the balloons in the image are yellow? Answer with a decimal number.",
            "There are 8 balloons and 2 of them are yellow, so the fraction is 0.25.",
            "0.25",
        ),
    ),
    "refcoco": _LETTER_DEMOS[:1] + (
        Demo(
            "What proportion of the image does the man in the striped shirt occupy? "
            "(A) 11% (B) 19% (C) 27% (D) 35%",
            "Estimating from a segmentation of the person, the mask covers about 27% of the pixels.\n"
            "Answer: C",
            "C",
        ),
    ),
    "symbolic": _INT_DEMOS[:1] + (
        Demo(
            "How many edges does the polygon drawn in black have? Answer as an integer.",
            "Tracing the outline I count the corners: 1, 2, ..., 9. A closed polygon has as many "
            "edges as corners, so it has nine edges.",
            "9",
        ),
    ),
    "math": _INT_DEMOS + (
        Demo(
            "Which point is the reflection of P across the line l?\nA. point Q\nB. point R\nC. point S\nD. point T",
            "Reflecting P across l keeps the distance to l and flips the side; the only point at the same "
            "distance on the other side is S.\n\nAnswer: C. point S",
            "C",
        ),
    ),
    "word_search": (
        Demo(
            "Find the word CAT in the letter grid. Give the row and column of its first letter as "
            "[row, column], counting from 1.",
            "Scanning row by row, the word CAT appears horizontally in row 4, starting in column 7, "
            "so the position is **[4, 7]**.",
            "[4, 7]",
        ),
        Demo(
            "在下面的数字矩阵中找到“2718”，给出首个数字所在的行和列，格式为[行, 列]。",
            "逐行查找，“2718”竖直出现，起点在第12行第3列，答案是[12, 3]。",
            "[12, 3]",
        ),
        Demo(
            "How many times does the word SUN appear in the grid? Answer with an integer.",
            "SUN appears once across in row 2 and once down in column 9, so it appears 2 times.",
            "2",
        ),
    ),
    "maze": (
        Demo(
            "Starting at the red dot, which move sequence reaches the green dot without crossing a wall? "
            "'U', 'D', 'L', 'R' are single steps.\nA. RRDDL\nB. DDRRR\nC. RDRDR\nD. No answer",
            "Following A, the third step hits a wall. B walks down the open corridor and then right "
            "along the bottom row to the goal. C turns into a dead end.\n\nThe correct option is B.",
            "B",
        ),
        Demo(
            "Which option leads from the start to the exit?\nA. UURR\nB. LLDD\nC. RRUU\nD. No answer",
            "Every option either leaves the grid or runs into a wall on its first two moves, "
            "so none of them works: D. No answer.",
            "D",
        ),
    ),
    "contrast": _LETTER_DEMOS[1:2] + _INT_DEMOS[:1] + (
        Demo(
            "After brightening the dark photo, what colour is the car parked on the left? "
            "(A) red (B) white (C) black (D) blue",
            "Once the exposure is raised the car on the left is clearly white.",
            "B",
        ),
    ),
    "instrument": _FLOAT_DEMOS + (
        Demo(
            "What temperature does the thermometer show in Celsius? Answer as an integer like 1,2,3.",
            "The liquid column stops just at the line labelled 23, so the reading is 23 °C.",
            "23",
        ),
    ),
    "spot_difference": (
        Demo(
            "The two images are split into a 4×4 grid of patches numbered 1 to 16 from left to right, "
            "top to bottom. Which patches differ? Answer with a list of patch numbers.",
            "Comparing patch by patch, the flower in patch 3 changed colour, a cloud is missing from "
            "patch 6, and the window in patch 14 is gone. The differing patches are **3, 6, 14**.",
            "[3, 6, 14]",
        ),
        Demo(
            "How many differences are there between the left and right images? Answer with an integer.",
            "I found differences in the hat, the clock and the dog's tail: 3 in total.",
            "3",
        ),
    ),
    "jigsaw": (
        Demo(
            "The image was cut into 3×3 numbered pieces and shuffled. Give the piece numbers in their "
            "original order, left to right, top to bottom, e.g. 1, 2, 3, 4, 5, 6, 7, 8, 9.",
            "Matching the edges, the sky pieces go on top and the road at the bottom:\n"
            "Row 1: 4, 9, 2\nRow 2: 7, 1, 5\nRow 3: 3, 8, 6",
            "4, 9, 2, 7, 1, 5, 3, 8, 6",
        ),
        Demo(
            "The image was cut into 2×2 numbered pieces and shuffled. In what order should the pieces "
            "be placed (left to right, top to bottom)?",
            "The correct order is **3, 1, 4, 2**: piece 3 holds the top-left corner of the roof.",
            "3, 1, 4, 2",
        ),
    ),
    "visual_search": _LETTER_DEMOS + (
        Demo(
            "图中路牌上写的街道名称是什么？(A) 长安街 (B) 南京路 (C) 中山路 (D) 人民路",
            "放大右上角的路牌后，可以看清上面写着“中山路”，所以选C。",
            "C",
        ),
    ),
    "rotation_game": (
        Demo(
            "By how many degrees clockwise must the image be rotated to make it upright? "
            "(A) 0 (B) 90 (C) 180 (D) 270",
            "The trees grow towards the left edge and the sky is on the right, so the picture lies on "
            "its side; rotating it 90 degrees counterclockwise, i.e. 270 clockwise, restores it. (D)",
            "D",
        ),
        Demo(
            "Which rotation restores the photo? A. none B. 90° clockwise C. 180° D. 90° counterclockwise",
            "Rotating the image 180 degrees puts the text right side up. The answer is C.",
            "C",
        ),
    ),
}

DEMO_BLOCKS: dict[str, str] = {task: render_block(demos) for task, demos in _BLOCKS.items()}
"""Rendered demo block per task type (every type but ``ocr``)."""
