"""The pieces around TranslationModule, tested without a Trainer: the ``ValidationBleu``
callback (its hook called with a stand-in trainer), ``check_data_fits_model`` (called directly)
and ``seq2seq fit`` adding the callback."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import seq2seq.training.validation as validation
from seq2seq.errors import ConfigError
from seq2seq.training.data_checks import InitCheckpoint, check_data_fits_model
from seq2seq.training.module import TranslationModule
from seq2seq.training.validation import ValidationBleu, evenly_spaced
from tests.helpers import synthetic_pairs, tiny_config

# -- ValidationBleu ----------------------------------------------------------------------------

PAIRS = synthetic_pairs()[:10]


@pytest.fixture(scope="module")
def tokenizer():
    from seq2seq.data.tokenizer import Tokenizer

    return Tokenizer.train([text for pair in synthetic_pairs() for text in pair], 406)


class DevData:
    """Stands in for the data module: the dev set's raw texts."""

    def split_texts(self, split: str) -> tuple[list[str], list[str]]:
        assert split == "dev"
        return [en for en, _ in PAIRS], [zh for _, zh in PAIRS]


def stand_in_trainer(rank: int = 0, world_size: int = 1) -> SimpleNamespace:
    return SimpleNamespace(datamodule=DevData(), global_rank=rank, world_size=world_size)


def logging_module(tokenizer, monkeypatch, **hparams) -> tuple[TranslationModule, list]:
    """A tiny untrained module with the data's tokenizer; its ``log`` calls are recorded."""
    module = TranslationModule(tiny_config(vocab_size=tokenizer.vocab_size), **hparams).eval()
    module.tokenizer_bytes = tokenizer.to_bytes()
    logged = []
    monkeypatch.setattr(module, "log", lambda name, value, **kw: logged.append((name, value, kw)))
    return module, logged


@pytest.fixture
def scored(monkeypatch) -> list:
    """What BLEU is computed on (hypotheses, references); the score is always 12.5."""
    calls = []

    def score(hypotheses, references):
        calls.append((hypotheses, references[0]))
        return {"bleu": 12.5}

    monkeypatch.setattr(validation, "score_translations", score)
    return calls


def test_validation_bleu_scores_evenly_spaced_dev_sentences_and_logs_them(
    tokenizer, monkeypatch, scored
):
    module, logged = logging_module(tokenizer, monkeypatch, val_bleu_sentences=4)
    ValidationBleu().on_validation_epoch_end(stand_in_trainer(), module)
    assert logged == [("val_bleu", 12.5, {"prog_bar": True, "sync_dist": True, "reduce_fx": "max"})]
    ((hypotheses, references),) = scored
    assert references == [PAIRS[i][1] for i in (0, 2, 5, 7)]
    assert len(hypotheses) == 4 and all(isinstance(h, str) for h in hypotheses)


def test_validation_bleu_gathers_every_ranks_share_in_dev_order(tokenizer, monkeypatch, scored):
    """Rank 1 of 2 translates every other chosen sentence; the gathered translations are
    scored in dev order, as one process would score them."""
    given = []

    def gather(items):  # rank 0's share, translated as "zero", then ours
        given.extend(items)
        return [(i, "zero") for i in range(0, 10, 2)] + items

    monkeypatch.setattr(validation, "gather_objects", gather)
    module, _ = logging_module(tokenizer, monkeypatch, val_bleu_sentences=-1)
    ValidationBleu().on_validation_epoch_end(stand_in_trainer(rank=1, world_size=2), module)
    assert [i for i, _ in given] == [1, 3, 5, 7, 9]
    ((hypotheses, references),) = scored
    assert hypotheses[0::2] == ["zero"] * 5
    assert hypotheses[1::2] == [text for _, text in given]
    assert references == [zh for _, zh in PAIRS]


def test_validation_bleu_is_skipped_when_switched_off_or_for_a_language_model(
    tokenizer, monkeypatch, scored
):
    module, logged = logging_module(tokenizer, monkeypatch, val_bleu_sentences=0)
    ValidationBleu().on_validation_epoch_end(stand_in_trainer(), module)
    module, logged_lm = logging_module(tokenizer, monkeypatch)
    module.task = "lm"
    ValidationBleu().on_validation_epoch_end(stand_in_trainer(), module)
    assert logged == logged_lm == [] and scored == []


def test_validation_bleu_is_zero_without_a_tokenizer_or_dev_texts(tokenizer, monkeypatch):
    module, logged = logging_module(tokenizer, monkeypatch)
    ValidationBleu().on_validation_epoch_end(SimpleNamespace(datamodule=None), module)
    module.tokenizer_bytes = None
    ValidationBleu().on_validation_epoch_end(stand_in_trainer(), module)
    assert [value for _, value, _ in logged] == [0.0, 0.0]


def test_evenly_spaced_spreads_the_sample_over_the_whole_set():
    assert evenly_spaced(10, 4) == [0, 2, 5, 7]
    assert evenly_spaced(3, 5) == evenly_spaced(3, -1) == [0, 1, 2]


def test_fit_adds_the_validation_bleu_callback_to_the_trainer():
    from pathlib import Path

    from seq2seq.training.lightning_cli import run_lightning_cli

    config = Path(__file__).parent.parent / "configs" / "tiny.yaml"
    cli = run_lightning_cli(["--config", str(config)], run=False)
    assert sum(isinstance(c, ValidationBleu) for c in cli.trainer.callbacks) == 1


# -- check_data_fits_model ---------------------------------------------------------------------


class FakeTokenizer:
    """The tokenizer attributes the checks read."""

    def __init__(self, vocab_size=40, ids=(0, 2, 3), source_ends_with_eos=False, model=b"spm"):
        self.vocab_size, self.model = vocab_size, model
        self.source_ends_with_eos = source_ends_with_eos
        self.pad_id, self.bos_id, self.eos_id = ids

    def to_bytes(self) -> bytes:
        return self.model


def data(tokenizer=None, **fields) -> SimpleNamespace:
    """A stand-in data module (translation pairs of max_len 20, encoder-decoder layout)."""
    values = dict(
        tokenizer=tokenizer or FakeTokenizer(),
        task="translation",
        max_len=20,
        block_size=20,
        decoder_only=False,
    )
    return SimpleNamespace(**{**values, **fields})


def test_data_that_fits_the_model_passes():
    config = tiny_config()
    check_data_fits_model(config, data())
    check_data_fits_model(config, data(max_len=config.max_positions - 1))
    check_data_fits_model(config, data(FakeTokenizer(source_ends_with_eos=True)))
    origin = InitCheckpoint("base.ckpt", b"spm", source_ends_with_eos=False)
    check_data_fits_model(config, data(), origin)


@pytest.mark.parametrize(
    ("config", "datamodule", "message"),
    [
        (
            tiny_config(),
            data(FakeTokenizer(vocab_size=41)),
            r"^ModelConfig.vocab_size \(40\) disagrees with the SentencePiece model \(41 pieces\)$",
        ),
        (
            tiny_config(),
            data(FakeTokenizer(ids=(1, 2, 3))),
            r"^the tokenizer's pad/bos/eos ids \(1, 2, 3\) are not the model's \(0, 2, 3\)$",
        ),
        (
            tiny_config(),
            data(decoder_only=True),
            "the data layout disagrees with the model's decoder_only=False",
        ),
        (
            tiny_config(decoder_only=True, n_encoder_layers=0),
            data(FakeTokenizer(source_ends_with_eos=True), decoder_only=True),
            "decoder-only translation model reads .* must not end with </s>$",
        ),
        (
            tiny_config(),
            data(max_len=128),
            r"^data.max_len=128 \(\+ bos\) make 129-token sequences but model.config.max_positions "
            "is 128: raise it or shorten the data$",
        ),
        (
            tiny_config(decoder_only=True, n_encoder_layers=0),
            data(max_len=64, decoder_only=True),
            "decoder-only pairs of data.max_len=64 joined make 130-token sequences",
        ),
        (tiny_config(), data(task="lm", block_size=200), "^data.block_size=200 make 200-token"),
    ],
)
def test_data_that_does_not_fit_is_a_one_line_error(config, datamodule, message):
    with pytest.raises(ConfigError, match=message):
        check_data_fits_model(config, datamodule)


def test_a_fine_tuned_models_data_must_be_cut_as_its_checkpoints():
    config, origin = tiny_config(), InitCheckpoint("base.ckpt", b"spm", source_ends_with_eos=False)
    with pytest.raises(ConfigError, match="not cut by the tokenizer of base.ckpt: set data.tok"):
        check_data_fits_model(config, data(FakeTokenizer(model=b"other")), origin)
    wrong_ending = (
        r"sources end with </s> but base.ckpt was trained on sources that do not end with "
        "</s>: cut the data with its tokenizer"
    )
    with pytest.raises(ConfigError, match=wrong_ending):
        check_data_fits_model(config, data(FakeTokenizer(source_ends_with_eos=True)), origin)
    # A language model reads no sources: how they would end does not matter.
    check_data_fits_model(config, data(FakeTokenizer(source_ends_with_eos=True), task="lm"), origin)
