"""Every command line README.md and docs/ show for the job parses with the job's own command-line parser:
``python -m simhash_spark ...``, ``simhash-spark ...`` and spark-submit's ``jobs/*.py ...`` (with the
subcommand the script adds). Optional parts shown in brackets are left out."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from simhash_spark.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("", "bash", "sh", "shell", "console")
# what starts the job's command line: the module, the console script, or an entry script under spark-submit
PROGRAM = re.compile(
    r"(?:^|\s)(?:\S*/)?(?:python3?|\.venv/bin/python) -m simhash_spark\s"
    r"|(?:^|\s)(?:\S*/)?simhash[-_]spark\s"
    r"|(?:^|\s)\S*jobs/(?P<job>\w+)\.py\s"
)


def shell_blocks(text: str) -> Iterator[str]:
    inside, language, lines = False, "", []
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if inside and language in SHELL:
                yield "\n".join(lines)
            inside, language, lines = not inside, line.strip()[3:].strip(), []
        elif inside:
            lines.append(line)


def job_prefix(job: str) -> list[str]:
    """The arguments ``jobs/<job>.py`` puts before its own (``main(["index", "compact", *sys.argv[1:]])``)."""
    source = (ROOT / "jobs" / f"{job}.py").read_text(encoding="utf-8")
    found = re.search(r"main\(\[(.*?),\s*\*sys\.argv\[1:\]\]\)", source)
    assert found, f"jobs/{job}.py does not call main([..., *sys.argv[1:]])"
    return re.findall(r'"([^"]*)"', found.group(1))


def documented_commands() -> Iterator[tuple[str, str, list[str]]]:
    """(file, the command as shown, the arguments the parser gets)."""
    for doc in DOCS:
        for block in shell_blocks(doc.read_text(encoding="utf-8")):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = re.sub(r"\s+#\s.*$", "", line.strip())
                program = PROGRAM.search(line)
                if line.startswith("#") or program is None:
                    continue
                rest = line[program.end() :]
                while re.search(r"\[[^\[\]]*\]", rest):
                    rest = re.sub(r"\[[^\[\]]*\]", "", rest)
                prefix = job_prefix(program.group("job")) if program.group("job") else []
                yield doc.name, line, prefix + shlex.split(rest)


COMMANDS = list(documented_commands())


def test_the_docs_show_the_commands_a_user_needs():
    shown = {tuple(argv[:2]) for _, _, argv in COMMANDS}
    for needed in [("dedup", "--input"), ("check", "--index"), ("index", "verify"), ("index", "compact")]:
        assert needed in shown, needed
    assert len(COMMANDS) >= 15


@pytest.mark.parametrize(("doc", "line", "argv"), COMMANDS, ids=[f"{d}:{a[0]}" for d, _, a in COMMANDS])
def test_every_documented_command_parses(doc, line, argv, capsys):
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{doc}: `{line}` does not parse: {capsys.readouterr().err.strip()} (exit {e.code})")


BENCH = re.compile(r"(?:^|\s)(?:\S*/)?(?:python3?|\.venv/bin/python) -m (?P<module>bench(?:\.\w+)+)(?:\s|$)")


def documented_bench_commands() -> Iterator[tuple[str, str, str, list[str]]]:
    """(file, the command as shown, the bench module, its arguments) of every ``python -m bench.NAME`` line."""
    for doc in DOCS:
        for block in shell_blocks(doc.read_text(encoding="utf-8")):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = re.sub(r"\s+#\s.*$", "", line.strip())
                found = BENCH.search(line)
                if line.startswith("#") or found is None or found.group("module") == "bench.NAME":
                    continue
                rest = line[found.end() :]
                while re.search(r"\[[^\[\]]*\]", rest):
                    rest = re.sub(r"\[[^\[\]]*\]", "", rest)
                yield doc.name, line, found.group("module"), shlex.split(rest.split("&&")[0])


BENCH_COMMANDS = list(documented_bench_commands())


BENCH_EXTRA = {"scipy", "datasketch", "zhconv", "rensa", "gaoya"}  # pyproject's bench extra: imported by some


class _Parsed(Exception):
    """Raised once a bench script's own parser accepted its arguments: nothing of the benchmark runs."""


def test_the_docs_show_the_benchmarks():
    assert {m for _, _, m, _ in BENCH_COMMANDS} >= {
        "bench.peers",
        "bench.throughput",
        "bench.fingerprint_throughput",
    }


@pytest.mark.parametrize(
    ("doc", "line", "module", "argv"), BENCH_COMMANDS, ids=[f"{d}:{m}" for d, _, m, _ in BENCH_COMMANDS]
)
def test_every_documented_benchmark_command_parses(doc, line, module, argv, monkeypatch, capsys):
    """Each ``python -m bench.NAME ...`` shown parses with that script's own argparse parser."""
    import argparse
    import importlib
    import sys

    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name not in BENCH_EXTRA:
            raise
        pytest.skip(f"{module} needs the bench extra ({e.name})")
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        parse(self, args, namespace)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", [module, *argv])
    try:
        loaded.main()
    except _Parsed:
        return
    except SystemExit as e:
        pytest.fail(f"{doc}: `{line}` does not parse: {capsys.readouterr().err.strip()} (exit {e.code})")
    pytest.fail(f"{doc}: `{line}`: {module}.main() never parsed its arguments")


def test_the_pyspark35_install_the_docs_give_is_the_one_ci_installs():
    """README and docs/deploy.md tell PySpark 3.5 platforms to name the spark35 extra's PySpark at the top
    of the install, and ``./dev test-spark35`` installs exactly that: left to the extra alone, pip fetches
    every PySpark 4 source archive (450 MB each) for the test extra's unpinned ``pyspark[connect]`` before
    backing off to 3.5."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    extra = extras["spark35"]
    pin = '"' + re.sub(r"\[[^]]*\]", "", next(d for d in extra if d.startswith("pyspark"))) + '"'
    assert f'-m pip install --quiet -e ".[test,spark35]" {pin}' in (ROOT / "dev").read_text()
    for doc in ("README.md", "docs/deploy.md"):
        assert f'pip install "simhash_spark[spark35]" {pin}' in " ".join((ROOT / doc).read_text().split())
