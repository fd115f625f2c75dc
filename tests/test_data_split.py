"""The fixed hash split: deterministic, keyed on Chinese, leak-free."""

import hashlib
import random

from seq2seq.data import split_pairs
from seq2seq.data.split import bucket, split_name


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
        expected = [p for p in pairs if split_name(p[1]) == name]
        assert splits[name] == expected


def test_no_leakage_into_train():
    splits = split_pairs(synthetic_pairs())
    held_out_en = {en for name in ("dev", "test") for en, _ in splits[name]}
    held_out_zh = {zh for name in ("dev", "test") for _, zh in splits[name]}
    assert held_out_en and held_out_zh
    assert not any(en in held_out_en or zh in held_out_zh for en, zh in splits["train"])
    dropped = [p for p in synthetic_pairs() if split_name(p[1]) == "train" and p[0] in held_out_en]
    assert dropped, "the synthetic data should exercise the English-overlap rule"
