"""The checkpoint format: loading checkpoints for inference, written atomically."""

from helpers import tiny_checkpoint
from seq2seq.checkpoint import atomic_save, load_model
from seq2seq.translator import TorchEngine, Translator


def test_a_checkpoint_saved_before_unk_id_existed_loads_with_the_tokenizers_unk(tmp_path):
    loaded = load_model(tiny_checkpoint(tmp_path / "old.ckpt", saved_before_unk_id=True))
    assert loaded.model.config.unk_id == 1
    translator = Translator(TorchEngine(loaded.model, loaded.search), loaded.tokenizer)
    outputs = translator.translate(["I will buy tea today.", "Tom can see the red bag."], 1)
    assert all(outputs) and not any("⁇" in line for line in outputs)  # sp's <unk>


def test_atomic_save_replaces_the_file_and_clears_a_killed_saves_temporary(tmp_path):
    import torch

    path = tmp_path / "new" / "last.ckpt"  # its directory is made
    atomic_save({"step": 1}, path)
    stale = path.with_name(".last.ckpt.tmp-99999")  # as a save killed mid-write leaves it
    stale.write_bytes(b"half a checkpoint")
    atomic_save({"step": 2}, path)
    assert torch.load(path)["step"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]
