"""The checkpoint format: loading checkpoints for inference."""

from helpers import tiny_checkpoint
from seq2seq.checkpoint import load_model
from seq2seq.translator import TorchEngine, Translator


def test_a_checkpoint_saved_before_unk_id_existed_loads_with_the_tokenizers_unk(tmp_path):
    loaded = load_model(tiny_checkpoint(tmp_path / "old.ckpt", saved_before_unk_id=True))
    assert loaded.model.config.unk_id == 1
    translator = Translator(TorchEngine(loaded.model, loaded.search), loaded.tokenizer)
    outputs = translator.translate(["I will buy tea today.", "Tom can see the red bag."], 1)
    assert all(outputs) and not any("⁇" in line for line in outputs)  # sp's <unk>
