"""The README's demo command runs end to end on its generated corpus."""

from simhash_spark.cli import main


def test_demo_runs_and_reports(spark, tmp_path, capsys):
    assert main(["demo", "--workdir", str(tmp_path), "--docs", "40"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "result" / "_SUCCESS").exists()
    assert "planted variants clustered with their base article: " in out
    assert "format " in out and "clusters mixing unrelated articles: 0" in out
    # a second run replaces the previous result
    assert main(["demo", "--workdir", str(tmp_path), "--docs", "40"]) == 0
