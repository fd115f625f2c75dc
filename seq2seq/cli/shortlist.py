"""``seq2seq shortlist``: learn a lexical shortlist from a checkpoint's training pairs, and the
``--shortlist FILE`` option of ``translate``, ``evaluate`` and ``serve`` that decodes with one.

The pairs are the checkpoint's own training split, as its data cache holds them (prepared
again if the cache is gone), or ``--src``/``--tgt`` text files tokenised with the
checkpoint's SentencePiece model. The file written is CTranslate2's vocabulary map
(``seq2seq.decoding.shortlist``): ``seq2seq export --format ctranslate2 --shortlist FILE``
puts it in the model directory.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator

from seq2seq.data.shortlist import ShortlistSettings

DEFAULTS = ShortlistSettings()
MAX_PAIRS = 200_000  # pairs read at most (a random sample of a larger training split)


def add_shortlist_option(p: argparse.ArgumentParser) -> None:
    """``--shortlist FILE``: decode with a lexical shortlist (our engine)."""
    p.add_argument(
        "--shortlist",
        metavar="FILE",
        default=None,
        help="decode with this lexical shortlist ('seq2seq shortlist'): each sentence writes "
        "only its candidate pieces (faster; our engine; a CTranslate2 export carries its own)",
    )


def add_export_shortlist(p: argparse.ArgumentParser) -> None:
    """``export --shortlist FILE``: the CTranslate2 export's vocabulary map."""
    p.add_argument(
        "--shortlist",
        metavar="FILE",
        default=None,
        help="ctranslate2 only: write this 'seq2seq shortlist' file into the model as its "
        "vocabulary map (vmap.txt), which translate --engine ctranslate2 then uses",
    )


# Where --shortlist cannot apply, what is said instead. Argos Translate 1.11 calls
# translate_batch without use_vmap (argostranslate/translate.py): a map in its package is unread.
REFUSALS = {
    "ctranslate2": "--shortlist is for our engine; a CTranslate2 model reads its own map: "
    "seq2seq export --format ctranslate2 --shortlist FILE writes it into the directory",
    "argos": "--shortlist: Argos Translate (and so LibreTranslate) does not pass use_vmap to "
    "CTranslate2, so an Argos package would carry a map nothing reads; export ctranslate2",
    "hf": "--shortlist: a Hugging Face model has no vocabulary map; export ctranslate2",
}


def check_shortlist_use(args: argparse.Namespace) -> None:
    """A one-line error where ``--shortlist`` cannot apply, before any model loads: with
    ``--engine ctranslate2`` (the export carries its map), or exported to Hugging Face or
    Argos Translate."""
    if getattr(args, "shortlist", None) is None:
        return
    if args.command == "export" and args.format != "ctranslate2":
        raise ValueError(REFUSALS[args.format])
    if getattr(args, "engine", "torch") == "ctranslate2":
        raise ValueError(REFUSALS["ctranslate2"])


def add_shortlist(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a .ckpt written by 'seq2seq fit'")
    p.add_argument("--output", required=True, help="the shortlist file to write (vmap.txt)")
    p.add_argument(
        "--src",
        metavar="FILE",
        help="English lines to learn from, with --tgt (default: the checkpoint's training split)",
    )
    p.add_argument("--tgt", metavar="FILE", help="their Chinese lines, line for line")
    p.add_argument(
        "--per-source",
        type=int,
        default=DEFAULTS.per_source,
        metavar="K",
        help="candidates per source piece, the most probable (default %(default)s)",
    )
    p.add_argument(
        "--frequent",
        type=int,
        default=DEFAULTS.frequent,
        metavar="N",
        help="the N most frequent target pieces: candidates of every sentence "
        "(default %(default)s)",
    )
    p.add_argument(
        "--min-probability",
        type=float,
        default=DEFAULTS.min_probability,
        metavar="P",
        help="leave out a candidate whose p(target | source) is below P (default %(default)s)",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=DEFAULTS.iterations,
        help="rounds of IBM Model 1's EM (default %(default)s)",
    )
    p.add_argument(
        "--max-pairs",
        type=int,
        default=MAX_PAIRS,
        help="pairs read at most, a random sample of more (default %(default)s)",
    )
    p.set_defaults(run=run_shortlist)


def run_shortlist(args: argparse.Namespace) -> int:
    from seq2seq import checks
    from seq2seq.cli.progress import progress_bar
    from seq2seq.data.shortlist import learn_shortlist
    from seq2seq.data.tokenizer import checkpoint_tokenizer

    settings = ShortlistSettings(
        args.per_source, args.frequent, args.iterations, args.min_probability
    )
    if (args.src is None) != (args.tgt is None):
        raise ValueError("--src and --tgt go together")
    if args.max_pairs < 1:
        raise ValueError(f"--max-pairs must be at least 1, got {args.max_pairs}")
    checks.writable_file(args.output, "shortlist")
    tokenizer = checkpoint_tokenizer(args.checkpoint)
    pairs = _pairs(args, tokenizer)
    total = len(pairs) * (1 + settings.iterations)
    with progress_bar(total, "pairs", True, "seq2seq shortlist") as bar:
        shortlist = learn_shortlist(pairs, vocabulary(tokenizer), settings, bar.advance)
    shortlist.write(args.output, tokenizer.id_to_piece)
    sizes = [len(shortlist.candidates_of(s)) for s in range(shortlist.vocab_size)]
    print(
        f"learnt from {len(pairs):,} pairs: {len(shortlist.always)} pieces always, "
        f"{sum(sizes) / max(1, sum(map(bool, sizes))):.1f} per source piece; "
        f"written to {args.output}",
        file=sys.stderr,
    )
    return 0


def vocabulary(tokenizer):  # noqa: ANN001, ANN201 (TokenizerLike -> Vocabulary)
    """What learning needs of a tokenizer (``seq2seq.data.shortlist.Vocabulary``)."""
    from seq2seq.data.shortlist import Vocabulary
    from seq2seq.data.tokenizer import byte_piece_ids

    ids = (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id)
    specials = frozenset(i for i in (*ids, tokenizer.sep_id) if i is not None)
    return Vocabulary(
        tokenizer.vocab_size,
        tokenizer.id_to_piece,
        specials,
        tokenizer.eos_id,
        byte_piece_ids(tokenizer),
    )


def _pairs(args: argparse.Namespace, tokenizer) -> list[tuple[list[int], list[int]]]:  # noqa: ANN001
    """The pairs to learn from, at most ``--max-pairs`` (a seeded sample)."""
    if args.src is not None:
        pairs = list(_file_pairs(args.src, args.tgt, tokenizer))
    else:
        pairs = list(_training_pairs(args.checkpoint))
    if len(pairs) > args.max_pairs:
        pairs = random.Random(0).sample(pairs, args.max_pairs)
    return pairs


def _file_pairs(source: str, target: str, tokenizer) -> Iterator[tuple[list[int], list[int]]]:  # noqa: ANN001
    from seq2seq.errors import DataError
    from seq2seq.textio import read_lines

    english, chinese = read_lines(source), read_lines(target)
    if len(english) != len(chinese):
        raise DataError(f"{target}: {len(chinese)} lines but {source} has {len(english)}")
    return zip(tokenizer.encode_sources(english), tokenizer.encode_targets(chinese), strict=True)


def _training_pairs(checkpoint: str) -> Iterator[tuple[list[int], list[int]]]:
    """The training split's token ids, from the data cache the checkpoint was trained on."""
    from seq2seq.data.datamodule import TranslationDataModule
    from seq2seq.errors import CheckpointError, DataError
    from seq2seq.inference.checkpoint import read_checkpoint

    hparams = read_checkpoint(checkpoint).get("datamodule_hyper_parameters")
    if not hparams:
        raise CheckpointError(f"{checkpoint}: no data settings stored; give --src and --tgt")
    try:
        datamodule = TranslationDataModule.trained_with(hparams, checkpoint)
    except DataError as error:
        raise DataError(f"{error}; give --src and --tgt files instead") from None
    datamodule.prepare_data(lambda line: print(line, file=sys.stderr))
    datamodule.setup()
    if datamodule.task != "translation":
        raise CheckpointError(f"{checkpoint}: a language model; a shortlist is for translation")
    train = datamodule.dataset("train")
    return (train[i] for i in range(len(train)))
