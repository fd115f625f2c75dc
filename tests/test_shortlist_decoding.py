"""Decoding with a lexical shortlist (``decoding/shortlist.py``, ``decoding/decode.py``): a
shortlist of the whole vocabulary decodes exactly as none, a sentence's output never depends on
its batch-mates, every output piece is one of its own candidates, cached decoding equals
recomputation over the candidates, and the file format reads back what it wrote."""

import random

import pytest
import torch

from seq2seq import Transformer
from seq2seq.decoding.decode import translate_ids
from seq2seq.decoding.search import SearchConfig
from seq2seq.decoding.shortlist import Shortlist, vocabulary_of
from seq2seq.errors import DataError
from seq2seq.inference.int8 import QUANTIZATION_AVAILABLE, quantize_for_cpu_inference
from seq2seq.inference.packed import pack_for_cpu_inference
from tests.helpers import file_error, random_ids, tiny_config, tiny_model

PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCAB = 3000


def float_model(seed: int, kind: str = "packed") -> Transformer:
    """float32 with a vocabulary of 3,000, as real models decode: packed, int8 or plain."""
    torch.manual_seed(seed)
    model = Transformer(tiny_config(vocab_size=VOCAB)).eval()
    if kind == "packed":
        return pack_for_cpu_inference(model)
    if kind == "int8":
        return quantize_for_cpu_inference(model)
    return model


def random_shortlist(vocab: int, seed: int, per_source: int = 20, always: int = 50) -> Shortlist:
    """Each source id some random candidates (itself among them), and a few always."""
    rng = random.Random(seed)
    candidates = {s: [s, *rng.sample(range(4, vocab), per_source)] for s in range(4, vocab)}
    return Shortlist(rng.sample(range(4, vocab), always), candidates, vocab, EOS)


def tokens(found):
    return [[h.tokens for h in hyps] for hyps in found]


KINDS = ["plain", "packed"] + (["int8"] if QUANTIZATION_AVAILABLE else [])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("beam", [1, 4])
def test_a_shortlist_of_the_whole_vocabulary_decodes_exactly_as_none(kind, beam):
    model = float_model(3, kind)
    src = random_ids(6, 9, vocab=VOCAB, seed=2)
    src[1, 4:] = PAD
    full = Shortlist.full(VOCAB, EOS)
    n_best = min(beam, 2)
    without = translate_ids(model, src, beam, n_best=n_best)
    within = translate_ids(model, src, beam, n_best=n_best, shortlist=full)
    assert tokens(within) == tokens(without)
    assert [h.log_prob for hyps in within for h in hyps] == [
        h.log_prob for hyps in without for h in hyps
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("beam", [1, 4])
def test_with_a_shortlist_a_sentence_translates_the_same_alone_and_in_any_batch(kind, beam):
    model = float_model(5, kind)
    shortlist = random_shortlist(VOCAB, seed=1)
    src = random_ids(6, 10, vocab=VOCAB, seed=4)
    src[2, 3:] = PAD
    together = translate_ids(model, src, beam, shortlist=shortlist)
    reversed_order = translate_ids(model, src.flip(0), beam, shortlist=shortlist)[::-1]
    assert tokens(reversed_order) == tokens(together)
    for i in range(len(src)):
        row = src[i : i + 1, : int((src[i] != PAD).sum())]
        alone = translate_ids(model, row, beam, shortlist=shortlist)
        assert tokens(alone) == tokens(together[i : i + 1])


def test_every_output_piece_is_one_of_its_own_sentences_candidates():
    model = float_model(7)
    shortlist = random_shortlist(VOCAB, seed=2, per_source=5, always=10)
    src = random_ids(5, 8, vocab=VOCAB, seed=6)
    allowed = shortlist.allowed(src, PAD)
    for beam in (1, 3):
        for i, hyps in enumerate(translate_ids(model, src, beam, n_best=1, shortlist=shortlist)):
            assert hyps[0].tokens and all(allowed[i, t] for t in hyps[0].tokens)
    # The shortlist did something: without it, some output leaves its sentence's candidates.
    free = translate_ids(model, src, 1)
    assert any(not allowed[i, t] for i, hyps in enumerate(free) for t in hyps[0].tokens)


def test_cached_shortlisted_greedy_equals_recomputing_over_the_candidates():
    model = tiny_model(seed=4)  # float64, 40 entries
    shortlist = random_shortlist(40, seed=3, per_source=4, always=3)
    src = random_ids(3, 6, seed=8)
    config = SearchConfig(max_len_a=0.0, max_len_b=7, max_repeats=0)
    found = translate_ids(model, src, 1, config, shortlist=shortlist)
    allowed = shortlist.allowed(src, PAD)
    with torch.inference_mode():
        for i in range(len(src)):
            out = [BOS]
            while len(out) < 7:
                logits = model(src[i : i + 1], torch.tensor([out]))[0, -1]
                logits[~allowed[i]] = -torch.inf
                logits[[PAD, UNK, BOS] + ([EOS] if len(out) == 1 else [])] = -torch.inf
                out.append(int(logits.argmax()))
                if out[-1] == EOS:
                    break
            assert found[i][0].tokens == [t for t in out[1:] if t != EOS]


def test_allowed_is_the_union_of_the_sources_candidates_and_the_always_ones():
    shortlist = Shortlist([5, 6], {7: [8, 9], 10: [11]}, 20, EOS)
    src = torch.tensor([[7, 10, PAD], [12, PAD, PAD]])
    allowed = shortlist.allowed(src, PAD)
    assert allowed[0].nonzero()[:, 0].tolist() == [EOS, 5, 6, 8, 9, 11]
    assert allowed[1].nonzero()[:, 0].tolist() == [EOS, 5, 6]


def test_a_decoder_only_model_refuses_a_shortlist():
    model = tiny_model(seed=1, decoder_only=True, sep_id=4)
    with pytest.raises(ValueError, match="encoder-decoder"):
        translate_ids(model, random_ids(1, 3), 1, shortlist=Shortlist.full(40, EOS))


# -- the file ----------------------------------------------------------------------------

PIECES = ["<pad>", "<unk>", "<s>", "</s>", "▁the", "▁cat", "猫", "的", "▁", "<0xE7>"]
IDS = {piece: i for i, piece in enumerate(PIECES)}


def test_the_file_reads_back_what_was_written_in_ctranslate2s_line_shape(tmp_path):
    shortlist = Shortlist([7, 8, 9], {5: [5, 6], 4: [7]}, len(PIECES), EOS)
    path = tmp_path / "vmap.txt"
    shortlist.write(path, PIECES.__getitem__)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == ["\t</s> 的 ▁ <0xE7>", "▁the\t的", "▁cat\t▁cat 猫"]
    again = Shortlist.read(path, vocabulary_of(PIECES.__getitem__, len(PIECES)), 10, EOS)
    assert again.always.tolist() == shortlist.always.tolist()
    assert [again.candidates_of(s) for s in range(10)] == [
        shortlist.candidates_of(s) for s in range(10)
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("▁cat 猫\n", ":1: expected SOURCE<TAB>TARGETS"),
        ("\t的\n▁the ▁cat\t猫\n", ":2: one source piece per line"),
        ("▁dog\t猫\n", ":1: '▁dog' is no piece of this model's vocabulary"),
        ("▁cat\t狗\n", ":1: '狗' is no piece"),
        ("\n\n", "no shortlist rules"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_line(tmp_path, text, problem):
    path = tmp_path / "bad.vmap"
    error = file_error(path, text, lambda p: Shortlist.read(p, IDS, len(PIECES), EOS))
    assert error.startswith(str(path)) and problem in error


def test_a_missing_or_binary_file_is_one_line(tmp_path):
    with pytest.raises(DataError, match="no such shortlist file"):
        Shortlist.read(tmp_path / "none.txt", IDS, len(PIECES), EOS)
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DataError, match="not UTF-8"):
        Shortlist.read(tmp_path / "binary", IDS, len(PIECES), EOS)
