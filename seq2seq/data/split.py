"""The fixed train/dev/test split, keyed on a hash of the Chinese sentence.

Hashing the (normalised) Chinese side puts every English variant of one Chinese sentence in
the same split, so test sentences can have several references and none of them leaks into
training. The split depends on nothing but the text: no seed, no corpus order.

An English sentence can also have several Chinese translations, which hash independently, so
one English source could land in two splits. Two rules keep every English source in one:

1. A dev Chinese sentence with an English variant in test moves to test, with all its variants.
   Otherwise checkpoint selection on dev would have seen a test source, and the test would
   score that source against fewer references than the corpus has. Moving to test (never to
   dev) leaves the hashed test set intact and only adds references and items to it.
2. Training pairs whose English is in dev or test are dropped: the model would otherwise have
   trained on a held-out source sentence (with another translation).
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
    """``"test"``, ``"dev"`` or ``"train"`` by the hash of a normalised Chinese sentence alone
    (:func:`split_pairs` can still move a dev sentence to test)."""
    b = bucket(zh)
    if b < TEST_BUCKETS:
        return "test"
    if b < DEV_BUCKETS:
        return "dev"
    return "train"


def split_pairs(pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    """Splits cleaned (en, zh) pairs into ``train``, ``dev`` and ``test``.

    Every Chinese sentence and every English sentence ends up in one split only: Chinese by
    its hash, dev sentences sharing English with test moved to test, and training pairs whose
    English is held out dropped (see the module docstring). Order within each split follows
    the input.
    """
    pairs = list(pairs)
    where = {zh: split_name(zh) for _, zh in pairs}
    _move_dev_sentences_sharing_english_with_test(pairs, where)
    held_out_en = {en for en, zh in pairs if where[zh] != "train"}
    splits: dict[str, list[Pair]] = {name: [] for name in SPLITS}
    for en, zh in pairs:
        if where[zh] != "train" or en not in held_out_en:
            splits[where[zh]].append((en, zh))
    return splits


def _move_dev_sentences_sharing_english_with_test(pairs: list[Pair], where: dict[str, str]) -> None:
    """Sets ``where[zh] = "test"`` for each dev ``zh`` with an English variant in test.

    Repeats until no English is in both, since a moved sentence brings its other English
    variants along, and one of those may have another dev translation.
    """
    while True:
        test_en = {en for en, zh in pairs if where[zh] == "test"}
        moving = {zh for en, zh in pairs if where[zh] == "dev" and en in test_en}
        if not moving:
            return
        where.update(dict.fromkeys(moving, "test"))
