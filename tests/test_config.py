import dataclasses

import pytest

from simhash_spark.config import DEFAULT_CONFIG_PATH, Config, load_config, parse_override
from simhash_spark.errors import ConfigError


def test_default_toml_documents_every_key_with_its_default():
    import tomllib

    data = tomllib.loads(DEFAULT_CONFIG_PATH.read_text("utf-8"))
    defaults = Config()
    for f in dataclasses.fields(Config):
        section = getattr(defaults, f.name)
        keys = {x.name for x in dataclasses.fields(section)}
        assert set(data[f.name]) == keys, f.name
        for key in keys:
            value = data[f.name][key]
            want = getattr(section, key)
            assert (tuple(value) if isinstance(value, list) else value) == want, f"{f.name}.{key}"
    assert load_config() == defaults


def test_overrides_are_typed():
    cfg = load_config(
        overrides=[
            "match.max_distance=2",
            "features.mode=tf",
            'input.text_columns=["title","text"]',
            "normalize.cjk_only=true",
        ]
    )
    assert cfg.match.max_distance == 2 and cfg.features.mode == "tf"
    assert cfg.input.text_columns == ("title", "text") and cfg.normalize.cjk_only is True


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().match.max_distance = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("match.max_distance=17", "match.max_distance: 17 is above 16"),
        (
            "match.length_steps=[[100, 3], [0, 5]]",
            "match.length_steps: from_chars must be strictly increasing",
        ),
        ("match.length_steps=[[0, 20]]", "match.length_steps: 20 is above 16"),
        ("bands.scheme=4x16", "match.max_distance: 12 is too large for bands.scheme='4x16'"),
        ("index.scheme=4x16", "index.scheme: no longer a setting: index format 4 stores each entry once"),
        ("index.lookup_rows_per_document=-1", "index.lookup_rows_per_document: must be >= 0"),
        ("writers.lease_timeout_seconds=0", "writers.lease_timeout_seconds: must be between 1 and 604800"),
        ("match.max_distance=3\nbands.scheme=4x16", "must be on one line"),
        ("title.rule=xor", "title.rule: must be one of"),
        ("title.max_distance=20", "title.max_distance: must be between 0 and 16"),
        ("verify.measure=cosine", "verify.measure: must be one of"),
        ("verify.min_similarity=0", "verify.min_similarity: must be in (0, 1]"),
        ("features.shingle_weights=tf", "features.shingle_weights: must be one of"),
        ("match.max_distance=-1", "match.max_distance: must be >= 0"),
        ("features.top_k=ten", "features.top_k: expected an integer, got 'ten'"),
        ("features.mode=magic", "features.mode: must be one of"),
        ("features.colour=red", "features.colour: unknown key"),
        ("nosuch.key=1", "[nosuch]: unknown section"),
        ("fingerprint.hash=sha1", "fingerprint.hash: must be one of"),
        ("bands.scheme=3x3", "bands.scheme: '3x3': N x W must cover exactly 64 bits"),
        ("features.idf_path=/no/such/file", "features.idf_path: file not found"),
        ("cluster.representative=biggest", "cluster.representative: must be"),
        ("normalize.lowercase=1", "normalize.lowercase: expected true or false"),
        ("match", "expected section.key=value"),
        # TOML spells inf and nan: no setting means either
        ("writers.lease_timeout_seconds=inf", "writers.lease_timeout_seconds: expected a finite number"),
        ("index.max_drop_fraction=nan", "index.max_drop_fraction: expected a finite number"),
        ("monitor.max_factor=-inf", "monitor.max_factor: expected a finite number"),
        ("index.retention_days=-1", "index.retention_days: must be 0..365000"),
        # values the configuration took and the run could not use (exit 1 later, or a traceback)
        (
            "spark.local_driver_memory='512'",
            "spark.local_driver_memory: '512' is 512 bytes: Spark needs at least",
        ),
        ("output.table_format='x'", "output.table_format: must be one of"),
        (
            "spark.arrow_batch_size=100000000000000000000000",
            "spark.arrow_batch_size: 100000000000000000000000 is out",
        ),
        ("spark.arrow_batch_size=2000000", "spark.arrow_batch_size: must be between 1 and 1e+06"),
        (
            "writers.lease_timeout_seconds=1e308",
            "writers.lease_timeout_seconds: must be between 1 and 604800",
        ),
        ("bands.hot_bucket_limit=3000000000", "bands.hot_bucket_limit: 3000000000 is out of range"),
        ("index.retention_days=100000000", "index.retention_days: must be 0..365000"),
        ("index.max_drop_fraction=1.5", "index.max_drop_fraction: must be between 0 and 1"),
        ("match.sketch_bands=yes", 'match.sketch_bands: expected "auto", true or false'),
        ("match.sketch_bands=1", 'match.sketch_bands: expected "auto", true or false'),
    ],
)
def test_bad_values_name_the_field(override, message):
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert message in str(e.value)


def test_length_steps():
    cfg = load_config(overrides=["match.length_steps=[[0, 14], [100, 12], [2000, 11]]"])
    assert cfg.match.length_steps == ((0, 14), (100, 12), (2000, 11))
    assert cfg.policy.largest == 14 and cfg.policy.k_for_length(150) == 12
    assert cfg.to_dict()["match"]["length_steps"] == [[0, 14], [100, 12], [2000, 11]]


def test_wider_blocks_lsh_and_auto_allow_larger_k():
    assert load_config(overrides=["match.max_distance=5", "bands.scheme=blocks:7"]).match.max_distance == 5
    assert (
        load_config(overrides=["match.max_distance=11", "bands.scheme=lsh:300,19"]).bands.scheme
        == "lsh:300,19"
    )
    assert load_config(overrides=["match.max_distance=12", "bands.scheme=auto"]).bands.scheme == "auto"
    with pytest.raises(ConfigError, match="above 16"):
        load_config(overrides=["match.max_distance=17", "bands.scheme=auto"])
    with pytest.raises(ConfigError, match=r"bands\.min_recall"):
        load_config(overrides=["bands.min_recall=1.5"])


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[match\nmax_distance = 3", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    typed = tmp_path / "typed.toml"
    typed.write_text('[match]\nmax_distance = "3"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"match.max_distance: expected an integer.*typed.toml"):
        load_config(typed)


def test_a_config_that_is_a_folder_or_not_utf8_is_an_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="is a folder; expected a TOML file"):
        load_config(tmp_path)
    gbk = tmp_path / "gbk.toml"
    gbk.write_bytes('[input]\nid_column = "编号"\n'.encode("gbk"))
    with pytest.raises(ConfigError, match=r"gbk\.toml' is not UTF-8 \(line 2"):
        load_config(gbk)


def test_parse_override_plain_string_fallback():
    assert parse_override("cluster.representative=min:publish_time") == (
        "cluster",
        "representative",
        "min:publish_time",
    )


@pytest.mark.parametrize(
    ("overrides", "setting", "on"),
    [
        ([], "auto", True),
        (["match.sketch_bands=true"], "true", True),
        (["match.sketch_bands=false"], "false", False),
        (['match.sketch_bands="auto"'], "auto", True),
        # "auto" turns itself off where the sketches are not the check's n-grams, without an error
        (["verify.measure=edit"], "auto", False),
        (["features.mode=tfidf"], "auto", False),
        (["verify.prefix_filter=true"], "auto", False),
        (["verify.sketch_filter=false"], "auto", False),
    ],
)
def test_sketch_bands_are_on_by_default_wherever_they_can_apply(overrides, setting, on):
    cfg = load_config(overrides=overrides)
    assert (cfg.match.sketch_bands, cfg.sketch_bands) == (setting, on)
    assert cfg.with_sketch_bands(not on).sketch_bands is not on
    assert cfg.to_dict()["match"]["sketch_bands"] == setting


@pytest.mark.parametrize(
    "override",
    ["verify.measure=edit", "features.mode=tfidf", "verify.prefix_filter=true", "verify.sketch_filter=false"],
)
def test_sketch_bands_asked_for_where_they_cannot_apply_name_the_reason(override):
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["match.sketch_bands=true", override])
    assert str(e.value).startswith("match.sketch_bands: needs")


def test_original_recipe_config():
    from simhash_spark.config import DEFAULT_CONFIG_PATH

    cfg = load_config(DEFAULT_CONFIG_PATH.parent / "original.toml")
    assert (cfg.features.mode, cfg.features.top_k, cfg.fingerprint.hash) == ("tfidf", 50, "md5_64")
    assert (cfg.match.max_distance, cfg.bands.scheme, cfg.verify.measure) == (3, "4x16", "none")
    assert not cfg.sketch_bands  # no text check to decide their pairs


def test_presets_are_named_or_given_as_files(tmp_path):
    from simhash_spark.config import PRESETS_DIR, presets

    assert presets() == ["default", "original", "short"]
    assert load_config("original") == load_config(PRESETS_DIR / "original.toml")
    assert load_config("original").features.mode == "tfidf"
    assert load_config("short").short_texts.below_letters == 100
    with pytest.raises(ConfigError, match=r"not a preset \(presets: default, original, short\)"):
        load_config("origin")


@pytest.mark.slow
def test_the_wheel_ships_the_presets(tmp_path):
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(tmp_path),
            str(root),
        ],
        check=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("simhash_spark-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"simhash_spark/conf/{p}.toml" for p in ("default", "original", "short")} <= set(names)


def test_overrides_as_a_mapping_round_trip_and_validate():
    from simhash_spark.config import with_overrides

    for cfg in (load_config(), load_config("original")):
        assert with_overrides(cfg, {"match.max_distance": cfg.match.max_distance}) == cfg
    changed = with_overrides(
        load_config(), {"match.max_distance": 10, "input.text_columns": ["title", "body"]}
    )
    assert changed == load_config(overrides=["match.max_distance=10", 'input.text_columns=["title","body"]'])
    with pytest.raises(ConfigError, match=r"match\.max_distance: expected an integer"):
        with_overrides(load_config(), {"match.max_distance": "ten"})
    with pytest.raises(ConfigError, match=r"expected section\.key"):
        with_overrides(load_config(), {"max_distance": 3})


def test_a_local_driver_heap_larger_than_the_machine_is_refused_before_the_jvm_starts(monkeypatch):
    from simhash_spark import session

    monkeypatch.setattr(session, "machine_memory_bytes", lambda: 8 << 30)
    monkeypatch.setattr(session, "_driver_memory_set_elsewhere", lambda settings: False)
    settings: dict = {}
    with pytest.raises(ConfigError, match=r"spark.local_driver_memory: '100000g' is more than the 8.0 GiB"):
        session._local_driver_memory(load_config(overrides=["spark.local_driver_memory='100000g'"]), settings)
    session._local_driver_memory(load_config(overrides=["spark.local_driver_memory='4g'"]), settings)
    assert settings[session.DRIVER_MEMORY] == "4g"
