"""Imports point one way: the pure core (no pyspark) → configuration → DataFrame stages (no I/O) → I/O, index
and run context → pipeline → command line. A module may import its own layer and the layers below it; a new
module must be placed in a layer here. Reads the sources only (no imports), so it costs milliseconds."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "simhash_spark"
JOBS = PACKAGE.parent / "jobs"

# (layer, module names or prefixes ending in "."), lowest first
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("simhash_spark.core.", "simhash_spark.columns", "simhash_spark.errors")),
    ("config", ("simhash_spark.config",)),
    # faults: the named points where tests inject failures, in stages and in the index protocol alike
    ("stages", ("simhash_spark.transforms.", "simhash_spark.functions", "simhash_spark.faults")),
    (
        "io/index",
        (
            "simhash_spark.io",
            "simhash_spark.tables",
            "simhash_spark.storage",
            "simhash_spark.lease",
            "simhash_spark.publish",
            "simhash_spark.index.",
            "simhash_spark.report.",
            "simhash_spark.context",
            "simhash_spark.progress",
            "simhash_spark.session",
            "simhash_spark.class_archive",
        ),
    ),
    (
        "pipeline",
        (
            "simhash_spark.link_model",
            "simhash_spark.linking_local",
            "simhash_spark.linking",
            "simhash_spark.fingerprint_pass",
            "simhash_spark.index_pass",
            "simhash_spark.assembly",
            "simhash_spark.run_summary",
            "simhash_spark.pipeline",
        ),
    ),
    # the package itself names its public API lazily (pipeline, session, config): importing it is the top
    # the Airflow operators: imported by DAG files only, beside the command line they submit
    (
        "cli",
        (
            "simhash_spark.cli",
            "simhash_spark.__main__",
            "simhash_spark.demo.",
            "simhash_spark.airflow",
            "simhash_spark",
        ),
    ),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    for level, (_, members) in enumerate(LAYERS):
        for member in members:
            # "pkg." holds pkg itself (its __init__) and every module under it
            if module == member.rstrip(".") or (member.endswith(".") and module.startswith(member)):
                return level
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py: place it")


def is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").exists() or (PACKAGE.parent / relative).is_dir()


def imported(source: str, module: str, *, package_init: bool = False) -> set[str]:
    """The simhash_spark modules and ``pyspark`` that ``source`` (the text of ``module``) imports anywhere
    (top level, functions, TYPE_CHECKING blocks); ``from package import module`` names the module."""
    here = module.split(".")
    package = here if package_init else here[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "pyspark":
                found.add("pyspark")
            elif name.split(".")[0] == "simhash_spark":
                found.add(name)
    return found


def imports_of(path: Path) -> set[str]:
    return imported(
        path.read_text(encoding="utf-8"), module_name(path), package_init=path.name == "__init__.py"
    )


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_imports_point_down(path):
    module = module_name(path)
    level = layer_of(module)
    found = imports_of(path)
    upward = sorted(m for m in found - {"pyspark"} if layer_of(m) > level)
    assert not upward, f"{module} ({LAYERS[level][0]}) imports a higher layer: {upward}"
    if LAYERS[level][0] in ("core", "config"):
        assert "pyspark" not in found, f"{module} imports pyspark: the core and config are pure Python"


def test_entry_scripts_only_call_the_cli():
    for script in sorted(JOBS.glob("*.py")):
        found = imported(script.read_text(encoding="utf-8"), f"jobs.{script.stem}")
        assert found == {"simhash_spark.cli"}, f"jobs/{script.name} imports {sorted(found)}"


def test_the_layer_check_sees_an_upward_import():
    # the check must not pass by resolving nothing: a core module importing the pipeline or a stage is caught
    source = "from simhash_spark import pipeline, columns as C\nfrom ..transforms import verify\nimport pyspark.sql\n"
    found = imported(source, "simhash_spark.core.x")
    assert found == {
        "simhash_spark.pipeline",
        "simhash_spark.columns",
        "simhash_spark.transforms.verify",
        "pyspark",
    }
    assert [m for m in sorted(found - {"pyspark"}) if layer_of(m) > layer_of("simhash_spark.core.x")] == [
        "simhash_spark.pipeline",
        "simhash_spark.transforms.verify",
    ]


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of ``graph`` (module -> the modules it imports), one per strongly connected component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_circle():
    """Modules of one layer may import each other, but never in a circle (not even for type hints, nor in a
    function): a circle leaves no module of it that can be read, or tested, first."""
    graph = {module_name(p): imports_of(p) - {"pyspark", "simhash_spark"} for p in SOURCES}
    assert import_cycles(graph) == []
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
