"""Floods: thousands of distinct near-variants of one text (a daily notice whose figures change, a price
table, a weather report) resolved in bounded work (pure numpy).

The members of hot buckets are resolved here once, together, instead of pair by pair: the clusters need
only a spanning structure of accepted pairs, and most pairs of a flood fail the check (the figures differ),
so a search that tries every close pair costs size² text checks.

With the n-gram Jaccard check (``verify.measure = "char_jaccard"``, no pair accepted unchecked) the
candidates come from a similarity join over the members' n-gram sets, as All-Pairs and PPJoin do it:
n-grams ordered rarest first within the flood (the figures' n-grams, then the template's), each member
probing with the prefix its threshold needs the lists of the members of the sizes a pair at the threshold
can have (kept in ascending size, so a size range is two binary searches) indexed by the shorter prefix
the smaller of two sets needs. Two sets at Jaccard ≥ t share an n-gram of those prefixes, so no pair that
can pass is missed; the template's n-grams, shared by every member, come last. A candidate is compared
first by a 256-bin one-permutation MinHash of the two sets (half the bins, then all, each dropping a pair
at t with probability below 5e-10), then exactly.

Members probe a block at a time (numpy's per-call cost paid once per block), breadth-first: a member
probes once and meets the members that have not probed yet, so for every accepted pair one of its two
members meets the other, and union-find over the accepted pairs gives the clusters. While the members
still to probe are in one cluster (a pile of near-identical texts, probed one at a time while each
reaches many), the members reached leave the lists too, so the pile costs about one check per member.

Each member looks at no more than ``max_candidates`` list entries (rarest n-grams first, the list the
budget runs out in taken as far as it lasts) and runs no more than ``max_checks`` exact checks that fail.
A member whose budget ran out probes once more when the lists have shrunk; one that reaches a limit again,
or the checks' limit, is counted in ``capped``: only there can a cluster miss an edge. Other measures (or
pairs accepted by distance alone) search breadth-first by Hamming distance (``core.forest``) with the same
bound on failed checks.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simhash_spark.core.batch_text import normalized_letters
from simhash_spark.core.forest import spanning_search
from simhash_spark.core.prefix_filter import prefix_length
from simhash_spark.core.rules import PairRule
from simhash_spark.core.shingles import codepoint_ngram_hashes_many
from simhash_spark.core.simhash import to_unsigned
from simhash_spark.core.sketch_bands import share_band
from simhash_spark.core.sketch_filter import min_agreements

_M64 = (1 << 64) - 1
SKETCH_BINS = 256
_BIN_SHIFT = np.uint64(64 - 8)
MISS_RATE = 1e-9  # the largest probability that the sketches drop a pair at the threshold
_FIRST_BINS = SKETCH_BINS // 2  # the first look: half the bins, at half the miss rate
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


@dataclass(frozen=True)
class _Needs:
    """The fewest agreeing bins a pair needs, by the number of bins either set fills: among the first
    ``_FIRST_BINS`` bins, then among all, each at half ``MISS_RATE`` (a bin of the union holds the same
    smallest hash in both sets with probability about the Jaccard). The first look drops most pairs at
    half the bytes."""

    first: np.ndarray
    all: np.ndarray

    @classmethod
    def of(cls, min_similarity: float) -> _Needs:
        def needs(bins: int) -> np.ndarray:
            return np.array([min_agreements(min_similarity, m, MISS_RATE / 2) for m in range(bins + 1)])

        return cls(needs(_FIRST_BINS), needs(SKETCH_BINS))


def minhash_bins(sets: Sequence[np.ndarray]) -> np.ndarray:
    """(n, 256) uint8: each set's smallest hash in each bin of its top 8 bits, reduced to 1 … 255 (0 when
    the bin is empty). Two different smallest hashes agree once in 255: that can only keep a pair, and
    a pair's bins take a quarter of the bytes that the whole hashes would."""
    sizes = np.array([len(h) for h in sets], dtype=np.int64)
    out = np.zeros(len(sets) * SKETCH_BINS, dtype=np.uint8)
    if not sizes.sum():
        return out.reshape(len(sets), SKETCH_BINS)
    hashes = np.concatenate(sets)
    cells = np.repeat(np.arange(len(sets)) * SKETCH_BINS, sizes) + (hashes >> _BIN_SHIFT).astype(np.int64)
    # each set is sorted: within a cell the first hash is its smallest
    first = np.ones(len(cells), dtype=bool)
    first[1:] = cells[1:] != cells[:-1]
    out[cells[first]] = (hashes[first] % np.uint64(255) + np.uint64(1)).astype(np.uint8)
    return out.reshape(len(sets), SKETCH_BINS)


_PREPARED = 8192  # texts normalized and hashed in one step: arrays a cache holds, numpy's overhead paid once


def normalized(texts: Sequence[str | None], rule: PairRule) -> list[np.ndarray | None]:
    """Each text's letters as the check normalizes them (None when missing)."""
    if len(texts) > _PREPARED:
        return [
            cps for a in range(0, len(texts), _PREPARED) for cps in normalized(texts[a : a + _PREPARED], rule)
        ]
    present = [i for i, t in enumerate(texts) if t is not None]
    letters = normalized_letters([texts[i] or "" for i in present], rule.norm)
    out: list[np.ndarray | None] = [None] * len(texts)
    for i, cps in zip(present, letters, strict=True):
        out[i] = cps
    return out


def ngram_sets(letters: Sequence[np.ndarray | None], n: int) -> list[np.ndarray]:
    """Each text's distinct n-gram hashes as the check computes them (sorted uint64; empty when missing)."""
    if len(letters) > _PREPARED:
        return [
            h for a in range(0, len(letters), _PREPARED) for h in ngram_sets(letters[a : a + _PREPARED], n)
        ]
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
    """The similarity join over n-gram sets (module docstring; a missing text has none), breadth-first and a
    block of members at a time. A pair at Jaccard ≥ t shares an n-gram between the smaller set's short
    prefix (overlap ≥ 2t/(1+t)·its size) and the larger's long one (overlap ≥ t·its size): each member is
    indexed by both, and probes each index with the other prefix."""
    t = judge.rule.verify.min_similarity
    ranks = _FlatRanks.of(sets)
    sizes = ranks.sizes
    long = np.array([prefix_length(int(m), t) for m in sizes.tolist()], dtype=np.int64)
    short = np.array([_short_prefix(int(m), t) for m in sizes.tolist()], dtype=np.int64)
    search = _Search(
        judge,
        sets,
        ranks,
        (_Postings.of(ranks, short), _Postings.of(ranks, long)),
        (short, long),
        minhash_bins(sets),
        _Needs.of(t),
        limits,
    )
    while (block := search.next_block()).size:
        search.probe(block)
    return search.result


def _short_prefix(size: int, t: float) -> int:
    """The prefix a set needs against sets at least its size (overlap ≥ 2t/(1+t)·size)."""
    return size - math.ceil(round(2 * t / (1 + t) * size, 9)) + 1 if size else 0


def _running_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The running sums of ``values`` within consecutive runs of ``counts`` values."""
    sums = np.cumsum(values)
    firsts, filled = np.cumsum(counts) - counts, counts > 0
    before = np.zeros(len(counts), dtype=sums.dtype)
    before[filled] = (sums - values)[firsts[filled]]
    return sums - np.repeat(before, counts)


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of int64 values by one sort (faster than its argsort where it needs one)."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


def _ranges(counts: np.ndarray) -> np.ndarray:
    """0 … c-1 for each c of ``counts``, back to back."""
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - counts, counts)


@dataclass(frozen=True)
class _FlatRanks:
    """Each set as ranks of its n-grams, rarest in the flood first (ties by hash), sorted ascending, back
    to back: member x's at ``flat[starts[x] : starts[x] + sizes[x]]``."""

    flat: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, sets: Sequence[np.ndarray]) -> _FlatRanks:
        sizes = np.array([len(s) for s in sets], dtype=np.int64)
        starts = np.cumsum(sizes) - sizes
        if not sizes.sum():
            return cls(np.zeros(0, dtype=np.int64), starts, sizes)
        hashes = np.concatenate(sets)
        # a sort of the values and a search for each, not np.unique's argsort: several times faster
        ordered = np.sort(hashes)
        first = np.concatenate(([True], ordered[1:] != ordered[:-1]))
        values = ordered[first]
        counts = np.diff(np.append(np.flatnonzero(first), len(ordered)))
        inverse = np.searchsorted(values, hashes)
        rank = np.empty(len(values), dtype=np.int64)
        rank[np.lexsort((values, counts))] = np.arange(len(values))
        owner = np.repeat(np.arange(len(sets), dtype=np.int64), sizes)
        # one sort of member · V + rank orders every set's ranks at once
        keyed = np.sort(owner * len(values) + rank[inverse])
        return cls(keyed - owner * len(values), starts, sizes)

    def prefixes(self, members: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first ``lengths[x]`` ranks of each member x of ``members``, back to back, and their
        positions in their sets."""
        counts = lengths[members]
        at = _ranges(counts)
        return self.flat[np.repeat(self.starts[members], counts) + at], at


class _Postings:
    """n-gram rank -> the members holding it in their prefix, as member << 32 | its position there, in
    ascending size (``entries[starts[r] : ends[r]]``; ``keys``: rank · span + size, ascending, so that a
    size range of a list is two binary searches). A long list drops the members done with when it is
    read, once enough members are done since it last did."""

    def __init__(self, tokens: np.ndarray, entries: np.ndarray, sizes: np.ndarray, vocabulary: int) -> None:
        self.span = int(sizes.max()) + 2 if len(sizes) else 2  # the last value marks dropped entries
        order = np.lexsort((entries, sizes, tokens))
        self.entries, self.keys = entries[order], (tokens * self.span + sizes)[order]
        self.ends = np.cumsum(np.bincount(tokens, minlength=vocabulary))
        self.starts = self.ends - np.bincount(tokens, minlength=vocabulary)
        self.cleaned = np.zeros(vocabulary, dtype=np.int64)  # members done when the list was last read

    @classmethod
    def of(cls, ranks: _FlatRanks, lengths: np.ndarray) -> _Postings:
        members = np.arange(len(lengths), dtype=np.int64)
        tokens, at = ranks.prefixes(members, lengths)
        owner = np.repeat(members, lengths)
        vocabulary = int(ranks.flat.max()) + 1 if len(ranks.flat) else 0
        return cls(tokens, (owner << np.int64(32)) | at, ranks.sizes[owner], vocabulary)

    def windows(self, tokens: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where the members of sizes ``low`` … ``high`` begin in the lists of ``tokens``, and how many."""
        base = tokens * self.span
        begin = np.maximum(np.searchsorted(self.keys, base + low, side="left"), self.starts[tokens])
        end = np.minimum(
            np.searchsorted(self.keys, base + np.minimum(high, self.span - 2), "right"), self.ends[tokens]
        )
        return begin, np.maximum(end - begin, 0)

    def drop_done(self, tokens: np.ndarray, done: np.ndarray, n_done: int, compact: int) -> None:
        """Leave out of the lists of ``tokens`` longer than ``compact`` the members ``done`` marks, where
        an eighth of the list may have become done since it was last read."""
        lengths = self.ends[tokens] - self.starts[tokens]
        stale = (lengths > compact) & (8 * (n_done - self.cleaned[tokens]) >= lengths)
        long = np.unique(tokens[stale])
        if not long.size:
            return
        sizes = self.ends[long] - self.starts[long]
        read = np.repeat(self.starts[long], sizes) + _ranges(sizes)
        alive = ~done[self.entries[read] >> 32]
        kept = np.bincount(np.repeat(np.arange(len(long)), sizes)[alive], minlength=len(long))
        write = np.repeat(self.starts[long], kept) + _ranges(kept)
        self.entries[write], self.keys[write] = self.entries[read[alive]], self.keys[read[alive]]
        self.ends[long] = self.starts[long] + kept
        dropped = np.repeat(self.ends[long], sizes - kept) + _ranges(sizes - kept)
        self.keys[dropped] = np.repeat(long * self.span + self.span - 1, sizes - kept)
        self.cleaned[long] = n_done

    def gather(self, begin: np.ndarray, count: np.ndarray) -> np.ndarray:
        return self.entries[np.repeat(begin, count) + _ranges(count)]


_COMPACT = 64  # lists longer than this (or a 64th of the budget) drop the members done with when read
_BLOCK = 1024  # members probed together: numpy's per-call cost paid once per block


class _Search:
    """The state of the breadth-first n-gram join, a block at a time. A member probes once (its block);
    the members it may meet are those that have not probed yet: for an accepted pair, whichever of the
    two probes first meets the other, so union-find over the accepted pairs gives the clusters."""

    def __init__(
        self,
        judge: _Judge,
        sets: list[np.ndarray],
        ranks: _FlatRanks,
        index: tuple[_Postings, _Postings],
        prefixes: tuple[np.ndarray, np.ndarray],
        bins: np.ndarray,
        need: _Needs,
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
        n = len(sets)
        self.probed = np.zeros(n, dtype=bool)
        self.reached = np.zeros(n, dtype=bool)
        self.block_size = 1
        self.opened = [0] * n  # per cluster root: its members reached and not probed yet
        self.open_trees = 0  # clusters with such members
        self.retry: list[int] = []
        self.retried = np.zeros(n, dtype=bool)
        self.done = self.probed
        self.n_done = 0
        self.parent = list(range(n))
        self.queue: deque[int] = deque()
        self.next_root = 0
        self.result = FloodResult([])
        _, group, counts = np.unique(judge.u, return_inverse=True, return_counts=True)
        self.group = np.where(counts[group] > 1, group, -1)
        self.grouped = {int(g): np.flatnonzero(self.group == g) for g in np.flatnonzero(counts > 1)}

    def next_block(self) -> np.ndarray:
        """Members reached and not probed yet; else those whose budget ran out, once more; else the next
        members not reached (roots)."""
        if self.queue:
            take = min(len(self.queue), self.block_size)
            return np.array([self.queue.popleft() for _ in range(take)], dtype=np.int64)
        if self.retry:
            block, self.retry = np.array(self.retry, dtype=np.int64), []
            self.retried[block] = True
            return block
        roots = np.flatnonzero(~self.reached[self.next_root :])[: self.block_size] + self.next_root
        if roots.size:
            self.next_root = int(roots[-1]) + 1
            self.reached[roots] = True
            for root in roots.tolist():
                self._open(root)
        return roots

    def probe(self, block: np.ndarray) -> None:
        """The block's candidates judged, in order: accepted ones join the block's members' clusters. A
        member whose budget ran out stays to be met and probes once more when the lists are shorter."""
        self.done = self._done()
        self.n_done = int(self.done.sum())
        xs, ys, spent = self._candidates(block)
        again = spent & ~self.retried[block]
        self.retry.extend(block[again].tolist())
        self.probed[block[~again]] = True
        for x in block[~again].tolist():
            self._close(x)
        capped = set(block[spent & ~again].tolist())
        failed = dict.fromkeys(block.tolist(), 0)
        queued = len(self.queue)
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
            if failed[x] >= self.limits.max_checks:
                continue
            if self._judge(x, y) is False:
                failed[x] += 1
                if failed[x] >= self.limits.max_checks:
                    capped.add(x)
        self.result.capped += len(capped)
        # one at a time while each member reaches many or the lists are long (they shrink between), else more
        if 2 * int(spent.sum()) > len(block) or len(self.queue) - queued > 2 * len(block):
            self.block_size = 1
        else:
            self.block_size = min(_BLOCK, 2 * self.block_size)

    def _done(self) -> np.ndarray:
        """The members no probe needs to meet: those probed, and, while the members still to probe are in
        one cluster, those reached (a reached member is then in that cluster, or in one whose members have
        all probed: that cluster has met all its pairs)."""
        return self.probed | self.reached if self.open_trees <= 1 else self.probed

    def _open(self, x: int) -> None:
        root = self._find(x)
        self.open_trees += self.opened[root] == 0
        self.opened[root] += 1

    def _close(self, x: int) -> None:
        root = self._find(x)
        self.opened[root] -= 1
        self.open_trees -= self.opened[root] == 0

    def _find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def _judge(self, x: int, y: int) -> bool | None:
        """Whether the pair is accepted (recorded, y reached), False when its text check fails, None when
        not judged (one cluster already, or not eligible)."""
        rx, ry = self._find(x), self._find(y)
        if rx == ry:
            return None
        a, b = (x, y) if x < y else (y, x)
        d = self.judge.distance(a, b)
        ok, band = self.judge.eligible(a, b, d)
        if not ok:
            return None
        sim = None
        if self.judge.rule.needs_text_check(d, within_k=not band):
            sim = _jaccard(self.sets[a], self.sets[b])
            self.result.checks += 1
        reason = self.judge.reason(a, b, d, sim, band)
        if reason is None:
            return False if sim is not None else None
        self.parent[rx] = ry
        self.open_trees -= bool(self.opened[rx] and self.opened[ry])
        self.opened[ry] += self.opened[rx]
        self.opened[rx] = 0
        self.result.edges.append((a, b, d, sim, reason))
        if not self.reached[y]:
            self.reached[y] = True
            self.queue.append(y)
            self._open(y)
        return True

    def _candidates(self, block: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pairs (x, y) to judge, x in the block: members of x's fingerprint (accepted unchecked), then
        those sharing a prefix n-gram that the sizes, the positions of the first shared n-gram (PPJoin's
        positional filter) and the sketches leave; and the members whose budget of looked-at entries ran
        out."""
        budget = np.full(len(block), self.limits.max_candidates, dtype=np.int64)
        smaller, capped_s = self._side(block, self.short_index, self.long, budget, larger=False)
        larger, capped_l = self._side(block, self.long_index, self.short, budget, larger=True)
        pairs = np.concatenate([smaller, larger])
        n = np.int64(len(self.probed))
        xs, ys = pairs // n, pairs % n
        keep = self._sketches_agree(xs, ys)
        xs, ys = xs[keep], ys[keep]
        same_x, same_y = self._same(block)
        rank = np.empty(len(self.probed), dtype=np.int64)
        rank[block] = np.arange(len(block))
        xs, ys = np.concatenate([same_x, xs]), np.concatenate([same_y, ys])
        order = np.lexsort((ys, rank[xs]))
        xs, ys = xs[order], ys[order]
        # two members of the block meet each other twice: judged once
        _, first = np.unique(np.minimum(xs, ys) * n + np.maximum(xs, ys), return_index=True)
        first.sort()
        return xs[first], ys[first], capped_s | capped_l

    def _same(self, block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) for the block's members x and the other members of their fingerprint not probed yet."""
        xs, ys = [], []
        for x in block[self.group[block] >= 0].tolist():
            others = self.grouped[int(self.group[x])]
            others = others[~self.done[others] & (others != x)]
            xs.append(np.full(len(others), x, dtype=np.int64))
            ys.append(others)
        empty = np.zeros(0, dtype=np.int64)
        return (np.concatenate(xs), np.concatenate(ys)) if xs else (empty, empty)

    def _sketches_agree(self, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        keep = self._agree(xs, ys, _FIRST_BINS, self.need.first)
        keep[keep] = self._agree(xs[keep], ys[keep], SKETCH_BINS, self.need.all)
        return keep

    def _agree(self, xs: np.ndarray, ys: np.ndarray, bins: int, need: np.ndarray) -> np.ndarray:
        keep = np.zeros(len(xs), dtype=bool)
        for a in range(0, len(xs), 1 << 14):
            bx, by = self.bins[xs[a : a + (1 << 14)], :bins], self.bins[ys[a : a + (1 << 14)], :bins]
            same = bx == by
            both_empty = np.count_nonzero(same & (bx == 0), axis=1)
            agree = np.count_nonzero(same, axis=1) - both_empty
            keep[a : a + len(bx)] = agree >= need[bins - both_empty]
        return keep

    def _side(
        self, block: np.ndarray, index: _Postings, lengths: np.ndarray, budget: np.ndarray, *, larger: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Pairs x · n + y (x in the block) of members at least (``larger``) or at most x's size met through
        x's prefix of ``lengths`` in ``index`` that may reach the threshold by size and positions; and
        which members' ``budget`` (spent here) ran out."""
        tokens, at = self.ranks.prefixes(block, lengths)
        counts = lengths[block]
        owner = np.repeat(np.arange(len(block)), counts)
        index.drop_done(tokens, self.done, self.n_done, min(_COMPACT, self.limits.max_candidates // 64))
        t = self.judge.rule.verify.min_similarity
        size = self.ranks.sizes[block][owner]
        if larger:  # the sizes a pair at t can have, past x's own (met on the other side)
            low, high = size + 1, np.floor(np.round(size / t, 9)).astype(np.int64)
        else:
            low, high = np.ceil(np.round(t * size, 9)).astype(np.int64), size
        begin, listed = index.windows(tokens, low, high)
        # rarest first until the budget runs out, the list it runs out in taken as far as it lasts
        met = np.clip(np.repeat(budget, counts) - _running_sums(listed, counts) + listed, 0, listed)
        capped = np.bincount(owner, weights=met < listed, minlength=len(block)) > 0
        budget -= np.bincount(owner, weights=met, minlength=len(block)).astype(np.int64)
        used = met > 0
        begin, met, owner, at = begin[used], met[used], owner[used], at[used]
        entries = index.gather(begin, met)
        x_of, in_x = block[np.repeat(owner, met)], np.repeat(at, met)
        ys, in_y = entries >> 32, entries & 0xFFFFFFFF
        size_x, size_y = self.ranks.sizes[x_of], self.ranks.sizes[ys]
        overlap = np.ceil(np.round(t / (1 + t) * (size_x + size_y), 9))
        # shared n-grams from here on can be at most: largest at a pair's first shared n-gram (PPJoin's
        # positional filter), so a pair is kept when any of its entries is
        left = np.minimum(size_x - in_x, size_y - in_y)
        keep = ~self.done[ys] & (ys != x_of) & (left >= overlap)  # sizes: the windows chose them
        return _distinct(x_of[keep] * np.int64(len(self.probed)) + ys[keep]), capped


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
