"""``seq2seq fit`` / ``seq2seq validate``: Lightning's own CLI over our module and data.

Every setting comes from the class signatures (TranslationModule, TranslationDataModule,
Trainer), so ``seq2seq fit --print_config`` writes a complete YAML that ``--config`` reads back.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import warnings

from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.plugins.io import TorchCheckpointIO

from seq2seq.callbacks import AtomicCheckpointIO, BestAndLastCheckpoint, ThroughputMonitor
from seq2seq.data.datamodule import TranslationDataModule
from seq2seq.training import TranslationModule


class Seq2SeqCLI(LightningCLI):
    """LightningCLI with our checkpointing defaults and the vocabulary linked to the data."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        # One vocabulary: the model's embedding has exactly the tokenizer's size.
        parser.link_arguments("data.vocab_size", "model.config.vocab_size")
        # One flag switches the data layout too: pairs joined into one sequence, or LM blocks.
        parser.link_arguments("model.config.decoder_only", "data.decoder_only")
        # Fine-tuning: the data is cut by the tokenizer of the checkpoint the model starts from.
        parser.link_arguments("model.init_from", "data.tokenizer_from")
        parser.add_lightning_class_args(BestAndLastCheckpoint, "checkpoint")
        parser.set_defaults(
            {
                "checkpoint.monitor": "val_bleu",
                "checkpoint.mode": "max",
                "checkpoint.save_last": True,
                "checkpoint.save_top_k": 1,
                "checkpoint.filename": "best-step{step}-bleu{val_bleu:.2f}",
                "checkpoint.auto_insert_metric_name": False,
            }
        )

    def instantiate_trainer(self, **kwargs):
        trainer = super().instantiate_trainer(**kwargs)
        add_tensorboard_beside_csv(trainer)
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:  # not a user's plugin
            trainer.strategy.checkpoint_io = AtomicCheckpointIO()
        return trainer


def add_tensorboard_beside_csv(trainer) -> None:
    """Also log to TensorBoard, in the CSV logger's run directory, when it is installed."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    if importlib.util.find_spec("tensorboard") is None:
        return
    loggers = trainer.loggers
    if len(loggers) != 1 or not isinstance(loggers[0], CSVLogger):
        return
    csv = loggers[0]
    tensorboard = TensorBoardLogger(
        save_dir=csv.save_dir, name=csv.name, version=csv.version, default_hp_metric=False
    )
    trainer.loggers = [csv, tensorboard]


def trainer_defaults() -> dict:
    return {
        "callbacks": [ThroughputMonitor(), LearningRateMonitor(logging_interval="step")],
        "default_root_dir": "runs",
    }


class _NoAdvertising(logging.Filter):
    """Drops Lightning's "💡 Tip: try installing <product>" lines from a training log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("💡 Tip")


def quiet_third_party_noise() -> None:
    """Keep a training log to what the user can act on: no product tips, and no deprecation
    warning that Lightning's own code triggers in the torch it runs on (Lightning 2.6's
    ``_pytree`` uses ``LeafSpec``, which torch 2.13 deprecates)."""
    logger = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _NoAdvertising) for f in logger.filters):
        logger.addFilter(_NoAdvertising())
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")


def lightning_command(argv: list[str]) -> int:
    """``seq2seq fit|validate ARGS``: run it, with one-line errors; the exit status."""
    from seq2seq.errors import USER_ERRORS

    try:
        run_lightning_cli(argv)
    except USER_ERRORS as error:
        print(f"seq2seq {argv[0]}: error: {error}", file=sys.stderr)
        return 2
    return 0


def run_lightning_cli(argv: list[str], run: bool = True) -> Seq2SeqCLI:
    """Run ``fit``/``validate`` with the given arguments (``run=False``: only instantiate;
    ``argv`` then has no subcommand)."""
    quiet_third_party_noise()
    saved_argv = sys.argv
    # Lightning's DDP launcher starts the other ranks by re-running sys.argv, so it must hold
    # exactly this command's arguments.
    sys.argv = sys.argv[:1] + list(argv)
    try:
        return Seq2SeqCLI(
            TranslationModule,
            TranslationDataModule,
            trainer_defaults=trainer_defaults(),
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,  # the module owns Adam and the paper's schedule
            args=None,  # = sys.argv[1:], set above (passing both makes Lightning warn)
            run=run,
        )
    finally:
        sys.argv = saved_argv
        close_process_group()


def close_process_group() -> None:
    """Destroy the DDP process group when the run is over. Lightning leaves it to interpreter
    exit, where gloo's threads were once seen to abort a finished run ("terminate called
    without an active exception", exit -6)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
