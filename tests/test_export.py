"""Exports keep our search's rules: never unk, pad or bos, never an empty output of a
non-empty source, in Hugging Face ``generate`` and in CTranslate2. An untrained checkpoint whose
export is pushed towards unk and eos by a bias on those logits shows that the rules, not the
model, keep them out (slow: a tokenizer, an export and a conversion, about 15 s).

And they read sources as the model was trained: a new model's (ending with ``</s>``) exactly as
``MarianTokenizer`` cuts them, so ``MarianTokenizer`` + ``generate`` give our greedy output; a
model from before, without it (CTranslate2 exactly; the HF export with a warning)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from seq2seq.inference.options import TranslateOptions
from tests.helpers import synthetic_pairs, tiny_checkpoint, without_byte_rule

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SOURCES = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]

LINES = [en for en, _ in synthetic_pairs()[:300:37]]

pytest.importorskip("transformers", reason="the exports need transformers")


@pytest.fixture(scope="module")
def biased_export(tmp_path_factory):
    """An HF export whose model would rather say <unk>, or end at once, than anything else."""
    from transformers import MarianMTModel

    from seq2seq.tools.export import export_hf

    root = tmp_path_factory.mktemp("export")
    hf = export_hf(tiny_checkpoint(root / "model.ckpt", saved_before_unk_id=True), root / "hf")
    marian = MarianMTModel.from_pretrained(hf)
    with torch.no_grad():
        marian.final_logits_bias[0, [UNK, EOS]] = 50.0
        # Then its last piece, an ordinary one: untrained, it could prefer a lone byte piece,
        # which forms no character (CTranslate2's are dropped, ``engines.whole_characters``).
        marian.final_logits_bias[0, -1] = 20.0
    marian.save_pretrained(hf)
    return hf


def test_the_generation_config_bans_specials_and_empty_outputs():
    from seq2seq.config import ModelConfig
    from seq2seq.tools.export import generation_config

    config = generation_config(ModelConfig()).to_dict()
    assert config["bad_words_ids"] == [[PAD], [UNK], [BOS]]
    assert config["min_new_tokens"] == 1 and config["forced_eos_token_id"] == EOS


@pytest.mark.slow
def test_the_export_writes_that_generation_config(biased_export):
    saved = json.loads((biased_export / "generation_config.json").read_text(encoding="utf-8"))
    assert saved["bad_words_ids"] == [[PAD], [UNK], [BOS]] and saved["min_new_tokens"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("beams", [1, 3])
def test_generate_gives_one_real_token_where_the_model_wants_unk_or_nothing(biased_export, beams):
    from transformers import MarianMTModel

    marian = MarianMTModel.from_pretrained(biased_export).eval()
    with torch.no_grad():
        for source in SOURCES:
            ids = torch.tensor([source])
            out = marian.generate(input_ids=ids, num_beams=beams, max_length=10)[0].tolist()
            assert out[0] == BOS and out[1] not in (PAD, UNK, BOS, EOS) and out[2:] == [EOS]
            # A limit of one token (after the start token) leaves room for the eos alone.
            limited = marian.generate(input_ids=ids, num_beams=beams, max_length=2)[0].tolist()
            assert limited == [BOS, EOS]


@pytest.fixture(scope="module")
def biased_ctranslate2(biased_export, tmp_path_factory):
    """The same model converted for CTranslate2, with search settings as exports wrote them
    before unk_id existed."""
    pytest.importorskip("ctranslate2")
    from seq2seq.inference.ctranslate2_engine import SETTINGS_FILE, SPM_FILE, CTranslate2Engine
    from seq2seq.tools.export import convert

    out = tmp_path_factory.mktemp("ct2")
    convert(biased_export, out)
    shutil.copy(biased_export / "source.spm", out / SPM_FILE)
    old = {"bos_id": BOS, "eos_id": EOS, "pad_id": PAD, "max_len_a": 1.2, "max_len_b": 10}
    settings = {"search": old, "max_positions": 128}
    (out / SETTINGS_FILE).write_text(json.dumps(settings), encoding="utf-8")
    return CTranslate2Engine(out)


def best_outputs(engine, sources, beams):
    return [hyps[0].tokens for hyps in engine.hypotheses(sources, beams)]


@pytest.mark.slow
@pytest.mark.parametrize("beams", [1, 3])
def test_ctranslate2_gives_one_real_token_where_the_model_wants_unk_or_nothing(
    biased_ctranslate2, beams
):
    for tokens in best_outputs(biased_ctranslate2, SOURCES, beams):
        assert len(tokens) == 1 and tokens[0] not in (PAD, UNK, BOS, EOS)
    only_eos = biased_ctranslate2.with_search(max_len_a=0.0, max_len_b=1)  # a limit of 1
    assert best_outputs(only_eos, SOURCES, beams) == [[], [], []]


@pytest.fixture(scope="module")
def new_model(tmp_path_factory):
    """An untrained checkpoint of a model trained on sources ending with eos, and its export."""
    from seq2seq.tools.export import export_hf

    root = tmp_path_factory.mktemp("new")
    checkpoint = tiny_checkpoint(root / "model.ckpt", source_ends_with_eos=True)
    return checkpoint, export_hf(checkpoint, root / "hf")


@pytest.mark.slow
def test_marian_tokenizer_and_generate_give_our_greedy_translations(new_model, capsys):
    from transformers import MarianMTModel, MarianTokenizer

    from seq2seq.inference.translator import Translator

    checkpoint, hf = new_model
    assert "warning" not in capsys.readouterr().err
    marian = MarianMTModel.from_pretrained(hf).eval()
    tokenizer = MarianTokenizer.from_pretrained(hf)
    # generate() has neither our byte rule nor our repetition guard
    translator = without_byte_rule(Translator.from_checkpoint(checkpoint)).with_search(
        max_repeats=0
    )
    ours = translator.translate_n_best(LINES, TranslateOptions(beam_size=1, split=False))
    for line, [best] in zip(LINES, ours, strict=True):
        encoded = tokenizer(line, return_tensors="pt")
        assert encoded.input_ids[0].tolist() == translator.encode([line])[0]  # ends with </s>
        # An untrained model runs to our length limit, a * |source| + b: generate's max_length
        # counts its start token too.
        limit = int(translator.search.max_lengths(torch.tensor([encoded.input_ids.shape[1]]))[0])
        with torch.no_grad():
            generated = marian.generate(
                **encoded, num_beams=1, do_sample=False, max_length=limit + 1
            )[0].tolist()
        assert generated == [BOS, *best.tokens, EOS]
        assert tokenizer.decode(generated, skip_special_tokens=True) == best.text


@pytest.mark.slow
def test_an_older_model_exports_with_a_warning_and_imports_back_as_it_was(tmp_path, capsys):
    from transformers import MarianConfig

    from seq2seq.inference.checkpoint import load_model
    from seq2seq.tools.export import export_hf
    from seq2seq.tools.marian_weights import EXPORT_SOURCE_EOS
    from seq2seq.tools.pretrained import import_marian

    old = tiny_checkpoint(tmp_path / "old.ckpt")  # no key: trained without a source eos
    hf = export_hf(old, tmp_path / "hf")
    err = capsys.readouterr().err  # (transformers' progress bars too)
    [warning] = [line for line in err.splitlines() if line.startswith("warning:")]
    assert "trained on sources without </s>" in warning and "retrain" in warning
    assert "drop it from `input_ids`" in (hf / "README.md").read_text(encoding="utf-8")
    assert getattr(MarianConfig.from_pretrained(hf), EXPORT_SOURCE_EOS) is False
    again = load_model(import_marian(str(hf), tmp_path / "again.ckpt"))
    assert again.tokenizer.source_ends_with_eos is False


@pytest.mark.slow
@pytest.mark.parametrize("with_eos", [True, None])  # None: a checkpoint from before the key
def test_ctranslate2_reads_sources_as_the_model_was_trained(tmp_path, capsys, with_eos):
    pytest.importorskip("ctranslate2")
    from seq2seq.inference.translator import Translator
    from seq2seq.tools.export import export_ctranslate2

    checkpoint = tiny_checkpoint(tmp_path / "model.ckpt", source_ends_with_eos=with_eos)
    exported = export_ctranslate2(checkpoint, tmp_path / "ct2")
    assert "warning" not in capsys.readouterr().err  # exact either way
    ours, theirs = Translator.from_checkpoint(checkpoint), Translator.from_ctranslate2(exported)
    without_byte_rule(ours), without_byte_rule(theirs)  # untrained: broken bytes either way
    assert theirs.tokenizer.source_ends_with_eos is bool(with_eos)
    assert theirs.encode(LINES) == ours.encode(LINES)
    assert theirs.translate(LINES, TranslateOptions(beam_size=1)) == ours.translate(
        LINES, TranslateOptions(beam_size=1)
    )


def test_ctranslate2_outputs_lose_their_broken_bytes_and_say_so(tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from seq2seq.inference.translator import Translator
    from seq2seq.tools.export import export_ctranslate2

    exported = export_ctranslate2(tiny_checkpoint(tmp_path / "model.ckpt"), tmp_path / "ct2")
    raw = without_byte_rule(Translator.from_ctranslate2(exported)).translate(
        LINES, TranslateOptions(beam_size=1)
    )
    assert any("\ufffd" in line for line in raw)  # untrained, it writes half characters
    capsys.readouterr()
    cleaned = Translator.from_ctranslate2(exported).translate(LINES, TranslateOptions(beam_size=1))
    assert not any("\ufffd" in line for line in cleaned)
    assert "byte piece(s) that form no UTF-8 character" in capsys.readouterr().err
    ours = Translator.from_checkpoint(tmp_path / "model.ckpt").translate(
        LINES, TranslateOptions(beam_size=1)
    )
    assert not any("\ufffd" in line for line in ours)  # our searches never write them


def test_plain_ctranslate2_reads_sources_as_the_model_was_trained(tmp_path):
    """CTranslate2 used the standard way (SentencePiece pieces in, no code of ours) gives our
    engine's tokens: the export's config.json says add_source_eos. An export written before
    (add_source_eos false) still translates the same through our engine."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    import sentencepiece

    from seq2seq.inference.ctranslate2_engine import SPM_FILE
    from seq2seq.inference.translator import Translator
    from seq2seq.tools.export import export_ctranslate2

    checkpoint = tiny_checkpoint(tmp_path / "model.ckpt", source_ends_with_eos=True)
    exported = export_ctranslate2(checkpoint, tmp_path / "ct2")
    config = json.loads((exported / "config.json").read_text(encoding="utf-8"))
    assert config["add_source_eos"] is True
    sp = sentencepiece.SentencePieceProcessor(model_file=str(exported / SPM_FILE))
    # Plain CTranslate2 has no max_repeats: our engine's is off to compare.
    ours = without_byte_rule(Translator.from_ctranslate2(exported)).with_search(max_repeats=0)
    sources = ours.encode(LINES)
    found = ours.engine.hypotheses(sources, 1)
    # An untrained model runs to the length limit and likes <s>, which a trained one never
    # writes: plain CTranslate2 gets our limit, and <s> and <pad> banned as ours are.
    limits = ours.search.max_lengths(torch.tensor([len(s) for s in sources])) - 1

    def plain(translator):
        return [
            translator.translate_batch(
                [sp.encode(line, out_type=str)],
                beam_size=1,
                max_decoding_length=int(limit),
                suppress_sequences=[["<s>"], ["<pad>"]],
            )[0].hypotheses[0]
            for line, limit in zip(LINES, limits, strict=True)
        ]

    standard = plain(ctranslate2.Translator(str(exported)))
    assert standard == [[sp.id_to_piece(t) for t in h[0].tokens] for h in found]
    config["add_source_eos"] = False  # as exports were written before
    (exported / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert plain(ctranslate2.Translator(str(exported))) != standard  # the eos matters
    old = without_byte_rule(Translator.from_ctranslate2(exported)).with_search(max_repeats=0)
    assert old.translate(LINES, TranslateOptions(beam_size=1)) == ours.translate(
        LINES, TranslateOptions(beam_size=1)
    )
