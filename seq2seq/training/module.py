"""Training as a LightningModule: teacher forcing with the label-smoothed loss, updates
normalised by target tokens, non-finite batches skipped, validation loss.

Validation BLEU is a callback (``seq2seq.training.validation.ValidationBleu``), whether the
data fits the model one function (``seq2seq.training.data_checks``) and fine-tuning's start
from a checkpoint another (``seq2seq.training.finetune``). Lightning lives here, in
``callbacks``/``validation`` and in the data/CLI layers only; the model, the loss
(``seq2seq.loss``) and the optimiser with its schedule (``seq2seq.training.schedule``) are plain
PyTorch.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Timer
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor

from seq2seq.config import ModelConfig
from seq2seq.data.tokenizer import SOURCE_EOS_KEY
from seq2seq.decoding.search import SearchConfig
from seq2seq.errors import ConfigError, TrainingStopped
from seq2seq.inference.checkpoint import (
    CHECKPOINT_KEY,
    TRUECASE_KEY,
    checkpoint_section,
)
from seq2seq.loss import label_smoothed_cross_entropy
from seq2seq.model import Transformer
from seq2seq.training.data_checks import InitCheckpoint, check_data_fits_model, ending
from seq2seq.training.finetune import keep_row_zero, pretrained_model, student_model
from seq2seq.training.schedule import (
    inverse_sqrt_schedule,
    paper_optimizer,
    refresh_rate,
    training_progress,
)


class TranslationModule(L.LightningModule):
    """Trains a Transformer with teacher forcing; validates its loss, NLL and perplexity.

    Validation BLEU (``val_bleu``, which ``seq2seq fit``'s best checkpoint is chosen by) is the
    ``ValidationBleu`` callback's (``seq2seq.training.validation``): ``seq2seq fit`` and
    ``validate`` add it; a plain ``Trainer`` built in Python trains without it, and logs no
    ``val_bleu``, unless given ``callbacks=[ValidationBleu()]``.

    Args:
        config: the model's shape (``ModelConfig``); ``vocab_size`` and the special ids are
            set from the data module's tokenizer by the CLI.
        label_smoothing: epsilon_ls (paper: 0.1).
        warmup_steps: linear warmup length of the inverse-sqrt schedule (paper: 4000).
        lr_scale: multiplies the paper's schedule (1.0 = the paper's rate).
        cooldown_steps: anneal the rate linearly to 0 over the last this-many of
            ``trainer.max_steps``, i.e. over that share of the run (0 = the paper's schedule
            unchanged). With ``trainer.max_time`` the share counts time too: a run the time
            budget stops early still ends annealed (see ``training_progress``).
        adam_betas: Adam's (beta1, beta2) (paper: 0.9, 0.98).
        adam_eps: Adam's epsilon (paper: 1e-9).
        weight_decay: decoupled weight decay (AdamW); 0 as in the paper.
        val_bleu_sentences: how many dev sentences, evenly spaced over the dev set, the
            ``ValidationBleu`` callback translates for validation BLEU (0 = skip BLEU,
            -1 = all); scored against the raw Chinese text, gathered over all ranks under DDP.
        val_beam_size: beam used for validation BLEU (1 = greedy, fastest).
        search: decoding defaults stored in the checkpoint for ``translate``/``evaluate``.
        max_nonfinite_steps: a batch whose loss is NaN or infinite (on any rank) is skipped:
            it contributes no gradient, and an update with no finite batch in it changes no
            parameter (Lightning's step counter and the schedule still advance); counted in the
            ``skipped_steps`` metric. After this many in a row, training stops with
            ``TrainingStopped``.
        init_from: fine-tune: start from this checkpoint's weights (ours, or one
            ``seq2seq import`` wrote). Its model config is used: a ``config`` field set to a
            value other than the checkpoint's is an error (a value equal to ModelConfig's
            default cannot be told from no value, and is ignored). The CLI makes the data
            module cut the data with its tokenizer (``data.tokenizer_from``); the optimizer
            starts fresh. An imported Marian model's start-token row stays zero, as Marian
            (and CTranslate2's Marian converter) assume.
        init_student: with ``init_from`` (the teacher): train a distillation student of
            ``config``'s layer counts started from the teacher's embedding and layers
            (``seq2seq.training.finetune.student_model``; configs/student.yaml).
        finetune_dropout: with ``init_from``, train with this residual/embedding dropout
            instead of the checkpoint's (None: the checkpoint's; switching dropout on for a
            model trained without it costs quality at first).
        peak_lr: the learning rate at the end of the warmup; sets ``lr_scale`` so that the
            inverse-sqrt schedule peaks there (None: ``lr_scale`` as given). Fine-tuning wants
            a peak far below training's (configs/finetune.yaml).
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
        init_from: str | None = None,
        finetune_dropout: float | None = None,
        peak_lr: float | None = None,
        init_student: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self._init: InitCheckpoint | None = None  # what init_from's data was cut with
        if init_from is not None:
            if init_student:
                config, self.model, tokenizer = student_model(init_from, config)
            else:
                config, self.model, tokenizer = pretrained_model(
                    init_from, config, finetune_dropout
                )
            self._init = InitCheckpoint(
                init_from, tokenizer.to_bytes(), tokenizer.source_ends_with_eos
            )
            self.hparams["config"] = config  # what is trained, for load_from_checkpoint
            if tokenizer.appended_pad:
                keep_row_zero(self.model.embedding.weight, config.bos_id)
        else:
            self.model = Transformer(config)
        self.config = config
        self.search = search
        self.tokenizer_bytes: bytes | None = None  # set from the data module in setup()
        self.source_ends_with_eos = False  # the data tokenizer's, set with tokenizer_bytes
        self.task = "translation"  # or "lm": what the data module trains (set in setup())
        self.truecase: dict[str, str] | None = None  # the data's word forms (set in setup())
        self.skipped_steps = 0  # batches skipped for a non-finite loss, in this process's run
        self._skipped_in_a_row = 0
        self._update_has_finite_batch = False  # in the current (accumulated) update
        self._update_tokens = 0  # target tokens of this rank's finite batches in this update
        self._time_used = 0.0  # share of trainer.max_time used (rank 0's clock), see below
        self._last_update_rate = 0.0  # the learning rate of the latest optimizer update
        self._val_sums = torch.zeros(3)  # label-smoothed loss, NLL, target tokens

    # -- optimisation --------------------------------------------------------------------

    def configure_optimizers(self) -> dict[str, Any]:
        hp = self.hparams
        optimizer, scheduler = paper_optimizer(
            self.parameters(),
            self.config.d_model,
            hp.warmup_steps,
            self.lr_scale(),
            hp.cooldown_steps,
            total_steps=self.trainer.max_steps if self._trainer is not None else -1,
            adam_betas=hp.adam_betas,
            adam_eps=hp.adam_eps,
            weight_decay=hp.weight_decay,
            time_used=lambda: self._time_used,
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def lr_scale(self) -> float:
        """The schedule's multiplier: ``lr_scale``, or the one that makes it peak at ``peak_lr``."""
        hp = self.hparams
        if hp.get("peak_lr") is None:
            return hp.lr_scale
        return hp.peak_lr / inverse_sqrt_schedule(
            hp.warmup_steps, self.config.d_model, hp.warmup_steps, 1.0
        )

    def training_progress(self, step: int, total_steps: int) -> float:
        """The share of the training budget used after ``step`` updates: the larger of
        ``step / trainer.max_steps`` and ``elapsed / trainer.max_time``.

        A run that the time budget stops (a slower machine than the recipe was tuned on)
        then ends annealed, as one stopped by its step budget does, instead of being cut off
        at full learning rate; the warmup and the inverse-square-root decay follow the same
        clock (``configure_optimizers``), so the whole schedule keeps its shape. The elapsed
        time is Lightning's ``Timer``'s (it is saved in checkpoints, so it survives
        ``--ckpt_path last``), read on rank 0 and shared with every rank
        (``on_before_optimizer_step``), so all ranks use the same rate.
        """
        return training_progress(step, total_steps, self._time_used)

    def _timer(self) -> Timer | None:
        """Lightning's ``Timer`` callback when ``trainer.max_time`` is set, else None."""
        if self._trainer is None:
            return None
        timers = [c for c in self.trainer.callbacks if isinstance(c, Timer)]
        return timers[0] if timers and timers[0].time_remaining() is not None else None

    def _time_used_on_this_rank(self) -> float:
        timer = self._timer()
        if timer is None:
            return 0.0
        elapsed = timer.time_elapsed()
        return elapsed / max(elapsed + timer.time_remaining(), 1e-9)

    # -- steps -----------------------------------------------------------------------------

    def loss(self, batch) -> tuple[Tensor, Tensor, int]:
        """Label-smoothed loss, NLL (no gradient) and target-token count of a batch; the
        losses are means over the batch's target tokens.

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
        loss, _, n_tokens = self.loss(batch)
        if not self._finite_on_every_rank(loss):
            self._skip_nonfinite_batch(loss)
            # Returning None is not allowed under DDP, whose backward must see every
            # parameter: a zero loss gives zero gradients, and on_before_optimizer_step drops
            # the update if no batch of it was finite.
            return sum(p.sum() for p in self.parameters() if p.requires_grad) * 0.0
        self._skipped_in_a_row = 0
        self._update_has_finite_batch = True
        self._update_tokens += n_tokens
        self.log("train_loss", loss, prog_bar=True, batch_size=batch.src.shape[0])
        # The token SUM: on_before_optimizer_step divides the update's gradient by the
        # update's token count over all ranks and micro-batches (see there).
        return loss * n_tokens

    def on_before_optimizer_step(self, optimizer) -> None:
        """Normalise the update's gradient by its target tokens; share rank 0's clock.

        Each micro-batch returned its loss summed over its tokens. Lightning divides each by
        ``accumulate_grad_batches`` and DDP averages the ranks, so the gradient here is the
        sum over every token of the update divided by ``world_size * accumulate``; times
        ``world_size * accumulate / tokens`` it is the per-token mean over the whole update,
        every token weighing the same whatever batch or rank it came from (fairseq's
        normalisation). Averaging per-batch means instead would weigh tokens of small
        batches more. Runs before gradient clipping, which then sees the true gradient.
        """
        world, accumulate = self.trainer.world_size, self.trainer.accumulate_grad_batches
        # One all-reduce per update: the token count and rank 0's clock.
        tokens, self._time_used = self._sum_over_ranks([self._update_tokens, self._clock()])
        self._update_tokens = 0
        self._last_update_rate = optimizer.param_groups[0]["lr"]
        if not self._update_has_finite_batch:
            for parameter in self.parameters():
                parameter.grad = None  # Adam skips parameters without gradients: no update
        elif tokens > 0:
            scale = world * accumulate / tokens
            for parameter in self.parameters():
                if parameter.grad is not None:
                    parameter.grad.mul_(scale)
        self._update_has_finite_batch = False

    def _clock(self) -> float:
        """Rank 0's share of the time budget used; 0 on the other ranks (summed over ranks, it
        is rank 0's everywhere)."""
        return self._time_used_on_this_rank() if self.global_rank == 0 else 0.0

    def _sum_over_ranks(self, values: list[float]) -> list[float]:
        shared = torch.tensor([float(v) for v in values], device=self.device)
        if self.trainer.world_size > 1:
            shared = self.trainer.strategy.reduce(shared, reduce_op="sum")
        return shared.tolist()

    def on_validation_end(self) -> None:
        """With ``trainer.max_time``, set the next update's rate from the clock as it is after
        a validation during training.

        The scheduler set that rate right after the previous update, and a validation can take
        a good share of a time budget: the update after it would run at a rate from before it,
        e.g. far above 0 when the time ran out during the validation."""
        trainer = self.trainer
        if self._timer() is None or trainer.state.fn != "fit" or trainer.sanity_checking:
            return
        (self._time_used,) = self._sum_over_ranks([self._clock()])
        refresh_rate(self.lr_schedulers())

    def on_train_end(self) -> None:
        """Say so in one line when ``trainer.max_time`` ended the run before ``max_steps``:
        where, and the rate of the last update. With a cooldown the schedule reaches 0 at
        max_time, but the last update began before the time ran out, so its rate is what is
        left of the cooldown for one step (as a run that max_steps ends, whose last update has
        1/cooldown_steps of the cooldown left)."""
        timer, total = self._timer(), self.trainer.max_steps
        if timer is None or total <= 0 or self.global_step >= total:
            return
        if timer.time_remaining() > 0:
            return  # stopped for another reason (max_epochs, an exception, a signal)
        hp = self.hparams
        peak = inverse_sqrt_schedule(
            hp.warmup_steps, self.config.d_model, hp.warmup_steps, self.lr_scale()
        )
        cooldown = "no cooldown_steps"
        if hp.cooldown_steps > 0:
            cooldown = "the cooldown reaches 0 at max_time"
        rank_zero_info(
            f"stopped by max_time ({timedelta(seconds=round(timer.time_elapsed()))}) at step "
            f"{self.global_step}/{total}; learning rate of the last update "
            f"{self._last_update_rate:.2g} (peak {peak:.2g}; {cooldown})"
        )

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

    # -- validation ------------------------------------------------------------------------

    def on_validation_epoch_start(self) -> None:
        self._val_sums = torch.zeros(3, dtype=torch.float64, device=self.device)

    def validation_step(self, batch, batch_idx: int) -> None:
        loss, nll, n_tokens = self.loss(batch)
        # Sums, not means: the epoch's loss is the mean over its tokens, each counted once.
        self._val_sums += torch.stack(
            [
                loss.double() * n_tokens,
                nll.double() * n_tokens,
                loss.new_tensor(n_tokens, dtype=torch.float64),
            ]
        )

    def on_validation_epoch_end(self) -> None:
        sums = self._val_sums
        if self.trainer.world_size > 1:
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        loss_sum, nll_sum, tokens = sums.tolist()
        # Every rank holds the same totals now; reduce_fx max keeps them exactly as they are.
        exact = {"sync_dist": True, "reduce_fx": "max"}
        if tokens > 0:
            self.log("val_loss", loss_sum / tokens, **exact)
            self.log("val_nll", nll_sum / tokens, prog_bar=True, **exact)
            self.log("val_ppl", math.exp(min(nll_sum / tokens, 700.0)), **exact)

    # -- tokenizer and self-contained checkpoints -----------------------------------------

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        tokenizer = getattr(datamodule, "tokenizer", None)
        if tokenizer is not None:
            self.tokenizer_bytes = tokenizer.to_bytes()
            self.task = getattr(datamodule, "task", "translation")
            # A language model reads no sources: its checkpoint says False whatever the
            # tokenizer (a decoder-only translator's must be False: check_data_fits_model).
            self.source_ends_with_eos = tokenizer.source_ends_with_eos and self.task != "lm"
            if hasattr(datamodule, "truecase_forms"):
                self.truecase = datamodule.truecase_forms()
            check_data_fits_model(self.config, datamodule, self._init)
            if self.config.decoder_only and tokenizer.sep_id is not None:
                self.config.sep_id = tokenizer.sep_id  # joined pairs: [bos] src [sep] tgt
                self.config.validate()

    def data_tokenizer(self):
        """The data's tokenizer (which validation BLEU decodes with); None before ``setup``
        or a checkpoint gave it."""
        if self.tokenizer_bytes is None:
            return None
        if getattr(self, "_tokenizer_cache", None) is None:
            from seq2seq.data.tokenizer import tokenizer_from_bytes

            self._tokenizer_cache = tokenizer_from_bytes(
                self.tokenizer_bytes, self.source_ends_with_eos
            )
        return self._tokenizer_cache

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[CHECKPOINT_KEY] = checkpoint_section(
            self.config,
            self.search,
            self.tokenizer_bytes,
            self.task,
            self.source_ends_with_eos,
            self.truecase,
        )

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        section = checkpoint.get(CHECKPOINT_KEY, {})
        stored = bool(section.get(SOURCE_EOS_KEY, False))  # absent: trained before the key
        if self.tokenizer_bytes is not None and "tokenizer" in section:  # resuming with data
            if stored != self.source_ends_with_eos and self.task != "lm":
                raise ConfigError(
                    f"the checkpoint was trained on sources that {ending(stored)}"
                    f" but the data's sources {ending(self.source_ends_with_eos)}:"
                    " resume on data cut as before"
                )
        self.tokenizer_bytes = section.get("tokenizer", self.tokenizer_bytes)
        self.source_ends_with_eos = stored
        self.task = section.get("task", self.task)
        self.truecase = section.get(TRUECASE_KEY, self.truecase)
        self._tokenizer_cache = None
