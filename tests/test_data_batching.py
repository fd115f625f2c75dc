"""Token-budget batch sampler, collation and the resumable loader."""

import itertools
import tracemalloc

import numpy as np
import pytest
import torch

from seq2seq.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Batch,
    TokenBatchLoader,
    TokenBatchSampler,
    collate,
    padding_fraction,
)
from seq2seq.data.permutation import keyed_permutation

MAX_TOKENS = 256


@pytest.fixture(scope="module")
def lengths():
    # Roughly the shape of real sentence lengths: mostly short, a long tail.
    rng = np.random.default_rng(0)
    return (rng.gamma(3.0, 4.0, size=3000).astype(int) + 2).clip(max=MAX_TOKENS).tolist()


def batches(sampler, epoch=0):
    sampler.set_epoch(epoch)
    return list(sampler)


def test_batches_respect_budget_and_cover_each_example_once(lengths):
    sampler = TokenBatchSampler(lengths, MAX_TOKENS, seed=3)
    for epoch in range(2):
        got = batches(sampler, epoch)
        assert len(got) == len(sampler)
        assert all(len(b) * max(lengths[i] for i in b) <= MAX_TOKENS for b in got)
        assert sorted(itertools.chain.from_iterable(got)) == list(range(len(lengths)))


def test_epochs_differ_same_seed_and_epoch_repeat(lengths):
    a, b = (
        TokenBatchSampler(lengths, MAX_TOKENS, seed=3),
        TokenBatchSampler(lengths, MAX_TOKENS, seed=3),
    )
    assert batches(a, 0) == batches(b, 0)
    assert batches(a, 1) == batches(b, 1)
    assert batches(a, 0) != batches(a, 1)
    # Composition changes too, not just the order of batches.
    assert {tuple(sorted(x)) for x in batches(a, 0)} != {tuple(sorted(x)) for x in batches(a, 1)}
    assert batches(a, 0) != batches(TokenBatchSampler(lengths, MAX_TOKENS, seed=4), 0)


def test_no_shuffle_is_fixed_and_sorted(lengths):
    sampler = TokenBatchSampler(lengths, MAX_TOKENS, shuffle=False)
    first = batches(sampler, 0)
    assert first == batches(sampler, 5)
    maxima = [max(lengths[i] for i in b) for b in first]
    assert maxima == sorted(maxima)


@pytest.mark.parametrize("n_examples", [3000, 2999, 7])
def test_two_ranks_disjoint_and_equal_counts(lengths, n_examples):
    lens = lengths[:n_examples]
    ranks = [TokenBatchSampler(lens, MAX_TOKENS, seed=1, num_replicas=2, rank=r) for r in (0, 1)]
    for epoch in (0, 1):
        per_rank = [batches(s, epoch) for s in ranks]
        assert len(per_rank[0]) == len(per_rank[1]) == len(ranks[0]) == len(ranks[1])
        seen = [set(itertools.chain.from_iterable(b)) for b in per_rank]
        assert seen[0] | seen[1] == set(range(n_examples))
        n_global = len(ranks[0].global_batches(epoch))
        if n_global % 2 == 0:
            assert not seen[0] & seen[1]
        else:  # one batch is repeated to even out the counts; nothing else is shared
            repeated = set(per_rank[1][-1])
            assert seen[0] & seen[1] <= repeated


def test_more_ranks_than_batches_never_leaves_a_rank_empty():
    ranks = [TokenBatchSampler([5, 5, 5], 16, num_replicas=4, rank=r) for r in range(4)]
    assert [len(list(s)) for s in ranks] == [1, 1, 1, 1]


@pytest.mark.parametrize("n_ranks", [1, 2, 3])
@pytest.mark.parametrize("n_examples", [3000, 7, 2])
def test_validation_batches_count_every_example_once_over_the_ranks(lengths, n_examples, n_ranks):
    """No padding for validation: a repeated dev batch would count its sentences twice."""
    lens = lengths[:n_examples]
    ranks = [
        TokenBatchSampler(lens, MAX_TOKENS, shuffle=False, num_replicas=n_ranks, rank=r)
        for r in range(n_ranks)
    ]
    per_rank = [list(sampler) for sampler in ranks]
    assert [len(b) for b in per_rank] == [len(sampler) for sampler in ranks]
    every = [i for batches_of_rank in per_rank for batch in batches_of_rank for i in batch]
    assert sorted(every) == list(range(n_examples))  # each exactly once
    if n_examples >= n_ranks:
        assert all(per_rank)  # no rank without a batch (it would skip validation's collectives)


def test_bucketing_cuts_padding(lengths):
    sampler = TokenBatchSampler(lengths, MAX_TOKENS, seed=0)
    bucketed = padding_fraction(batches(sampler), lengths)
    # Same batch sizes, random membership.
    perm = np.random.default_rng(0).permutation(len(lengths)).tolist()
    sizes = [len(b) for b in batches(sampler)]
    cuts = np.cumsum([0, *sizes])
    random_batches = [perm[s:e] for s, e in itertools.pairwise(cuts)]
    random_padding = padding_fraction(random_batches, lengths)
    assert bucketed < 0.05 and random_padding > 0.4
    assert sampler.padding_fraction() == pytest.approx(bucketed)


def test_overlong_example_rejected():
    with pytest.raises(ValueError, match="exceeds max_tokens"):
        TokenBatchSampler([3, 300], max_tokens=256)


def test_sampler_resume_mid_epoch(lengths):
    full = TokenBatchSampler(lengths, MAX_TOKENS, seed=7)
    full.set_epoch(2)
    expected = list(full)

    first = TokenBatchSampler(lengths, MAX_TOKENS, seed=7)
    first.set_epoch(2)
    head = list(itertools.islice(iter(first), 5))
    state = first.state_dict()
    assert state == {"epoch": 2, "batches_yielded": 5}

    resumed = TokenBatchSampler(lengths, MAX_TOKENS, seed=7)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # Lightning re-sets the same epoch after restoring: must not reset
    it = iter(resumed)
    middle = list(itertools.islice(it, 3))
    # A second save/restore inside the same epoch keeps counting from the epoch start.
    assert resumed.state_dict() == {"epoch": 2, "batches_yielded": 8}
    again = TokenBatchSampler(lengths, MAX_TOKENS, seed=7)
    again.load_state_dict(resumed.state_dict())
    assert head + middle + list(again) == expected
    again.set_epoch(3)
    assert list(again) == batches(full, 3)


def reference_batch_sizes(lengths, max_tokens):
    """The greedy rule written plainly: walk the ascending lengths, cut before the example
    that would take the batch over budget (the newest example sets the padded width)."""
    sizes, size = [], 0
    for length in sorted(lengths):
        if (size + 1) * length > max_tokens:
            sizes.append(size)
            size = 0
        size += 1
    return sizes + [size] if size else sizes


def random_lengths(n, high, seed=0):
    return np.random.default_rng(seed).integers(1, high + 1, n).tolist()


@pytest.mark.parametrize(
    ("lengths", "max_tokens"),
    [
        ([7] * 500, 64),  # one group
        ([8] * 64, 64),  # one group, budget a multiple of the length
        (random_lengths(3000, 200, seed=1), 256),  # many groups
        (random_lengths(3000, 256, seed=2), 256),  # the longest length equals the budget
        (random_lengths(500, 16, seed=3), 16),  # budget equal to a length, few groups
        (random_lengths(2000, 5, seed=4), 1000),  # batches spanning many groups
        ([3, 3, 4, 4, 4, 5, 9, 9], 12),
        ([5], 5),
    ],
)
def test_boundaries_match_the_plain_greedy_rule(lengths, max_tokens):
    unshuffled = TokenBatchSampler(lengths, max_tokens, shuffle=False)
    got = unshuffled.global_batches()
    assert [len(b) for b in got] == reference_batch_sizes(lengths, max_tokens)
    # Shortest first, ties in index order: the stable sort, cut into runs.
    assert list(itertools.chain.from_iterable(got)) == np.argsort(lengths, kind="stable").tolist()
    # Shuffling only permutes ties and the batch order, never the boundaries.
    shuffled = TokenBatchSampler(lengths, max_tokens, seed=5).global_batches()
    assert sorted(map(len, shuffled)) == sorted(map(len, got))
    assert sorted(sorted(lengths[i] for i in b) for b in shuffled) == sorted(
        sorted(lengths[i] for i in b) for b in got
    )


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000, 4097])
@pytest.mark.parametrize("key", [0, 1, 12345, 2**64 - 1])
def test_keyed_permutation_is_a_bijection(size, key):
    image = keyed_permutation(np.arange(size), size, key)
    assert sorted(image.tolist()) == list(range(size))
    # Evaluating a few positions gives the same images as evaluating all of them.
    some = np.arange(size)[size // 3 : size // 3 + 5]
    assert keyed_permutation(some, size, key).tolist() == image[some].tolist()


def test_keyed_permutation_depends_on_the_key():
    images = {tuple(keyed_permutation(np.arange(1000), 1000, key).tolist()) for key in range(5)}
    assert len(images) == 5
    assert images != {tuple(range(1000))}


def test_ties_are_broken_differently_each_epoch_and_not_without_shuffle():
    lengths = [4] * 300  # one length: every batch is a choice among ties
    shuffled = TokenBatchSampler(lengths, 64, seed=0)
    compositions = [{frozenset(b) for b in shuffled.global_batches(e)} for e in range(3)]
    assert compositions[0] != compositions[1] != compositions[2]
    unshuffled = TokenBatchSampler(lengths, 64, shuffle=False)
    assert unshuffled.global_batches() == [
        list(range(s, min(s + 16, 300))) for s in range(0, 300, 16)
    ]


@pytest.mark.parametrize("lengths", [random_lengths(2000, 40), [6] * 1000, [1, 2] * 700])
def test_each_epoch_covers_every_example_once_within_budget(lengths):
    sampler = TokenBatchSampler(lengths, 100, seed=2)
    for epoch in range(4):
        got = sampler.global_batches(epoch)
        assert sorted(itertools.chain.from_iterable(got)) == list(range(len(lengths)))
        assert all(len(b) * max(lengths[i] for i in b) <= 100 for b in got)
        # Within a batch the examples ascend in length, as in the sorted order.
        assert all([lengths[i] for i in b] == sorted(lengths[i] for i in b) for b in got)


@pytest.mark.parametrize("n_ranks", [2, 3])
@pytest.mark.parametrize("n_examples", [3000, 2999, 7])
def test_ranks_together_are_the_padded_global_list(lengths, n_ranks, n_examples):
    lens = lengths[:n_examples]
    ranks = [
        TokenBatchSampler(lens, MAX_TOKENS, seed=4, num_replicas=n_ranks, rank=r)
        for r in range(n_ranks)
    ]
    for epoch in (0, 1):
        global_list = ranks[0].global_batches(epoch)
        padded_total = len(ranks[0]) * n_ranks
        assert 0 <= padded_total - len(global_list) < n_ranks
        padded = [global_list[i % len(global_list)] for i in range(padded_total)]
        per_rank = [sampler.rank_batches(epoch) for sampler in ranks]
        assert per_rank == [batches(sampler, epoch) for sampler in ranks]  # lazy == eager
        assert [per_rank[i % n_ranks][i // n_ranks] for i in range(padded_total)] == padded
        # Disjoint apart from the repeats that pad the list.
        seen = [set(itertools.chain.from_iterable(b)) for b in per_rank]
        repeats = set(itertools.chain.from_iterable(padded[len(global_list) :]))
        for a, b in itertools.combinations(seen, 2):
            assert a & b <= repeats


@pytest.mark.parametrize("shuffle", [True, False])
def test_precomputed_memmapped_order_gives_the_same_batches(lengths, tmp_path, shuffle):
    np.save(tmp_path / "lengths.npy", np.asarray(lengths, dtype=np.uint16))
    np.save(tmp_path / "order.npy", np.argsort(lengths, kind="stable"))
    stored_lengths = np.load(tmp_path / "lengths.npy", mmap_mode="r")
    stored_order = np.load(tmp_path / "order.npy", mmap_mode="r")
    stored = TokenBatchSampler(
        stored_lengths, MAX_TOKENS, shuffle=shuffle, seed=1, order=stored_order
    )
    computed = TokenBatchSampler(lengths, MAX_TOKENS, shuffle=shuffle, seed=1)
    for epoch in (0, 1):
        assert stored.global_batches(epoch) == computed.global_batches(epoch)
        assert batches(stored, epoch) == batches(computed, epoch)
    assert stored.padding_fraction() == computed.padding_fraction()


def test_an_order_for_other_lengths_is_rejected(lengths):
    with pytest.raises(ValueError, match="does not sort lengths"):
        TokenBatchSampler(lengths, MAX_TOKENS, order=np.arange(len(lengths)))
    with pytest.raises(ValueError, match="shape"):
        TokenBatchSampler(lengths, MAX_TOKENS, order=np.arange(len(lengths) - 1))


@pytest.mark.parametrize(
    ("shuffle", "n_ranks", "n_examples"), [(True, 1, 3000), (False, 1, 3000), (False, 4, 3)]
)
def test_padding_fraction_equals_the_explicit_count(lengths, shuffle, n_ranks, n_examples):
    lens = lengths[:n_examples]  # 3 examples over 4 ranks: runs halved so every rank validates
    sampler = TokenBatchSampler(lens, MAX_TOKENS, shuffle=shuffle, num_replicas=n_ranks)
    for epoch in (0, 1):
        explicit = padding_fraction(sampler.global_batches(epoch), lens)
        assert sampler.padding_fraction(epoch) == pytest.approx(explicit, abs=1e-12)


def test_no_examples():
    sampler = TokenBatchSampler([], MAX_TOKENS)
    assert len(sampler) == 0 and list(sampler) == [] and sampler.global_batches() == []
    assert sampler.padding_fraction() == 0.0


def test_resume_skips_batches_without_computing_them(lengths, monkeypatch):
    sampler = TokenBatchSampler(lengths, MAX_TOKENS, seed=7, num_replicas=2, rank=1)
    sampler.set_epoch(1)
    expected = list(sampler)
    calls = []
    members = TokenBatchSampler._members
    monkeypatch.setattr(
        TokenBatchSampler, "_members", lambda self, *a: calls.append(a) or members(self, *a)
    )
    resumed = TokenBatchSampler(lengths, MAX_TOKENS, seed=7, num_replicas=2, rank=1)
    resumed.load_state_dict({"epoch": 1, "batches_yielded": 10})
    assert list(resumed) == expected[10:]
    assert len(calls) == len(expected) - 10


def test_large_corpus_keeps_only_per_batch_state(tmp_path):
    """3M examples: no per-example Python objects or private arrays survive construction, and
    the first batch is computed alone."""
    n = 3_000_000
    rng = np.random.default_rng(0)
    lengths = (rng.gamma(3.0, 4.0, size=n) + 2).clip(max=200).astype(np.uint16)
    np.save(tmp_path / "lengths.npy", lengths)
    np.save(tmp_path / "order.npy", np.argsort(lengths, kind="stable"))
    del lengths
    stored_lengths = np.load(tmp_path / "lengths.npy", mmap_mode="r")
    stored_order = np.load(tmp_path / "order.npy", mmap_mode="r")
    tracemalloc.start()
    try:
        sampler = TokenBatchSampler(
            stored_lengths, 6250, seed=0, num_replicas=2, rank=1, order=stored_order
        )
        kept, _ = tracemalloc.get_traced_memory()
        first = next(iter(sampler))
    finally:
        tracemalloc.stop()
    assert len(sampler._starts) < n / 10
    assert kept < n  # under a byte per example: nothing of size N is held
    assert len(first) * int(stored_lengths[first].max()) <= 6250


def test_collate_shapes_and_specials():
    batch = collate([([5, 6, 7], [8, 9]), ([10], [11, 12, 13])])
    assert batch.src.tolist() == [[5, 6, 7], [10, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, 9, PAD_ID], [BOS_ID, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[8, 9, EOS_ID, PAD_ID], [11, 12, 13, EOS_ID]]
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (4, 7)
    assert batch.n_tgt_tokens == int((batch.tgt_out != PAD_ID).sum())
    assert len(batch) == 2


def test_batch_moves_with_lightning_transfer():
    from lightning.fabric.utilities.apply_func import move_data_to_device

    batch = collate([([5, 6], [7])])
    moved = move_data_to_device(batch, torch.device("meta"))
    assert isinstance(moved, Batch)
    assert moved.src.device.type == moved.tgt_in.device.type == moved.tgt_out.device.type == "meta"
    assert moved.n_tgt_tokens == batch.n_tgt_tokens


def toy_examples(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (
            rng.integers(4, 50, rng.integers(1, 20)).tolist(),
            rng.integers(4, 50, rng.integers(1, 20)).tolist(),
        )
        for _ in range(n)
    ]


def loader_for(examples, num_workers=0, seed=0):
    lens = [max(len(s), len(t)) + 1 for s, t in examples]
    return TokenBatchLoader(
        examples, TokenBatchSampler(lens, 64, seed=seed), num_workers=num_workers
    )


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_state_counts_delivered_batches(num_workers):
    examples = toy_examples()
    reference = [b.src.tolist() for b in loader_for(examples)]
    loader = loader_for(examples, num_workers=num_workers)
    loader.set_epoch(0)
    it = iter(loader)
    head = [next(it).src.tolist() for _ in range(4)]
    # With workers the sampler runs ahead (prefetch); the loader must report what it delivered.
    state = loader.state_dict()
    assert state == {"epoch": 0, "batches_yielded": 4}
    del it
    resumed = loader_for(examples, num_workers=num_workers)
    resumed.load_state_dict(state)
    resumed.set_epoch(0)
    assert head + [b.src.tolist() for b in resumed] == reference
    assert len(resumed) == len(reference)
    resumed.set_epoch(1)
    assert resumed.state_dict() == {"epoch": 1, "batches_yielded": 0}
