"""The job's configuration: one frozen, typed tree loaded from TOML and validated at load.

Every error names the offending key (``features.top_k``) and value. ``--set section.key=value``
overrides are parsed as TOML values (``--set match.max_distance=4``, ``--set input.text_columns=["title","body"]``);
a value that is not valid TOML is taken as a plain string (``--set features.mode=tf``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from simhash_spark import columns as C
from simhash_spark.core.features import MODES, SHINGLE_WEIGHTS, FeatureOptions
from simhash_spark.core.fingerprint import FingerprintOptions, ModelOptions
from simhash_spark.core.hashing import HASHES
from simhash_spark.core.index_model import MonitorOptions
from simhash_spark.core.normalize import NormalizeOptions
from simhash_spark.core.shingles import ShortTextOptions
from simhash_spark.core.tokenize import TokenizerOptions
from simhash_spark.core.verify import MEASURES, ThresholdPolicy, VerifyOptions, parse_steps
from simhash_spark.errors import ConfigError, decode_utf8

# The presets ship inside the package (the repository's conf/ points here): ``--config NAME`` names one.
PRESETS_DIR = Path(__file__).resolve().parent / "conf"
DEFAULT_CONFIG_PATH = PRESETS_DIR / "default.toml"
MAX_RETENTION_DAYS = 365_000


def presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def _config_source(path: str | os.PathLike[str]) -> Path:
    """A TOML file, or the name of a preset (``original``) when no such file exists."""
    given = Path(path)
    if given.exists() or given.suffix == ".toml" or len(given.parts) > 1:
        return given
    preset = PRESETS_DIR / f"{given.name}.toml"
    if preset.is_file():
        return preset
    raise ConfigError(
        f"config {str(path)!r}: no such file, and not a preset (presets: {', '.join(presets())})"
    )


@dataclass(frozen=True)
class InputConfig:
    id_column: str = "id"
    text_columns: tuple[str, ...] = ("text",)
    passthrough_columns: tuple[str, ...] = ()
    title_column: str = ""
    allow_empty: bool = False


# a setting a run decides ("auto") or the user does; TOML booleans are read as "true" / "false"
AutoBool = Literal["auto", "true", "false"]


@dataclass(frozen=True)
class MatchConfig:
    max_distance: int = 12
    length_steps: tuple[tuple[int, int], ...] = ()
    sketch_bands: AutoBool = "auto"  # Config.sketch_bands is the answer


@dataclass(frozen=True)
class TitleConfig:
    rule: str = "and"
    max_distance: int = 6
    ngram_size: int = 2
    min_chars: int = 4


@dataclass(frozen=True)
class BandsConfig:
    scheme: str = "auto"
    min_recall: float = 0.99
    auto_max_pairs_per_doc: float = 50.0
    auto_sample_rows: int = 50_000
    hot_bucket_limit: int = 1000
    flood_max_candidates: int = 4096
    flood_max_checks: int = 64
    in_task_max_fingerprints: int = 10_000_000


@dataclass(frozen=True)
class ClusterConfig:
    representative: str = "min_id"
    max_iterations: int = 100
    local_max_edges: int = 2_000_000
    local_max_documents: int = 50_000
    local_max_characters: int = 20_000_000


@dataclass(frozen=True)
class OutputConfig:
    write_deduplicated: bool = True
    write_report: bool = True
    overwrite: bool = False
    pairs_max_group: int = 1000
    table_layout: str = "external"
    table_format: str = "parquet"


@dataclass(frozen=True)
class SparkConfig:
    app_name: str = "simhash_spark"
    arrow_batch_size: int = 1000
    min_fingerprint_partitions: int = 0
    # local runs' driver JVM class archive: "auto" (the user's cache), "off", a folder
    class_archive: str = "auto"
    # local runs' driver JVM: "quick" (HotSpot's quick compiler only) or "full" (the JVM's default)
    driver_jit: str = "quick"
    # local runs' driver heap unless the user set spark.driver.memory: "auto" (a quarter of the machine) or a size
    local_driver_memory: str = "auto"
    # local runs' Python workers: "auto" (numpy's AVX2 code where its AVX-512 sort is slow: AMD Zen 4) or "keep"
    local_numpy_avx512: str = "auto"


@dataclass(frozen=True)
class IndexConfig:
    """The persistent index (``--index``)."""

    # a lookup's segment probes meet at most about this many unrelated entries per document: exact
    # within k while the index is small enough, fewer probes beyond (core.index_keys.probe_radius); 0 = exact
    lookup_rows_per_document: int = 2048
    retention_days: int = 0
    # index compact (--keep-recent, --min-snapshots, --max-drop-fraction set these)
    keep_recent: int = 7
    compact_min_snapshots: int = 2
    # 0: compaction merges every older snapshot into one; > 1: the smallest group of like-sized ones
    compact_tier_ratio: float = 0.0
    max_drop_fraction: float = 0.5


@dataclass(frozen=True)
class WritersConfig:
    """Leases of the processes writing an index or an output (docs/reliability.md)."""

    lease_timeout_seconds: float = 120.0  # a writer whose heartbeat is older than this is taken as dead


@dataclass(frozen=True)
class Config:
    input: InputConfig = field(default_factory=InputConfig)
    normalize: NormalizeOptions = field(default_factory=NormalizeOptions)
    tokenizer: TokenizerOptions = field(default_factory=TokenizerOptions)
    features: FeatureOptions = field(default_factory=FeatureOptions)
    fingerprint: FingerprintOptions = field(default_factory=FingerprintOptions)
    short_texts: ShortTextOptions = field(default_factory=ShortTextOptions)
    match: MatchConfig = field(default_factory=MatchConfig)
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    title: TitleConfig = field(default_factory=TitleConfig)
    bands: BandsConfig = field(default_factory=BandsConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    monitor: MonitorOptions = field(default_factory=MonitorOptions)
    writers: WritersConfig = field(default_factory=WritersConfig)

    @property
    def model(self) -> ModelOptions:
        return ModelOptions(self.normalize, self.tokenizer, self.features, self.fingerprint, self.short_texts)

    @property
    def title_model(self) -> ModelOptions:
        """Titles: character n-grams of the normalized title, the body's hash."""
        return ModelOptions(
            self.normalize,
            self.tokenizer,
            FeatureOptions(mode="char_ngram", ngram_size=self.title.ngram_size),
            dataclasses.replace(self.fingerprint, min_chars=self.title.min_chars),
        )

    @functools.cached_property
    def sketch_bands(self) -> bool:
        """Whether pairs whose sketches share a band are candidates (``match.sketch_bands``): "auto" is on
        wherever the sketch filter's sketches are the check's n-grams (``sketch_bands_problem``). A run
        turns "auto" into its index's setting, and off through Spark Connect (``with_sketch_bands``)."""
        setting = self.match.sketch_bands
        return setting == "true" or (setting == "auto" and sketch_bands_problem(self) is None)

    def with_sketch_bands(self, on: bool) -> Config:
        """This config with ``match.sketch_bands`` decided: what a run that resolved "auto" uses."""
        return self.replace(match=dataclasses.replace(self.match, sketch_bands="true" if on else "false"))

    @functools.cached_property
    def policy(self) -> ThresholdPolicy:
        return ThresholdPolicy(self.match.max_distance, self.match.length_steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: {k: _plain(v) for k, v in dataclasses.asdict(getattr(self, f.name)).items()}
            for f in dataclasses.fields(self)
        }

    def replace(self, **sections: Any) -> Config:
        return dataclasses.replace(self, **sections)


def _plain(v: Any) -> Any:
    return [_plain(x) for x in v] if isinstance(v, tuple) else v


# --- field rules -----------------------------------------------------------------------------------


def _choice(options: Iterable[str]) -> Callable[[Any], str | None]:
    opts = tuple(options)
    return lambda v: None if v in opts else f"must be one of {', '.join(map(repr, opts))}"


def _at_least(lo: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be >= {lo}"


def _between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"must be between {lo:g} and {hi:g}"


def _identifier(v: Any) -> str | None:
    return None if v else "must not be empty"


# the integers a run hands to the JVM (record counts, sizes) are Java ints
INT_MAX = 2**31 - 1
SIZE = re.compile(r"([1-9][0-9]*)([kmgt]?)")
MIN_DRIVER_MEMORY = 512 << 20  # Spark refuses a driver heap below ~450 MiB


def size_bytes(text: str) -> int | None:
    """A JVM memory size ("8g", "512m", "1048576") in bytes; None when it is not one."""
    found = SIZE.fullmatch(text.strip().lower())
    if not found:
        return None
    return int(found.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[found.group(2)]


def _driver_memory(v: Any) -> str | None:
    if v == "auto":
        return None
    size = size_bytes(v)
    if size is None:
        return 'must be "auto" or a size like "8g"'
    if size < MIN_DRIVER_MEMORY:
        return f"{v!r} is {size:,} bytes: Spark needs at least 512m for the driver (a size without a unit is bytes)"
    return None


# formats partitioned output tables can be created in (the catalog must provide the last three)
TABLE_FORMATS = ("parquet", "orc", "delta", "iceberg", "hudi")


def _existing_file(v: Any) -> str | None:
    return None if not v or os.path.isfile(v) else f"file not found: {v}"


def _representative(v: Any) -> str | None:
    if v in ("min_id", "longest_text"):
        return None
    kind, _, col = v.partition(":")
    if kind in ("min", "max") and col:
        return None
    return "must be 'min_id', 'longest_text', 'min:COLUMN' or 'max:COLUMN'"


def _scheme(v: Any) -> str | None:
    from simhash_spark.core.bands import parse_scheme

    try:
        parse_scheme(v)
    except ValueError as e:
        return str(e)
    return None


def _variants(value: Any) -> str | None:
    from simhash_spark.core.normalize import VARIANTS

    if value not in VARIANTS:
        return f"expected one of {', '.join(VARIANTS)}"
    if value != "none":
        try:
            import opencc  # noqa: F401
        except ImportError:
            return "needs the opencc package (pip install opencc)"
    return None


_RULES: dict[str, Callable[[Any], str | None]] = {
    "input.id_column": _identifier,
    "input.text_columns": lambda v: None if v and all(v) else "must name at least one column",
    "input.passthrough_columns": lambda v: (
        f"{', '.join(repr(c) for c in v if c in C.NOT_PASSTHROUGH)} would overwrite columns the job writes "
        "or uses internally"
        if set(v) & set(C.NOT_PASSTHROUGH)
        else None
    ),
    "normalize.max_chars": _at_least(1),
    "normalize.variants": _variants,
    "short_texts.below_letters": _at_least(0),
    "short_texts.ngram_size": _at_least(1),
    "tokenizer.backend": _choice(("fast", "jieba")),
    "tokenizer.user_dict_path": _existing_file,
    "features.mode": _choice(MODES),
    "features.top_k": _at_least(0),
    "features.idf_path": _existing_file,
    "features.stop_words_path": _existing_file,
    "features.ngram_size": _at_least(1),
    "fingerprint.hash": _choice(HASHES),
    "fingerprint.min_chars": _at_least(1),
    "fingerprint.memo_size": _at_least(0),
    "match.max_distance": _at_least(0),
    "features.word_ngram_size": _at_least(1),
    "features.shingle_weights": _choice(SHINGLE_WEIGHTS),
    "verify.measure": _choice(MEASURES),
    "title.rule": _choice(("and", "or")),
    "output.table_layout": _choice(("external", "partitioned")),
    "output.table_format": _choice(TABLE_FORMATS),
    "title.max_distance": lambda v: None if 0 <= v <= 16 else "must be between 0 and 16",
    "title.ngram_size": _at_least(1),
    "title.min_chars": _at_least(1),
    "verify.min_similarity": lambda v: None if 0 < v <= 1 else "must be in (0, 1]",
    "verify.ngram_size": _at_least(1),
    "verify.accept_distance": _at_least(0),
    "bands.scheme": _scheme,
    "bands.min_recall": lambda v: None if 0 < v < 1 else "must be between 0 and 1 (exclusive)",
    "bands.auto_max_pairs_per_doc": lambda v: None if v > 0 else "must be > 0",
    "bands.auto_sample_rows": _at_least(1000),
    "bands.hot_bucket_limit": _at_least(2),
    "bands.flood_max_candidates": _at_least(1),
    "bands.flood_max_checks": _at_least(1),
    "bands.in_task_max_fingerprints": _at_least(0),
    "cluster.representative": _representative,
    "cluster.max_iterations": _at_least(1),
    "cluster.local_max_edges": _at_least(0),
    "cluster.local_max_documents": _at_least(0),
    "cluster.local_max_characters": _at_least(0),
    "spark.arrow_batch_size": _between(1, 1_000_000),
    "output.pairs_max_group": _at_least(1),
    "spark.min_fingerprint_partitions": _at_least(0),
    "spark.class_archive": lambda v: None if v.strip() else 'must be "auto", "off" or a folder',
    "spark.driver_jit": lambda v: None if v in ("quick", "full") else 'must be "quick" or "full"',
    "spark.local_numpy_avx512": lambda v: None if v in ("auto", "keep") else 'must be "auto" or "keep"',
    "spark.local_driver_memory": _driver_memory,
    "index.lookup_rows_per_document": _at_least(0),
    # a day count a date can subtract: 0 (keep everything) up to 1000 years
    "index.retention_days": lambda v: (
        None if 0 <= v <= MAX_RETENTION_DAYS else f"must be 0..{MAX_RETENTION_DAYS}"
    ),
    "index.keep_recent": _at_least(0),
    "index.compact_min_snapshots": _at_least(1),
    "index.compact_tier_ratio": lambda v: None if v == 0 or v > 1 else "must be 0 (merge all) or > 1",
    "index.max_drop_fraction": lambda v: None if 0 <= v <= 1 else "must be between 0 and 1",
    "monitor.max_factor": lambda v: None if v == 0 or v > 1 else "must be 0 (off) or > 1",
    "monitor.window": _at_least(1),
    "monitor.min_runs": _at_least(1),
    "monitor.min_delta": lambda v: None if v >= 0 else "must be >= 0",
    # a lease's heartbeat sleeps a quarter of it; a week is longer than any run should hold a dead lease
    "writers.lease_timeout_seconds": _between(1, 7 * 86400),
}


def _coerce(key: str, value: Any, typ: Any) -> Any:
    """Check ``value`` against the field's annotation; TOML arrays become tuples."""
    origin = typing.get_origin(typ)
    if origin is Literal:
        return _literal(key, value, typing.get_args(typ))
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            if abs(value) > INT_MAX:
                raise ConfigError(f"{key}: {value} is out of range (at most {INT_MAX:,})")
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if typ is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            # TOML spells inf and nan; no setting means either (nan passes every comparison's "else")
            if not math.isfinite(value):
                raise ConfigError(f"{key}: expected a finite number, got {value!r}")
            return float(value)
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if typ is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    if origin is tuple and typing.get_args(typ)[0] is not str:
        try:
            return parse_steps(value)
        except ValueError as e:
            raise ConfigError(f"{key}: {e}, got {value!r}") from None
    if origin is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
            raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
        return tuple(value)
    if isinstance(typ, types.UnionType):  # pragma: no cover - no optional fields today
        return value
    raise ConfigError(f"{key}: unsupported type {typ!r}")


def _literal(key: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of ``choices``; where they include "true" and "false", a TOML boolean is read as them."""
    if isinstance(value, bool) and str(value).lower() in choices:
        return str(value).lower()
    if value in choices:
        return str(value)
    shown = [c if c in ("true", "false") else f'"{c}"' for c in choices]
    raise ConfigError(f"{key}: expected {', '.join(shown[:-1])} or {shown[-1]}, got {value!r}")


# keys earlier versions read, and why they are gone: named, not "unknown"
_RETIRED = {
    f"index.{key}": "index format 4 stores each entry once with a few sorted key tables, whatever the size "
    "of the index: there is no band design, key partition or text bucket to choose. Remove the key; "
    "index.lookup_rows_per_document sets what a lookup may read"
    for key in ("scheme", "expected_entries", "partitions", "doc_buckets")
}


def _build_section(name: str, cls: type, values: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        full = f"{name}.{key}"
        if full in _RETIRED:
            raise ConfigError(f"{full}: no longer a setting: {_RETIRED[full]}")
        if key not in known:
            raise ConfigError(f"{full}: unknown key (known keys in [{name}]: {', '.join(sorted(known))})")
        value = _coerce(full, value, hints[key])
        rule = _RULES.get(full)
        if rule is not None:
            problem = rule(value)
            if problem:
                raise ConfigError(f"{full}: {problem} (got {value!r})")
        kwargs[key] = value
    return cls(**kwargs)


def _check_scheme(key: str, spec: str, k: int, what: str) -> None:
    """Band design ``spec`` (at ``key``) must find every pair (exact designs) or be able to (LSH) up to k."""
    from simhash_spark.core.bands import MAX_AUTO_K, parse_scheme

    scheme = parse_scheme(spec)
    if scheme.accepts(k):
        return
    if scheme.auto:
        raise ConfigError(f"{what}: {k} is above {MAX_AUTO_K}, the largest k {key}='auto' handles")
    raise ConfigError(
        f"{what}: {k} is too large for {key}={spec!r}, which finds every pair only up to "
        f"{scheme.max_exact_distance} differing bits; use more blocks "
        f'(e.g. {key}="blocks:{k + 2}") or {key}="auto"'
    )


def sketch_bands_problem(cfg: Config) -> str | None:
    """Why the sketch bands cannot apply with this configuration, or ``None``: they band the sketch
    filter's sketches, and only the text check accepts their pairs."""
    from simhash_spark.core.fingerprint import check_filter_problem

    problem = check_filter_problem(cfg.model, cfg.verify)
    if problem is not None:
        return problem
    if cfg.verify.prefix_filter or not cfg.verify.sketch_filter:
        return "needs the sketches of verify.sketch_filter = true, which verify.prefix_filter = true replaces"
    return None


def index_sketch_bands_problem(cfg: Config, held: bool, index: str) -> str | None:
    """Why this configuration cannot use ``index``, which ``held`` sketch band tables or not, or ``None``.
    The setting is fixed for an index's life (its entries must be found the way the batch's are):
    "auto" takes the index's, an explicit setting must be it."""
    if cfg.match.sketch_bands == "auto":
        problem = sketch_bands_problem(cfg) if held else None
        if problem is None:
            return None
        return (
            f"{index} holds sketch band tables (match.sketch_bands) and this configuration cannot compute "
            f"the sketches: {problem}. Use the index's settings, or --rebuild-index to rebuild its tables "
            "without them"
        )
    if cfg.sketch_bands == held:
        return None
    holds = "holds" if held else "holds no"
    return (
        f"{index} {holds} sketch band tables and this run has match.sketch_bands = "
        f"{cfg.match.sketch_bands}: the setting is fixed for an index's life (its entries must be found "
        "the way the batch's are). Use the index's setting or \"auto\", or --rebuild-index to rebuild its "
        "tables with this run's"
    )


def _check_sketch_bands(cfg: Config) -> None:
    """An explicit ``match.sketch_bands = true`` must be able to apply ("auto" turns itself off)."""
    problem = sketch_bands_problem(cfg)
    if problem is not None:
        raise ConfigError(f'match.sketch_bands: {problem} (or set match.sketch_bands = "auto" or false)')


def _check_cross_fields(cfg: Config) -> None:
    k = cfg.policy.largest
    what = "match.max_distance" if k == cfg.match.max_distance else "match.length_steps"
    _check_scheme("bands.scheme", cfg.bands.scheme, k, what)
    if cfg.match.sketch_bands == "true":
        _check_sketch_bands(cfg)
    if cfg.verify.prefix_filter:  # asked for; the sketch filter (on by default) applies only where it can
        from simhash_spark.core.fingerprint import check_filter_problem

        problem = check_filter_problem(cfg.model, cfg.verify)
        if problem is not None:
            raise ConfigError(f"verify.prefix_filter: {problem}")


def from_mapping(data: Mapping[str, Any]) -> Config:
    sections = {f.name: f for f in dataclasses.fields(Config)}
    hints = typing.get_type_hints(Config)
    kwargs: dict[str, Any] = {}
    for name, values in data.items():
        if name not in sections:
            raise ConfigError(f"[{name}]: unknown section (known: {', '.join(sections)})")
        if not isinstance(values, Mapping):
            raise ConfigError(f"[{name}]: expected a table of keys, got {values!r}")
        kwargs[name] = _build_section(name, hints[name], values)
    cfg = Config(**kwargs)
    _check_cross_fields(cfg)
    return cfg


def with_overrides(cfg: Config, overrides: Mapping[str, Any]) -> Config:
    """``cfg`` with ``{"section.key": value}`` replaced, validated as at load (errors name the key)."""
    if not overrides:
        return cfg
    data: dict[str, dict[str, Any]] = {name: dict(values) for name, values in cfg.to_dict().items()}
    for dotted, value in overrides.items():
        section, dot, key = dotted.partition(".")
        if not dot or section not in data:
            raise ConfigError(f"{dotted!r}: expected section.key with a known section ({', '.join(data)})")
        data[section][key] = value
    return from_mapping(data)


def parse_override(item: str) -> tuple[str, str, Any]:
    """``section.key=value`` → (section, key, value)."""
    if "\n" in item or "\r" in item:
        raise ConfigError(f"--set {item!r}: a value must be on one line")
    lhs, sep, rhs = item.partition("=")
    section, dot, key = lhs.strip().partition(".")
    if not sep or not dot or not section or not key:
        raise ConfigError(f"--set {item!r}: expected section.key=value")
    try:
        value = tomllib.loads(f"v = {rhs.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = rhs.strip()
    return section, key, value


def _read_toml(source: Path) -> dict[str, Any]:
    """The TOML file at ``source``; every way it can be unreadable is a ConfigError naming it."""
    if source.is_dir():
        raise ConfigError(f"config {str(source)!r} is a folder; expected a TOML file")
    try:
        raw = source.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {source}") from None
    except OSError as e:
        raise ConfigError(f"config {str(source)!r} cannot be read: {e.strerror}") from None
    text = decode_utf8(raw, f"config {str(source)!r}", "TOML files are UTF-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML: {e}") from None


def load_config(path: str | os.PathLike[str] | None = None, overrides: Iterable[str] = ()) -> Config:
    """Load ``path`` — a TOML file or a preset's name (default: the packaged ``conf/default.toml``) —
    apply ``section.key=value`` overrides, validate."""
    data: dict[str, dict[str, Any]] = {}
    source = _config_source(path) if path is not None else DEFAULT_CONFIG_PATH
    if path is not None or source.is_file():
        data = _read_toml(source)
    for item in overrides:
        section, key, value = parse_override(item)
        data.setdefault(section, {})[key] = value
    try:
        return from_mapping(data)
    except ConfigError as e:
        raise ConfigError(
            f"{e} [config: {source if path is not None or source.is_file() else 'defaults'}]"
        ) from None
