"""No search writes half a character: byte pieces keep UTF-8 valid (``decoding.utf8``)."""

import hashlib

import pytest
import torch

from seq2seq.decoding.beam import beam_search
from seq2seq.decoding.continuous import ContinuousBeam, ContinuousGreedy
from seq2seq.decoding.decode import translate_ids
from seq2seq.decoding.greedy import greedy_search
from seq2seq.decoding.sampling import SamplingConfig, sample_search
from seq2seq.decoding.search import (
    SearchConfig,
    SpecialTokens,
    TokenRules,
)
from seq2seq.decoding.utf8 import drop_broken_bytes, last_written, next_byte_range
from tests.helpers import tiny_model

PAD, UNK, BOS, EOS = 0, 1, 2, 3
BYTES = tuple(range(8, 8 + 256))  # <0x00> .. <0xFF>, as in our SentencePiece models
VOCAB = 8 + 256 + 16  # 16 ordinary pieces after the bytes
PLAIN = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS)
WITH_BYTES = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS, bytes=BYTES)


def as_bytes(tokens: list[int]) -> bytes:
    """Byte pieces as their byte, every other piece as an ASCII letter."""
    return b"".join(
        bytes([t - BYTES[0]]) if t in BYTES else b"x" for t in tokens if t not in (EOS, PAD)
    )


def valid(tokens: list[int]) -> bool:
    try:
        as_bytes(tokens).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class BrokenByteScorer:
    """A decoder that prefers broken UTF-8: its scores favour continuation bytes, leads
    followed by anything, and eos after a lead. Scores depend on the prefix alone (a hash),
    so reordered beams and batched rows score as they would alone."""

    def __init__(self, rows: int, seed: int = 0, names: list[int] | None = None) -> None:
        self.prefixes: list[tuple[int, ...]] = [() for _ in range(rows)]
        self.names = list(range(rows)) if names is None else names  # a sentence's own scores
        self.seed = seed

    def __call__(self, last_tokens):
        out = torch.empty(len(self.prefixes), VOCAB)
        for row, token in enumerate(last_tokens.tolist()):
            if token != BOS:
                self.prefixes[row] = self.prefixes[row] + (token,)
            key = (self.seed, self.names[row], self.prefixes[row])
            digest = hashlib.sha256(repr(key).encode()).digest()
            generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
            scores = torch.randn(VOCAB, generator=generator)
            scores[BYTES[0x80] : BYTES[0xC0]] += 2.5  # continuation bytes
            scores[BYTES[0xE0] : BYTES[0xF8]] += 2.5  # leads, and past U+10FFFF
            scores[EOS] += 1.0 + len(self.prefixes[row])  # end soon, anywhere
            out[row] = scores
        return out

    def reorder(self, index):
        self.prefixes = [self.prefixes[i] for i in index.tolist()]
        self.names = [self.names[i] for i in index.tolist()]


def beams_of(rows: int, k: int, seed: int) -> BrokenByteScorer:
    """The scorer of ``rows`` sentences with ``k`` beams each (the rows of one sentence are
    the same sentence)."""
    return BrokenByteScorer(rows * k, seed, [row for row in range(rows) for _ in range(k)])


def test_the_table_of_what_may_follow():
    def after(*values):
        tokens = torch.tensor([[PAD] * (3 - len(values)) + [BYTES[v] for v in values]])
        low, high = next_byte_range(last_written(tokens, PAD), BYTES, VOCAB)
        return int(low[0]), int(high[0])

    assert after() == (-1, -1) and after(0x41) == (-1, -1)
    assert after(0xC3) == (0x80, 0xBF)
    assert after(0xE0) == (0xA0, 0xBF) and after(0xED) == (0x80, 0x9F)
    assert after(0xE4, 0xB8) == (0x80, 0xBF) and after(0xE4, 0xB8, 0xAD) == (-1, -1)
    assert after(0xF0) == (0x90, 0xBF) and after(0xF4) == (0x80, 0x8F)
    assert after(0xF0, 0x9F, 0x98) == (0x80, 0xBF)
    assert after(0xC3, 0xA9) == (-1, -1)  # é written: a character may start


def test_last_written_skips_pads_on_either_side():
    written = torch.tensor([[PAD, 5, 6, 7, PAD, PAD], [PAD, PAD, PAD, PAD, PAD, 9]])
    assert last_written(written, PAD).tolist() == [[5, 6, 7], [PAD, PAD, 9]]


@pytest.mark.parametrize("seed", range(3))
def test_every_search_writes_valid_utf8_where_the_scorer_prefers_broken_bytes(seed):
    rows, max_lens = 24, torch.full((24,), 40)
    # Without the rule the scorer's favourites are broken: the test can fail.
    broken = greedy_search(BrokenByteScorer(rows, seed), max_lens, PLAIN)
    assert sum(not valid(h.tokens) for h in broken) > rows // 2
    # The limit is far enough for every output to end by itself (eos at the limit is forced
    # whatever was written: drop_broken_bytes cleans those).
    greedy = greedy_search(BrokenByteScorer(rows, seed), max_lens, WITH_BYTES)
    assert all(len(h.tokens) < 39 for h in greedy)
    assert all(valid(h.tokens) for h in greedy)
    assert sum(any(t in BYTES[0x80:] for t in h.tokens) for h in greedy) > rows // 2
    beams = beam_search(beams_of(rows, 3, seed), max_lens, 3, WITH_BYTES, SearchConfig(), n_best=3)
    assert all(valid(h.tokens) for hyps in beams for h in hyps)
    one_beam = beam_search(BrokenByteScorer(rows, seed), max_lens, 1, WITH_BYTES, SearchConfig())
    assert [hyps[0].tokens for hyps in one_beam] == [h.tokens for h in greedy]
    sampled = sample_search(
        BrokenByteScorer(rows, seed), max_lens, SamplingConfig(seed=seed), WITH_BYTES
    ).tolist()
    assert all(valid(row[: row.index(EOS)]) for row in sampled if EOS in row)


def test_a_row_alone_and_in_a_batch_write_the_same_bytes():
    max_lens = torch.full((6,), 40)
    batch = beam_search(beams_of(6, 2, 0), max_lens, 2, WITH_BYTES, SearchConfig())
    for row in range(6):
        alone = beam_search(
            BrokenByteScorer(2, 0, [row, row]), max_lens[:1], 2, WITH_BYTES, SearchConfig()
        )
        assert alone[0][0].tokens == batch[row][0].tokens


def test_drop_broken_bytes_keeps_whole_characters_only():
    middle = [BYTES[b] for b in "中".encode()]
    kept, dropped = drop_broken_bytes([20, BYTES[0xE4], 21, *middle, BYTES[0xB8], 22], BYTES)
    assert kept == [20, 21, *middle, 22] and dropped == 2
    assert drop_broken_bytes([*middle, BYTES[0xE4], BYTES[0xB8]], BYTES) == (middle, 2)
    assert drop_broken_bytes([BYTES[0x41], 20], BYTES) == ([BYTES[0x41], 20], 0)


@pytest.fixture(scope="module")
def byte_model():
    """A tiny model whose byte pieces' embeddings (tied to the output layer) are scaled up,
    so that its outputs are mostly bytes, broken ones included."""
    model = tiny_model(seed=5, vocab_size=VOCAB, max_positions=64).float()
    with torch.no_grad():
        model.embedding.weight[BYTES[0x80] :] *= 6.0
    return model


def test_continuous_batching_keeps_bytes_valid_and_equals_the_whole_batch(byte_model):
    rules = TokenRules(bytes=BYTES)
    search = SearchConfig(max_len_a=1.0, max_len_b=12)
    sources = [[264 + (i * 7 + j) % 16 for j in range(3 + i % 5)] for i in range(10)]
    plain = [translate_ids(byte_model, torch.tensor([s]), 1, search)[0][0] for s in sources]
    assert not all(valid(h.tokens) for h in plain)  # the model alone breaks characters
    for beam in (1, 3):
        decoder = (
            ContinuousGreedy(byte_model, search, rules)
            if beam == 1
            else ContinuousBeam(byte_model, search, beam, rules=rules)
        )
        results, next_source = {}, 0
        while len(results) < len(sources):
            if next_source < len(sources):
                decoder.add([sources[next_source]], [next_source])
                next_source += 1
            results.update(decoder.step())
        for index, source in enumerate(sources):
            whole = translate_ids(byte_model, torch.tensor([source]), beam, search, rules=rules)
            got = results[index] if beam == 1 else results[index][0]
            assert got.tokens == whole[0][0].tokens
            assert valid(got.tokens) or len(got.tokens) >= search.max_len_b  # cut at the limit
