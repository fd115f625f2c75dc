"""The packed-weight linear layer: same numbers as F.linear, remade when weights change."""

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F

from helpers import tiny_config
from seq2seq import Transformer
from seq2seq.linear import PACKING_AVAILABLE, Linear, uses_packed_weight

needs_packing = pytest.mark.skipif(not PACKING_AVAILABLE, reason="no oneDNN in this torch")


@needs_packing
def test_inference_uses_the_packed_weight_and_matches_f_linear():
    torch.manual_seed(0)
    layer = Linear(64, 96)
    x = torch.randn(5, 3, 64)
    with torch.inference_mode():
        assert uses_packed_weight(x, layer.weight)
        fast = layer(x)
    assert not uses_packed_weight(x, layer.weight)  # grad mode: plain F.linear
    torch.testing.assert_close(fast, F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
    assert not uses_packed_weight(x.double(), layer.weight.double())


@needs_packing
def test_the_packed_copy_follows_optimizer_steps_and_loaded_weights():
    torch.manual_seed(1)
    layer = Linear(32, 48)
    x = torch.randn(7, 32)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    for _ in range(2):  # inference, a training step, inference again
        with torch.no_grad():
            before = layer(x)
        layer(x).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            after = layer(x)
            expected = F.linear(x, layer.weight, layer.bias)
        assert not torch.allclose(before, after)
        torch.testing.assert_close(after, expected, rtol=1e-5, atol=1e-5)
    other = Linear(32, 48)
    layer.load_state_dict(other.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(layer(x), other(x), rtol=0, atol=0)
        layer(x)
        layer.weight.data = torch.zeros(48, 32)  # what module.to()/.double() do: no new version
        torch.testing.assert_close(layer(x), layer.bias.expand(7, 48), rtol=0, atol=0)
        layer.double().float()
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))


@needs_packing
def test_writes_that_bump_no_version_are_caught_by_train_and_eval():
    torch.manual_seed(3)
    layer = Linear(8, 4)
    x = torch.randn(3, 8)
    with torch.no_grad():
        layer(x)
    layer.weight.data.mul_(2.0)  # in place through .data (EMA code; fused optimizers): no version
    layer.eval()
    with torch.no_grad():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert not uses_packed_weight(x, layer.weight)  # autocast's precision, as F.linear


def test_copies_and_pickles_carry_no_packed_copy():
    layer = Linear(16, 8)
    with torch.no_grad():
        layer(torch.randn(2, 16))
    for clone in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        with torch.no_grad():
            clone.weight.add_(1.0)  # the clone's own weights, not the original's packed copy
            torch.testing.assert_close(
                clone(torch.ones(1, 16)), F.linear(torch.ones(1, 16), clone.weight, clone.bias)
            )
    assert set(layer.state_dict()) == {"weight", "bias"}


@needs_packing
def test_model_logits_at_inference_match_the_training_path():
    """The whole model (tied output projection included) with packed weights vs F.linear."""
    torch.manual_seed(2)
    model = Transformer(tiny_config(vocab_size=3000)).eval()
    src = torch.randint(4, 3000, (3, 9))
    tgt = torch.randint(4, 3000, (3, 6))
    with torch.inference_mode():
        fast = model(src, tgt)
    slow = model(src, tgt)  # grad mode: F.linear everywhere
    torch.testing.assert_close(fast, slow.detach(), rtol=1e-4, atol=1e-5)
