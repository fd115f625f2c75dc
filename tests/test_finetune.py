"""Fine-tuning: ``seq2seq fit --model.init_from`` starts from a checkpoint (here an imported
OPUS-MT-shaped model, the hardest case: Marian's special ids and a paired tokenizer), cuts the
data with its tokenizer, and trains the very function Marian computes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.opus_mt import build_opus_mt_like, hsk_pairs

pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

TARGET = ">>cmn_Hans<<"
CONFIG = Path(__file__).parents[1] / "configs" / "finetune.yaml"


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    from seq2seq.tools.pretrained import import_marian

    root = tmp_path_factory.mktemp("finetune")
    directory = build_opus_mt_like(root / "hf")
    return import_marian(str(directory), root / "imported.ckpt", TARGET)


@pytest.fixture(scope="module")
def domain_tsv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("domain") / "hsk.tsv"
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in hsk_pairs()[:600]), encoding="utf-8")
    return path


def _fit_args(imported: Path, tsv: Path, root: Path, *extra: str) -> list[str]:
    return [
        "fit",
        "--config",
        str(CONFIG),
        f"--model.init_from={imported}",
        f"--data.path={tsv}",
        f"--data.cache_dir={root / 'cache'}",
        "--data.max_tokens=600",
        "--data.max_len=100",
        f"--checkpoint.dirpath={root / 'checkpoints'}",
        "--trainer.accelerator=cpu",
        f"--trainer.logger.init_args.save_dir={root}",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
        "--trainer.val_check_interval=4",
        "--trainer.limit_val_batches=1",
        "--model.val_bleu_sentences=4",
        "--model.warmup_steps=2",
        "--model.cooldown_steps=0",
        *extra,
    ]


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from seq2seq.inference.checkpoint import load_model

    return load_model(path).model.state_dict()


def test_fine_tuning_starts_from_the_checkpoint_with_its_tokenizer(
    imported, domain_tsv, tmp_path, capsys
):
    from seq2seq.cli import main
    from seq2seq.inference.checkpoint import load_model

    copy = tmp_path / "start.ckpt"  # removed after fitting: evaluate must not need it
    shutil.copy(imported, copy)
    args = _fit_args(
        copy,
        domain_tsv,
        tmp_path,
        "--trainer.max_steps=4",
        "--model.peak_lr=1e-3",
        "--model.finetune_dropout=0.2",
    )
    assert main(args) == 0
    copy.unlink()
    tuned_path = str(tmp_path / "checkpoints" / "last.ckpt")
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                tuned_path,
                "--split",
                "test",
                "--beam-size",
                "1",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["sentences"] > 5
    tuned, start = load_model(tmp_path / "checkpoints" / "last.ckpt"), load_model(imported)
    assert tuned.tokenizer.to_bytes() == start.tokenizer.to_bytes()
    shape = {k: v for k, v in start.model.config.to_dict().items() if "dropout" not in k}
    assert {k: v for k, v in tuned.model.config.to_dict().items() if k in shape} == shape
    assert tuned.model.config.dropout == 0.2  # the run's choice
    assert tuned.model.config.attention_dropout == start.model.config.attention_dropout
    before, after = start.model.state_dict(), tuned.model.state_dict()
    moved = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(moved) > len(before) // 2  # it trained ...
    # ... from the imported weights: 4 Adam steps of <= 1e-3 move no weight further than that.
    assert max((before[k] - after[k]).abs().max().item() for k in before) < 5e-3
    # Marian's start token keeps its zero embedding (decoding starts from a zero vector).
    bos = start.model.config.bos_id
    assert not before["embedding.weight"][bos].any() and not after["embedding.weight"][bos].any()
    # The data was cut by the imported tokenizer: Marian's sources, language token first and
    # eos last.
    cache = next((tmp_path / "cache").iterdir())
    offsets, ids = (
        np.load(cache / "train" / "src_offsets.npy"),
        np.load(cache / "train" / "src.npy"),
    )
    config = start.model.config
    assert ids[offsets[0]] == start.tokenizer.piece_to_id(TARGET)
    assert ids[offsets[1] - 1] == config.eos_id


def test_our_training_loss_is_marians_loss(imported, domain_tsv, tmp_path):
    """The batches the data module builds for an imported model (its ids, its padding, its
    start token) give the loss Marian computes for the same pairs."""
    from transformers import MarianMTModel

    from seq2seq.config import ModelConfig
    from seq2seq.data.datamodule import TranslationDataModule
    from seq2seq.training.module import TranslationModule

    data = TranslationDataModule(
        corpus="tsv",
        path=str(domain_tsv),
        tokenizer_from=str(imported),
        cache_dir=str(tmp_path / "cache"),
        max_tokens=800,
    )
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    module = TranslationModule(ModelConfig(), init_from=str(imported), label_smoothing=0.0).eval()
    config = module.config
    with torch.no_grad():
        _, nll, tokens = module.loss(batch)
    marian = MarianMTModel.from_pretrained(imported.parent / "hf").eval()
    marian_pad = marian.config.pad_token_id
    mask = batch.src != config.pad_id
    labels = batch.tgt_out.masked_fill(batch.tgt_out == config.pad_id, -100)  # -100: ignored
    with torch.no_grad():
        reference = marian(
            input_ids=batch.src.masked_fill(~mask, marian_pad),
            attention_mask=mask.long(),
            labels=labels,
        )
    assert tokens > 60 and batch.src.shape[0] > 4
    assert abs(nll.item() - reference.loss.item()) < 1e-4


def test_a_config_that_contradicts_the_checkpoint_is_a_one_line_error(
    imported, domain_tsv, tmp_path, capsys
):
    from seq2seq.cli import main

    args = _fit_args(imported, domain_tsv, tmp_path, "--model.config.d_model=64")
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "model.config.d_model=64 contradicts --model.init_from" in err and "d_model=32" in err
    args = _fit_args(tmp_path / "missing.ckpt", domain_tsv, tmp_path)
    assert main(args) == 2
    assert "model.init_from: no checkpoint at" in capsys.readouterr().err
