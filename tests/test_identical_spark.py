"""The identical-groups stage: groups, members, expanded pairs and their counts against brute force."""

import itertools
import random

from simhash_spark import columns as C
from simhash_spark.core.verify import IDENTICAL, VERIFIED
from simhash_spark.transforms.identical import (
    GROUP_SIZE,
    cross_group_pair_count,
    expand_pairs,
    fingerprint_groups,
    group_members,
    grouped_members,
    star_edges,
    within_group_pairs,
)


def test_groups_expand_to_every_member_pair_and_big_groups_to_stars(spark):
    rng = random.Random(4)
    fingerprint_of = {i: rng.choice([10, 20, 30, 40, 50]) for i in range(40)}
    fingerprint_of.update({100 + i: 60 for i in range(7)})  # one group over the limit
    fingerprint_of.update({200: 70, 201: 80})  # two documents alone with their fingerprints
    keyed = spark.createDataFrame(sorted(fingerprint_of.items()), "id long, fingerprint long")
    grouped = grouped_members(keyed)
    groups, members = fingerprint_groups(grouped), group_members(grouped)
    by_fp: dict[int, list[int]] = {}
    for i, f in sorted(fingerprint_of.items()):
        by_fp.setdefault(f, []).append(i)
    assert {(r[C.ID], r[C.FINGERPRINT], r[GROUP_SIZE]) for r in groups.collect()} == {
        (min(ids), f, len(ids)) for f, ids in by_fp.items()
    }
    rep = {f: min(ids) for f, ids in by_fp.items()}
    assert {(r["member"], r["rep"], r[GROUP_SIZE]) for r in members.collect()} == {
        (i, rep[f], len(by_fp[f])) for i, f in fingerprint_of.items()
    }
    # representatives of 10 and 20 are pairs (verified), 20 and 60 too
    rep_pairs = spark.createDataFrame(
        [
            (rep[10], rep[20], 5, 0.9, VERIFIED),
            (min(rep[20], rep[60]), max(rep[20], rep[60]), 3, 0.95, VERIFIED),
            (rep[10], rep[70], 7, 0.85, VERIFIED),  # a group and a document alone
            (rep[70], rep[80], 2, 0.99, VERIFIED),  # two documents alone
        ],
        "id_a long, id_b long, distance int, similarity double, reason string",
    )
    limit = 5
    got = {
        (r[C.ID_A], r[C.ID_B], r[C.DISTANCE], r[C.REASON])
        for r in expand_pairs(rep_pairs, members, max_group=limit).collect()
    }
    want = set()
    for ids in by_fp.values():
        if len(ids) <= limit:
            want |= {(a, b, 0, IDENTICAL) for a, b in itertools.combinations(ids, 2)}
        else:
            want |= {(min(ids), m, 0, IDENTICAL) for m in ids if m != min(ids)}
    stand = {f: ids if len(ids) <= limit else [min(ids)] for f, ids in by_fp.items()}
    for fa, fb, d in ((10, 20, 5), (20, 60, 3), (10, 70, 7), (70, 80, 2)):
        want |= {(min(a, b), max(a, b), d, VERIFIED) for a in stand[fa] for b in stand[fb]}
    assert got == want
    within = groups.select(within_group_pairs(groups[GROUP_SIZE], limit).alias("n")).collect()
    assert sum(r["n"] for r in within) + cross_group_pair_count(rep_pairs, groups, max_group=limit) == len(
        want
    )
    assert star_edges(members).count() == len(fingerprint_of) - len(by_fp)


def test_a_text_hash_splits_a_fingerprint_group(spark):
    keyed = spark.createDataFrame(
        [(1, 7, 100), (2, 7, 100), (3, 7, 200)], "id long, fingerprint long, text_hash long"
    )
    grouped = grouped_members(keyed)
    groups = {(r[C.ID], r[GROUP_SIZE]) for r in fingerprint_groups(grouped).collect()}
    assert groups == {(1, 2), (3, 1)}
    members = {(r["member"], r["rep"], r[GROUP_SIZE]) for r in group_members(grouped).collect()}
    assert members == {(1, 1, 2), (2, 1, 2), (3, 3, 1)}
