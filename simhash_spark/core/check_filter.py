"""What the fingerprint pass keeps of each document so the text check can drop candidate pairs before it
reads their texts (pure Python): the exact n-gram prefix (``core.prefix_filter``, ``verify.prefix_filter``)
or the 32-byte sketch (``core.sketch_filter``, ``verify.sketch_filter``). Either is computed from the
document's distinct n-gram hashes, which with the default features are the fingerprint's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.prefix_filter import ngram_prefix, stored_prefixes_meet, to_bytes
from simhash_spark.core.sketch_filter import (
    ngram_sketch,
    ngram_sketches,
    run_sketches,
    stored_sketches_may_pass,
)
from simhash_spark.core.verify import VerifyOptions

PREFIX = "prefix"
SKETCH = "sketch"


@dataclass(frozen=True)
class CheckFilter:
    kind: str  # PREFIX or SKETCH
    min_similarity: float  # the check's threshold

    def summary(self, sorted_distinct: np.ndarray) -> bytes:
        """What a document keeps, from its distinct n-gram hashes sorted ascending (uint64)."""
        if self.kind == PREFIX:
            return to_bytes(ngram_prefix(sorted_distinct, self.min_similarity))
        return ngram_sketch(sorted_distinct)

    def summaries(self, sorted_distinct: Sequence[np.ndarray]) -> list[bytes]:
        """``summary`` of each of many documents (the sketches a batch at a time)."""
        if self.kind == PREFIX:
            return [self.summary(h) for h in sorted_distinct]
        return ngram_sketches(sorted_distinct)

    def run_summaries(self, hashes: np.ndarray, counts: np.ndarray) -> list[bytes]:
        """``summaries`` of documents whose sorted distinct hashes lie back to back (``counts`` per
        document)."""
        if self.kind == PREFIX:
            ends = np.cumsum(counts).tolist()
            return [self.summary(hashes[a:b]) for a, b in zip([0, *ends[:-1]], ends, strict=True)]
        return run_sketches(hashes, counts)

    def may_pass(self, stored_a: Sequence[bytes | None], stored_b: Sequence[bytes | None]) -> np.ndarray:
        """Element-wise over pairs of summaries: False for a pair to drop; True where it may pass the
        check, and where either document has no summary."""
        if self.kind == PREFIX:
            return stored_prefixes_meet(stored_a, stored_b)
        return stored_sketches_may_pass(stored_a, stored_b, self.min_similarity)


def requested(verify: VerifyOptions) -> CheckFilter | None:
    """The filter ``verify.prefix_filter`` or ``verify.sketch_filter`` asks for: the exact prefix when
    asked for, which replaces the sketch (on by default)."""
    kind = PREFIX if verify.prefix_filter else SKETCH if verify.sketch_filter else None
    return None if kind is None else CheckFilter(kind, verify.min_similarity)
