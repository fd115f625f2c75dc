"""``seq2seq import``: a MarianMTModel shaped like OPUS-MT's opus-mt-en-zh (built here, offline,
small, random weights: tests/opus_mt.py) becomes a checkpoint that computes the same function,
tokenizes as MarianTokenizer does, and goes back out through ``export`` unchanged."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from seq2seq.inference.options import TranslateOptions
from tests.helpers import tiny_checkpoint
from tests.opus_mt import build_opus_mt_like, hsk_pairs

pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

TARGET = ">>cmn_Hans<<"
ODD_TEXTS = [
    "",
    "   leading and  inner   spaces ",
    "Ünïcödé ½ 42 — “quotes”",
    "emoji 🙂 ok",
    "tab\there",
    "a" * 300,
    ">>yue<< a code already",
    "中文 mixed with English",
]


def _marian(directory):
    from transformers import MarianMTModel, MarianTokenizer

    return MarianMTModel.from_pretrained(directory).eval(), MarianTokenizer.from_pretrained(
        directory
    )


@pytest.fixture(scope="module")
def opus(tmp_path_factory):
    from seq2seq.inference.checkpoint import load_model
    from seq2seq.tools.pretrained import import_marian

    root = tmp_path_factory.mktemp("opus")
    directory = build_opus_mt_like(root / "hf")
    checkpoint = import_marian(str(directory), root / "imported.ckpt", TARGET)
    marian, hf_tokenizer = _marian(directory)
    pairs = hsk_pairs()[::500][:9]
    return SimpleNamespace(
        dir=directory,
        ckpt=checkpoint,
        marian=marian,
        hf=hf_tokenizer,
        loaded=load_model(checkpoint),
        pairs=pairs,
        root=root,
    )


def test_the_config_and_special_ids_come_from_the_files(opus):
    config, marian_pad = opus.loaded.model.config, opus.marian.config.pad_token_id
    assert config.activation == "swish" and config.output_bias
    assert (config.d_model, config.n_heads, config.d_ff) == (32, 4, 64)
    assert (config.eos_id, config.unk_id) == (0, 1)
    # Decoding starts from Marian's <pad> row; padding gets an id of its own after it.
    assert config.bos_id == marian_pad and config.pad_id == marian_pad + 1
    assert config.vocab_size == opus.marian.config.vocab_size + 1
    embedding = opus.loaded.model.embedding
    assert not embedding.weight[config.pad_id].any()
    assert embedding.bias[config.pad_id] < -50


def _batch(opus):
    """MarianTokenizer's padded batch, and the same batch padded with our padding id."""
    sources = [en for en, _ in opus.pairs]
    targets = [zh for _, zh in opus.pairs]
    encoded = opus.hf(
        [f"{TARGET} {s}" for s in sources], text_target=targets, padding=True, return_tensors="pt"
    )
    return encoded


def test_logits_equal_marians_on_a_padded_batch(opus):
    config, marian_pad = opus.loaded.model.config, opus.marian.config.pad_token_id
    batch = _batch(opus)
    labels = batch["labels"]  # (B, T): targets + eos, padded with Marian's pad
    real = labels != marian_pad
    start = torch.full_like(labels[:, :1], marian_pad)
    decoder_in = torch.cat([start, labels[:, :-1]], dim=1)  # Marian's shift_tokens_right
    with torch.no_grad():
        reference = opus.marian(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            decoder_input_ids=decoder_in,
        ).logits
        source = batch.input_ids.masked_fill(batch.attention_mask == 0, config.pad_id)
        target_in = decoder_in.masked_fill(
            ~torch.cat([real[:, :1], real[:, :-1]], 1), config.pad_id
        )
        ours = opus.loaded.model(source, target_in)
    marian_rows = reference.shape[-1]
    assert real.sum() > 50 and (~real).sum() > 0  # padded rows on both sides
    assert (ours[..., :marian_rows] - reference)[real].abs().max() < 1e-4
    # The appended padding id takes no probability: log-probabilities are Marian's too.
    log_probs = ours.log_softmax(-1)[..., :marian_rows] - reference.log_softmax(-1)
    assert log_probs[real].abs().max() < 1e-4


def test_greedy_translations_equal_generate(opus):
    from seq2seq.decoding.decode import translate_ids
    from seq2seq.inference.translator import Translator

    loaded, config = opus.loaded, opus.loaded.model.config
    # Marian's generate has no repetition guard: ours is switched off to compare.
    tokenizer, search = loaded.tokenizer, replace(loaded.search, max_repeats=0)
    sources = [tokenizer.encode_source(en) for en, _ in opus.pairs]
    width = max(map(len, sources))
    batch = torch.tensor([s + [config.pad_id] * (width - len(s)) for s in sources])
    ours = [h[0].tokens for h in translate_ids(loaded.model, batch, 1, search)]
    texts = (
        Translator.from_checkpoint(opus.ckpt)
        .with_search(max_repeats=0)
        .translate([en for en, _ in opus.pairs], TranslateOptions(beam_size=1))
    )
    for source, tokens, text in zip(sources, ours, texts, strict=True):
        limit = int(search.max_lengths(torch.tensor([len(source)]))[0])  # tokens, eos included
        # Our searches' rules: never pad (Marian's bad_words_ids), unk or the start token; at
        # least one token; eos forced at the length limit.
        generated = opus.marian.generate(
            torch.tensor([source]),
            num_beams=1,
            do_sample=False,
            max_length=limit + 1,
            min_new_tokens=1,
            bad_words_ids=[[config.bos_id], [config.unk_id]],
        )[0].tolist()
        assert generated[0] == config.bos_id
        expected = generated[1:]
        if expected[-1] == config.eos_id:
            expected = expected[:-1]
        assert tokens == expected
        assert text == opus.hf.decode(generated, skip_special_tokens=True)


@pytest.mark.parametrize("target_token", [TARGET, None])
def test_tokenization_equals_marian_tokenizers(opus, target_token):
    from seq2seq.data.paired_tokenizer import PairedTokenizer

    imported = opus.loaded.tokenizer
    tokenizer = PairedTokenizer(
        imported._source_model,
        imported._target_model,
        imported.vocab,
        imported.specials,
        target_token,
    )
    prefix = f"{target_token} " if target_token else ""
    sources = [en for en, _ in hsk_pairs()[::40]] + ODD_TEXTS
    unknown = 0
    for text in sources:
        expected = opus.hf(prefix + text).input_ids
        assert tokenizer.encode_source(text) == expected, text
        unknown += expected.count(tokenizer.unk_id)
    assert unknown > 0  # pieces missing from vocab.json became <unk>, as MarianTokenizer has it
    for _, zh in hsk_pairs()[::40]:
        ids = opus.hf(text_target=zh).input_ids
        assert tokenizer.encode_target(zh) + [tokenizer.eos_id] == ids
        assert tokenizer.decode(ids) == opus.hf.decode(ids, skip_special_tokens=True)


def test_import_export_import_round_trips(opus, tmp_path):
    from seq2seq.inference.checkpoint import load_model, read_checkpoint
    from seq2seq.tools.export import export_hf
    from seq2seq.tools.pretrained import import_marian

    exported = export_hf(opus.ckpt, tmp_path / "hf")
    marian, _ = _marian(exported)
    original = opus.marian.state_dict()
    assert marian.state_dict().keys() == original.keys()
    for name, tensor in marian.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    for key in (
        "vocab_size",
        "pad_token_id",
        "decoder_start_token_id",
        "eos_token_id",
        "activation_function",
    ):
        assert getattr(marian.config, key) == getattr(opus.marian.config, key)
    for name in ("source.spm", "target.spm"):
        assert (exported / name).read_bytes() == (opus.dir / name).read_bytes()
    assert json.loads((exported / "vocab.json").read_text()) == opus.hf.encoder

    again = load_model(import_marian(str(exported), tmp_path / "again.ckpt", TARGET))
    first = read_checkpoint(opus.ckpt)["state_dict"]
    second = read_checkpoint(tmp_path / "again.ckpt")["state_dict"]
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert again.model.config == opus.loaded.model.config
    assert again.tokenizer.to_bytes() == opus.loaded.tokenizer.to_bytes()


@pytest.mark.parametrize("with_eos", [True, None])  # None: a checkpoint from before the key
def test_our_own_export_imports_back_exactly(tmp_path, with_eos):
    from seq2seq.inference.checkpoint import load_model, read_checkpoint
    from seq2seq.tools.export import export_hf
    from seq2seq.tools.pretrained import import_marian

    checkpoint = tiny_checkpoint(tmp_path / "ours.ckpt", source_ends_with_eos=with_eos)
    exported = export_hf(checkpoint, tmp_path / "hf")
    imported = import_marian(str(exported), tmp_path / "imported.ckpt")
    before, after = read_checkpoint(checkpoint), read_checkpoint(imported)
    assert before["state_dict"].keys() == after["state_dict"].keys()
    assert all(torch.equal(v, after["state_dict"][k]) for k, v in before["state_dict"].items())
    assert load_model(imported).model.config == load_model(checkpoint).model.config
    # Its own SentencePiece model, reading sources as it was trained (with eos or without).
    assert after["seq2seq"]["tokenizer"] == before["seq2seq"]["tokenizer"]
    assert load_model(imported).tokenizer.source_ends_with_eos is bool(with_eos)


def test_an_imported_tokenizer_always_ends_sources_with_eos(opus):
    from seq2seq.data.tokenizer import checkpoint_tokenizer, tokenizer_from_bytes
    from seq2seq.inference.checkpoint import read_checkpoint

    assert read_checkpoint(opus.ckpt)["seq2seq"]["source_ends_with_eos"] is True
    assert checkpoint_tokenizer(opus.ckpt).source_ends_with_eos is True
    data = opus.loaded.tokenizer.to_bytes()
    tokenizer = tokenizer_from_bytes(data, source_ends_with_eos=False)  # ignored: Marian's
    assert tokenizer.source_ends_with_eos and tokenizer.encode_source("Hi.")[-1] == 0


def test_an_imported_model_translates_from_the_command_line(opus, tmp_path, capsys):
    from seq2seq.cli import main
    from seq2seq.inference.translator import Translator

    lines = [en for en, _ in opus.pairs[:3]] + ["", "  "]
    (tmp_path / "in.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.zh"
    args = [
        "translate",
        "--checkpoint",
        str(opus.ckpt),
        "--input",
        str(tmp_path / "in.en"),
        "--output",
        str(out),
        "--beam-size",
        "3",
    ]
    assert main(args) == 0
    written = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert written == Translator.from_checkpoint(opus.ckpt).translate(
        lines, TranslateOptions(beam_size=3)
    )
    assert len(written) == len(lines) and written[0] and written[3] == ""


def test_missing_or_unknown_target_tokens_are_one_line_errors(opus, tmp_path, capsys):
    from seq2seq.cli import main

    cases = [
        ([], "choose one with --target-token (one of >>cmn_Hans<<"),
        (["--target-token", ">>xx<<"], "'>>xx<<' is not in the vocabulary"),
    ]
    for extra, message in cases:
        args = ["import", "--hf", str(opus.dir), "--output", str(tmp_path / "x.ckpt"), *extra]
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err
    assert main(["import", "--hf", str(tmp_path / "nowhere"), "--output", "x.ckpt"]) == 2
    assert "nowhere: no such directory" in capsys.readouterr().err
    assert not (tmp_path / "x.ckpt").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"share_encoder_decoder_embeddings": False, "tie_word_embeddings": False},
            "separate vocabularies",
        ),
        ({"tie_word_embeddings": False}, "the output projection is not tied"),
        ({"scale_embedding": False}, "not scaled by sqrt(d_model)"),
        ({"activation_function": "gelu_new"}, "activation 'gelu_new'"),
        ({"decoder_ffn_dim": 48}, "differ in heads or feed-forward width"),
    ],
)
def test_models_we_cannot_represent_are_refused(tmp_path, capsys, overrides, message):
    from seq2seq.cli import main

    directory = build_opus_mt_like(tmp_path / "hf", **overrides)
    args = [
        "import",
        "--hf",
        str(directory),
        "--output",
        str(tmp_path / "x.ckpt"),
        "--target-token",
        TARGET,
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot import" in err and message in err and "\n" not in err
    assert not (tmp_path / "x.ckpt").exists()


def test_a_cut_source_keeps_its_language_token_and_eos(opus, capsys):
    from seq2seq.inference.translator import Translator

    translator = Translator.from_checkpoint(opus.ckpt)
    config, tokenizer = opus.loaded.model.config, opus.loaded.tokenizer
    [ids] = translator.encode([" ".join(["tea"] * 300)])
    assert len(ids) == config.max_positions
    assert ids[0] == tokenizer.piece_to_id(TARGET) and ids[-1] == config.eos_id
    assert "truncated 1 over-long input line(s)" in capsys.readouterr().err


def test_an_imported_model_exports_to_ctranslate2_with_the_same_greedy_output(opus, tmp_path):
    pytest.importorskip("ctranslate2")
    from seq2seq.inference.translator import Translator
    from seq2seq.tools.export import export_ctranslate2

    exported = export_ctranslate2(opus.ckpt, tmp_path / "ct2")
    lines = [en for en, _ in opus.pairs]
    ours = Translator.from_checkpoint(opus.ckpt).translate(lines, TranslateOptions(beam_size=1))
    assert (
        Translator.from_ctranslate2(exported).translate(lines, TranslateOptions(beam_size=1))
        == ours
    )
