"""An incremental run's steps around the index: the lookup, what the linking adds of the entries the
batch touches, and the entries the batch commits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from simhash_spark import columns as C
from simhash_spark.config import Config
from simhash_spark.context import RunContext
from simhash_spark.core.fingerprint import ALREADY_INDEXED, FINGERPRINTED
from simhash_spark.core.index_model import ENTRY_COLUMNS
from simhash_spark.core.spark_hash import xxhash64
from simhash_spark.fingerprint_pass import Fingerprinted, count_statuses
from simhash_spark.index.session import HeldBatch, IndexSession, LocalMatches, Lookup
from simhash_spark.index.snapshots import entries_of_batch
from simhash_spark.link_model import AtHand
from simhash_spark.transforms.fingerprint import is_fingerprinted, valid_text


def n_linked(status_counts: dict[str, int], looked: Lookup | None) -> int:
    """What is linked: the batch's fingerprinted rows and, in an incremental run, the entries it touches
    (disjoint: a batch row whose id the index holds is already_indexed, not fingerprinted)."""
    fingerprinted = sum(status_counts[s] for s in FINGERPRINTED)
    return fingerprinted + (0 if looked is None else int(looked.stats["touched_entries"]))


def index_lookup(
    index: IndexSession, fp_pass: Fingerprinted, cfg: Config, ctx: RunContext
) -> tuple[Lookup, DataFrame, dict[str, int], AtHand | None]:
    """(the lookup, fps, rows per status, what the driver holds for the linking): ids the index holds
    already change status; a batch looked up on the driver is linked there with the entries it touched."""
    fps, status_counts, at_hand = fp_pass.fps, fp_pass.status_counts, fp_pass.at_hand
    local = fp_pass.local
    held = (
        HeldBatch(local[C.ID].tolist(), at_hand.keyed) if at_hand is not None and local is not None else None
    )
    with ctx.stage("index_lookup"):
        if index.rebuilt_from is not None:
            index.rebuild(cfg)
        documents = sum(status_counts[s] for s in FINGERPRINTED)
        looked = index.lookup(
            fps, cfg.policy.largest, ctx, held, summaries=fp_pass.summaries, documents=documents
        )
        if looked.fps is not fps:
            fps = ctx.persist(looked.fps)
            if looked.local is not None and at_hand is not None:
                status_counts = _marked_indexed(status_counts, at_hand.keyed, looked.local.known_ids)
            else:
                status_counts = count_statuses(fps)
    linked_at_hand = _with_touched(at_hand, looked.local) if at_hand is not None and looked.local else None
    return looked, fps, status_counts, linked_at_hand


def _marked_indexed(status_counts: dict[str, int], keyed: pd.DataFrame, known: list[Any]) -> dict[str, int]:
    """Rows per status once the fingerprinted rows of ``known`` ids are ``already_indexed``
    (``mark_already_indexed``, counted on the driver)."""
    counts = dict(status_counts)
    for status, n in keyed.loc[keyed[C.ID].isin(known), C.STATUS].value_counts().items():
        counts[str(status)] -= int(n)
        counts[ALREADY_INDEXED] += int(n)
    return counts


def _stacked(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """The rows of both (pandas types an empty frame's columns as it likes: left out)."""
    if not len(second):
        return first
    return pd.concat([first, second], ignore_index=True) if len(first) else second.reset_index(drop=True)


def _with_touched(at_hand: AtHand, found: LocalMatches) -> AtHand:
    """What an incremental run links, on the driver: the batch's fingerprinted rows but those whose ids
    the index holds (linked as the index's entries, with its texts), and the touched entries."""
    known, entries = set(found.known_ids), found.touched
    batch = at_hand.keyed[~at_hand.keyed[C.ID].isin(known)] if known else at_hand.keyed
    ids = entries[C.ID].to_numpy()
    if batch[C.ID].dtype.kind in "iu":
        ids = ids.astype(batch[C.ID].dtype)
    indexed = pd.DataFrame(
        {
            C.ID: ids,
            C.FINGERPRINT: entries[C.FINGERPRINT].to_numpy(np.int64),
            C.N_CHARS: entries[C.N_CHARS].to_numpy(np.int64),
            # what the Spark path hashes: the stored text, as it is
            C.TEXT_HASH: np.array([xxhash64((t,), "string") for t in entries[C.TEXT]], dtype=np.int64),
            C.CHECK_SUMMARY: entries[C.CHECK_SUMMARY].to_numpy(object),
        }
    )
    # the sketches, when the batch's were computed (the sketch bands link on them)
    sketched = C.CHECK_SUMMARY in batch.columns
    columns = [C.ID, C.FINGERPRINT, C.N_CHARS, C.TEXT_HASH] + ([C.CHECK_SUMMARY] if sketched else [])
    keyed = _stacked(batch[columns], indexed[columns])
    titles = at_hand.titles
    if titles is not None:
        titled = entries[C.TITLE_FINGERPRINT].notna().to_numpy()
        title_fps = entries[C.TITLE_FINGERPRINT].to_numpy()[titled].astype(np.int64)
        more = pd.DataFrame({C.ID: ids[titled], C.TITLE_FINGERPRINT: title_fps})
        titles = _stacked(titles[~titles[C.ID].isin(known)], more)
    stored = dict(zip(ids.tolist(), entries[C.TEXT].tolist(), strict=True))

    def texts(wanted: set[Any]) -> dict[Any, str]:
        out = at_hand.texts({i for i in wanted if i not in stored})
        out.update({i: stored[i] for i in wanted if i in stored})
        return out

    return AtHand(keyed, titles, texts)


def texts_of(docs: DataFrame, *more: Column, known_valid: bool = False) -> DataFrame:
    """``id``, ``text`` (valid UTF-8) and ``more`` of the working frame.

    ``known_valid`` (``Fingerprinted.texts_valid``): no fingerprinted document's text needed repair, so
    the texts are taken as read instead of checked byte by byte once more. Only the texts of fingerprinted
    documents are then sure to be valid: every reader of them joins them to fingerprinted ids (pairs,
    cluster members, index entries)."""
    text = F.col(C.TEXT) if known_valid else valid_text(F.col(C.TEXT))
    return docs.select(C.ID, text.alias(C.TEXT), *more)


def index_entries(
    fps: DataFrame,
    docs: DataFrame,
    run_date: str,
    sketches: DataFrame | None = None,
    *,
    known_valid: bool = False,
) -> DataFrame:
    """The batch's entries for the index (``entries_of_batch``), titles included when the input has them,
    and the ``sketches`` (``id``, ``check_summary``) an index with sketch tables stores. ``known_valid``:
    as ``texts_of`` (titles are checked whatever it says: the fingerprint pass does not read them)."""
    title = [valid_text(F.col(C.TITLE)).alias(C.TITLE)] if C.TITLE in docs.columns else []
    return entries_of_batch(fps, texts_of(docs, *title, known_valid=known_valid), run_date, sketches)


def local_entries(fp_pass: Fingerprinted, looked: Lookup, run_date: str) -> pd.DataFrame | None:
    """``index_entries`` on the driver, when the batch was fingerprinted and looked up there."""
    if fp_pass.at_hand is None or fp_pass.local is None or looked.local is None:
        return None
    keyed, local = fp_pass.at_hand.keyed, fp_pass.local
    keep = keyed[~keyed[C.ID].isin(looked.local.known_ids)]
    titles = keep[C.TITLE_FINGERPRINT] if C.TITLE_FINGERPRINT in keep.columns else None
    texts = local.set_index(C.ID)
    rows = {
        C.ID: keep[C.ID].to_numpy(),
        C.FINGERPRINT: keep[C.FINGERPRINT].to_numpy(np.int64),
        C.N_CHARS: keep[C.N_CHARS].to_numpy(np.int64),
        C.TITLE_FINGERPRINT: [None] * len(keep)
        if titles is None
        else titles.astype(object).where(titles.notna(), None),
        C.TEXT: texts.loc[keep[C.ID], C.TEXT].to_numpy(),
        C.TITLE: texts.loc[keep[C.ID], C.TITLE].to_numpy()
        if C.TITLE in texts.columns
        else [None] * len(keep),
        C.RUN_DATE: run_date,
        C.CHECK_SUMMARY: keep[C.CHECK_SUMMARY].to_numpy(object)
        if C.CHECK_SUMMARY in keep.columns
        else [None] * len(keep),
    }
    return pd.DataFrame({c: rows[c] for c in ENTRY_COLUMNS})


def link_inputs(
    fps: DataFrame,
    docs: DataFrame,
    cfg: Config,
    looked: Lookup | None,
    summaries: DataFrame | None,
    *,
    known_valid: bool = False,
) -> tuple[DataFrame, DataFrame, DataFrame | None, DataFrame | None]:
    """(keyed, texts, titles, check summaries) of what is linked: the fingerprinted documents, and the
    index entries the batch touches (with their sketches, when the index stores them). ``known_valid``:
    as ``texts_of``."""
    fingerprinted = fps.where(is_fingerprinted(F.col(C.STATUS)))
    keyed = fingerprinted.select(C.ID, C.FINGERPRINT, C.N_CHARS, C.TEXT_HASH)
    texts = texts_of(docs, known_valid=known_valid)
    titles = (
        fingerprinted.where(F.col(C.TITLE_FINGERPRINT).isNotNull()).select(C.ID, C.TITLE_FINGERPRINT)
        if cfg.input.title_column
        else None
    )
    if looked is None:
        return keyed, texts, titles, summaries
    # an id the index holds already is linked as the index's entry, with the index's text: the batch's
    # row for it (already_indexed) must not bring a second text, title or check summary for the same id
    batch_ids = keyed.select(C.ID)
    texts = texts.join(batch_ids, on=C.ID, how="left_semi")
    touched = looked.touched
    if summaries is not None:
        stored = touched.where(F.col(C.CHECK_SUMMARY).isNotNull()).select(C.ID, C.CHECK_SUMMARY)
        summaries = summaries.join(batch_ids, on=C.ID, how="left_semi").unionByName(stored)
    keyed = keyed.unionByName(
        touched.select(C.ID, C.FINGERPRINT, C.N_CHARS, F.xxhash64(C.TEXT).alias(C.TEXT_HASH))
    )
    texts = texts.unionByName(touched.select(C.ID, C.TEXT))
    if titles is not None:
        titled = touched.where(F.col(C.TITLE_FINGERPRINT).isNotNull())
        titles = titles.unionByName(titled.select(C.ID, C.TITLE_FINGERPRINT))
    return keyed, texts, titles, summaries
