"""The modern decoder options (RMSNorm, learned/rotary positions, GELU/SwiGLU, no biases) and
decoder-only decoding: causality, cache exactness, left-padded prompts, sampling."""

import math

import pytest
import torch

from helpers import random_ids, tiny_model
from seq2seq.attention import apply_rotary
from seq2seq.embedding import RotaryPositions
from seq2seq.generation import Generator
from seq2seq.layers import RMSNorm
from seq2seq.scoring import PromptScorer, generate_ids, special_tokens, translate_ids
from seq2seq.search import SamplingConfig, SearchConfig, greedy_search

PAD, UNK, BOS, EOS, SEP = 0, 1, 2, 3, 4
GPT = {"norm_first": True, "activation": "gelu", "positions": "learned"}
LLAMA = {"norm_first": True, "norm": "rmsnorm", "positions": "rope", "activation": "swiglu",
         "bias": False}  # fmt: skip
STYLES = {"paper": {}, "gpt": GPT, "llama": LLAMA}


def test_rmsnorm_matches_its_formula():
    norm = RMSNorm(6, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.arange(1.0, 7.0))
    x = torch.randn(3, 4, 6)
    rms = torch.sqrt((x**2).mean(dim=-1, keepdim=True) + 1e-6)
    assert torch.allclose(norm(x), x / rms * torch.arange(1.0, 7.0), atol=1e-6)
    # No centring: a constant vector keeps its sign and size (LayerNorm would zero it).
    assert torch.allclose(RMSNorm(6)(torch.full((6,), 3.0)), torch.ones(6), atol=1e-5)


def test_rotary_attention_scores_depend_only_on_relative_position():
    rotary = RotaryPositions(max_positions=200, head_dim=8).double()
    q, k = torch.randn(1, 2, 10, 8, dtype=torch.float64), torch.randn(1, 2, 10, 8).double()
    positions = torch.arange(10)

    def scores(offset: int) -> torch.Tensor:
        cos_sin = rotary(positions + offset)
        return apply_rotary(q, cos_sin) @ apply_rotary(k, cos_sin).transpose(-1, -2)

    assert torch.allclose(scores(0), scores(37), atol=1e-5)  # float32 tables
    assert torch.allclose(scores(0), scores(150), atol=1e-5)
    assert not torch.allclose(scores(0), q @ k.transpose(-1, -2))  # it does rotate
    # Each pair of dimensions is a plane rotation: lengths are kept.
    rotated = apply_rotary(q, rotary(positions + 5))
    assert torch.allclose(rotated.norm(dim=-1), q.norm(dim=-1), atol=1e-5)


def test_style_options_build_the_named_parts():
    gpt, llama = tiny_model(**GPT), tiny_model(**LLAMA)
    assert [n for n, _ in gpt.named_parameters() if n.startswith("positions")] == [
        "positions.weight"
    ]
    llama_names = [n for n, _ in llama.named_parameters()]
    assert not any(n.endswith("bias") for n in llama_names)
    assert "decoder.layers.0.feed_forward.linear3.weight" in llama_names  # SwiGLU's W3
    assert isinstance(llama.decoder.layers[0].norm1, RMSNorm)
    assert llama.positions is None and llama.rotary is not None
    # Still one tied embedding for source, target and output.
    assert sum(p.shape[0] == 40 for p in llama.parameters()) == 1


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


@pytest.mark.parametrize("style", STYLES, ids=str)
def test_left_padded_prompts_give_each_prompt_its_own_logits(style):
    """Prompts of different lengths in one batch: padding is masked and positions start at
    each prompt's first token, so every row matches the prompt run alone."""
    model = tiny_model(decoder_only=True, **STYLES[style])
    prompts = [[BOS, 7, 8], [BOS, 9, 10, 11, 12, 13, 14], [BOS]]
    together = PromptScorer(model, prompts, beam_size=1, max_new=4)
    first = together(torch.zeros(3, dtype=torch.long))
    then = together(torch.tensor([20, 21, 22]))
    for row, prompt in enumerate(prompts):
        alone = model(torch.tensor([[*prompt, 20 + row]]))[0].float()  # logits
        assert torch.allclose(first[row], alone[-2], atol=1e-5)
        assert torch.allclose(then[row], alone[-1], atol=1e-5)


def naive_greedy(model, prompt: list[int], steps: int) -> list[int]:
    """Recompute the whole sequence for every new token: no cache at all."""
    ids = list(prompt)
    for step in range(steps):
        logits = model(torch.tensor([ids]))[0, -1]
        logits[[PAD, UNK, BOS] + ([EOS] if step == 0 else [])] = -math.inf
        ids.append(int(logits.argmax()))
        if ids[-1] == EOS:
            break
    new = ids[len(prompt) :]
    return new[:-1] if new and new[-1] == EOS else new


@pytest.mark.parametrize("style", STYLES, ids=str)
def test_cached_generation_equals_uncached(style):
    model = tiny_model(seed=3, decoder_only=True, **STYLES[style])
    prompts = [[BOS, 5, 6, 7], [BOS, 9], [BOS, 11, 12, 13, 14, 15]]
    cached = generate_ids(model, prompts, 12, SamplingConfig(temperature=0.0))
    assert cached == [naive_greedy(model, p, 12) for p in prompts]
    assert max(map(len, cached)) == 12  # an untrained model runs to the limit: a real test


def test_generation_seed_temperature_and_beam():
    model = tiny_model(seed=4, decoder_only=True, **LLAMA)
    prompts = [[BOS, 5, 6], [BOS, 7]]
    sample = SamplingConfig(temperature=1.0, top_k=8, top_p=0.9, seed=11)
    assert generate_ids(model, prompts, 10, sample) == generate_ids(model, prompts, 10, sample)
    other = generate_ids(model, prompts, 10, SamplingConfig(seed=12))
    assert other != generate_ids(model, prompts, 10, sample)
    greedy = generate_ids(model, prompts, 10, SamplingConfig(temperature=0.0))
    cold = generate_ids(model, prompts, 10, SamplingConfig(temperature=1e-5, seed=1))
    assert cold == greedy  # temperature -> 0 is greedy
    beam1 = generate_ids(model, prompts, 10, beam_size=1, sampling=SamplingConfig(temperature=0))
    assert beam1 == greedy
    beam4 = generate_ids(model, prompts, 10, beam_size=4)
    assert all(len(row) <= 10 for row in beam4)
    streamed = []
    generate_ids(model, [prompts[0]], 10, SamplingConfig(temperature=0.0),
                 on_token=lambda t: streamed.append(int(t[0])))  # fmt: skip
    assert streamed[: len(greedy[0])] == greedy[0]


def test_a_seed_gives_a_prompt_the_same_text_at_the_same_index_whatever_its_neighbours():
    model = tiny_model(seed=4, decoder_only=True, **LLAMA)
    x, y, z = [BOS, 5, 6], [BOS, 7], [BOS, 9, 10, 11, 12]
    sample = SamplingConfig(temperature=1.0, top_p=0.95, seed=11)
    alone = generate_ids(model, [x], 10, sample)[0]
    assert generate_ids(model, [x, y, z], 10, sample)[0] == alone
    assert generate_ids(model, [x, z], 10, sample)[0] == alone
    # Index 2 has its own stream: the same there alone (indices=[2]) or with neighbours.
    third = generate_ids(model, [x], 10, sample, indices=[2])[0]
    assert generate_ids(model, [y, z, x], 10, sample)[2] == third
    assert generate_ids(model, [y, z, x], 10, SamplingConfig(seed=12))[2] != third


class CharTokenizer:
    """Letters a-z are ids 4-29; enough of a tokenizer for ``Generator``."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) - ord("a") + 4 for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i - 4 + ord("a")) if 4 <= i < 30 else "#" for i in ids if i > EOS)


def test_generator_seeds_each_prompt_by_its_index_in_the_input_not_in_its_batch():
    model = tiny_model(seed=4, decoder_only=True, **LLAMA)
    generator = Generator(model, CharTokenizer(), SearchConfig())
    sample = SamplingConfig(seed=3)
    alone = generator.generate(["ab"], 8, sample)[0]
    # Batches put the longest prompt first: "ab" is row 1 of its batch, or in a batch alone.
    assert generator.generate(["ab", "cdefg"], 8, sample)[0] == alone
    assert generator.generate(["ab", "cdefg"], 8, sample, max_tokens=20)[0] == alone


def test_generation_adds_at_least_one_token_and_never_unk():
    model = tiny_model(seed=4, decoder_only=True)
    bias = torch.zeros(model.config.vocab_size, dtype=torch.float64)
    bias[[UNK, EOS]] = 50.0  # the model would rather end at once, or say <unk>
    original = model.project
    model.project = lambda states: original(states) + bias
    prompts = [[BOS, 5, 6], [BOS]]
    for options in ({"sampling": SamplingConfig(seed=1)}, {"beam_size": 3},
                    {"sampling": SamplingConfig(temperature=0.0)}):  # fmt: skip
        for new in generate_ids(model, prompts, 5, **options):
            assert len(new) == 1 and UNK not in new


def test_generation_stops_at_the_models_last_position():
    model = tiny_model(decoder_only=True, max_positions=16)
    out = generate_ids(model, [[BOS, 5, 6, 7, 8, 9]], 100, SamplingConfig(temperature=0.0))
    assert len(out[0]) <= 16 - 6
    with pytest.raises(ValueError, match="fills all 16 positions"):
        generate_ids(model, [[BOS] + [5] * 15 + [6]], 5, SamplingConfig(temperature=0.0))
    with pytest.raises(ValueError, match="decoder-only"):
        generate_ids(tiny_model(), [[BOS]], 5)


def _decoder_only_translation_model(sep_id=SEP):
    return tiny_model(seed=5, decoder_only=True, sep_id=sep_id, **GPT)


def test_decoder_only_translation_beam_one_is_greedy_and_batching_does_not_matter():
    model = _decoder_only_translation_model()
    config = SearchConfig(max_len_a=1.0, max_len_b=4)
    src = random_ids(3, 6, seed=9)
    src[0, 3:] = PAD
    src[2, 5:] = PAD
    greedy = translate_ids(model, src, beam_size=1, config=config)
    # Greedy from the prompt [bos] src [sep], recomputing every step, gives the same.
    for row, hyps in zip(src.tolist(), greedy, strict=True):
        source = [t for t in row if t != PAD]
        expected = naive_greedy(model, [BOS, *source, SEP], len(source) + 4)
        assert hyps[0].tokens == expected[: len(source) + 3]
    alone = [translate_ids(model, src[i : i + 1], beam_size=4, config=config) for i in range(3)]
    together = translate_ids(model, src, beam_size=4, config=config)
    assert [h[0].tokens for h in together] == [a[0][0].tokens for a in alone]


def test_decoder_only_translation_needs_the_separator():
    with pytest.raises(ValueError, match="sep_id"):
        translate_ids(_decoder_only_translation_model(None), random_ids(1, 4), beam_size=1)


def test_greedy_search_over_prompt_scorer_matches_generate():
    model = tiny_model(seed=6, decoder_only=True)
    prompts = [[BOS, 5, 6], [BOS, 8, 9, 10]]
    scorer = PromptScorer(model, prompts, beam_size=1, max_new=9)
    hyps = greedy_search(scorer, torch.full((2,), 9), special_tokens(model.config))
    expected = generate_ids(model, prompts, 8, SamplingConfig(temperature=0.0))
    assert [h.tokens for h in hyps] == expected


def test_a_long_neighbour_never_shortens_a_rows_limit():
    """Near max_positions, each row keeps its own room: the same output alone or batched."""
    model = tiny_model(seed=7, decoder_only=True, max_positions=40, sep_id=SEP)
    config = SearchConfig(max_len_a=1.0, max_len_b=8)
    src = random_ids(2, 25, seed=11)
    src[0, 6:] = PAD  # 6 tokens: limit 14; the 25-token neighbour leaves only 40 - 27 = 13
    together = translate_ids(model, src, beam_size=1, config=config)
    alone = translate_ids(model, src[:1, :6], beam_size=1, config=config)
    assert together[0][0].tokens == alone[0][0].tokens and len(alone[0][0].tokens) == 13
    greedy = SamplingConfig(temperature=0.0)
    prompts = [[BOS, 5, 6], [BOS] + [7] * 30]
    batched = generate_ids(model, prompts, 20, greedy)
    assert batched[0] == generate_ids(model, prompts[:1], 20, greedy)[0]
    assert len(batched[0]) == 20 and len(batched[1]) == 40 - 31  # each to its own limit
    beams = generate_ids(model, prompts, 20, beam_size=2)
    assert len(beams[1]) <= 9 and beams[0] == generate_ids(model, prompts[:1], 20, beam_size=2)[0]
