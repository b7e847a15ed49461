"""Which numpy code paths a local run's Python workers keep: AMD Zen 4 detection and the settings it gives."""

import pytest

from simhash_spark import session
from simhash_spark.config import ConfigError, load_config, with_overrides
from simhash_spark.core.cpu import avx512_targets, cpu_fields, slow_avx512_sort


def cpuinfo(vendor: str, family: int, flags: str, processors: int = 2) -> str:
    block = f"processor\t: {{n}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel name\t: CPU\nflags\t\t: {flags}\n"
    return "\n".join(block.format(n=n) for n in range(processors))


ZEN4 = cpuinfo("AuthenticAMD", 25, "fpu sse2 avx avx2 avx512f avx512dq avx512bw avx512vl avx512_vbmi2")
ZEN3 = cpuinfo("AuthenticAMD", 25, "fpu sse2 avx avx2")
ZEN5 = cpuinfo("AuthenticAMD", 26, "fpu sse2 avx avx2 avx512f avx512dq avx512bw avx512vl")
ICE_LAKE = cpuinfo("GenuineIntel", 6, "fpu sse2 avx avx2 avx512f avx512dq avx512bw avx512vl")


@pytest.mark.parametrize(
    ("text", "slow"),
    [(ZEN4, True), (ZEN3, False), (ZEN5, False), (ICE_LAKE, False), ("", False), ("cpu family : x", False)],
)
def test_only_amd_family_19h_with_avx512_is_slow(text, slow):
    assert slow_avx512_sort(text) is slow


def test_cpu_fields_are_the_first_processors():
    text = ZEN4 + "\n" + cpuinfo("GenuineIntel", 6, "avx2", processors=1)
    assert cpu_fields(text)["vendor_id"] == "AuthenticAMD"
    assert cpu_fields("\n\n" + ZEN3)["cpu family"] == "25"


def test_avx512_targets_in_either_numpy_naming():
    found = {"X86_V3": True, "X86_V4": True, "AVX512_ICL": True, "AVX512_SPR": False}
    assert avx512_targets(["X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"], found) == ["X86_V4", "AVX512_ICL"]
    numpy1 = ["AVX2", "AVX512F", "AVX512CD", "AVX512_SKX", "AVX512_ICL"]
    found1 = {"AVX2": True, "AVX512F": True, "AVX512CD": True, "AVX512_SKX": True, "AVX512_ICL": False}
    assert avx512_targets(numpy1, found1) == ["AVX512F", "AVX512CD", "AVX512_SKX"]
    assert avx512_targets(["X86_V3"], {"X86_V3": True}) == []


@pytest.fixture
def zen4(monkeypatch):
    monkeypatch.delenv(session.NUMPY_FEATURES, raising=False)
    monkeypatch.setattr(session, "machine_cpuinfo", lambda: ZEN4)
    monkeypatch.setattr(
        session, "_numpy_targets", lambda: (["X86_V3", "X86_V4"], {"X86_V3": True, "X86_V4": True})
    )
    monkeypatch.setattr(session, "_defaults_file_sets", lambda key: False)


def test_a_local_run_on_zen4_leaves_its_workers_on_avx2(zen4):
    settings: dict[str, str] = {}
    session._local_numpy_features(load_config(), settings)
    assert settings == {session.WORKER_NUMPY_FEATURES: "X86_V4"}


def test_what_the_user_set_or_chose_is_kept(zen4, monkeypatch):
    mine = {session.WORKER_NUMPY_FEATURES: "AVX512_SPR"}
    session._local_numpy_features(load_config(), mine)
    assert mine == {session.WORKER_NUMPY_FEATURES: "AVX512_SPR"}
    kept: dict[str, str] = {}
    session._local_numpy_features(with_overrides(load_config(), {"spark.local_numpy_avx512": "keep"}), kept)
    assert kept == {}
    monkeypatch.setenv(session.NUMPY_FEATURES, "X86_V4")  # the workers inherit this process's
    inherited: dict[str, str] = {}
    session._local_numpy_features(load_config(), inherited)
    assert inherited == {}


def test_other_cpus_keep_numpys_choice(zen4, monkeypatch):
    for text in (ZEN3, ZEN5, ICE_LAKE, ""):
        monkeypatch.setattr(session, "machine_cpuinfo", lambda text=text: text)
        settings: dict[str, str] = {}
        session._local_numpy_features(load_config(), settings)
        assert settings == {}


def test_the_setting_is_validated():
    with pytest.raises(ConfigError, match=r"spark\.local_numpy_avx512"):
        with_overrides(load_config(), {"spark.local_numpy_avx512": "off"})


class _Conf:
    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, key: str, default=None):
        return self.values.get(key, default)


class _Session:
    def __init__(self, values: dict[str, str]):
        self.conf = _Conf(values)


def test_the_summary_records_what_the_workers_got(monkeypatch):
    from simhash_spark.run_summary import worker_numpy

    key = "worker_numpy_disabled_features"
    monkeypatch.delenv(session.NUMPY_FEATURES, raising=False)
    set_for_workers = {session.WORKER_NUMPY_FEATURES: "X86_V4", "spark.master": "local[2]"}
    assert worker_numpy(_Session(set_for_workers)) == {key: "X86_V4"}
    assert worker_numpy(_Session({"spark.master": "local[2]"})) == {key: None}
    monkeypatch.setenv(session.NUMPY_FEATURES, "AVX512_SPR")  # a local run's workers inherit it
    assert worker_numpy(_Session({"spark.master": "local[*]"})) == {key: "AVX512_SPR"}
    assert worker_numpy(_Session({"spark.master": "yarn"})) == {key: None}
