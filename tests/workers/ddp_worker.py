"""One rank of the 2-process DDP test (launched by torchrun from tests/test_commands_ddp.py).

Trains one epoch of a tiny model with Lightning's DDP strategy on CPU (gloo) and saves, per
rank: every batch's source rows, the first step's (all-reduced) gradients and the weights the
run started from; then validates the trained model on the whole dev set (2 processes) and
saves the validation metrics and exactly what BLEU was computed on.
Usage: ddp_worker.py OUT_DIR CORPUS_TSV CACHE_DIR
"""

import sys
from pathlib import Path

import lightning as L
import torch

import seq2seq.training.validation
from seq2seq.config import ModelConfig
from seq2seq.data.datamodule import TranslationDataModule
from seq2seq.training.module import TranslationModule
from seq2seq.training.validation import ValidationBleu

TINY = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0)


class Recorder(L.Callback):
    def __init__(self) -> None:
        self.rows: list[tuple[int, ...]] = []
        self.batches = 0
        self.first_grads: dict[str, torch.Tensor] = {}
        self.first_batch = None
        self.initial: dict[str, torch.Tensor] = {}
        self.losses: list[float] = []

    def on_train_start(self, trainer, pl_module) -> None:
        self.initial = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.batches += 1
        self.rows += [tuple(row[row != 0].tolist()) for row in batch.src]
        if self.first_batch is None:
            self.first_batch = batch

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append(float(outputs["loss"]))

        if trainer.global_step == 1:  # the first update's gradient, all-reduced and normalised
            self.first_grads = {n: p.grad.detach().clone() for n, p in pl_module.named_parameters()}


def main() -> None:
    out, corpus, cache = sys.argv[1:4]
    torch.set_num_threads(1)
    data = TranslationDataModule(
        corpus="tsv", path=corpus, vocab_size=556, max_tokens=400, max_len=40, cache_dir=cache
    )
    L.seed_everything(0)
    module = TranslationModule(
        ModelConfig(vocab_size=556, max_positions=64, **TINY),
        warmup_steps=10,
        val_bleu_sentences=0,
    )
    recorder = Recorder()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=1,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[recorder, ValidationBleu()],
    )
    trainer.fit(module, datamodule=data)

    scored = []  # what validation BLEU is computed on
    score = seq2seq.training.validation.score_translations

    def recording_score(hypotheses, references):
        scored.append((hypotheses, references[0]))
        return score(hypotheses, references)

    seq2seq.training.validation.score_translations = recording_score
    module.hparams.val_bleu_sentences = -1  # the whole dev set
    trainer.limit_val_batches = 1.0
    (validation,) = trainer.validate(module, datamodule=data, verbose=False)
    b = recorder.first_batch
    torch.save(
        {
            "rows": recorder.rows,
            "batches": recorder.batches,
            "losses": recorder.losses,
            "global_step": trainer.global_step,
            "world_size": trainer.world_size,
            "first_batch": (b.src, b.tgt_in, b.tgt_out),
            "first_grads": recorder.first_grads,
            "initial": recorder.initial,
            "final": {k: v.detach().clone() for k, v in module.state_dict().items()},
            "validation": validation,
            "scored": scored,
        },
        Path(out) / f"rank{trainer.global_rank}.pt",
    )


if __name__ == "__main__":
    main()
