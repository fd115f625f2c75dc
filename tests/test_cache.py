"""The key/value cache: decoding step by step through it equals recomputing the whole sequence,
for every decoder style, encoder-decoder and decoder-only (the model is causal, so the cache may
keep past keys and values)."""

import pytest
import torch

from helpers import STYLES, random_ids, tiny_model

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
