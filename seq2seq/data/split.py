"""The fixed train/dev/test split, keyed on a hash of the Chinese sentence.

Hashing the (normalised) Chinese side puts every English variant of one Chinese sentence in
the same split, so test sentences can have several references and none of them leaks into
training. The split depends on nothing but the text: no seed, no corpus order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

Pair = tuple[str, str]

SPLITS = ("train", "dev", "test")
N_BUCKETS = 1000
TEST_BUCKETS = 20  # buckets [0, 20): 2% test
DEV_BUCKETS = 40  # buckets [20, 40): 2% dev


def bucket(zh: str) -> int:
    """The hash bucket in ``[0, 1000)`` of a normalised Chinese sentence."""
    return int(hashlib.sha256(zh.encode("utf-8")).hexdigest()[:8], 16) % N_BUCKETS


def split_name(zh: str) -> str:
    """``"test"``, ``"dev"`` or ``"train"`` for a normalised Chinese sentence."""
    b = bucket(zh)
    if b < TEST_BUCKETS:
        return "test"
    if b < DEV_BUCKETS:
        return "dev"
    return "train"


def split_pairs(pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    """Splits cleaned (en, zh) pairs into ``train``, ``dev`` and ``test``.

    Training pairs whose English sentence also occurs in dev or test are dropped, so that an
    English sentence with two Chinese translations cannot carry a test source into training.
    Order within each split follows the input.
    """
    splits: dict[str, list[Pair]] = {name: [] for name in SPLITS}
    for pair in pairs:
        splits[split_name(pair[1])].append(pair)
    held_out_en = {en for name in ("dev", "test") for en, _ in splits[name]}
    splits["train"] = [p for p in splits["train"] if p[0] not in held_out_en]
    return splits
