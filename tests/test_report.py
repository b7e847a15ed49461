"""The run report: rendered from plain data, checked as HTML, and (where Chromium is installed) rendered
headless to a screenshot that must not be blank."""

import re
import shutil
import subprocess
from html.parser import HTMLParser
from xml.etree import ElementTree

import numpy as np
import pytest

from simhash_spark.core.fingerprint import STATUSES
from simhash_spark.report.plots import WIDTH, Plot, barh, bars, histogram, nice_ticks
from simhash_spark.report.render import ExampleCluster, Member, ReportData, figures, highlight, render

VOID = {"meta", "img", "br", "hr", "input", "link"}


class Checker(HTMLParser):
    """Tags balanced and properly nested; counts the drawings (inline SVG) and images."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.drawings = 0
        self.images = 0
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.drawings += tag == "svg"
        self.images += tag == "img"
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):  # <rect .../>: opens and closes itself
        pass

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
        else:
            self.stack.pop()


STAGES = ("validate", "fingerprint", "candidates", "verify", "clusters", "assemble", "write", "report")


def sample() -> ReportData:
    summary = {
        "input": "/data/news.parquet",
        "input_rows": 1_000_000,
        "duplicates": 120_000,
        "dedup_rate": 0.12,
        "clusters": 70_000,
        "largest_cluster": 900,
        "pairs_accepted": 260_000,
        "pairs_complete": False,
        "hot_buckets": 2,
        "status": dict(zip(STATUSES, (990_000, 3, 2, 4, 6, 9_985, 0, 0), strict=True)),
        "largest_buckets": [{"band": 3, "key": "00000000ffff0000", "fingerprints": 44}],
        "stages": {
            name: {"seconds": 0.4 + 37.5 * (i % 3), "tasks": 4, "rows": 10} for i, name in enumerate(STAGES)
        },
        "timings_s": {"fingerprint": 12.5, "total": 402.5},
        "bands": {"scheme": "lsh:120,22", "exact": False},
        "verify": {"measure": "char_jaccard", "min_similarity": 0.8, "passed": 200},
    }
    base = "国务院总理李强主持召开国务院常务会议，研究部署推动城市更新的有关工作。<b>&"
    examples = [
        ExampleCluster(
            f"c{i}",
            3,
            [
                Member(f"c{i}", base, f"e{i}", "来源：新华网\n" + base, 4, 0.9),
                Member(f"d{i}", base.replace("城市更新", "乡村振兴"), f"c{i}", base, 7, 0.81),
                Member(f"e{i}", "来源：新华网\n" + base, f"c{i}", base, 4, 0.9),
            ],
        )
        for i in range(20)
    ]
    sizes = {2: 50_000, 3: 15_000, 4: 4_000, 7: 500, 12: 90, 20: 30, 40: 12, 100: 5, 300: 2, 900: 1}
    distances = {d: 123_456 // (d + 1) for d in range(13)}
    return ReportData(summary, sizes, distances, [0.81, 0.9, 1.0] * 20, examples)


def _overlaps(plot: Plot) -> list[tuple[str, str]]:
    """Pairs of a plot's labels (tick and axis labels, title, bar values) whose boxes overlap, and labels
    that leave the drawing."""
    boxes = [(t.text, t.box()) for t in plot.texts]
    outside = [
        (text, "edge")
        for text, (x0, y0, x1, y1) in boxes
        if x0 < 0 or y0 < 0 or x1 > WIDTH or y1 > plot.height
    ]
    return outside + [
        (a, b)
        for i, (a, box_a) in enumerate(boxes)
        for b, box_b in boxes[i + 1 :]
        if box_a[0] < box_b[2] - 1
        and box_b[0] < box_a[2] - 1
        and box_a[1] < box_b[3] - 1
        and box_b[1] < box_a[3] - 1
    ]


@pytest.fixture
def figs() -> list[Plot]:
    return figures(sample())


def test_no_two_labels_of_a_plot_overlap(figs):
    assert len(figs) == 5
    for plot in figs:
        assert _overlaps(plot) == [], plot.title


def test_crowded_plots_keep_labels_apart():
    """Many wide bars (counts of millions at 40 distances), long and Chinese category names, a
    threshold at the right edge: labels turn or thin out instead of overlapping."""
    crowded = [
        bars(
            "distances",
            [str(d) for d in range(40)],
            [1_234_567 // (d + 1) for d in range(40)],
            "bits",
            "pairs",
        ),
        barh("statuses", ["已索引", "a very long status name indeed", "x"], [10**9, 1, 0], "documents"),
        histogram("similarity", [0.97, 0.99, 1.0] * 50_000, 0.95, 0.999),
        barh("nothing", [], [], "documents"),
    ]
    for plot in crowded:
        assert _overlaps(plot) == [], plot.title
    assert {t.vertical for t in crowded[0].texts if t.text in {"1,234,567", "39"}} == {True}
    assert "1,000,000,000" in {t.text for t in crowded[1].texts}


def test_similarities_all_at_one_are_drawn_inside_the_plot():
    """verify.min_similarity = 1.0 and every pair identical: the range [1, 1] is empty, the bars must
    still fall inside the drawing (they were drawn thousands of pixels to the right)."""
    from simhash_spark.report.render import _similarities

    plot = _similarities([1.0, 1.0, 1.0], 1.0)
    bars = [
        re.search(r'x="([\d.]+)".*width="([\d.]+)" height="([\d.]+)"', r) for r in plot.shapes if "<rect" in r
    ]
    boxes = [(float(m[1]), float(m[1]) + float(m[2]), float(m[3])) for m in bars if m]
    assert len(boxes) == 20 and all(0 <= x0 and x1 <= WIDTH for x0, x1, _ in boxes)
    assert [h > 0 for *_, h in boxes] == [False] * 19 + [True]  # the three pairs in the last bin
    assert {"0.95", "1"} <= {t.text for t in plot.texts} and _overlaps(plot) == []


def test_plots_show_what_a_reader_needs(figs):
    sizes, _, status, stage, sims = figs

    def labels(plot):  # the category names, top to bottom
        return [t.text for t in plot.texts if t.anchor == "end" and not t.vertical]

    # every status with documents is a bar with its count printed, however small
    assert labels(status) == list(STATUSES[:6])
    assert {"990,000", "2", "3"} <= {t.text for t in status.texts}
    assert labels(sizes)[:3] == ["2", "3", "4"] and "50,000" in {t.text for t in sizes.texts}
    # the whole run is in the title, not a bar that dwarfs the stages
    assert "total" not in labels(stage) and "402.5 s" in stage.title
    # the similarity axis spans where accepted pairs are, with the threshold marked
    ticks = [float(t.text) for t in sims.texts if t.anchor == "middle" and t.text.replace(".", "").isdigit()]
    assert 0.75 <= min(ticks) <= 0.8 and max(ticks) == 1.0
    assert any("threshold 0.8" in t.text for t in sims.texts)


def test_nice_ticks_cover_the_largest_value():
    for high in (0.4, 1, 7, 37.9, 75.4, 123_456, 10**9):
        ticks = nice_ticks(high)
        assert ticks[0] == 0 and ticks[-1] >= high and len(ticks) <= 8
        assert ticks[-2] < high  # no empty step at the top


def test_report_is_well_formed_and_self_contained():
    page = render(sample())
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert not checker.errors and checker.stack == []
    assert page.startswith("<!DOCTYPE html>") and 'charset="utf-8"' in page
    drawings = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(drawings) == 5
    for drawing in drawings:  # each a well-formed SVG document of bars and labels
        root = ElementTree.fromstring(drawing)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(root.findall(".//{http://www.w3.org/2000/svg}rect")) >= 3
    assert checker.drawings == 5 and checker.images == 0
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched
    assert "https://" not in page
    assert page.count('class="cluster"') == 20
    assert "&lt;b&gt;&amp;" in page  # texts escaped
    assert "<del>城市更新</del>" in page and "<ins>乡村振兴</ins>" in page
    assert "its pair with c0: distance 7 bits, similarity 0.810" in page
    assert 'class="warn"' in page  # pairs_complete = false is said, not hidden


def test_highlight_marks_only_the_differences():
    left, right = highlight("今天天气很好", "今天天气不好啊")
    assert left == "今天天气<del>很</del>好"
    assert right == "今天天气<ins>不</ins>好<ins>啊</ins>"


def test_empty_run_renders():
    page = render(ReportData({"input": "x", "status": {}}, {}, {}, [], []))
    checker = Checker()
    checker.feed(page)
    assert not checker.errors and "Example clusters (0)" in page


def _browser() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def test_report_renders_in_headless_chromium(tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("Chromium not installed (Debian package 'chromium'); the HTML checks above still ran")
    page = tmp_path / "report.html"
    page.write_text(render(sample()), "utf-8")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    image = pytest.importorskip("PIL.Image", reason="Pillow reads the screenshot")
    img = np.asarray(image.open(shot).convert("RGB"), dtype=float) / 255
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    non_white = (img < 0.95).any(axis=2).mean()
    assert 0.02 < non_white < 0.9, f"screenshot looks blank or broken ({non_white:.3f} non-white)"
    assert img.std() > 0.05


def test_each_example_member_is_shown_with_the_pair_that_joined_it(spark):
    """A chain a–b–c: c was joined by its pair with b (similarity 0.85), never compared with a; the report
    must not show c against a (which would read as a similarity under the threshold)."""
    from simhash_spark.report.collect import collect_report

    documents = spark.createDataFrame(
        [("a", "a", 3, False), ("b", "a", 3, True), ("c", "a", 3, True), ("x", "x", 1, False)],
        "id string, cluster_id string, cluster_size int, is_duplicate boolean",
    )
    pairs = spark.createDataFrame(
        [("a", "b", 3, 0.9), ("b", "c", 5, 0.85)], "id_a string, id_b string, distance int, similarity double"
    )
    texts = spark.createDataFrame(
        [("a", "甲乙丙丁戊"), ("b", "甲乙丙丁己"), ("c", "庚乙丙丁己"), ("x", "无关")],
        "id string, text string",
    )
    report = collect_report({"input": "t"}, documents, pairs, texts)
    (example,) = report.examples
    shown = {m.id: (m.partner_id, m.distance, m.similarity, m.partner_text) for m in example.members}
    assert shown == {
        "a": ("b", 3, 0.9, "甲乙丙丁己"),
        "b": ("a", 3, 0.9, "甲乙丙丁戊"),  # its better pair
        "c": ("b", 5, 0.85, "甲乙丙丁己"),
    }
    assert "its pair with b: distance 5 bits, similarity 0.850" in render(report)
