"""The repetition guard (``seq2seq.decoding.repetition``) in every search: what it forbids,
what it leaves alone, and the search properties that must keep holding with it on."""

from __future__ import annotations

import random

import pytest
import torch

from seq2seq.decoding.beam import beam_search, constrained_beam_search
from seq2seq.decoding.continuous import ContinuousBeam, ContinuousGreedy
from seq2seq.decoding.decode import TransformerScorer, translate_ids
from seq2seq.decoding.greedy import greedy_search
from seq2seq.decoding.repetition import RepetitionGuard, right_aligned, tandem_repeats
from seq2seq.decoding.sampling import SamplingConfig, sample_search
from seq2seq.decoding.search import (
    SearchConfig,
    SpecialTokens,
    TokenRules,
)
from tests.helpers import random_ids, tiny_model

PAD, UNK, BOS, EOS = 0, 1, 2, 3
VOCAB = 12
DIGIT = 11  # a piece that writes no letter
IDS = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS, symbols=(DIGIT,))


class LoopingScorer:
    """A fake decoder that loves one unit: after any prefix it prefers the next piece of
    ``unit`` repeated forever, then eos, then every other piece."""

    def __init__(self, unit: list[int], rows: int) -> None:
        self.unit = unit
        self.prefixes: list[list[int]] = [[] for _ in range(rows)]

    def __call__(self, last_tokens: torch.Tensor) -> torch.Tensor:
        out = torch.full((len(self.prefixes), VOCAB), -4.0)
        for row, token in enumerate(last_tokens.tolist()):
            if token != BOS:
                self.prefixes[row].append(token)
            out[row, self.unit[len(self.prefixes[row]) % len(self.unit)]] = 3.0
            out[row, EOS] = 0.0
        return out

    def reorder(self, index: torch.Tensor) -> None:
        self.prefixes = [list(self.prefixes[i]) for i in index.tolist()]


def longest_run(tokens: list[int], unit: int) -> int:
    """Most copies in a row of any unit of ``unit`` pieces in ``tokens``."""
    best = 1 if tokens else 0
    for start in range(len(tokens)):
        copies = 1
        while tokens[start + copies * unit : start + (copies + 1) * unit] == tokens[
            start : start + unit
        ] and start + (copies + 1) * unit <= len(tokens):
            copies += 1
        best = max(best, copies)
    return best


def every_search(unit: list[int], config: SearchConfig) -> dict[str, list[int]]:
    """The output of one sentence (limit 20) under each search, with ``LoopingScorer``."""
    limits = torch.tensor([20])
    guard = config.guard
    cold = SamplingConfig(temperature=1e-4, seed=1)
    return {
        "greedy": greedy_search(LoopingScorer(unit, 1), limits, IDS, guard)[0].tokens,
        "beam": beam_search(LoopingScorer(unit, 3), limits, 3, IDS, config)[0][0].tokens,
        "sampling": [
            t
            for t in sample_search(LoopingScorer(unit, 1), limits, cold, IDS, guard=guard)[
                0
            ].tolist()
            if t not in (PAD, EOS)
        ],
    }


@pytest.mark.parametrize("unit", [[4], [4, 5], [4, 5, 6], [4, 5, 6, 7]])
def test_no_search_writes_a_unit_three_times_in_a_row(unit):
    unguarded = every_search(unit, SearchConfig(max_repeats=0))
    assert all(longest_run(out, len(unit)) > 3 for out in unguarded.values())  # it loops
    for name, out in every_search(unit, SearchConfig()).items():
        assert longest_run(out, len(unit)) == 2, name
        assert len(out) >= 2 * len(unit), name  # the doubled unit is still written


def test_doubled_words_are_left_alone():
    """谢谢, 看看, 一个一个: a unit written twice is what the model wants, guard or not."""
    table_scorer = LoopingScorer([4, 4, EOS], 1)  # 4 4 then eos, preferred
    out = greedy_search(table_scorer, torch.tensor([10]), IDS, RepetitionGuard())[0].tokens
    assert out == [4, 4]


def test_pieces_without_a_letter_repeat_freely():
    """Numbers and markup (1000000, ...): units of symbol pieces are never cut."""
    out = greedy_search(LoopingScorer([DIGIT], 1), torch.tensor([8]), IDS)[0].tokens
    assert out == [DIGIT] * 7  # to the limit, as without the guard


def test_no_repeat_ngram_size_forbids_every_ngram_twice():
    config = SearchConfig(max_repeats=0, no_repeat_ngram_size=2)
    for name, out in every_search([4, 5, 6], config).items():
        bigrams = list(zip(out, out[1:], strict=False))
        assert len(bigrams) == len(set(bigrams)), name


def test_repetition_penalty_is_hugging_faces():
    """Against transformers' own processor, on logits (as its greedy search and CTranslate2
    apply it)."""
    transformers = pytest.importorskip("transformers")
    logits = torch.randn(3, 1, VOCAB) * 3
    written = torch.tensor([[[4, 5, 4]], [[6, 6, 7]], [[8, 9, 10]]])
    ours = RepetitionGuard(repetition_penalty=1.3).penalize_(logits.clone(), written, PAD)
    processor = transformers.RepetitionPenaltyLogitsProcessor(1.3)
    theirs = processor(written[:, 0], logits[:, 0].clone())
    assert torch.allclose(ours[:, 0], theirs)


def test_the_guard_reads_rows_padded_on_either_side():
    written = torch.tensor([[PAD, PAD, 4, 5], [4, 5, PAD, PAD], [PAD, 4, 5, PAD], [4, 5, 6, 7]])
    assert right_aligned(written, PAD, 3).tolist() == [[PAD, 4, 5]] * 3 + [[5, 6, 7]]
    assert right_aligned(written, PAD).tolist() == [[PAD, PAD, 4, 5]] * 3 + [[4, 5, 6, 7]]


def test_finished_outputs_name_the_runs_the_search_would_forbid():
    assert tandem_repeats([4, 4, 4], 2) == [(4, 4, 4)]
    assert tandem_repeats([4, 4, 5, 6, 5, 6, 5, 6], 2) == [(5, 6, 5, 6, 5, 6)]
    assert tandem_repeats([4, 4, 5, 5], 2) == []
    assert tandem_repeats([DIGIT] * 5, 2, symbols={DIGIT}) == []
    assert tandem_repeats([4] * 9, 0) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"max_repeats": -1},
        {"no_repeat_ngram_size": 1},
        {"repetition_penalty": 0.5},
        {"max_repeats": 1.5},
    ],
)
def test_settings_no_guard_can_take_are_one_line_errors(bad):
    with pytest.raises(ValueError, match=next(iter(bad))) as error:
        SearchConfig(**bad)
    assert "\n" not in str(error.value)


# -- the search properties, with every guard on ---------------------------------------------

ALL_ON = SearchConfig(max_len_a=1.0, max_len_b=6, no_repeat_ngram_size=3, repetition_penalty=1.3)


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=5, vocab_size=40, max_positions=64).float()


@pytest.mark.parametrize("config", [SearchConfig(max_len_a=1.0, max_len_b=6), ALL_ON])
def test_beam_size_one_is_greedy_and_the_batch_changes_nothing(model, config):
    src = random_ids(5, 8, vocab=40, seed=3)
    src[1, 3:] = PAD
    greedy = translate_ids(model, src, 1, config)
    max_lens = config.max_lengths((src != PAD).sum(1))
    one_beam = beam_search(TransformerScorer(model, src, 1, 20), max_lens, 1, IDS, config)
    assert [g[0].tokens for g in greedy] == [b[0].tokens for b in one_beam]
    together = translate_ids(model, src, 4, config, n_best=2)
    for i in range(5):
        alone = translate_ids(model, src[i : i + 1, : int((src[i] != PAD).sum())], 4, config, 2)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]


def test_the_guards_change_what_the_model_writes(model):
    """Not a no-op: on a random model (which loops), each guard changes some output."""
    src = random_ids(8, 8, vocab=40, seed=3)
    plain = translate_ids(model, src, 4, SearchConfig(max_repeats=0))
    for guard in ({"max_repeats": 2}, {"no_repeat_ngram_size": 2}, {"repetition_penalty": 2.0}):
        config = SearchConfig(**{"max_repeats": 0} | guard)
        guarded = translate_ids(model, src, 4, config)
        assert [h[0].tokens for h in guarded] != [h[0].tokens for h in plain], guard


@pytest.mark.parametrize("beam", [1, 3])
def test_continuous_batching_gives_each_sentence_its_own_guarded_output(model, beam):
    rng = random.Random(2)
    sources = [[rng.randrange(4, 40) for _ in range(rng.randrange(1, 12))] for _ in range(12)]
    decoder = ContinuousGreedy(model, ALL_ON) if beam == 1 else ContinuousBeam(model, ALL_ON, beam)
    results, pending = {}, list(enumerate(sources))
    while pending or decoder.active:
        if pending:  # one newcomer a step
            index, source = pending.pop(0)
            decoder.add([source], [index])
        results.update(decoder.step())
    for index, source in enumerate(sources):
        expected = translate_ids(model, torch.tensor([source]), beam, ALL_ON)[0][0].tokens
        got = results[index] if beam == 1 else results[index][0]
        assert got.tokens == expected


def test_constrained_search_keeps_the_guard_for_sentences_without_constraints(model):
    src = random_ids(3, 8, vocab=40, seed=4)
    max_lens = ALL_ON.max_lengths((src != PAD).sum(1))
    plain = beam_search(TransformerScorer(model, src, 3, 20), max_lens, 3, IDS, ALL_ON)
    steered = constrained_beam_search(
        TransformerScorer(model, src, 3, 20), max_lens, 3, IDS, [None] * 3, ALL_ON
    )
    assert [h[0].tokens for h in steered] == [h[0].tokens for h in plain]
    assert not any(
        tandem_repeats(h[0].tokens, ALL_ON.max_repeats) for h in steered
    )  # guarded still


def test_rules_mark_pieces_without_letters(tmp_path):
    from seq2seq.inference.engines import token_rules
    from seq2seq.inference.translator import Translator
    from tests.helpers import tiny_checkpoint

    translator = Translator.from_checkpoint(tiny_checkpoint(tmp_path / "mt.ckpt"))
    rules: TokenRules = token_rules(translator.tokenizer)
    pieces = {translator.tokenizer.id_to_piece(i) for i in rules.symbols}
    # A byte piece <0xNN> writes the byte NN; the others write their text.
    texts = [chr(int(p[3:5], 16)) if p.startswith("<0x") else p for p in pieces]
    assert texts and not any(c.isalpha() for text in texts for c in text)
    others = [
        translator.tokenizer.id_to_piece(i)
        for i in range(4, translator.tokenizer.vocab_size)
        if i not in set(rules.symbols)
    ]  # each writes a letter, or is a byte piece of a letter or of a non-ASCII byte
    assert all(p.startswith("<") or any(c.isalpha() for c in p) for p in others)


def test_ctranslate2_searches_looping_outputs_again_and_gives_our_greedy_output(tmp_path):
    """CTranslate2 has no max_repeats: its looping outputs are searched again with what they
    repeated suppressed, which gives exactly our guarded greedy output."""
    pytest.importorskip("ctranslate2")
    from seq2seq.inference.options import TranslateOptions
    from seq2seq.inference.translator import Translator
    from seq2seq.tools.export import export_ctranslate2
    from tests.helpers import synthetic_pairs, tiny_checkpoint, without_byte_rule

    checkpoint = tiny_checkpoint(tmp_path / "model.ckpt")
    exported = export_ctranslate2(checkpoint, tmp_path / "ct2")
    lines = [en for en, _ in synthetic_pairs()[:40:3]]
    greedy = TranslateOptions(beam_size=1, split=False)
    ours = without_byte_rule(Translator.from_checkpoint(checkpoint))
    theirs = without_byte_rule(Translator.from_ctranslate2(exported))
    unguarded = theirs.with_search(max_repeats=0).translate(lines, greedy)
    guarded = theirs.translate(lines, greedy)
    assert guarded != unguarded  # the untrained model loops: some lines were searched again
    assert guarded == ours.translate(lines, greedy)
    for line in guarded:  # no character three times in a row
        assert not any(c.isalpha() and line.count(c * 3) for c in line)


# -- every route can change it ------------------------------------------------------------


@pytest.fixture(scope="module")
def looping_checkpoint(tmp_path_factory):
    """An untrained tiny checkpoint: it loops, so the guard's settings show."""
    from tests.helpers import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("loops") / "mt.ckpt")


LOOPING_LINES = ["Tom will buy apples today.", "She can see the small dog.", "We eat rice."]


def python_api(checkpoint, **changes) -> list[str]:
    from seq2seq.inference.options import TranslateOptions
    from seq2seq.inference.translator import Translator

    translator = Translator.from_checkpoint(checkpoint).with_search(**changes)
    # One line a call: an untrained model's near-ties may differ between rows of a batch.
    return [
        translator.translate([line], TranslateOptions(beam_size=2))[0] for line in LOOPING_LINES
    ]


def test_translate_takes_the_guards_options(looping_checkpoint, tmp_path):
    from seq2seq.cli import main

    source, out = tmp_path / "in.en", tmp_path / "out.zh"
    source.write_text("\n".join(LOOPING_LINES) + "\n", encoding="utf-8")

    def translate(*flags: str) -> list[str]:
        command = ["translate", "--checkpoint", str(looping_checkpoint), "--input", str(source)]
        assert main([*command, "--output", str(out), "--beam-size", "2", *flags]) == 0
        return out.read_text(encoding="utf-8").splitlines()

    guarded = translate()
    assert guarded == python_api(looping_checkpoint)
    assert translate("--max-repeats", "0") == python_api(looping_checkpoint, max_repeats=0)
    assert translate("--max-repeats", "0") != guarded
    flags = ["--no-repeat-ngram-size", "2", "--repetition-penalty", "1.5"]
    assert translate(*flags) == python_api(
        looping_checkpoint, no_repeat_ngram_size=2, repetition_penalty=1.5
    )


def test_serve_takes_the_guards_options(looping_checkpoint):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from seq2seq.cli.arguments import build_parser
    from seq2seq.cli.commands import _server_settings
    from seq2seq.serve.app import create_app
    from seq2seq.serve.handling import ServerSettings
    from seq2seq.serve.served_model import ServedModel

    args = build_parser().parse_args(
        ["serve", "--checkpoint", str(looping_checkpoint), "--max-repeats", "0"]
    )
    assert _server_settings(args).search_changes == {"max_repeats": 0}
    served = ServedModel.load(looping_checkpoint)

    def answers(settings: ServerSettings) -> list[str]:
        texts = []
        with TestClient(create_app(served, settings)) as client:
            for line in LOOPING_LINES:  # one line a request, as python_api's calls
                body = {"q": line, "source": "en", "target": "zh"}
                response = client.post("/translate", json=body)
                assert response.status_code == 200, response.text
                texts.append(response.json()["translatedText"])
        return texts

    assert answers(ServerSettings(continuous=False, beam_size=2)) == python_api(looping_checkpoint)
    unguarded = python_api(looping_checkpoint, max_repeats=0)
    assert answers(ServerSettings(continuous=False, beam_size=2, max_repeats=0)) == unguarded
    assert answers(ServerSettings(beam_size=2, max_repeats=0)) == unguarded  # continuous
    assert served.translator.search.max_repeats == 2  # the app's setting left the model's own
    with pytest.raises(ValueError, match="repetition_penalty"):
        ServerSettings(repetition_penalty=0.5)


def test_the_penalty_leaves_pad_alone_so_continuous_batching_equals_alone():
    """Continuous histories are padded: pad is in the normaliser and must keep its logit (a
    model with an output bias gives pad a logit of its own)."""
    model = tiny_model(seed=5, vocab_size=40, max_positions=64, output_bias=True).float()
    with torch.no_grad():
        model.embedding.bias[PAD] = 6.0
    config = SearchConfig(max_len_a=1.0, max_len_b=6, repetition_penalty=1.5)
    rng = random.Random(4)
    sources = [[rng.randrange(4, 40) for _ in range(rng.randrange(2, 10))] for _ in range(8)]
    decoder = ContinuousBeam(model, config, 3)
    results, pending = {}, list(enumerate(sources))
    while pending or decoder.active:
        if pending:
            index, source = pending.pop(0)
            decoder.add([source], [index])
        results.update(decoder.step())
    for index, source in enumerate(sources):
        alone = translate_ids(model, torch.tensor([source]), 3, config)[0][0]
        assert results[index][0].tokens == alone.tokens
        assert results[index][0].log_prob == pytest.approx(alone.log_prob, abs=1e-4)


def test_no_repeat_ngram_size_never_leaves_a_character_unfinished():
    """Continuation bytes are free of the n-gram rule: inside a character the lead byte chose."""
    byte_ids = tuple(range(8, 8 + 256))
    vocab = 8 + 256
    specials = SpecialTokens(pad=PAD, unk=UNK, bos=BOS, eos=EOS, bytes=byte_ids)
    lead, cont = byte_ids[0xE5], byte_ids[0x93]
    logits = torch.zeros(1, 1, vocab)
    written = torch.tensor([[[lead, cont, byte_ids[0x88], lead]]])  # 哈 then E5 again
    guard = RepetitionGuard(max_repeats=0, no_repeat_ngram_size=2)
    from seq2seq.decoding.search import restrict_next_tokens_

    out = restrict_next_tokens_(
        logits, 4, torch.tensor([20]), specials, written=written, guard=guard
    )
    assert out[0, 0, cont].isfinite()  # E5 93 again: the bigram repeats, the character must go on
