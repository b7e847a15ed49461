"""Floods: thousands of distinct near-variants of one text (a daily notice whose figures change, a price
table, a weather report) resolved in bounded work (pure numpy).

The members of hot buckets are resolved here once, together, instead of pair by pair: the clusters need
only a spanning structure of accepted pairs, and most pairs of a flood fail the check (the figures differ),
so a search that tries every close pair costs size² text checks.

With the n-gram Jaccard check (``verify.measure = "char_jaccard"``, no pair accepted unchecked) the
candidates come from a similarity join over the members' n-gram sets, as All-Pairs and PPJoin do it:
n-grams ordered rarest first within the flood (the figures' n-grams, then the template's), each member
probing with the prefix its threshold needs and indexed by the shorter prefix that members no larger than it
need, in ascending size. Two sets at Jaccard ≥ t share an n-gram of those prefixes, so no pair that can
pass is missed; the template's n-grams, shared by every member, come last and are never looked at.
A candidate is compared first by a 256-bin one-permutation MinHash of the two sets (kept for the exact
check unless its bins show it below t, which a pair at t escapes with probability below 1e-9), then
exactly. Members already joined are not compared again (union-find), so a pile of near-identical texts
costs one check per member.

Each member looks at no more than ``max_candidates`` candidates and runs no more than ``max_checks`` exact
checks that fail; a member that reaches either is counted in ``capped``: only there can a cluster miss an
edge. Other measures (or pairs accepted by distance alone) search breadth-first by Hamming distance
(``core.forest``) with the same bound on failed checks.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simhash_spark.core.batch_text import normalized_letters
from simhash_spark.core.forest import spanning_search
from simhash_spark.core.prefix_filter import prefix_length
from simhash_spark.core.rules import PairRule
from simhash_spark.core.shingles import codepoint_ngram_hashes_many
from simhash_spark.core.simhash import to_unsigned
from simhash_spark.core.sketch_bands import share_band

_M64 = (1 << 64) - 1
SKETCH_BINS = 256
_BIN_SHIFT = np.uint64(64 - 8)
_EMPTY = np.uint32(0xFFFFFFFF)
MISS_RATE = 1e-9
_COMPACT = 64  # index lists longer than this drop their reached members when read
FloodEdge = tuple[int, int, int, float | None, str]  # i < j, distance, similarity, reason


@dataclass(frozen=True)
class FloodLimits:
    """Per member: candidates looked at, and exact checks that may fail, before it is counted capped."""

    max_candidates: int = 4096
    max_checks: int = 64


DEFAULT_LIMITS = FloodLimits()


@dataclass
class FloodResult:
    edges: list[FloodEdge]  # accepted pairs spanning the members' clusters
    checks: int = 0  # exact text checks run
    capped: int = 0  # members whose candidates or failed checks reached the limits


@lru_cache(maxsize=64)
def min_bin_agreements(min_similarity: float, bins: int) -> int:
    """The fewest agreeing bins a pair needs: the largest a such that a pair at Jaccard ``min_similarity``
    agrees in fewer than a of the ``bins`` either set fills with probability at most ``MISS_RATE`` (a bin
    of the union holds the same smallest hash in both sets with probability about the Jaccard)."""
    below, t = 0.0, min_similarity
    for a in range(bins + 1):
        below_next = below + math.comb(bins, a) * t**a * (1 - t) ** (bins - a)
        if below_next > MISS_RATE:
            return a
        below = below_next
    return bins


def minhash_bins(sets: Sequence[np.ndarray]) -> np.ndarray:
    """(n, 256) uint32: the low half of each set's smallest hash in each bin of its top 8 bits (all ones
    when empty; two different smallest hashes agree once in 2³²: that can only keep a pair)."""
    sizes = np.array([len(h) for h in sets], dtype=np.int64)
    out = np.full(len(sets) * SKETCH_BINS, _EMPTY, dtype=np.uint32)
    if not sizes.sum():
        return out.reshape(len(sets), SKETCH_BINS)
    hashes = np.concatenate(sets)
    cells = np.repeat(np.arange(len(sets)) * SKETCH_BINS, sizes) + (hashes >> _BIN_SHIFT).astype(np.int64)
    # each set is sorted: within a cell the first hash is its smallest
    first = np.ones(len(cells), dtype=bool)
    first[1:] = cells[1:] != cells[:-1]
    out[cells[first]] = (hashes[first] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return out.reshape(len(sets), SKETCH_BINS)


def normalized(texts: Sequence[str | None], rule: PairRule) -> list[np.ndarray | None]:
    """Each text's letters as the check normalizes them (None when missing)."""
    present = [i for i, t in enumerate(texts) if t is not None]
    letters = normalized_letters([texts[i] or "" for i in present], rule.norm)
    out: list[np.ndarray | None] = [None] * len(texts)
    for i, cps in zip(present, letters, strict=True):
        out[i] = cps
    return out


def ngram_sets(letters: Sequence[np.ndarray | None], n: int) -> list[np.ndarray]:
    """Each text's distinct n-gram hashes as the check computes them (sorted uint64; empty when missing)."""
    present = [i for i, cps in enumerate(letters) if cps is not None]
    hashed = codepoint_ngram_hashes_many([letters[i] for i in present], n)  # type: ignore[misc]
    out = [np.zeros(0, dtype=np.uint64) for _ in letters]
    for i, (h, _) in zip(present, hashed, strict=True):
        out[i] = np.asarray(h, dtype=np.uint64)
    return out


def joins_by_ngrams(rule: PairRule, letters: Sequence[np.ndarray | None]) -> bool:
    """Whether the n-gram join finds every pair the rule accepts among these members: the check is the
    n-gram Jaccard on one n (no member a short text), and no pair is accepted by its distance alone."""
    v = rule.verify
    if not v.enabled or v.measure != "char_jaccard" or v.accept_distance > 0:
        return False
    return not any(cps is not None and rule.short.is_short(len(cps)) for cps in letters)


def _ranked(sets: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each set as ranks of its n-grams, rarest in the flood first (ties by hash), sorted ascending."""
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    if not sizes.sum():
        return [np.zeros(0, dtype=np.int64) for _ in sets]
    values, inverse, counts = np.unique(np.concatenate(sets), return_inverse=True, return_counts=True)
    order = np.lexsort((values, counts))
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values))
    ranks = rank[inverse]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    return [np.sort(ranks[bounds[i] : bounds[i + 1]]) for i in range(len(sets))]


def flood_forest(
    fps: np.ndarray,
    n_chars: Sequence[int],
    texts: Sequence[str | None],
    titles: Sequence[int | None],
    rule: PairRule,
    sketch_keys: np.ndarray | None = None,
    limits: FloodLimits = DEFAULT_LIMITS,
) -> FloodResult:
    """Accepted pairs spanning the clusters of the members (the pairs ``rule`` accepts among them), in
    bounded work. ``fps`` int64; ``titles`` (None: no title) and ``sketch_keys`` (with sketch bands) per
    member. Edges are (i, j, distance, similarity or None, reason) with i < j, sorted."""
    letters = normalized(texts, rule) if rule.verify.measure == "char_jaccard" else []
    if letters and joins_by_ngrams(rule, letters):
        sets = ngram_sets(letters, rule.verify.ngram_size)
        result = _ngram_join(_Judge(fps, n_chars, titles, rule, sketch_keys), sets, limits)
    else:
        result = _hamming_search(fps, texts, _Judge(fps, n_chars, titles, rule, sketch_keys), limits)
    result.edges.sort(key=lambda e: (e[0], e[1]))
    return result


class _Judge:
    """The rule's verdict on one pair of members, given its similarity (or None when unchecked)."""

    def __init__(
        self,
        fps: np.ndarray,
        n_chars: Sequence[int],
        titles: Sequence[int | None],
        rule: PairRule,
        sketch_keys: np.ndarray | None,
    ) -> None:
        self.u, self.n_chars, self.titles, self.rule, self.keys = (
            to_unsigned(fps),
            n_chars,
            titles,
            rule,
            sketch_keys,
        )

    def distance(self, i: int, j: int) -> int:
        return int(self.u[i] ^ self.u[j]).bit_count()

    def title_distance(self, i: int, j: int) -> int | None:
        ti, tj = self.titles[i], self.titles[j]
        return None if ti is None or tj is None else ((ti ^ tj) & _M64).bit_count()

    def eligible(self, i: int, j: int, d: int) -> tuple[bool, bool]:
        """(may be accepted, shares a sketch band): within its k or sharing a band, titles agreeing."""
        within_k = d <= self.rule.k(self.n_chars[i], self.n_chars[j])
        band = not within_k and self.keys is not None and bool(share_band(self.keys[[i]], self.keys[[j]])[0])
        ok = (within_k or band) and self.rule.titles_agree(self.title_distance(i, j))
        return ok, band

    def reason(self, i: int, j: int, d: int, sim: float | None, band: bool) -> str | None:
        return self.rule.reason(
            d,
            self.n_chars[i],
            self.n_chars[j],
            similarity=sim,
            title_distance=self.title_distance(i, j),
            shares_band=band,
        )


def _ngram_join(judge: _Judge, sets: list[np.ndarray], limits: FloodLimits) -> FloodResult:
    """The similarity join over n-gram sets (module docstring; a missing text has none), breadth-first:
    each member taken from the queue reaches the members not reached yet that it is accepted with, and a
    reached member leaves the index for good. A pair at Jaccard ≥ t shares an n-gram between the
    smaller set's short prefix (overlap ≥ 2t/(1+t)·its size) and the larger's long one (overlap ≥ t·its
    size): each member is indexed by both, and probes each index with the other prefix."""
    t = judge.rule.verify.min_similarity
    ranks = _ranked(sets)
    long = [prefix_length(len(r), t) for r in ranks]
    short = [_short_prefix(len(r), t) for r in ranks]
    search = _Search(
        judge,
        sets,
        ranks,
        (_prefix_index(ranks, short), _prefix_index(ranks, long)),
        (short, long),
        minhash_bins(sets),
        np.array([min_bin_agreements(t, m) for m in range(SKETCH_BINS + 1)]),
        limits,
    )
    for root in range(len(sets)):
        if search.reached[root]:
            continue
        search.reached[root] = True
        queue = deque([root])
        while queue:
            queue.extend(search.reach_from(queue.popleft()))
    return search.result


def _short_prefix(size: int, t: float) -> int:
    """The prefix a set needs against sets at least its size (overlap ≥ 2t/(1+t)·size)."""
    return size - math.ceil(round(2 * t / (1 + t) * size, 9)) + 1 if size else 0


def _prefix_index(ranks: list[np.ndarray], lengths: list[int]) -> dict[int, np.ndarray]:
    """n-gram rank -> the members holding it in their prefix of ``lengths``, as member << 32 | its
    position there."""
    tokens = [r[:p] for r, p in zip(ranks, lengths, strict=True)]
    packed = [(np.int64(x) << np.int64(32)) | np.arange(p, dtype=np.int64) for x, p in enumerate(lengths)]
    if not tokens or not sum(lengths):
        return {}
    all_tokens, all_packed = np.concatenate(tokens), np.concatenate(packed)
    order = np.argsort(all_tokens, kind="stable")
    all_tokens, all_packed = all_tokens[order], all_packed[order]
    cuts = np.flatnonzero(np.diff(all_tokens)) + 1
    keys = all_tokens[np.concatenate(([0], cuts))].tolist()
    return dict(zip(keys, np.split(all_packed, cuts), strict=True))


class _Search:
    """The state of the breadth-first n-gram join."""

    def __init__(
        self,
        judge: _Judge,
        sets: list[np.ndarray],
        ranks: list[np.ndarray],
        index: tuple[dict[int, np.ndarray], dict[int, np.ndarray]],
        prefixes: tuple[list[int], list[int]],
        bins: np.ndarray,
        need: np.ndarray,
        limits: FloodLimits,
    ) -> None:
        self.judge, self.sets, self.ranks, self.bins, self.need, self.limits = (
            judge,
            sets,
            ranks,
            bins,
            need,
            limits,
        )
        self.short_index, self.long_index = index
        self.short, self.long = prefixes
        self.sizes = np.array([len(x) for x in sets], dtype=np.int64)
        self.reached = np.zeros(len(sets), dtype=bool)
        self.result = FloodResult([])
        _, inverse, counts = np.unique(judge.u, return_inverse=True, return_counts=True)
        by_value = np.split(np.argsort(inverse, kind="stable"), np.cumsum(counts)[:-1])
        self.same = {int(m): by_value[g] for g in np.flatnonzero(counts > 1) for m in by_value[g]}

    def reach_from(self, x: int) -> list[int]:
        """The members not reached yet that ``x`` is accepted with, now reached (edges recorded)."""
        found, capped = self._candidates(x)
        reached: list[int] = []
        failed = 0
        for y in found.tolist():
            if self.reached[y]:
                continue
            a, b = (x, y) if x < y else (y, x)
            d = self.judge.distance(a, b)
            ok, band = self.judge.eligible(a, b, d)
            if not ok:
                continue
            sim = None
            if self.judge.rule.needs_text_check(d, within_k=not band):
                sim = _jaccard(self.sets[a], self.sets[b])
                self.result.checks += 1
            reason = self.judge.reason(a, b, d, sim, band)
            if reason is None:
                failed += sim is not None
                if failed >= self.limits.max_checks:
                    capped = True
                    break
                continue
            self.reached[y] = True
            reached.append(y)
            self.result.edges.append((a, b, d, sim, reason))
        self.result.capped += int(capped)
        return reached

    def _candidates(self, x: int) -> tuple[np.ndarray, bool]:
        """Members of x's fingerprint (accepted unchecked), then those sharing a prefix n-gram (rarest
        first) that the sizes, the positions of the first shared n-gram (PPJoin's positional filter) and
        the sketches leave; and whether the budget of looked-at entries ran out."""
        same = self.same.get(x, np.zeros(0, dtype=np.int64))
        budget = [self.limits.max_candidates]
        smaller, capped_s = self._side(x, self.short_index, self.long[x], budget, larger=False)
        larger, capped_l = self._side(x, self.long_index, self.short[x], budget, larger=True)
        members = np.union1d(smaller, larger)
        members = members[members != x]
        bx, by = self.bins[x], self.bins[members]
        both_empty = (by == _EMPTY) & (bx == _EMPTY)
        agree = ((by == bx) & ~both_empty).sum(axis=1)
        members = members[agree >= self.need[SKETCH_BINS - both_empty.sum(axis=1)]]
        return np.concatenate([same, members]), capped_s or capped_l

    def _side(
        self, x: int, index: dict[int, np.ndarray], length: int, budget: list[int], *, larger: bool
    ) -> tuple[np.ndarray, bool]:
        """The members at least (``larger``) or at most x's size met through x's prefix of ``length`` in
        ``index`` that may reach the threshold by size and positions."""
        parts, at, counts, capped = [], [], [], False
        for i, token in enumerate(self.ranks[x][:length].tolist()):
            posting = index.get(token)
            if posting is None:
                continue
            if len(posting) > _COMPACT:  # reached members leave long lists for good
                posting = posting[~self.reached[posting >> 32]]
                index[token] = posting
            if len(posting) > budget[0]:
                capped = True
                break
            budget[0] -= len(posting)
            parts.append(posting)
            at.append(i)
            counts.append(len(posting))
        if not parts:
            return np.zeros(0, dtype=np.int64), capped
        packed = np.concatenate(parts)
        positions = np.repeat(np.array(at, dtype=np.int64), counts)
        alive = ~self.reached[packed >> 32]
        packed, positions = packed[alive], positions[alive]
        members, first = np.unique(packed >> 32, return_index=True)  # each member's first shared n-gram
        in_x, in_y = positions[first], packed[first] & 0xFFFFFFFF
        t = self.judge.rule.verify.min_similarity
        size_x, size_y = self.sizes[x], self.sizes[members]
        overlap = np.ceil(np.round(t / (1 + t) * (size_x + size_y), 9))
        left = np.minimum(size_x - in_x, size_y - in_y)  # shared n-grams there can be at most
        small, big = np.minimum(size_x, size_y), np.maximum(size_x, size_y)
        sized = (size_y >= size_x) if larger else (size_y <= size_x)
        keep = sized & (small >= np.ceil(np.round(t * big, 9))) & (left >= overlap)
        return members[keep], capped


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    inter = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - inter
    return inter / union if union else 1.0


def _hamming_search(
    fps: np.ndarray, texts: Sequence[str | None], judge: _Judge, limits: FloodLimits
) -> FloodResult:
    """Breadth-first by Hamming distance (``core.forest``), each member's failed checks bounded."""
    rule = judge.rule
    result = FloodResult([])
    found: dict[tuple[int, int], tuple[float | None, str]] = {}

    def accept(i: int, j: int, d: int) -> bool:
        ok, band = judge.eligible(i, j, d)
        if not ok:
            return False
        sim = None
        if rule.needs_text_check(d, within_k=not band):
            sim = rule.similarity(texts[i] or "", texts[j] or "")
            result.checks += 1
        reason = judge.reason(i, j, d, sim, band)
        if reason is None:
            return False
        found[(i, j)] = (sim, reason)
        return True

    edges, result.capped = spanning_search(fps, rule.largest_k, accept, max_failures=limits.max_checks)
    result.edges = [(i, j, d, *found[(i, j)]) for i, j, d in edges]
    return result
