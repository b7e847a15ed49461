"""Timed, labelled job stages: failures name the stage they happened in (exit code 1)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from simhash_spark.errors import InputError, SimhashSparkError, essence, is_unreadable_input
from simhash_spark.faults import maybe_pause

log = logging.getLogger("simhash_spark.pipeline")


class StageFailed(RuntimeError):
    """A runtime failure, labelled with the stage it happened in (exit code 1)."""


@contextmanager
def timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    start = time.perf_counter()
    log.info("stage %s: start", stage)
    maybe_pause(stage)
    try:
        yield
    except SimhashSparkError:
        raise
    except Exception as e:
        if is_unreadable_input(e):
            raise InputError(f"cannot read input: {essence(e)}") from e
        raise StageFailed(f"stage '{stage}' failed: {type(e).__name__}: {essence(e)}") from e
    timings[stage] = round(time.perf_counter() - start, 3)
    log.info("stage %s: %.1f s", stage, timings[stage])
