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

On a big corpus this runs on arrays: each sentence is an integer id (:func:`dense_ids` of its
128-bit hash, :func:`seq2seq.data.clean.text_key`) and :func:`split_codes` assigns every pair
with a few vectorised passes, never a Python set of strings; :func:`split_pairs` is the same
rule for a list of pairs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

Pair = tuple[str, str]

SPLITS = ("train", "dev", "test")
TRAIN, DEV, TEST = 0, 1, 2  # split_codes' codes: indices into SPLITS
DROPPED = -1  # a training pair whose English is held out
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
    en_ids = _ids_of([en for en, _ in pairs])
    zh_ids = _ids_of([zh for _, zh in pairs])
    buckets = np.fromiter((bucket(zh) for _, zh in pairs), dtype=np.int64, count=len(pairs))
    codes = split_codes(en_ids, zh_ids, buckets)
    return {
        name: [pair for pair, code in zip(pairs, codes, strict=True) if code == i]
        for i, name in enumerate(SPLITS)
    }


def _ids_of(texts: list[str]) -> np.ndarray:
    """Integer ids of texts, equal for equal texts."""
    ids: dict[str, int] = {}
    return np.asarray([ids.setdefault(text, len(ids)) for text in texts], dtype=np.int64)


def split_codes(en_ids: np.ndarray, zh_ids: np.ndarray, zh_buckets: np.ndarray) -> np.ndarray:
    """Each pair's split: :data:`TRAIN`, :data:`DEV`, :data:`TEST` or :data:`DROPPED`.

    Args:
        en_ids: (N,) integer id of each pair's English sentence (equal ids: equal sentences).
        zh_ids: (N,) integer id of each pair's Chinese sentence.
        zh_buckets: (N,) hash bucket of each pair's Chinese sentence (:func:`bucket`).

    Returns:
        (N,) int8 codes, by the rules of the module docstring.
    """
    codes = bucket_codes(zh_buckets)
    # Rule 1, repeated: a moved sentence brings its other English variants along, and one of
    # those may have another dev translation.
    while True:
        moving = (codes == DEV) & np.isin(en_ids, en_ids[codes == TEST])
        if not moving.any():
            break
        codes[np.isin(zh_ids, zh_ids[moving])] = TEST  # every variant of a moving sentence
    # Rule 2: no training pair whose English is held out.
    codes[(codes == TRAIN) & np.isin(en_ids, en_ids[codes != TRAIN])] = DROPPED
    return codes


def bucket_codes(buckets: np.ndarray) -> np.ndarray:
    """(N,) int8 :data:`TRAIN`, :data:`DEV` or :data:`TEST` of each hash bucket, as
    :func:`split_name` names them."""
    buckets = np.asarray(buckets)
    codes = np.full(len(buckets), TRAIN, dtype=np.int8)
    codes[buckets < DEV_BUCKETS] = DEV
    codes[buckets < TEST_BUCKETS] = TEST
    return codes


def first_occurrences(ids: np.ndarray) -> np.ndarray:
    """The ascending indices of the first occurrence of each distinct value of ``ids``."""
    _, first = np.unique(ids, return_index=True)  # a stable sort: the first of equal values
    first.sort()
    return first


def bucket_of_keys(key_hi: np.ndarray) -> np.ndarray:
    """:func:`bucket` of each sentence from the first half of its key
    (:func:`seq2seq.data.clean.text_key`): the top 32 bits are SHA-256's first 8 hex digits."""
    return (np.asarray(key_hi, dtype=np.uint64) >> np.uint64(32)) % np.uint64(N_BUCKETS)


def dense_ids(key_hi: np.ndarray, key_lo: np.ndarray) -> np.ndarray:
    """(N,) int64 ids numbering the distinct 128-bit keys ``(key_hi, key_lo)`` 0, 1, 2, …
    (in key order): equal keys get equal ids, so sentences compare as integers."""
    order = np.lexsort((key_lo, key_hi))  # sorts by key_hi, then key_lo
    new = np.ones(len(order), dtype=bool)
    for key in (key_hi, key_lo):  # one sorted copy at a time
        in_order = key[order]
        new[1:] &= in_order[1:] == in_order[:-1]
        del in_order
    new[1:] = ~new[1:]  # a new key where either half differs from the previous one's
    ids = np.empty(len(order), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids
