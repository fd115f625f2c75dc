"""The key/value cache: decoding step by step through it equals recomputing the whole sequence,
for every decoder style, encoder-decoder and decoder-only (the model is causal, so the cache may
keep past keys and values)."""

import pytest
import torch

from seq2seq.cache import KVCache
from tests.helpers import STYLES, random_ids, tiny_model

PAD = 0


@pytest.mark.parametrize("style", STYLES, ids=str)
@pytest.mark.parametrize("decoder_only", [False, True])
def test_every_style_is_causal_and_cached_decoding_equals_recomputation(style, decoder_only):
    model = tiny_model(decoder_only=decoder_only, **STYLES[style])
    src, tgt = random_ids(3, 6), random_ids(3, 10, seed=7)
    src[1, 4:] = PAD
    changed = tgt.clone()
    changed[:, 6:] = 5
    if decoder_only:
        full, memory, mask = model(tgt), None, None
        assert torch.allclose(model(changed)[:, :6], full[:, :6], atol=1e-10)
    else:
        full = model(src, tgt)
        memory, mask = model.encode(src), src != PAD
        assert torch.allclose(model(src, changed)[:, :6], full[:, :6], atol=1e-10)
    cache = model.init_cache(3, 16, memory, mask)
    steps = [model.decode(tgt[:, t : t + 1], cache=cache) for t in range(4)]
    steps.append(model.decode(tgt[:, 4:], cache=cache))
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-10)


def test_compact_and_join_go_on_decoding_as_separate_caches():
    """Rows kept by ``compact`` and rows joining by ``join`` decode what each would alone: the
    newcomers start at the cache's step, left-padded, with their sources padded wider."""
    model = tiny_model()
    src_a, tgt_a = random_ids(3, 6), random_ids(3, 9, seed=7)
    src_a[1, 4:] = PAD
    src_b, tgt_b = random_ids(2, 4, seed=3), random_ids(2, 5, seed=5)
    full_a, full_b = model(src_a, tgt_a), model(src_b, tgt_b)
    cache_a = model.init_cache(3, 16, model.encode(src_a), src_a != PAD)
    model.decode(tgt_a[:, :4], cache=cache_a)
    cache_b = model.init_cache(2, 0, model.encode(src_b), src_b != PAD)
    kept = cache_a.compact(torch.tensor([0, 2]), shift=0)
    assert kept.length == 4 and kept.cross_k.shape[1] == 2
    cache = KVCache.join([kept, cache_b], max_steps=torch.tensor([9, 9, 5, 5]))
    assert cache.pad_left.tolist() == [0, 0, 4, 4] and cache.max_len == 9
    assert cache.source_mask.shape == (4, 6) and not cache.source_mask[2:, 4:].any()
    for t in range(4):
        tokens = torch.cat([tgt_a[[0, 2], 4 + t], tgt_b[:, t]])[:, None]
        step = model.decode(tokens, cache=cache)[:, 0]
        assert torch.allclose(step[:2], full_a[[0, 2], 4 + t], atol=1e-10)
        assert torch.allclose(step[2:], full_b[:, t], atol=1e-10)
    # The newcomers alone, without the 4 padding slots they all share.
    alone = KVCache.join([cache.compact(torch.tensor([2, 3]), shift=4)], torch.tensor([5, 5]))
    assert alone.length == 4 and alone.pad_left.tolist() == [0, 0]
    step = model.decode(tgt_b[:, 4:5], cache=alone)[:, 0]
    assert torch.allclose(step, full_b[:, 4], atol=1e-10)


def test_compact_refuses_to_drop_real_tokens():
    model = tiny_model()
    src = random_ids(2, 5)
    cache = model.init_cache(2, 8, model.encode(src), src != PAD, pad_left=torch.tensor([1, 3]))
    model.decode(random_ids(2, 4, seed=1), cache=cache)
    assert cache.compact(torch.tensor([0, 1]), shift=1).pad_left.tolist() == [0, 2]
    with pytest.raises(ValueError, match="real tokens"):
        cache.compact(torch.tensor([0, 1]), shift=2)
