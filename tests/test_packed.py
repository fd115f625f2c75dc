"""Packing a model for CPU inference: an explicit, one-way step; the model code itself and
training multiply with plain ``nn.Linear`` / ``F.linear``, so no weight write is ever missed."""

import copy
import io
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from seq2seq import Transformer
from seq2seq.data import Tokenizer
from seq2seq.decoding.decode import generate_ids, translate_ids
from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.decoding.search import SearchConfig
from seq2seq.inference import packed as packing
from seq2seq.inference.checkpoint import load_model
from seq2seq.inference.engines import TorchEngine, token_rules
from seq2seq.inference.generation import Generator
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.packed import (
    PACKING_AVAILABLE,
    PackedEmbedding,
    PackedLinear,
    pack_for_cpu_inference,
)
from seq2seq.inference.translator import Translator
from tests.helpers import random_ids, synthetic_pairs, tiny_config

needs_packing = pytest.mark.skipif(not PACKING_AVAILABLE, reason="no oneDNN in this torch")
VOCAB = 3000  # float32 and a vocabulary of 3,000: the shapes real models decode with


def model_of(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(vocab_size=VOCAB, **overrides)).eval()


def packed_copy(model: Transformer) -> Transformer:
    return pack_for_cpu_inference(copy.deepcopy(model))


def is_packed(model: nn.Module) -> bool:
    linears = (m for m in model.modules() if type(m) is nn.Linear)
    return isinstance(model.embedding, PackedEmbedding) and next(linears, None) is None


def logits(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(tgt) if model.config.decoder_only else model(src, tgt)


def assert_float_close(a: torch.Tensor, b: torch.Tensor) -> None:
    """oneDNN and MKL sum in different orders: equal to float32 rounding, not bitwise."""
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


SRC, TGT = random_ids(3, 9, vocab=VOCAB, seed=1), random_ids(3, 6, vocab=VOCAB, seed=2)


# -- the unpacked model: plain nn.Linear, so every weight write is seen ----------------------


def write_through_data_copy(model: Transformer) -> None:
    for parameter in model.parameters():
        parameter.data.copy_(torch.randn_like(parameter) * 0.2)


def write_through_data_mul(model: Transformer) -> None:
    for parameter in model.parameters():
        parameter.data.mul_(2.0)


def fused_adam_step(model: Transformer) -> None:
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, fused=True)
    model(SRC, TGT).logsumexp(dim=-1).mean().backward()  # still in eval mode
    optimizer.step()


@pytest.mark.parametrize(
    "write", [write_through_data_copy, write_through_data_mul, fused_adam_step]
)
def test_an_unpacked_model_in_eval_mode_sees_writes_that_bump_no_version(write):
    model = model_of(seed=3)
    before = logits(model, SRC, TGT)  # an inference forward first, as a validation run does
    write(model)
    after = logits(model, SRC, TGT)
    fresh = Transformer(model.config).eval()
    fresh.load_state_dict(model.state_dict())
    assert not torch.allclose(before, after)
    assert torch.equal(after, logits(fresh, SRC, TGT))


def test_the_model_code_uses_plain_linear_layers():
    model = model_of()
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert linears and all(type(m) is nn.Linear for m in linears)
    hidden = torch.randn(2, 3, model.config.d_model)
    with torch.inference_mode():  # the tied projection too: F.linear, even at inference
        assert torch.equal(model.project(hidden), F.linear(hidden, model.embedding.weight))


# -- packing ---------------------------------------------------------------------------------


@needs_packing
def test_a_model_built_in_inference_mode_packs_and_runs():
    with torch.inference_mode():
        model = model_of(seed=4)
        plain = model(SRC, TGT)
    pack_for_cpu_inference(model)
    assert is_packed(model)
    with torch.no_grad():
        assert_float_close(model(SRC, TGT), plain)
    assert_float_close(logits(model, SRC, TGT), plain)


@needs_packing
@pytest.mark.parametrize("decoder_only", [False, True])
def test_the_packed_model_decodes_as_the_unpacked_one(decoder_only):
    overrides = {"decoder_only": True, "n_encoder_layers": 0} if decoder_only else {}
    model = model_of(seed=5, **overrides)
    packed = packed_copy(model)
    assert is_packed(packed) and not is_packed(model)
    assert_float_close(logits(packed, SRC, TGT), logits(model, SRC, TGT))
    if decoder_only:
        prompts = [[2, *row] for row in SRC.tolist()]
        greedy = SamplingConfig(temperature=0.0)
        assert generate_ids(packed, prompts, 8, greedy) == generate_ids(model, prompts, 8, greedy)
        return
    config = SearchConfig(max_len_a=0.0, max_len_b=8)
    for beam in (1, 4):
        ours = translate_ids(packed, SRC, beam, config)
        theirs = translate_ids(model, SRC, beam, config)
        assert [h[0].tokens for h in ours] == [h[0].tokens for h in theirs]


@needs_packing
def test_packing_swaps_every_linear_and_keeps_the_parameters_and_the_tie():
    model = model_of(seed=6, activation="swiglu")
    parameters = dict(model.named_parameters())
    embedding = model.embedding
    pack_for_cpu_inference(model)
    assert dict(model.named_parameters()) == parameters  # the very same Parameter objects
    assert model.embedding.weight is embedding.weight  # the tie: lookup and projection
    assert model.embedding.pad_id == embedding.pad_id and model.embedding.scale == embedding.scale
    assert {k for k in vars(embedding) if not k.startswith("_")} <= set(vars(model.embedding))
    n_linears = sum(isinstance(m, PackedLinear) for m in model.modules())
    assert n_linears == 2 * (2 + 3) + 2 * (5 + 3)  # attention: qkv, out (+ q, kv, out); SwiGLU
    assert not model.training and not any(p.requires_grad for p in model.parameters())


@needs_packing
def test_packing_reads_the_weights_once_and_forwards_never_pack(monkeypatch):
    model = model_of(seed=7)
    calls = []
    original = packing.pack_weight
    monkeypatch.setattr(packing, "pack_weight", lambda w: calls.append(w) or original(w))
    pack_for_cpu_inference(model)
    assert len(calls) == 1 + sum(isinstance(m, PackedLinear) for m in model.modules())
    translate_ids(model, SRC, 2, SearchConfig(max_len_a=0.0, max_len_b=4))
    assert len(calls) == 1 + sum(isinstance(m, PackedLinear) for m in model.modules())


@needs_packing
def test_packing_twice_changes_nothing():
    model = pack_for_cpu_inference(model_of(seed=8))
    modules = dict(model.named_modules())
    assert pack_for_cpu_inference(model) is model
    assert dict(model.named_modules()) == modules


def test_packing_is_a_no_op_off_cpu_float32():
    model = model_of(seed=9).double()
    pack_for_cpu_inference(model)
    assert not any(isinstance(m, (PackedLinear, PackedEmbedding)) for m in model.modules())
    assert all(p.requires_grad for p in model.parameters())


@needs_packing
def test_packing_leaves_the_state_dict_unchanged():
    model = model_of(seed=10)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    pack_for_cpu_inference(model)
    after = model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], before[k]) for k in before)
    torch.save(after, io.BytesIO())  # nothing packed (opaque, unsaveable) in it


@needs_packing
def test_a_packed_model_refuses_to_train_in_one_line():
    model = pack_for_cpu_inference(model_of(seed=11))
    with pytest.raises(RuntimeError, match="packed for CPU inference") as error:
        model.train()
    assert "\n" not in str(error.value)
    model.eval()  # still fine
    assert not any(m.training for m in model.modules() if isinstance(m, PackedLinear))


@needs_packing
def test_loads_conversions_copies_and_pickles_pack_again():
    model = pack_for_cpu_inference(model_of(seed=12))
    other = model_of(seed=13)
    model.load_state_dict(other.state_dict())
    assert_float_close(logits(model, SRC, TGT), logits(other, SRC, TGT))
    model.float().cpu()  # no change of device or dtype: packs the same weights again
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert is_packed(clone)
        assert_float_close(logits(clone, SRC, TGT), logits(other, SRC, TGT))
    with pytest.raises(ValueError, match="stays on the CPU in float32"):
        model.double()


# -- Translator and Generator pack what they load --------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    texts = [text for pair in synthetic_pairs() for text in pair]
    return Tokenizer.train(texts, vocab_size=456)  # the 256 byte pieces + 200


def write_checkpoint(path, tokenizer, task: str, **overrides):
    """A checkpoint as ``seq2seq fit`` writes it, with random weights."""
    torch.manual_seed(14)
    config = tiny_config(vocab_size=tokenizer.vocab_size, **overrides)
    model = Transformer(config)
    section = {"model_config": config.to_dict(), "tokenizer": tokenizer.to_bytes(), "task": task}
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    torch.save({"state_dict": state, "seq2seq": section}, path)
    return path


@needs_packing
def test_a_translator_from_a_checkpoint_decodes_with_packed_weights(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "mt.ckpt", tokenizer, "translation")
    translator = Translator.from_checkpoint(path)
    assert is_packed(translator.engine.model)
    loaded = load_model(path)
    engine = TorchEngine(loaded.model, loaded.search, token_rules(loaded.tokenizer))
    unpacked = Translator(engine, loaded.tokenizer)
    assert not is_packed(unpacked.engine.model)
    lines = [en for en, _ in synthetic_pairs()[:40:9]]
    for beam in (1, 3):
        assert translator.translate(lines, TranslateOptions(beam_size=beam)) == unpacked.translate(
            lines, TranslateOptions(beam_size=beam)
        )


@needs_packing
def test_a_generator_from_a_checkpoint_decodes_with_packed_weights(tmp_path, tokenizer):
    path = write_checkpoint(
        tmp_path / "lm.ckpt", tokenizer, "lm", decoder_only=True, n_encoder_layers=0
    )
    generator = Generator.from_checkpoint(path)
    assert is_packed(generator.model)
    loaded = load_model(path)
    unpacked = Generator(loaded.model, loaded.tokenizer, loaded.search)
    prompts = ["我们明天", "I will", ""]
    greedy = SamplingConfig(temperature=0.0)
    assert generator.generate(prompts, 12, greedy) == unpacked.generate(prompts, 12, greedy)
