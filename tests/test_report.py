"""The run report: rendered from plain data, checked as HTML, and (where Chromium is installed) rendered
headless to a screenshot that must not be blank."""

import base64
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from simhash_spark.report.render import ExampleCluster, ReportData, highlight, render

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


def sample() -> ReportData:
    summary = {
        "input": "/data/news.parquet",
        "input_rows": 1000,
        "duplicates": 120,
        "dedup_rate": 0.12,
        "clusters": 70,
        "largest_cluster": 9,
        "pairs_accepted": 260,
        "status": {"ok": 990, "empty": 6, "null_text": 4},
        "largest_buckets": [{"band": 3, "key": "00000000ffff0000", "fingerprints": 44}],
        "timings_s": {"fingerprint": 12.5, "candidates": 3.2, "verify": 1.1, "clusters": 2.0},
        "bands": {"scheme": "lsh:120,22", "exact": False},
        "verify": {"measure": "char_jaccard", "passed": 200},
    }
    base = "国务院总理李强主持召开国务院常务会议，研究部署推动城市更新的有关工作。<b>&"
    examples = [
        ExampleCluster(
            f"c{i}",
            3,
            [
                (f"c{i}", base, None, None),
                (f"d{i}", base.replace("城市更新", "乡村振兴"), 7, 0.81),
                (f"e{i}", "来源：新华网\n" + base, 4, 0.9),
            ],
        )
        for i in range(20)
    ]
    return ReportData(summary, {2: 50, 3: 15, 9: 5}, {0: 30, 4: 80, 7: 150}, [0.81, 0.9, 1.0] * 20, examples)


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
