"""Validation BLEU as a Lightning callback: ``ValidationBleu``, which ``seq2seq fit`` and
``seq2seq validate`` add to every trainer (``lightning_cli.trainer_defaults``).

The module's own validation computes the loss only; BLEU needs decoding, which is slow and needs
the data's raw text, so it lives here, where a run chooses it. How many sentences and which beam
stay the module's hyper-parameters (``val_bleu_sentences``, ``val_beam_size``), so configs and
checkpoints keep them.
"""

from __future__ import annotations

import contextlib
import os

import lightning as L
import torch

from seq2seq.inference.engines import TorchEngine, token_rules
from seq2seq.inference.evaluation import score_translations
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator


class ValidationBleu(L.Callback):
    """Logs ``val_bleu``: sacreBLEU of a sample of the dev set, after every validation.

    Driven by the module's hyper-parameters: ``val_bleu_sentences`` evenly spaced dev sentences
    (0 = no BLEU, -1 = all) translated with beam ``val_beam_size``, scored against the raw
    (cleaned) Chinese text. Under DDP each rank translates its share and the translations are
    gathered, so every rank scores exactly the corpus a single process would. Language models
    (``task == "lm"``) log no BLEU.
    """

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if pl_module.task != "translation" or pl_module.hparams.val_bleu_sentences == 0:
            return
        # Every rank computes the same score; reduce_fx max keeps it exactly as it is.
        bleu = validation_bleu(trainer, pl_module)
        pl_module.log("val_bleu", bleu, prog_bar=True, sync_dist=True, reduce_fx="max")


def validation_bleu(trainer, pl_module) -> float:
    """The score ``ValidationBleu`` logs; 0 without a tokenizer and data with dev texts."""
    datamodule = getattr(trainer, "datamodule", None)
    tokenizer = pl_module.data_tokenizer()
    if tokenizer is None or not hasattr(datamodule, "split_texts"):
        return 0.0
    sources, references = datamodule.split_texts("dev")
    chosen = evenly_spaced(len(sources), pl_module.hparams.val_bleu_sentences)
    mine = chosen[trainer.global_rank :: trainer.world_size]
    engine = TorchEngine(pl_module.model, pl_module.search, token_rules(tokenizer))
    translator = Translator(engine, tokenizer)
    with _quiet_stderr():  # truncation warnings of over-long dev sentences
        outputs = translator.translate(
            [sources[i] for i in mine], TranslateOptions(beam_size=pl_module.hparams.val_beam_size)
        )
    translated = dict(gather_objects(list(zip(mine, outputs, strict=True))))
    hypotheses = [translated[i] for i in chosen]
    return score_translations(hypotheses, [[references[i] for i in chosen]])["bleu"]


def evenly_spaced(n: int, count: int) -> list[int]:
    """``count`` indices spread evenly over ``range(n)`` (all of them for count < 0 or >= n)."""
    if count < 0 or count >= n:
        return list(range(n))
    return sorted({i * n // count for i in range(count)})


def gather_objects(items: list) -> list:
    """The concatenation of every rank's ``items`` (just ``items`` without distribution)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return items
    gathered: list[list] = [[] for _ in range(torch.distributed.get_world_size())]
    torch.distributed.all_gather_object(gathered, items)
    return [item for part in gathered for item in part]


@contextlib.contextmanager
def _quiet_stderr():
    with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
        yield
