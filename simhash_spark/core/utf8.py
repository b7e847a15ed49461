"""Texts from Arrow string arrays whose bytes may not be valid UTF-8: Spark hands Python the bytes it read,
and a crawled text can hold any bytes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def repaired_texts(values: pa.Array) -> tuple[list[str | None], np.ndarray | None]:
    """The texts of ``values`` (a string array) as Python strings, and which rows needed repair (``None``
    when none did). A row that is not valid UTF-8 gets each maximal invalid subsequence replaced by one
    U+FFFD, as Python's ``"replace"`` and Spark 4's ``make_valid_utf8`` both do (tests/test_utf8.py checks
    them against each other; Spark 3.5's decoder differs on some malformed sequences).

    Valid batches cost no pass of their own: decoding them is the check. Only a batch that fails it is
    decoded again row by row."""
    try:
        return values.to_numpy(zero_copy_only=False).tolist(), None
    except (pa.ArrowException, UnicodeDecodeError):  # pyarrow reports the decoder's failure as its own
        pass
    binary = pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary()
    texts: list[str | None] = []
    repaired = np.zeros(len(values), dtype=bool)
    for i, raw in enumerate(values.view(binary).to_pylist()):
        if raw is None:
            texts.append(None)
            continue
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(raw.decode("utf-8", "replace"))
            repaired[i] = True
    return texts, repaired
