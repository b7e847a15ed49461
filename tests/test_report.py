"""The run report: rendered from plain data, checked as HTML, and (where Chromium is installed) rendered
headless to a screenshot that must not be blank."""

import base64
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from simhash_spark.core.fingerprint import STATUSES
from simhash_spark.report.render import ExampleCluster, Member, ReportData, figures, highlight, render

VOID = {"meta", "img", "br", "hr", "input", "link"}


class Checker(HTMLParser):
    """Tags balanced and properly nested; collects image sources."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.images: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))
        if tag not in VOID:
            self.stack.append(tag)

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


def _overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of visible texts (tick labels, axis labels, title, bar values) whose drawn boxes overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = []
    for ax in fig.axes:
        for t in (
            *ax.get_xticklabels(),
            *ax.get_yticklabels(),
            ax.xaxis.label,
            ax.yaxis.label,
            ax.title,
            *ax.texts,
        ):
            if t.get_visible() and t.get_text().strip():
                texts.append((t.get_text(), t.get_window_extent(renderer).expanded(1.0, 1.0)))
    return [
        (a, b)
        for i, (a, box_a) in enumerate(texts)
        for b, box_b in texts[i + 1 :]
        if box_a.x0 < box_b.x1 - 1
        and box_b.x0 < box_a.x1 - 1
        and box_a.y0 < box_b.y1 - 1
        and box_b.y0 < box_a.y1 - 1
    ]


@pytest.fixture
def figs():
    """The sample report's figures, closed afterwards."""
    import matplotlib.pyplot as plt

    made = figures(sample())
    yield made
    for fig in made:
        plt.close(fig)


def test_no_two_labels_of_a_plot_overlap(figs):
    assert len(figs) == 5
    for fig in figs:
        title = fig.axes[0].get_title()
        assert _overlaps(fig) == [], title


def test_plots_show_what_a_reader_needs(figs):
    sizes, _, status, stage, sims = (fig.axes[0] for fig in figs)
    assert status.get_xscale() == "linear" and sizes.get_xscale() == "linear"
    # every status with documents is a bar with its count printed, however small
    assert [t.get_text() for t in status.get_yticklabels()][::-1] == list(STATUSES[:6])
    assert {"990,000", "2", "3"} <= {t.get_text() for t in status.texts}
    # the whole run is in the title, not a bar that dwarfs the stages
    assert "total" not in [t.get_text() for t in stage.get_yticklabels()] and "402.5 s" in stage.get_title()
    # the similarity axis spans where accepted pairs are, with the threshold marked
    low, high = sims.get_xlim()
    assert 0.75 <= low <= 0.8 and high >= 1.0
    assert any("threshold 0.8" in t.get_text() for t in sims.texts)


def test_report_is_well_formed_and_self_contained():
    page = render(sample())
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert not checker.errors and checker.stack == []
    assert page.startswith("<!DOCTYPE html>") and 'charset="utf-8"' in page
    assert len(checker.images) == 5
    for src in checker.images:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    assert "http://" not in page and "https://" not in page  # nothing fetched from elsewhere
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
    import matplotlib.image

    img = np.asarray(matplotlib.image.imread(str(shot)))[..., :3]
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
