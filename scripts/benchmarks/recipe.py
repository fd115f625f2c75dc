"""A training config as ``seq2seq fit --config X`` sees it, and copies of it to run.

``load_recipe`` resolves the config with the fit command's own parser (Lightning's CLI over
``TranslationModule``, ``TranslationDataModule`` and ``Trainer``, with its links and defaults),
so the benchmarks train the reference model with exactly the settings our run gets.
``fit_config`` writes the bookkeeping changes of a benchmark run into a copy of the YAML,
which ``seq2seq fit`` then reads as usual.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass
class Recipe:
    """What ``seq2seq fit --config`` resolves from a config.

    Attributes:
        yaml: the config file as written (benchmark runs of ``seq2seq fit`` use copies of it).
        model: ``TranslationModule``'s arguments, every one resolved; ``config`` (the
            ``ModelConfig``, vocabulary linked from the data) and ``search`` as dicts.
        datamodule: the ``TranslationDataModule`` fit builds (not yet prepared).
        gradient_clip_val: ``trainer.gradient_clip_val`` (0: no clipping).
        max_steps: ``trainer.max_steps`` (-1: no limit).
        seed: ``seed_everything``.
    """

    yaml: dict[str, Any]
    model: dict[str, Any]
    datamodule: Any
    gradient_clip_val: float
    max_steps: int
    seed: int

    def prepared_datamodule(self):
        """The data module, prepared and set up for fitting (reads the cache if present)."""
        self.datamodule.prepare_data()
        self.datamodule.setup("fit")
        return self.datamodule


def load_recipe(path: str, overrides: list[str] | None = None) -> Recipe:
    """The config at ``path`` as ``seq2seq fit --config path *overrides`` resolves it (the
    CLI builds the module, data module and trainer without running anything)."""
    from seq2seq.training.lightning_cli import run_lightning_cli

    cli = run_lightning_cli(["--config", path, *(overrides or [])], run=False)
    trainer = cli.config.trainer
    return Recipe(
        yaml=read_config(path),
        model=cli.config.model.as_dict(),
        datamodule=cli.datamodule,
        gradient_clip_val=float(trainer.gradient_clip_val or 0.0),
        max_steps=int(trainer.max_steps),
        seed=int(cli.config.seed_everything),
    )


def read_config(path: str) -> dict[str, Any]:
    """The config file as written."""
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def fit_config(
    config: dict[str, Any],
    out: Path,
    trainer: dict[str, Any],
    model: dict[str, Any] | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of ``config`` for a benchmark's ``seq2seq fit`` run: everything written under
    ``out`` (CSV logs in out/logs, checkpoints in out/checkpoints), no snapshot callbacks
    (each costs the run's clock), then the given trainer, model and checkpoint settings."""
    config = copy.deepcopy(config)
    config.setdefault("model", {}).update(model or {})
    section = config.setdefault("trainer", {})
    section["callbacks"] = []
    section["logger"] = {
        "class_path": "lightning.pytorch.loggers.CSVLogger",
        "init_args": {"save_dir": str(out), "name": "logs"},
    }
    section["default_root_dir"] = str(out)
    section.update(trainer)
    config.setdefault("checkpoint", {})["dirpath"] = str(out / "checkpoints")
    config["checkpoint"].update(checkpoint or {})
    return config
