"""Search properties: greedy vs beam, exhaustive optimality, a hand-checkable fake decoder."""

import itertools
import math

import pytest
import torch

from seq2seq.decoding.beam import beam_search
from seq2seq.decoding.decode import TransformerScorer, translate_ids
from seq2seq.decoding.greedy import greedy_search
from seq2seq.decoding.sampling import (
    RowStreams,
    SamplingConfig,
    _sample_token,
    sample_search,
    top_k_filter,
    top_p_filter,
)
from seq2seq.decoding.search import (
    SearchConfig,
    SpecialTokens,
    top_k_by_blocks,
)
from tests.helpers import random_ids, tiny_model

PAD, UNK, BOS, EOS, A, B = 0, 1, 2, 3, 4, 5
IDS = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS)  # as tiny_config's


class ScriptedScorer:
    """A fake decoder: next-token probabilities looked up from the prefix, by hand."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], rows: int) -> None:
        self.table = table
        self.prefixes: list[tuple[int, ...]] = [() for _ in range(rows)]

    def __call__(self, last_tokens):
        out = torch.full((len(self.prefixes), 6), -math.inf)
        for row, token in enumerate(last_tokens.tolist()):
            if token != BOS:
                self.prefixes[row] = self.prefixes[row] + (token,)
            probs = self.table.get(self.prefixes[row], {EOS: 0.8, A: 0.1, B: 0.1})
            for tok, p in probs.items():
                out[row, tok] = math.log(p)
        return out

    def reorder(self, index):
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


# Greedy takes A (0.5), then A (0.45), then eos (0.9): P = 0.2025.
# Beam 2 keeps B (0.4) alive and finds B eos (0.9): P = 0.36, the better sentence.
TABLE = {
    (): {A: 0.5, B: 0.4, EOS: 0.1},
    (A,): {A: 0.45, B: 0.3, EOS: 0.25},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
    (A, A): {EOS: 0.9, A: 0.05, B: 0.05},
    (A, B): {EOS: 0.5, A: 0.25, B: 0.25},
}
PLAIN = SearchConfig(length_penalty=0.0, max_len_a=0.0, max_len_b=4)


def test_scripted_decoder_greedy_and_beam_results_checked_by_hand():
    max_lens = torch.tensor([4])
    greedy = greedy_search(ScriptedScorer(TABLE, 1), max_lens, IDS)[0]
    assert greedy.tokens == [A, A]
    assert greedy.log_prob == pytest.approx(math.log(0.5 * 0.45 * 0.9))
    beams = beam_search(ScriptedScorer(TABLE, 2), max_lens, 2, IDS, PLAIN, n_best=2)[0]
    assert [h.tokens for h in beams] == [[B], [A, A]]
    assert beams[0].log_prob == pytest.approx(math.log(0.4 * 0.9))
    assert beams[1].log_prob == pytest.approx(math.log(0.2025))


def test_length_penalty_is_the_gnmt_formula():
    config = SearchConfig(length_penalty=0.6)
    assert config.length_norm(3) == pytest.approx(((5 + 3) / 6) ** 0.6)
    beams = beam_search(ScriptedScorer(TABLE, 2), torch.tensor([4]), 2, IDS, config, n_best=2)[0]
    for hyp in beams:
        assert hyp.score == pytest.approx(hyp.log_prob / config.length_norm(len(hyp.tokens) + 1))


@pytest.mark.parametrize("seed", range(4))
def test_beam_size_one_equals_greedy(seed):
    model = tiny_model(seed=seed)
    src = random_ids(4, 7, seed=seed)
    src[2, 3:] = PAD
    greedy = translate_ids(model, src, beam_size=1)
    config = SearchConfig()
    max_lens = config.max_lengths((src != PAD).sum(1))
    beam = beam_search(
        TransformerScorer(model, src, 1, int(max_lens.max())), max_lens, 1, IDS, config
    )
    for g, b in zip(greedy, beam, strict=True):
        assert g[0].tokens == b[0].tokens
        assert g[0].log_prob == pytest.approx(b[0].log_prob, abs=1e-9)


@pytest.mark.parametrize("width", [256, 1000, 8000, 8013])
@pytest.mark.parametrize("k", [1, 10])
def test_top_k_by_blocks_equals_topk(width, k):
    generator = torch.Generator().manual_seed(width + k)
    x = torch.randn(37, width, generator=generator)
    x[:, ::7] = -math.inf  # banned tokens
    x[3, :] = -math.inf  # a row with one finite value (a forced eos)
    x[3, width - 1] = 0.5
    values, index = top_k_by_blocks(x, k)
    expected_values, expected_index = x.topk(k, dim=-1)
    assert torch.equal(values, expected_values)
    finite = expected_values.isfinite()  # -inf ties may come in any order
    assert torch.equal(index[finite], expected_index[finite])
    assert torch.equal(x.gather(1, index), values)


def _all_hypotheses(model, src, content_tokens, max_len, config):
    """Every non-empty output of at most max_len tokens (eos included), scored by a full
    forward pass."""
    results = []
    for length in range(1, max_len):
        for body in itertools.product(content_tokens, repeat=length):
            tgt = torch.tensor([[BOS, *body, EOS]])
            log_probs = model(src, tgt[:, :-1]).log_softmax(-1)[0]
            raw = float(log_probs.gather(1, tgt[0, 1:, None]).sum())
            results.append((raw / config.length_norm(length + 1), list(body)))
    return sorted(results, reverse=True)


@pytest.mark.parametrize(("exact_stop", "max_repeats"), [(False, 0), (True, 0), (False, 2)])
def test_a_beam_holding_every_hypothesis_finds_the_exhaustive_optimum(exact_stop, max_repeats):
    # vocab 6: pad, unk, bos, eos, 4, 5 -> content tokens 4, 5 (pad/unk/bos are banned), and
    # at least one of them before the eos; with the repetition guard, never one three times
    # in a row (4 4 4 and 5 5 5 are not hypotheses)
    model = tiny_model(seed=3, vocab_size=6)
    src = torch.tensor([[4, 5, 4, 1]])
    config = SearchConfig(
        max_len_a=0.0, max_len_b=4, exact_stop=exact_stop, max_repeats=max_repeats
    )
    expected = _all_hypotheses(model, src, [A, B], 4, config)  # 2 + 4 + 8 = 14
    if max_repeats:
        expected = [(s, body) for s, body in expected if body not in ([A] * 3, [B] * 3)]
    max_lens = config.max_lengths(torch.tensor([4]))
    found = beam_search(TransformerScorer(model, src, 16, 4), max_lens, 16, IDS, config, n_best=16)[
        0
    ]
    assert len(found) == len(expected) == (12 if max_repeats else 14)
    assert [h.tokens for h in found] == [tokens for _, tokens in expected]
    assert [h.score for h in found] == pytest.approx([score for score, _ in expected])


# -- sampling ------------------------------------------------------------------------------


def test_top_k_keeps_exactly_k_candidates():
    logits = torch.randn(3, 50)
    kept = top_k_filter(logits, 7).isfinite().sum(-1)
    assert kept.tolist() == [7, 7, 7]


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.05, 0.5, 0.2, 0.15, 0.1]])
    kept = top_p_filter(probs.log(), 0.8).isfinite()[0].tolist()
    assert kept == [False, True, True, True, False]  # 0.5 + 0.2 + 0.15 = 0.85 >= 0.8
    kept = top_p_filter(probs.log(), 0.7).isfinite()[0].tolist()
    assert kept == [False, True, True, False, False]  # 0.7 reached exactly by two tokens


def _lm_scorer(model):
    cache = model.init_cache(4, 32)

    class Scorer:
        def __call__(self, last):
            return model.decode(last[:, None], cache=cache)[:, -1].log_softmax(-1)

        def reorder(self, index):
            cache.reorder(index)

    return Scorer()


def test_sampling_with_a_seed_is_reproducible_and_temperature_zero_is_greedy():
    model = tiny_model(seed=2, decoder_only=True)
    limits = torch.full((4,), 13)
    config = SamplingConfig(temperature=1.0, top_k=10, top_p=0.9, seed=123)
    first = sample_search(_lm_scorer(model), limits, config, IDS)
    second = sample_search(_lm_scorer(model), limits, config, IDS)
    assert torch.equal(first, second)
    other = sample_search(_lm_scorer(model), limits, SamplingConfig(seed=7), IDS)
    assert not torch.equal(first, other)
    greedy = sample_search(_lm_scorer(model), limits, SamplingConfig(temperature=0.0), IDS)
    cold = sample_search(_lm_scorer(model), limits, SamplingConfig(temperature=1e-4, seed=1), IDS)
    assert torch.equal(greedy, cold)


def test_each_row_draws_from_its_own_stream():
    """Row i's numbers depend on (seed, its index) only: not on the rows beside it."""
    alone = [RowStreams(5, [i], torch.device("cpu")) for i in range(3)]
    together = RowStreams(5, [0, 1, 2], torch.device("cpu"))
    for _ in range(4):
        assert torch.equal(together.next(), torch.cat([s.next() for s in alone]))
    assert not torch.equal(RowStreams(6, [0], "cpu").next(), RowStreams(5, [0], "cpu").next())


def test_sampled_tokens_follow_the_filtered_distribution():
    probs = torch.tensor([0.0, 0.1, 0.5, 0.0, 0.25, 0.15])
    rows = 20_000
    scores = probs.log().expand(rows, -1)
    uniforms = RowStreams(0, range(rows), torch.device("cpu")).next()
    tokens = _sample_token(scores, SamplingConfig(), uniforms)
    frequencies = torch.bincount(tokens, minlength=6) / rows
    assert torch.allclose(frequencies, probs, atol=0.015)
    assert frequencies[0] == frequencies[3] == 0  # no mass, never drawn
    top2 = _sample_token(scores, SamplingConfig(top_k=2), uniforms)
    assert set(top2.tolist()) == {2, 4}
    # A uniform that rounds up to the end of the cdf still gives a token with mass.
    edge = _sample_token(scores[:1], SamplingConfig(), torch.tensor([1.0 - 2**-60]))
    assert edge.tolist() == [5]


# -- special tokens and the minimum length -------------------------------------------------

# A scorer that would rather say <unk> (or pad, or bos) than anything else.
UNK_LOVER = {
    (): {UNK: 0.5, PAD: 0.1, BOS: 0.1, A: 0.2, B: 0.05, EOS: 0.05},
    (A,): {UNK: 0.6, EOS: 0.3, B: 0.1},
    (B,): {UNK: 0.6, BOS: 0.3, EOS: 0.1},
}
# A scorer whose favourite first token is the eos: an empty output.
EOS_FIRST = {
    (): {EOS: 0.9, A: 0.06, B: 0.04},
    (A,): {EOS: 0.8, A: 0.1, B: 0.1},
    (B,): {EOS: 0.8, A: 0.1, B: 0.1},
}


def _sampled(table, rows: int, limit: int, seed: int = 0) -> list[list[int]]:
    out = sample_search(
        ScriptedScorer(table, rows), torch.full((rows,), limit), SamplingConfig(seed=seed), IDS
    )
    return out.tolist()


def test_no_search_ever_emits_unk_pad_or_bos():
    max_lens = torch.tensor([4])
    greedy = greedy_search(ScriptedScorer(UNK_LOVER, 1), max_lens, IDS)[0]
    assert greedy.tokens == [A]
    assert greedy.log_prob == pytest.approx(math.log(0.2 * 0.3))  # probabilities unchanged
    beams = beam_search(ScriptedScorer(UNK_LOVER, 3), max_lens, 3, IDS, PLAIN, n_best=3)[0]
    assert [h.tokens for h in beams] == [[A], [A, B], [B]]  # P = 0.06, 0.016, 0.005
    for row in _sampled(UNK_LOVER, 300, 4):
        assert not {UNK, PAD, BOS} & set(row[: row.index(EOS) if EOS in row else 3])
        assert row[0] != EOS


def test_the_first_token_is_never_eos_unless_the_limit_is_one():
    max_lens = torch.tensor([4, 1, 2])
    greedy = greedy_search(ScriptedScorer(EOS_FIRST, 3), max_lens, IDS)
    assert [h.tokens for h in greedy] == [[A], [], [A]]
    assert greedy[0].log_prob == pytest.approx(math.log(0.06 * 0.8))
    assert greedy[1].log_prob == pytest.approx(math.log(0.9))  # the forced eos
    beams = beam_search(ScriptedScorer(EOS_FIRST, 6), max_lens, 2, IDS, PLAIN, n_best=2)
    assert [[h.tokens for h in hyps] for hyps in beams] == [[[A], [B]], [[]], [[A], [B]]]
    one_beam = beam_search(ScriptedScorer(EOS_FIRST, 3), max_lens, 1, IDS, PLAIN)
    assert [hyps[0].tokens for hyps in one_beam] == [h.tokens for h in greedy]
    assert all(row[0] in (A, B) for row in _sampled(EOS_FIRST, 100, 4))


class RowCountingScorer:
    """Wraps a scorer and records how many rows every step decodes."""

    def __init__(self, scorer) -> None:
        self.scorer, self.rows = scorer, []

    def __call__(self, last_tokens):
        self.rows.append(last_tokens.shape[0])
        return self.scorer(last_tokens)

    def reorder(self, index):
        self.scorer.reorder(index)


@pytest.mark.parametrize("beam", [1, 3])
def test_finished_sentences_leave_the_batch_and_the_rest_decode_unchanged(beam):
    model = tiny_model(seed=8)
    src = random_ids(6, 12, seed=10)
    for i, length in enumerate([2, 3, 4, 12, 6, 9]):  # limits 1.2 * length + 10 differ
        src[i, length:] = PAD
    config = SearchConfig()
    max_lens = config.max_lengths((src != PAD).sum(dim=1))
    scorer = RowCountingScorer(TransformerScorer(model, src, beam, int(max_lens.max())))
    if beam == 1:
        together = [[h] for h in greedy_search(scorer, max_lens, IDS)]
    else:
        together = beam_search(scorer, max_lens, beam, IDS, config, n_best=2)
    assert scorer.rows[0] == 6 * beam and min(scorer.rows) < 6 * beam  # rows were dropped
    assert scorer.rows == sorted(scorer.rows, reverse=True)
    for i in range(6):
        alone = translate_ids(
            model, src[i : i + 1, : int((src[i] != PAD).sum())], beam, config, n_best=min(2, beam)
        )
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i][: len(alone[0])]]
        assert [h.score for h in alone[0]] == pytest.approx(
            [h.score for h in together[i][: len(alone[0])]]
        )


# A decoder that loves a blank piece (A, standing for SentencePiece's bare "▁") and then eos:
# the output [A] decodes to an empty line, as empty as eos alone.
BLANK_LOVER = {
    (): {A: 0.7, B: 0.2, EOS: 0.1},
    (A,): {EOS: 0.8, A: 0.1, B: 0.1},
    (A, A): {EOS: 0.9, A: 0.05, B: 0.05},
    (A, B): {EOS: 0.9, A: 0.05, B: 0.05},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
}
BLANK_A = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS, blank=(A,))


def _visible(tokens: list[int]) -> bool:
    return B in tokens


def test_no_search_ends_an_output_of_blank_pieces_alone():
    max_lens = torch.tensor([5, 5])
    # Without blank pieces named, [A] is what the scorer likes best (0.7 * 0.8).
    assert greedy_search(ScriptedScorer(BLANK_LOVER, 2), max_lens, IDS)[0].tokens == [A]
    greedy = greedy_search(ScriptedScorer(BLANK_LOVER, 2), max_lens, BLANK_A)
    assert [h.tokens for h in greedy] == [[A, B], [A, B]]  # then A B eos: 0.7 * 0.1 * 0.9
    beams = beam_search(ScriptedScorer(BLANK_LOVER, 6), max_lens, 3, BLANK_A, PLAIN, n_best=3)
    assert all(_visible(h.tokens) for hyps in beams for h in hyps)
    assert beams[0][0].tokens == [B]  # 0.2 * 0.9 beats A B (0.063)
    one_beam = beam_search(ScriptedScorer(BLANK_LOVER, 2), max_lens, 1, BLANK_A, PLAIN)
    assert [hyps[0].tokens for hyps in one_beam] == [h.tokens for h in greedy]
    rows = sample_search(
        ScriptedScorer(BLANK_LOVER, 200), torch.full((200,), 5), SamplingConfig(seed=1), BLANK_A
    ).tolist()
    assert all(_visible(row[: row.index(EOS)]) for row in rows if EOS in row)


def test_blank_pieces_at_the_length_limit_still_end():
    # A limit leaves room for nothing visible: eos is forced there, as before.
    greedy = greedy_search(ScriptedScorer(BLANK_LOVER, 1), torch.tensor([2]), BLANK_A)
    assert greedy[0].tokens == [A]
