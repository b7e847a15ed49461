"""The whole default job against its peers, each a separate process from the same Parquet file to its pairs
on disk, measured side by side in one run:

- ``job``: ``python -m simhash_spark dedup`` with the default configuration (local[*], every output and
  the report, as a user runs it);
- ``datasketch``: MinHashLSH (threshold 0.8, 128 permutations, character 5-grams of the normalized text)
  in one Python process, its candidate pairs written as Parquet;
- ``mllib``: Spark MLlib ``MinHashLSH`` (5 tables, ``approxSimilarityJoin`` at Jaccard distance 0.2)
  in local[*] over the same 5-gram sets (4 GB driver heap: it fails at the default 1 GB), its pairs
  written as Parquet;
- ``rensa``: single-process Rust MinHash (PyPI ``rensa``): the job's normalized letters and character
  5-gram hashes (its numpy code), ``RMinHash`` digests (128 permutations) computed by rensa, 16 bands of 8
  grouped with numpy, and every candidate pair checked exactly (5-gram Jaccard >= 0.8, the job's check);
- ``gaoya``: single-process Rust SimHash (PyPI ``gaoya``): 64 bits over character 5-grams of the job's
  normalized text, 13 blocks for k = 12 (the job's default), ``par_bulk_query`` on both cores, every
  candidate checked exactly as above;
- ``job_20``: the job on the first 20 documents (what a first try on a sample costs);
- ``job_spark_link``, ``job_spark_link_20``: the same with ``cluster.local_max_documents=0`` (the Spark
  linking steps instead of the driver's);
- ``job_pairs_only``: the job with ``output.write_deduplicated=false`` and ``output.write_report=false``
  (pairs, clusters and documents only: the outputs nearest to what the single-process peers write);
- ``job_no_archive``, ``job_20_no_archive``: the same with ``spark.class_archive=off`` (the driver JVM
  loads Spark's classes itself, as every run did before the class archive);
- ``job_full_jit``, ``job_20_full_jit``: the same with ``spark.driver_jit=full`` (the driver JVM's default
  compilers instead of the quick one only);
- ``job_numpy_keep``: the same with ``spark.local_numpy_avx512=keep`` (the Python workers on numpy's own
  choice of code paths, on a CPU where the job would leave numpy's AVX-512 code off);
- ``job_uncompressed``, ``job_zstd``: the same with ``spark.sql.parquet.compression.codec`` set to
  ``uncompressed`` or ``zstd`` (Spark's default, which the job keeps, is snappy): what the codec costs
  in time and saves in bytes (``output_mib``), mostly in ``deduplicated/``, the input's copy.

The single-process Python peers run with numpy on the code paths the job's Python workers get on this
machine (``NPY_DISABLE_CPU_FEATURES`` as ``spark.local_numpy_avx512 = "auto"`` sets it; unset elsewhere).

The job's other peers run as users' local runs do from their second run on: with the driver's class
archive in the user's cache (``simhash_spark/class_archive.py``). Before the rounds the bench runs the job
twice on the 20 documents (the first writes the archive when its JVM exits, the second checks it).

    .venv/bin/python -m bench.peers [--corpus ../shared/corpora/news_xwlb.parquet] [--limit 0] [--repeat 1]
        [--peers job,datasketch,mllib,rensa,gaoya,job_20] [--timeout 0]

Needs the ``bench`` extra (datasketch, rensa, gaoya). Prints one JSON object: seconds per peer (median over
``--repeat`` rounds, peers interleaved within a round), pairs found, each peer's time over the job's, and
the CPU the machine spent during each round (``cpu``: user and system seconds over all cores, from
``/proc/stat``, with Linux; what else ran meanwhile counts too): a peer on one core and the job on all
of them compare by it whatever the machine's load did to their wall clocks; and what each peer wrote
(``output_mib``: its output folder or file, median over the rounds).
A peer still running after ``--timeout`` seconds is stopped, and one that fails (a non-zero exit, e.g.
killed for its memory) is let be; both are reported in ``timed_out`` (failed or stopped: its time then
only bounds it from below, and stderr says which).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from simhash_spark import class_archive
from simhash_spark.session import NUMPY_FEATURES, machine_cpuinfo, numpy_features_to_disable

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "news_xwlb.parquet"
THRESHOLD = 0.8


def shingle_sets(texts: list[str | None]) -> list[set[str]]:
    from simhash_spark.core.normalize import NormalizeOptions, normalize
    from simhash_spark.core.shingles import char_shingles

    opts = NormalizeOptions()
    return [char_shingles(normalize(t or "", opts).text, 5) for t in texts]


def run_datasketch(corpus: str, out: str) -> int:
    from datasketch import MinHash, MinHashLSH

    table = pq.read_table(corpus, columns=["id", "text"])
    ids = table.column("id").to_pylist()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=128)
    hashes = []
    for i, s in enumerate(shingle_sets(table.column("text").to_pylist())):
        m = MinHash(num_perm=128)
        m.update_batch([g.encode("utf-8") for g in s])
        hashes.append(m)
        lsh.insert(i, m)
    pairs = sorted({(min(i, j), max(i, j)) for i, m in enumerate(hashes) for j in lsh.query(m) if j != i})
    a, b = [ids[i] for i, _ in pairs], [ids[j] for _, j in pairs]
    pq.write_table(pa.table({"id_a": a, "id_b": b}), out)
    return len(pairs)


NGRAM = 5
CHUNK_DOCS = 20_000  # documents normalized and hashed at a time: bounded memory at any corpus size


def _letters(texts: list[str | None]) -> list[np.ndarray]:
    from simhash_spark.core.batch_text import normalized_letters
    from simhash_spark.core.normalize import NormalizeOptions

    return normalized_letters([t or "" for t in texts], NormalizeOptions())


def exact_pairs(texts: list[str | None], candidates: np.ndarray) -> np.ndarray:
    """The candidate (a, b) rows whose texts pass the job's check (5-gram Jaccard >= 0.8), a batch at a time."""
    from simhash_spark.core.normalize import NormalizeOptions
    from simhash_spark.core.verify import VerifyOptions, similarities

    keep = np.zeros(len(candidates), dtype=bool)
    for start in range(0, len(candidates), CHUNK_DOCS):
        rows = candidates[start : start + CHUNK_DOCS]
        sims = similarities(
            [texts[a] for a in rows[:, 0]],
            [texts[b] for b in rows[:, 1]],
            VerifyOptions(),
            NormalizeOptions(),
        )
        keep[start : start + len(rows)] = sims >= THRESHOLD
    return candidates[keep]


def write_pairs(ids: list[object], pairs: np.ndarray, out: str) -> int:
    pq.write_table(
        pa.table({"id_a": [ids[a] for a in pairs[:, 0]], "id_b": [ids[b] for b in pairs[:, 1]]}), out
    )
    return len(pairs)


def minhash_digests(texts: list[str | None], num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows with at least one 5-gram, their rensa ``RMinHash`` digests as a uint32 matrix)."""
    from rensa import RMinHash

    from simhash_spark.core.shingles import codepoint_ngram_hashes_many

    rows, digests = [], []
    for start in range(0, len(texts), CHUNK_DOCS):
        hashed = [
            h for h, _ in codepoint_ngram_hashes_many(_letters(texts[start : start + CHUNK_DOCS]), NGRAM)
        ]
        present = [i for i, h in enumerate(hashed) if len(h)]
        offsets = np.concatenate(([0], np.cumsum([len(hashed[i]) for i in present]))).astype(np.uint64)
        flat = np.concatenate([hashed[i] for i in present]) if present else np.zeros(0, dtype=np.uint64)
        matrix = RMinHash.digest_matrix_from_flat_token_hashes(flat, offsets, num_perm, 42)
        rows.append(np.array(present, dtype=np.int64) + start)
        digests.append(np.array(matrix.to_rows(), dtype=np.uint32).reshape(len(present), num_perm))
    return np.concatenate(rows), np.concatenate(digests)


def band_candidates(rows: np.ndarray, digests: np.ndarray, bands: int) -> np.ndarray:
    """Distinct (a < b) pairs of ``rows`` whose digests agree on every value of at least one band."""
    found = []
    for band in np.split(digests, bands, axis=1):
        keys = np.frombuffer(np.ascontiguousarray(band).tobytes(), dtype=f"V{band.shape[1] * 4}")
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1], [True])))
        for a, b in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
            if b - a > 1:
                members = np.sort(rows[order[a:b]])
                i, j = np.triu_indices(len(members), 1)
                found.append(np.stack([members[i], members[j]], axis=1))
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(found), axis=0)


def run_rensa(corpus: str, out: str) -> int:
    table = pq.read_table(corpus, columns=["id", "text"])
    texts = table.column("text").to_pylist()
    rows, digests = minhash_digests(texts, num_perm=128)
    candidates = band_candidates(rows, digests, bands=16)
    return write_pairs(table.column("id").to_pylist(), exact_pairs(texts, candidates), out)


def run_gaoya(corpus: str, out: str) -> int:
    from gaoya.simhash import SimHashStringIndex

    table = pq.read_table(corpus, columns=["id", "text"])
    texts = table.column("text").to_pylist()
    index = SimHashStringIndex(
        hash_size=64, num_blocks=13, hamming_distance=12, analyzer="char", ngram_range=(5, 5)
    )
    normalized = []
    for start in range(0, len(texts), CHUNK_DOCS):
        for cps in _letters(texts[start : start + CHUNK_DOCS]):
            normalized.append(cps.astype("<u4").tobytes().decode("utf-32-le"))
    for i, text in enumerate(normalized):
        if len(text) >= NGRAM:
            index.insert_document(i, text)
    found = [
        (min(i, j), max(i, j))
        for i, near in enumerate(index.par_bulk_query(normalized))
        for j in near
        if j != i
    ]
    candidates = np.array(sorted(set(found)), dtype=np.int64).reshape(-1, 2)
    return write_pairs(table.column("id").to_pylist(), exact_pairs(texts, candidates), out)


def run_mllib(corpus: str, out: str) -> int:
    from pyspark.ml.feature import HashingTF, MinHashLSH
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    # 4g: at Spark's default 1g driver heap MLlib runs out of memory on ~10k news stories
    spark = SparkSession.builder.master("local[*]").config("spark.driver.memory", "4g").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    shingles = pandas_udf(_sorted_shingles, "array<string>")  # type: ignore[call-overload]
    docs = spark.read.parquet(corpus).select("id", shingles("text").alias("sh")).where(F.size("sh") > 0)
    vec = HashingTF(inputCol="sh", outputCol="vec", numFeatures=1 << 22, binary=True).transform(docs)
    model = MinHashLSH(inputCol="vec", outputCol="hashes", numHashTables=5, seed=7).fit(vec)
    joined = model.approxSimilarityJoin(vec, vec, 1 - THRESHOLD, distCol="jd")
    pairs = joined.select(F.col("datasetA.id").alias("id_a"), F.col("datasetB.id").alias("id_b")).where(
        F.col("id_a") < F.col("id_b")
    )
    pairs.write.mode("overwrite").parquet(out)
    n = spark.read.parquet(out).count()
    spark.stop()
    return n


def _sorted_shingles(texts: pd.Series) -> pd.Series:
    return pd.Series([sorted(s) for s in shingle_sets(texts.tolist())])


def machine_cpu_seconds() -> tuple[float, float] | None:
    """(user, system) CPU seconds this machine's cores have run since boot, from ``/proc/stat`` (user and
    nice; system, interrupts and soft interrupts); None where there is none (not Linux). The difference
    over a run is its process tree's CPU wherever its processes go (a JVM a driver does not wait for, the
    Python workers it forks), plus whatever else ran meanwhile: compare runs side by side."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice) / tick, (system + irq + softirq) / tick


@dataclass(frozen=True)
class Timed:
    seconds: float  # wall clock
    finished: bool  # exited 0 before the timeout
    cpu: dict[str, float] | None  # the machine's user and system CPU seconds meanwhile (machine_cpu_seconds)


def timed(cmd: list[str], timeout: float | None = None, env: dict[str, str] | None = None) -> Timed:
    """A command run and timed: one past ``timeout`` is stopped with its process group; one that fails has
    not finished either, and the end of what it wrote to stderr is printed."""
    cpu_before, start = machine_cpu_seconds(), time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, env=env)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return Timed(time.perf_counter() - start, False, _cpu_since(cpu_before))
        took, cpu = time.perf_counter() - start, _cpu_since(cpu_before)
        if rc:  # a peer that fails (e.g. killed for its memory) is reported, not fatal to the others
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-2000:]
            print(f"{cmd[-5:]}: exit {rc}\n{tail}", file=sys.stderr)
            return Timed(took, False, cpu)
    return Timed(took, True, cpu)


def _cpu_since(before: tuple[float, float] | None) -> dict[str, float] | None:
    after = machine_cpu_seconds()
    if before is None or after is None:
        return None
    return {"user": round(after[0] - before[0], 1), "system": round(after[1] - before[1], 1)}


def commands(peer: str, corpus: str, small: str, work: Path) -> tuple[list[str], Path]:
    py, me = sys.executable, str(Path(__file__).resolve())
    work.mkdir(parents=True, exist_ok=True)  # a single-process peer writes its pairs file into it
    out = work / peer
    if peer.startswith("job"):
        src = small if "_20" in peer else corpus
        cmd = [py, "-m", "simhash_spark", "dedup", "--input", src, "--output", str(out), "--quiet"]
        if "spark_link" in peer:  # the Spark linking steps even where the driver would link
            cmd += ["--set", "cluster.local_max_documents=0"]
        if "no_archive" in peer:
            cmd += ["--set", "spark.class_archive=off"]
        if "pairs_only" in peer:
            cmd += ["--set", "output.write_deduplicated=false", "--set", "output.write_report=false"]
        if "full_jit" in peer:
            cmd += ["--set", "spark.driver_jit=full"]
        if "numpy_keep" in peer:
            cmd += ["--set", "spark.local_numpy_avx512=keep"]
        for codec in ("uncompressed", "zstd"):
            if peer.endswith(f"_{codec}"):
                cmd += ["--spark-conf", f"spark.sql.parquet.compression.codec={codec}"]
        return cmd, out / "pairs"
    return [py, me, "--run", peer, "--corpus", corpus, "--out", str(out)], out


def peer_env(peer: str) -> dict[str, str] | None:
    """The environment of a single-process Python peer: numpy on the code paths the job's Python workers
    get on this machine (``spark.local_numpy_avx512``), so that the numpy code they share (normalizing,
    hashing, the exact check) runs equally fast in both."""
    if peer.startswith("job") or peer == "mllib" or NUMPY_FEATURES in os.environ:
        return None
    features = numpy_features_to_disable(machine_cpuinfo())
    return {**os.environ, NUMPY_FEATURES: features} if features else None


def warm_archive(small: str, work: Path) -> None:
    """The class archive as a user has it after a first local run: written, then checked."""
    for i in range(2):
        timed(commands("job_20", small, small, work / f"warm{i}")[0])
        class_archive.wait_for_writers(class_archive.default_directory(), 300)


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (a file: its size; nothing there: 0)."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def count_pairs(path: Path) -> int:
    return pq.read_table(str(path)).num_rows if path.exists() else -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--limit", type=int, default=0, help="first N documents only (0 = all)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--peers", default="job,datasketch,mllib,rensa,gaoya,job_20")
    ap.add_argument("--timeout", type=float, default=0, help="seconds a peer may run (0 = no limit)")
    ap.add_argument("--run", default="", help=argparse.SUPPRESS)  # one peer, in this process
    ap.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:
        runners = {"datasketch": run_datasketch, "mllib": run_mllib, "rensa": run_rensa, "gaoya": run_gaoya}
        print(runners[args.run](args.corpus, args.out))
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="simhash-peers-"))
    try:
        print(json.dumps(measure(args, work), indent=2))
    finally:
        # each peer's outputs of each round: gigabytes at 1 M documents
        shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, work: Path) -> dict:
    """Every peer of args.peers, args.repeat rounds, on a copy of the corpus in work."""
    table = pq.read_table(args.corpus, columns=["id", "text"])
    if args.limit:
        table = table.slice(0, args.limit)
    corpus, small = str(work / "corpus.parquet"), str(work / "small.parquet")
    pq.write_table(table, corpus, row_group_size=50_000)  # as corpora are written (docs/reliability.md)
    pq.write_table(table.slice(0, 20), small)
    peers = args.peers.split(",")
    if any(p.startswith("job") for p in peers):
        warm_archive(small, work)
    seconds: dict[str, list[float]] = {p: [] for p in peers}
    cpu: dict[str, list[dict[str, float] | None]] = {p: [] for p in peers}
    written: dict[str, list[int]] = {p: [] for p in peers}
    found: dict[str, int] = {}
    timed_out: set[str] = set()
    for n in range(args.repeat):
        for peer in peers:
            cmd, pairs_path = commands(peer, corpus, small, work / f"r{n}")
            run = timed(cmd, args.timeout or None, peer_env(peer))
            seconds[peer].append(run.seconds)
            cpu[peer].append(run.cpu)
            if run.finished:
                found[peer] = count_pairs(pairs_path)
            else:
                timed_out.add(peer)
            written[peer].append(tree_bytes(work / f"r{n}" / peer))
            # counted: the next round does not need this one's outputs on the disk
            shutil.rmtree(work / f"r{n}" / peer, ignore_errors=True)
    med = {p: statistics.median(s) for p, s in seconds.items()}
    result = {
        "corpus": Path(args.corpus).name,
        "documents": table.num_rows,
        "mean_chars": round(sum(len(t or "") for t in table.column("text").to_pylist()) / table.num_rows),
        "cores": os.cpu_count(),
        "seconds": {p: round(s, 1) for p, s in med.items()},
        "rounds": {p: [round(x, 1) for x in s] for p, s in seconds.items()},
        "cpu": cpu,
        "output_mib": {p: round(statistics.median(b) / 2**20, 1) for p, b in written.items()},
        "pairs": found,
        "timed_out": sorted(timed_out),
    }
    if "job" in med:
        result["peer_over_job"] = {p: round(s / med["job"], 2) for p, s in med.items() if p != "job"}
    return result


if __name__ == "__main__":
    main()
