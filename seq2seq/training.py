"""Training as a LightningModule: label-smoothed loss, Adam, the paper's warmup schedule.

Lightning lives here and in the data/CLI layers only; the model itself is plain PyTorch.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, replace
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor

from seq2seq.config import ConfigError, ModelConfig
from seq2seq.loss import label_smoothed_cross_entropy
from seq2seq.model import Transformer
from seq2seq.search import SearchConfig, translate_ids
from seq2seq.translator import CHECKPOINT_KEY


def inverse_sqrt_schedule(step: int, d_model: int, warmup_steps: int, scale: float) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (paper §5.3).

    ``step`` counts from 1 (optimizer updates), so the first update already has a nonzero rate.
    """
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def cooldown_factor(step: int, total_steps: int, cooldown_steps: int) -> float:
    """1 until the last ``cooldown_steps`` of ``total_steps``, then linearly down to 0.

    Not in the paper: short runs end far from convergence at the inverse-sqrt rate, and
    annealing to zero over the last stretch recovers much of the gap (``cooldown_steps=0``
    turns it off).
    """
    if cooldown_steps <= 0 or total_steps <= 0:
        return 1.0
    return max(0.0, min(1.0, (total_steps - step) / cooldown_steps))


class TrainingStopped(RuntimeError):
    """Training cannot usefully go on; the message says why in one line."""


class TranslationModule(L.LightningModule):
    """Trains a Transformer with teacher forcing and scores BLEU on the validation set.

    Args:
        config: the model's shape (``ModelConfig``); ``vocab_size`` and the special ids are
            set from the data module's tokenizer by the CLI.
        label_smoothing: epsilon_ls (paper: 0.1).
        warmup_steps: linear warmup length of the inverse-sqrt schedule (paper: 4000).
        lr_scale: multiplies the paper's schedule (1.0 = the paper's rate).
        cooldown_steps: anneal the rate linearly to 0 over the last this-many of
            ``trainer.max_steps`` (0 = the paper's schedule unchanged).
        adam_betas: Adam's (beta1, beta2) (paper: 0.9, 0.98).
        adam_eps: Adam's epsilon (paper: 1e-9).
        weight_decay: decoupled weight decay (AdamW); 0 as in the paper.
        val_bleu_sentences: about how many dev sentences to translate for validation BLEU
            per validation run, the same share of every batch (0 = skip BLEU, -1 = all).
        val_beam_size: beam used for validation BLEU (1 = greedy, fastest).
        search: decoding defaults stored in the checkpoint for ``translate``/``evaluate``.
        max_nonfinite_steps: a batch whose loss is NaN or infinite (on any rank) is skipped:
            it contributes no gradient, and an update with no finite batch in it changes no
            parameter (Lightning's step counter and the schedule still advance); counted in the
            ``skipped_steps`` metric. After this many in a row, training stops with
            ``TrainingStopped``.
    """

    def __init__(
        self,
        config: ModelConfig,
        label_smoothing: float = 0.1,
        warmup_steps: int = 4000,
        lr_scale: float = 1.0,
        cooldown_steps: int = 0,
        adam_betas: tuple[float, float] = (0.9, 0.98),
        adam_eps: float = 1e-9,
        weight_decay: float = 0.0,
        val_bleu_sentences: int = 500,
        val_beam_size: int = 1,
        search: SearchConfig = SearchConfig(),  # noqa: B008 (frozen, so sharing is safe)
        max_nonfinite_steps: int = 10,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.config = config
        self.model = Transformer(config)
        self.search = search.with_specials(config)
        self.tokenizer_bytes: bytes | None = None  # set from the data module in setup()
        self.task = "translation"  # or "lm": what the data module trains (set in setup())
        self._val_outputs: list[tuple[str, str]] = []
        self.skipped_steps = 0  # batches skipped for a non-finite loss, in this process's run
        self._skipped_in_a_row = 0
        self._update_has_finite_batch = False  # in the current (accumulated) update

    # -- optimisation --------------------------------------------------------------------

    def configure_optimizers(self) -> dict[str, Any]:
        hp = self.hparams
        optimizer = torch.optim.AdamW(
            self.parameters(),
            lr=1.0,  # the schedule below supplies the whole rate
            betas=tuple(hp.adam_betas),
            eps=hp.adam_eps,
            weight_decay=hp.weight_decay,
        )
        d_model, warmup, scale = self.config.d_model, hp.warmup_steps, hp.lr_scale
        total = self.trainer.max_steps if self._trainer is not None else -1
        cooldown = hp.cooldown_steps
        if cooldown > 0 and total <= 0:
            raise ValueError("cooldown_steps needs trainer.max_steps (the run's length)")

        def rate(step: int) -> float:  # step = optimizer updates done so far
            return inverse_sqrt_schedule(step + 1, d_model, warmup, scale) * cooldown_factor(
                step, total, cooldown
            )

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    # -- steps -----------------------------------------------------------------------------

    def loss(self, batch) -> tuple[Tensor, Tensor, int]:
        """Label-smoothed loss, NLL (no gradient) and target-token count of a batch.

        The output projection (the largest matmul with an 8k+ vocabulary) runs only on
        non-pad target positions.
        """
        memory = None if self.config.decoder_only else self.model.encode(batch.src)
        source_mask = None if memory is None else batch.src != self.config.pad_id
        states = self.model.decoder_states(batch.tgt_in, memory, source_mask)  # (B, T, d)
        real = batch.tgt_out != self.config.pad_id  # (B, T)
        logits = self.model.project(states[real])  # (N, V)
        targets = batch.tgt_out[real]
        loss = label_smoothed_cross_entropy(logits, targets, self.hparams.label_smoothing)
        with torch.no_grad():
            nll = F.cross_entropy(logits.detach().float(), targets) if not self.training else loss
        return loss, nll, int(real.sum())

    def training_step(self, batch, batch_idx: int) -> Tensor:
        loss, _, _ = self.loss(batch)
        if not self._finite_on_every_rank(loss):
            self._skip_nonfinite_batch(loss)
            # Returning None is not allowed under DDP, whose backward must see every
            # parameter: a zero loss gives zero gradients, and on_before_optimizer_step drops
            # the update if no batch of it was finite.
            return sum(p.sum() for p in self.parameters() if p.requires_grad) * 0.0
        self._skipped_in_a_row = 0
        self._update_has_finite_batch = True
        self.log("train_loss", loss, prog_bar=True, batch_size=batch.src.shape[0])
        return loss

    def on_before_optimizer_step(self, optimizer) -> None:
        if not self._update_has_finite_batch:
            for parameter in self.parameters():
                parameter.grad = None  # Adam skips parameters without gradients: no update
        self._update_has_finite_batch = False

    def _finite_on_every_rank(self, loss: Tensor) -> bool:
        """Whether the loss is finite everywhere: under DDP every rank must skip together, or
        the ranks that do step would wait forever for the others' gradients."""
        finite = torch.isfinite(loss.detach()).float()
        return bool(self.all_gather(finite).min() > 0)

    def _skip_nonfinite_batch(self, loss: Tensor) -> None:
        self.skipped_steps += 1
        self._skipped_in_a_row += 1
        self.log("skipped_steps", float(self.skipped_steps))
        limit = self.hparams.max_nonfinite_steps
        if self._skipped_in_a_row >= limit:
            raise TrainingStopped(
                f"the training loss was not finite ({loss.item()}) for {limit} batches in a row "
                f"at step {self.global_step} ({self.skipped_steps} skipped in all); lower "
                "model.lr_scale, lengthen model.warmup_steps or check the data"
            )

    def validation_step(self, batch, batch_idx: int) -> None:
        loss, nll, n_tokens = self.loss(batch)
        self.log("val_loss", loss, batch_size=n_tokens, sync_dist=True)
        self.log("val_nll", nll, batch_size=n_tokens, sync_dist=True, prog_bar=True)
        share = self._bleu_share(batch.src.shape[0]) if self.task == "translation" else 0
        if share:
            self._translate_for_bleu(batch, share)

    def on_validation_epoch_start(self) -> None:
        self._val_outputs = []

    def on_validation_epoch_end(self) -> None:
        nll = self.trainer.callback_metrics.get("val_nll")
        if nll is not None:
            self.log("val_ppl", torch.exp(nll), sync_dist=True)
        if self._val_outputs:
            self.log("val_bleu", corpus_bleu_zh(self._val_outputs), prog_bar=True)
        elif self.hparams.val_bleu_sentences != 0 and self.task == "translation":
            self.log("val_bleu", 0.0)

    def _bleu_share(self, batch_size: int) -> int:
        """How many sentences of this dev batch to translate for validation BLEU.

        Dev batches run shortest first, so taking the first N sentences would score only short
        ones; the same fraction of every batch samples all lengths.
        """
        limit = self.hparams.val_bleu_sentences
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        if limit == 0:
            return 0
        if limit < 0 or not hasattr(datamodule, "dataset"):
            return batch_size
        n_dev = len(datamodule.dataset("dev"))
        return min(batch_size, math.ceil(batch_size * limit / max(n_dev, 1)))

    def _translate_for_bleu(self, batch, share: int) -> None:
        tokenizer = self._tokenizer()
        if tokenizer is None:
            return
        src, refs = batch.src[:share], batch.tgt_out[:share].tolist()
        hyps = translate_ids(self.model, src, self.hparams.val_beam_size, self.search)
        for best, ref in zip(hyps, refs, strict=True):
            self._val_outputs.append((tokenizer.decode(best[0].tokens), tokenizer.decode(ref)))

    # -- tokenizer and self-contained checkpoints -----------------------------------------

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        tokenizer = getattr(datamodule, "tokenizer", None)
        if tokenizer is not None:
            self.tokenizer_bytes = tokenizer.to_bytes()
            self._check_vocab(tokenizer.vocab_size)
            self.task = getattr(datamodule, "task", "translation")
            if self.config.decoder_only and tokenizer.sep_id is not None:
                self.search = replace(self.search, sep_id=tokenizer.sep_id)
            self._check_positions(datamodule)

    def _check_positions(self, datamodule) -> None:
        """The longest training sequence must fit the position table (one line, not a crash
        at the step that first meets it)."""
        if self.task == "lm":
            longest, what = datamodule.block_size, f"data.block_size={datamodule.block_size}"
        elif self.config.decoder_only:
            longest = 2 * datamodule.max_len + 2  # [bos] src [sep] tgt, both sides at max_len
            what = f"decoder-only pairs of data.max_len={datamodule.max_len} joined"
        else:
            longest, what = datamodule.max_len + 1, f"data.max_len={datamodule.max_len} (+ bos)"
        if longest > self.config.max_positions:
            raise ConfigError(
                f"{what} make {longest}-token sequences but model.config.max_positions is "
                f"{self.config.max_positions}: raise it or shorten the data"
            )

    def _check_vocab(self, vocab_size: int) -> None:
        if vocab_size != self.config.vocab_size:
            raise ConfigError(
                f"ModelConfig.vocab_size ({self.config.vocab_size}) disagrees with the "
                f"SentencePiece model ({vocab_size} pieces)"
            )

    def _tokenizer(self):
        if self.tokenizer_bytes is None:
            return None
        if getattr(self, "_tokenizer_cache", None) is None:
            from seq2seq.data.tokenizer import Tokenizer

            self._tokenizer_cache = Tokenizer.from_bytes(self.tokenizer_bytes)
        return self._tokenizer_cache

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[CHECKPOINT_KEY] = {
            "model_config": self.config.to_dict(),
            "search": asdict(self.search),
            "tokenizer": self.tokenizer_bytes,
            "task": self.task,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        section = checkpoint.get(CHECKPOINT_KEY, {})
        self.tokenizer_bytes = section.get("tokenizer", self.tokenizer_bytes)
        self.task = section.get("task", self.task)


def corpus_bleu_zh(pairs: list[tuple[str, str]]) -> float:
    """sacreBLEU corpus BLEU with the ``zh`` tokenizer over (hypothesis, reference) pairs."""
    import sacrebleu

    hyps = [h for h, _ in pairs]
    refs = [[r for _, r in pairs]]
    return float(sacrebleu.corpus_bleu(hyps, refs, tokenize="zh").score)


class ThroughputMonitor(L.Callback):
    """Logs non-pad source+target tokens per second of training (progress bar and logger)."""

    def __init__(self, window: int = 10) -> None:
        self.window = window
        self._tokens = 0
        self._start: float | None = None
        self._steps = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if self._start is None:
            self._start = time.perf_counter()

    def on_validation_start(self, trainer, pl_module) -> None:
        # Validation time is not training time: restart the window afterwards.
        self._tokens, self._steps, self._start = 0, 0, None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self._tokens += int(batch.n_src_tokens) + int(batch.n_tgt_tokens)
        self._steps += 1
        if self._steps >= self.window and self._start is not None:
            elapsed = time.perf_counter() - self._start
            rate = self._tokens * trainer.world_size / max(elapsed, 1e-9)
            pl_module.log("tok_per_s", rate, prog_bar=True, rank_zero_only=True)
            self._tokens, self._steps, self._start = 0, 0, time.perf_counter()
