"""The checkpoint format: loading checkpoints for inference, written atomically, and the source
convention it records (sources ending with eos, or, before that was recorded, without)."""

from types import SimpleNamespace

import pytest
import torch

from seq2seq.data.clean import normalize_en
from seq2seq.data.tokenizer import (
    EOS_ID,
    SEP,
    Tokenizer,
    checkpoint_tokenizer,
    checkpoint_tokenizer_bytes,
)
from seq2seq.decoding.decode import translate_ids
from seq2seq.errors import ConfigError
from seq2seq.inference.checkpoint import atomic_save, load_model, read_checkpoint
from seq2seq.inference.engines import TorchEngine, token_rules
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from seq2seq.training.module import TranslationModule
from tests.helpers import synthetic_pairs, tiny_checkpoint, tiny_config

LINES = ["I will buy tea today.", "Tom can see the red bag.", "We  can cook rice at home."]


def test_a_checkpoint_saved_before_unk_id_existed_loads_with_the_tokenizers_unk(tmp_path):
    loaded = load_model(tiny_checkpoint(tmp_path / "old.ckpt", saved_before_unk_id=True))
    assert loaded.model.config.unk_id == 1
    translator = Translator(TorchEngine(loaded.model, loaded.search), loaded.tokenizer)
    outputs = translator.translate(
        ["I will buy tea today.", "Tom can see the red bag."], TranslateOptions(beam_size=1)
    )
    assert all(outputs) and not any("⁇" in line for line in outputs)  # sp's <unk>


def test_atomic_save_replaces_the_file_and_clears_a_killed_saves_temporary(tmp_path):
    path = tmp_path / "new" / "last.ckpt"  # its directory is made
    atomic_save({"step": 1}, path)
    stale = path.with_name(".last.ckpt.tmp-99999")  # as a save killed mid-write leaves it
    stale.write_bytes(b"half a checkpoint")
    atomic_save({"step": 2}, path)
    assert torch.load(path)["step"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]


# -- the source convention ------------------------------------------------------------------


def greedy(loaded, sources: list[list[int]]) -> list[str]:
    """Each source's greedy translation, decoded straight from its ids, under the rules a
    ``Translator`` takes from its tokenizer (``engines.token_rules``)."""
    rules = token_rules(loaded.tokenizer)
    found = [
        translate_ids(loaded.model, torch.tensor([ids]), 1, loaded.search, rules=rules)[0][0]
        for ids in sources
    ]
    return [loaded.tokenizer.decode(h.tokens) for h in found]


def test_a_checkpoint_written_before_the_key_translates_as_it_did(tmp_path):
    """Checkpoints written before sources ended with eos (the demo model among them) lack the
    key: their models read sources without it, as before; the same weights recorded as a new
    model read the eos."""
    old = tiny_checkpoint(tmp_path / "old.ckpt")
    new = tiny_checkpoint(tmp_path / "new.ckpt", source_ends_with_eos=True)
    assert "source_ends_with_eos" not in read_checkpoint(old)["seq2seq"]
    assert not checkpoint_tokenizer(old).source_ends_with_eos
    assert checkpoint_tokenizer_bytes(old) == checkpoint_tokenizer(old).to_bytes()
    for path, with_eos in ((old, False), (new, True)):
        loaded = load_model(path)
        assert loaded.tokenizer.source_ends_with_eos is with_eos
        translator = Translator.from_checkpoint(path)
        ids = [loaded.tokenizer.encode(normalize_en(line)) + [EOS_ID] * with_eos for line in LINES]
        assert translator.encode(LINES) == ids
        assert translator.translate(LINES, TranslateOptions(beam_size=1)) == greedy(loaded, ids)


@pytest.fixture(scope="module")
def tokenizers():
    """The tokenizer tiny_checkpoint trains, and one with a <sep> for decoder-only pairs."""
    texts = [text for pair in synthetic_pairs() for text in pair]
    return Tokenizer.train(texts, 406), Tokenizer.train(texts, 406, user_symbols=(SEP,))


def with_data(module: TranslationModule, tokenizer, task: str = "translation"):
    """``module`` set up as fit sets it up, on a data module with ``tokenizer``."""
    data = SimpleNamespace(
        tokenizer=tokenizer,
        task=task,
        max_len=20,
        block_size=20,
        decoder_only=module.config.decoder_only,
    )
    module._trainer = SimpleNamespace(datamodule=data)
    module.setup("fit")
    return module


def saved(module: TranslationModule, path):
    """The checkpoint Lightning would write for ``module``."""
    checkpoint = {"state_dict": {f"model.{k}": v for k, v in module.model.state_dict().items()}}
    module.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return path


def test_fit_records_the_source_convention_of_its_data(tokenizers, tmp_path):
    plain, _ = tokenizers
    for with_eos in (True, False):
        tokenizer = Tokenizer.from_bytes(plain.to_bytes(), with_eos)
        module = with_data(TranslationModule(tiny_config(vocab_size=406)), tokenizer)
        assert module.data_tokenizer().source_ends_with_eos is with_eos  # validation BLEU's
        path = saved(module, tmp_path / f"{with_eos}.ckpt")
        assert read_checkpoint(path)["seq2seq"]["source_ends_with_eos"] is with_eos
        assert load_model(path).tokenizer.source_ends_with_eos is with_eos
        assert checkpoint_tokenizer(path).source_ends_with_eos is with_eos
        assert checkpoint_tokenizer_bytes(path) == plain.to_bytes()


def test_a_decoder_only_checkpoint_records_sources_without_eos(tokenizers, tmp_path):
    plain, joined = tokenizers
    config = tiny_config(vocab_size=406, decoder_only=True, n_encoder_layers=0)
    without = Tokenizer.from_bytes(joined.to_bytes(), source_ends_with_eos=False)
    translator = saved(with_data(TranslationModule(config), without), tmp_path / "mt.ckpt")
    assert load_model(translator).tokenizer.source_ends_with_eos is False
    # A language model reads no sources: False whatever its tokenizer says.
    lm = saved(with_data(TranslationModule(config), plain, task="lm"), tmp_path / "lm.ckpt")
    assert read_checkpoint(lm)["seq2seq"]["source_ends_with_eos"] is False
    # Joined pairs [bos] src [sep] tgt never hold a source eos: data that would is refused.
    with pytest.raises(ConfigError, match="decoder-only translation model"):
        with_data(TranslationModule(config), joined)


def test_resuming_or_fine_tuning_on_data_cut_otherwise_is_a_one_line_error(tokenizers, tmp_path):
    plain, _ = tokenizers
    old = tiny_checkpoint(tmp_path / "old.ckpt")  # trained on sources without eos
    without = Tokenizer.from_bytes(plain.to_bytes(), source_ends_with_eos=False)
    config = tiny_config(vocab_size=406)
    with_data(TranslationModule(config, init_from=str(old)), without)  # as it was trained
    with pytest.raises(ConfigError, match=r"do not end with </s>: cut the data with its"):
        with_data(TranslationModule(config, init_from=str(old)), plain)
    module = with_data(TranslationModule(config), plain)
    with pytest.raises(ConfigError, match="resume on data cut as before"):
        module.on_load_checkpoint(read_checkpoint(old))
    module = with_data(TranslationModule(config), without)
    module.on_load_checkpoint(read_checkpoint(old))
    assert module.source_ends_with_eos is False
