"""``seq2seq fit`` / ``seq2seq validate``: Lightning's own CLI over our module and data.

Every setting comes from the class signatures (TranslationModule, TranslationDataModule,
Trainer), so ``seq2seq fit --print_config`` writes a complete YAML that ``--config`` reads back.
Options are never abbreviated, and a mistyped one is a one-line error naming the closest real
one. SIGINT (Ctrl+C) and SIGTERM end ``fit`` with ``last.ckpt`` saved and the command that
resumes it (``seq2seq.training.callbacks.SignalStop``).
"""

from __future__ import annotations

import importlib.util
import logging
import shlex
import signal
import sys
import warnings
from argparse import ArgumentError

from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.connectors.signal_connector import _SignalConnector

from seq2seq.checks import unknown_options_message
from seq2seq.data.datamodule import TranslationDataModule
from seq2seq.training.callbacks import (
    AtomicCheckpointIO,
    BestAndLastCheckpoint,
    Interrupted,
    ThroughputMonitor,
    lightning_requeues,
)
from seq2seq.training.module import TranslationModule
from seq2seq.training.validation import ValidationBleu

# jsonargparse's parser is argparse's: without this, --model.warmup_step would silently set
# --model.warmup_steps (a prefix), and a typo would print the whole 120-line usage.
PARSER_KWARGS = {"allow_abbrev": False, "exit_on_error": False}


class UsageError(Exception):
    """A command line that the parser rejects; the message is one line."""


class Seq2SeqCLI(LightningCLI):
    """LightningCLI with our checkpointing defaults and the vocabulary linked to the data;
    ``fit`` stops cleanly on SIGINT/SIGTERM."""

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

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        try:
            super().parse_arguments(parser, args)
        except ArgumentError as error:
            raise UsageError(usage_problem(str(error), self._parser_of_command())) from None

    def _parser_of_command(self) -> LightningArgumentParser:
        """The parser of the subcommand run (``fit``, ``validate``): it knows the options."""
        parsers = getattr(self, "_subcommand_parsers", {})
        return parsers.get(sys.argv[1] if len(sys.argv) > 1 else None, self.parser)

    def instantiate_trainer(self, **kwargs):
        trainer = super().instantiate_trainer(**kwargs)
        add_tensorboard_beside_csv(trainer)
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:  # not a user's plugin
            trainer.strategy.checkpoint_io = AtomicCheckpointIO()
        # Trainer has no public way to choose its signal handling; see FitSignalConnector.
        trainer._signal_connector = FitSignalConnector(trainer)
        return trainer

    def fit(self, model, **kwargs) -> None:
        """``trainer.fit``, with SIGINT/SIGTERM caught for its whole duration (``SignalStop``)."""
        trainer = self.trainer
        if kwargs.get("ckpt_path") == "last":
            require_something_to_resume(trainer)
        (checkpoint,) = [c for c in trainer.callbacks if isinstance(c, BestAndLastCheckpoint)]
        with checkpoint.signals.caught(trainer):
            trainer.fit(model, **kwargs)


class FitSignalConnector(_SignalConnector):
    """Lightning's signal handling, less its SIGTERM handler unless it requeues under SLURM.

    Lightning's handler stops training at the end of the batch without saving anything (and,
    under DDP, calls a collective from inside the handler); ``fit`` handles SIGTERM itself, with
    ``last.ckpt`` saved first. Under SLURM auto-requeue, SIGUSR1 (save an hpc checkpoint and
    requeue) and SIGTERM stay Lightning's, unchanged.
    """

    def register_signal_handlers(self) -> None:
        if lightning_requeues(self.trainer):
            super().register_signal_handlers()


def require_something_to_resume(trainer) -> None:
    """A one-line error for ``--ckpt_path last`` when no checkpoint callback has a last
    checkpoint: Lightning would only warn, and silently start over from step 0."""
    callbacks = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]
    # _find_last_checkpoints is exactly what Lightning resolves "last" with.
    if any(c._find_last_checkpoints(trainer) for c in callbacks):
        return
    where = " or ".join(sorted({str(c.dirpath) for c in callbacks if c.dirpath})) or "checkpoints"
    raise UsageError(
        f"--ckpt_path last: nothing to resume (no last.ckpt in {where}); leave out --ckpt_path "
        "to start a new run"
    )


def usage_problem(message: str, parser: LightningArgumentParser) -> str:
    """The parser's complaint in one line; an unknown option is named with its closest match
    (as the other commands name theirs)."""
    if message.startswith("unrecognized arguments: "):
        return unknown_options_message(parser, message.split(": ", 1)[1].split())
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


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
    """The trainer's defaults; LightningCLI appends these callbacks to any a config gives.

    ``ValidationBleu`` logs the ``val_bleu`` that the best checkpoint is chosen by."""
    return {
        "callbacks": [
            ThroughputMonitor(),
            LearningRateMonitor(logging_interval="step"),
            ValidationBleu(),
        ],
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
    """``seq2seq fit|validate ARGS``: run it, with one-line errors; the exit status (128 +
    the signal's number when a signal stopped it, as a shell reports a signal)."""
    from seq2seq.errors import USER_ERRORS

    try:
        run_lightning_cli(argv)
    except (*USER_ERRORS, UsageError, ArgumentError, OSError) as error:
        print(f"seq2seq {argv[0]}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl+C before fit's own handling starts (parsing, building)
        stop = Interrupted(signal.SIGINT)
    except Interrupted as interrupted:
        stop = interrupted
    else:
        return 0
    if stop.report:
        print(f"seq2seq {argv[0]}: {interrupted_line(stop, argv)}", file=sys.stderr)
    return 128 + stop.signum


def interrupted_line(stop: Interrupted, argv: list[str]) -> str:
    """Where an interrupted run stopped, what it saved and the command that resumes it."""
    name = str(stop)
    if stop.step is None:
        started = " before training started" if argv[0] == "fit" else ""
        return f"interrupted ({name}){started}; nothing to save"
    if stop.path is None:
        return f"interrupted ({name}) at step {stop.step}; not saved (checkpoint.save_last false)"
    return (
        f"interrupted ({name}) at step {stop.step}; saved {stop.path}; "
        f"resume with: {shlex.join(['seq2seq', *resume_argv(argv)])}"
    )


def resume_argv(argv: list[str]) -> list[str]:
    """``argv`` with its ``--ckpt_path`` (if any) replaced by ``--ckpt_path last``."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--ckpt_path":
            skip = True  # and its value
        elif not arg.startswith("--ckpt_path="):
            kept.append(arg)
    return [*kept, "--ckpt_path", "last"]


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
            parser_kwargs=parser_kwargs(),
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,  # the module owns Adam and the paper's schedule
            args=None,  # = sys.argv[1:], set above (passing both makes Lightning warn)
            run=run,
        )
    finally:
        sys.argv = saved_argv
        close_process_group()


def parser_kwargs() -> dict:
    """``PARSER_KWARGS`` for the main parser and for each subcommand's (LightningCLI takes the
    subcommands' under their names)."""
    return {**PARSER_KWARGS, **{name: dict(PARSER_KWARGS) for name in Seq2SeqCLI.subcommands()}}


def close_process_group() -> None:
    """Destroy the DDP process group when the run is over. Lightning leaves it to interpreter
    exit, where gloo's threads were once seen to abort a finished run ("terminate called
    without an active exception", exit -6)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
