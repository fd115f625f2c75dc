"""The model scorers and the id-level entry points (``decoding/decode.py``): ``translate_ids``
and ``generate_ids`` over encoder-decoder and decoder-only models. Batch composition never
changes an output, cached decoding equals recomputation, each row keeps its own length limit,
and no output is empty or holds a special token."""

import math

import pytest
import torch

from seq2seq import Transformer
from seq2seq.decoding.beam import beam_search
from seq2seq.decoding.decode import (
    PromptScorer,
    TransformerScorer,
    generate_ids,
    special_tokens,
    translate_ids,
)
from seq2seq.decoding.greedy import greedy_search
from seq2seq.decoding.sampling import SamplingConfig
from seq2seq.decoding.search import (
    SearchConfig,
    SpecialTokens,
)
from seq2seq.inference.packed import pack_for_cpu_inference
from tests.helpers import GPT, LLAMA, STYLES, random_ids, tiny_config, tiny_model

PAD, UNK, BOS, EOS, SEP = 0, 1, 2, 3, 4
IDS = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS)  # as tiny_config's

# -- encoder-decoder translation ----------------------------------------------------------


def test_batch_composition_does_not_change_a_sentence_translation():
    model = tiny_model(seed=5)
    src = random_ids(5, 8, seed=9)
    src[1, 5:] = PAD
    together = translate_ids(model, src, beam_size=3, n_best=2)
    for i in range(5):
        alone = translate_ids(model, src[i : i + 1, : int((src[i] != PAD).sum())], 3, n_best=2)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]


def test_outputs_respect_the_length_limit_and_never_contain_specials():
    model = tiny_model(seed=6)
    src = random_ids(3, 5)
    config = SearchConfig(max_len_a=1.0, max_len_b=2)
    for beam in (1, 4):
        for hyps in translate_ids(model, src, beam, config, n_best=1):
            assert len(hyps[0].tokens) + 1 <= 5 + 2
            assert not {PAD, UNK, BOS, EOS} & set(hyps[0].tokens) and hyps[0].tokens


def test_a_model_that_prefers_unk_and_an_empty_output_still_translates():
    model = tiny_model(seed=6)
    with torch.no_grad():  # unk and eos outscore every token whatever the decoder state
        model.embedding.weight[UNK] = 0.0
        model.embedding.weight[EOS] = 0.0
    bias = torch.zeros(model.config.vocab_size, dtype=torch.float64)
    bias[[UNK, EOS]] = 50.0
    original = model.project
    model.project = lambda states: original(states) + bias
    src = random_ids(3, 5)
    for beam in (1, 3):
        for hyps in translate_ids(model, src, beam, SearchConfig(max_len_a=1.0, max_len_b=2)):
            assert len(hyps[0].tokens) == 1 and UNK not in hyps[0].tokens


def production_like_model(seed: int):
    """float32, a vocabulary of 3,000 and packed for CPU inference: the paths real models take
    (packed weights, top-k through block maxima), unlike the float64 40-token models above."""
    torch.manual_seed(seed)
    return pack_for_cpu_inference(Transformer(tiny_config(vocab_size=3000)).eval())


@pytest.mark.parametrize("seed", range(3))
def test_production_like_model_beam_one_is_greedy_and_cache_equals_recomputation(seed):
    model = production_like_model(seed)
    src = random_ids(4, 9, vocab=3000, seed=seed)
    src[1, 4:] = PAD
    config = SearchConfig(max_len_a=0.0, max_len_b=8, max_repeats=0)  # the reference has none
    greedy = translate_ids(model, src, 1, config)
    max_lens = config.max_lengths((src != PAD).sum(1))
    one_beam = beam_search(TransformerScorer(model, src, 1, 8), max_lens, 1, IDS, config)
    for g, b in zip(greedy, one_beam, strict=True):
        assert g[0].tokens == b[0].tokens
        assert g[0].log_prob == pytest.approx(b[0].log_prob, abs=1e-4)
    with torch.inference_mode():  # greedy by recomputing every prefix, no cache
        for i in range(4):
            row = src[i : i + 1, : int((src[i] != PAD).sum())]
            tokens = [BOS]
            while len(tokens) <= 8:
                logits = model(row, torch.tensor([tokens]))[0, -1]
                logits[[PAD, UNK, BOS] + ([EOS] if len(tokens) == 1 else [])] = -math.inf
                if len(tokens) == 8:
                    break
                tokens.append(int(logits.argmax()))
                if tokens[-1] == EOS:
                    break
            expected = [t for t in tokens[1:] if t != EOS]
            assert greedy[i][0].tokens == expected


def test_production_like_model_batch_composition_leaves_beam_outputs_unchanged():
    model = production_like_model(7)
    src = random_ids(5, 8, vocab=3000, seed=4)
    src[2, 3:] = PAD
    together = translate_ids(model, src, beam_size=4, n_best=2)
    for i in range(5):
        alone = translate_ids(model, src[i : i + 1, : int((src[i] != PAD).sum())], 4, n_best=2)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]


# -- decoder-only models: prompts, generation and translation -----------------------------


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
    no_guard = SearchConfig(max_repeats=0)  # naive_greedy has none
    cached = generate_ids(model, prompts, 12, SamplingConfig(temperature=0.0), config=no_guard)
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
    generate_ids(
        model,
        [prompts[0]],
        10,
        SamplingConfig(temperature=0.0),
        on_token=lambda t: streamed.append(int(t[0])),
    )
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


def test_generation_adds_at_least_one_token_and_never_unk():
    model = tiny_model(seed=4, decoder_only=True)
    bias = torch.zeros(model.config.vocab_size, dtype=torch.float64)
    bias[[UNK, EOS]] = 50.0  # the model would rather end at once, or say <unk>
    original = model.project
    model.project = lambda states: original(states) + bias
    prompts = [[BOS, 5, 6], [BOS]]
    for options in (
        {"sampling": SamplingConfig(seed=1)},
        {"beam_size": 3},
        {"sampling": SamplingConfig(temperature=0.0)},
    ):
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
    config = SearchConfig(max_len_a=1.0, max_len_b=4, max_repeats=0)  # naive_greedy has none
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
