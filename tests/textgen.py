"""Mixed-script test documents the tests generate themselves (deterministic per seed)."""

import random

from simhash_spark.demo.corpus import Vocabulary, make_article

_LATIN = [
    "SimHash",
    "Spark",
    "GPU",
    "5G",
    "iPhone15",
    "COVID-19",
    "A股",
    "NBA",
    "H&M",
    "C++",
    "x86_64",
    "v2.3.1",
]
_EXTRA = [
    "😀",
    "🚀",
    "👍🏻",
    "①",
    "㈱",
    "™",
    "½",
    "ｶﾀｶﾅ",
    "ＡＢＣ",
    "１２３",
    "——",
    "……",
    "·",
    "\u3000",
    "&amp;",
    "<b>",
]
_UNKNOWN = ["魑魅魍魉", "饕餮", "氪金", "躺平", "内卷化", "赛博朋克", "元宇宙", "碳达峰"]


def mixed_documents(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    vocab = Vocabulary.load()
    docs = []
    for _ in range(n):
        base = make_article(vocab, rng)
        pieces = list(base)
        for _ in range(rng.randint(3, 25)):
            pos = rng.randrange(len(pieces) + 1)
            pool = rng.choice((_LATIN, _EXTRA, _UNKNOWN, [str(rng.randint(0, 10**6)), f"{rng.random():.3f}"]))
            pieces.insert(pos, rng.choice(pool) + rng.choice(["", " ", "，", "."]))
        text = "".join(pieces)
        docs.append(text[: rng.randint(5, len(text))] if rng.random() < 0.2 else text)
    return docs
