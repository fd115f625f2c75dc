"""Token-budget batch sampler, collation and the resumable loader."""

import itertools

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
