"""Continuous batching (sentences joining and leaving between steps) gives every sentence
exactly what greedy or beam search gives it alone."""

from __future__ import annotations

import random

import pytest
import torch

from seq2seq.decoding.continuous import ContinuousBeam, ContinuousGreedy
from seq2seq.decoding.decode import translate_ids
from seq2seq.decoding.search import SearchConfig, TokenRules
from tests.helpers import tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=3, vocab_size=40, max_positions=64).float()


def random_sources(count: int, seed: int, longest: int = 20) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, 40) for _ in range(rng.randrange(1, longest))] for _ in range(count)]


def alone(model, sources, search):
    return [translate_ids(model, torch.tensor([s]), 1, search)[0][0] for s in sources]


def decode(decoder: ContinuousGreedy, sources, arrivals, on_step=None) -> dict:
    """Feed sources in groups of ``arrivals`` (one group before each step) until all finish."""
    results, next_source, steps = {}, 0, 0
    while len(results) < len(sources):
        count = arrivals[steps % len(arrivals)]
        group = range(next_source, min(next_source + count, len(sources)))
        decoder.add([sources[i] for i in group], list(group))
        next_source = group.stop
        results.update(decoder.step())
        steps += 1
        if on_step:
            on_step(decoder)
        assert steps < 10_000
    return results


@pytest.mark.parametrize("arrivals", [[1], [0, 3, 1, 0, 0, 5], [40]])
def test_sentences_joining_at_any_step_get_their_greedy_translation(model, arrivals):
    search = SearchConfig(max_len_a=1.5, max_len_b=5)
    sources = random_sources(40, seed=len(arrivals))
    expected = alone(model, sources, search)
    results = decode(ContinuousGreedy(model, search), sources, arrivals)
    assert [results[i].tokens for i in range(len(sources))] == [h.tokens for h in expected]
    for i, hypothesis in enumerate(expected):
        assert results[i].log_prob == pytest.approx(hypothesis.log_prob, abs=1e-4)


@pytest.mark.parametrize("exact_stop", [False, True])
@pytest.mark.parametrize("arrivals", [[1], [0, 3, 1, 0, 0, 5], [40]])
def test_sentences_joining_at_any_step_get_their_beam_search_n_best(model, arrivals, exact_stop):
    search = SearchConfig(max_len_a=1.5, max_len_b=5, exact_stop=exact_stop)
    sources = random_sources(40, seed=len(arrivals) + 10)
    expected = [translate_ids(model, torch.tensor([s]), 4, search, n_best=2)[0] for s in sources]
    results = decode(ContinuousBeam(model, search, beam_size=4, n_best=2), sources, arrivals)
    for i, hypotheses in enumerate(expected):
        assert [h.tokens for h in results[i]] == [h.tokens for h in hypotheses]
        assert [h.score for h in results[i]] == pytest.approx(
            [h.score for h in hypotheses], abs=1e-4
        )


def test_under_steady_load_the_cache_stays_bounded_and_finished_rows_leave(model):
    search = SearchConfig()
    sources = random_sources(200, seed=9, longest=30)
    capacities, rows = [], []

    def watch(decoder):
        if decoder.cache is not None:
            capacities.append(decoder.cache.max_len)
            rows.append(decoder.cache.n_rows)

    results = decode(ContinuousGreedy(model, search), sources, [1], watch)
    assert len(results) == 200
    longest_output = max(int(search.max_lengths(torch.tensor([len(s)]))) for s in sources)
    assert max(capacities) <= 3 * longest_output  # slots no row reads are dropped
    assert max(rows) < 80  # finished rows do not pile up


def test_an_idle_decoder_is_empty_and_a_reset_forgets_everything(model):
    decoder = ContinuousGreedy(model, SearchConfig())
    assert decoder.active == 0 and decoder.step() == []
    decoder.add([[5, 6, 7], [8]], ["a", "b"])
    assert decoder.active == 2 and decoder.source_tokens == 4
    decoder.step()
    decoder.reset()
    assert decoder.active == 0 and decoder.cache is None
    with pytest.raises(ValueError, match="at least one token"):
        decoder.add([[]], ["empty"])


def test_continuous_searches_never_end_on_blank_pieces_alone(model):
    # Token 4 and 5 play SentencePiece's "▁": no sentence may end having written only these,
    # and each gets exactly what the whole-batch searches give it with the same rule.
    blank, sources, search = (4, 5), random_sources(12, seed=8), SearchConfig()
    rules = TokenRules(blank=blank, banned=(6,))
    for beam in (1, 3):
        decoder = (
            ContinuousGreedy(model, search, rules)
            if beam == 1
            else ContinuousBeam(model, search, beam, rules=rules)
        )
        results = decode(decoder, sources, [0, 4, 1])
        for index, source in enumerate(sources):
            whole = translate_ids(model, torch.tensor([source]), beam, search, rules=rules)
            got = results[index] if beam == 1 else results[index][0]
            assert got.tokens == whole[0][0].tokens
            assert set(got.tokens) - set(blank) and 6 not in got.tokens
