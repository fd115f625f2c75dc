"""Sequence-level knowledge distillation (Kim and Rush, 2016): a teacher translates the training
sources, and a student is trained on those translations instead of the human references.

The teacher searches each source with a beam and keeps, of its n-best list, the hypothesis
closest to the reference by sentence chrF (Mozilla's Firefox Translations pipeline does the
same): the student learns what the teacher can say, pulled toward what the reference says.

The corpus is written as it goes, one ``source<TAB>translation`` line per source in input
order, a chunk at a time and flushed, so an interrupted run resumes where it stopped:
:func:`distill` counts the complete lines already there, checks that they translate the same
sources, and goes on after them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from seq2seq.decoding.search import Hypothesis
from seq2seq.errors import DataError
from seq2seq.inference.evaluation import sentence_chrf

CHUNK_LINES = 512  # lines translated and written together: what an interruption can lose
BATCH_SENTENCES = 64  # sources per engine call, after sorting a chunk by length


@dataclass(frozen=True)
class DistillSettings:
    """How the teacher searches: ``beam_size`` and the ``n_best`` hypotheses it chooses from
    (1: the beam's best, no reference needed)."""

    beam_size: int = 5
    n_best: int = 5
    batch_sentences: int = BATCH_SENTENCES
    chunk_lines: int = CHUNK_LINES

    def __post_init__(self) -> None:
        if self.beam_size < 1 or self.n_best < 1 or self.batch_sentences < 1:
            raise ValueError("beam_size, n_best and batch_sentences must be at least 1")
        if self.n_best > self.beam_size:
            raise ValueError(f"n_best ({self.n_best}) cannot exceed beam_size ({self.beam_size})")


def teacher_hypotheses(
    translator: Any, settings: DistillSettings, sources: list[str]
) -> list[list[Hypothesis]]:
    """The teacher model's own n-best outputs (``text`` set) for a batch of training sources,
    as written: the student learns the model's translations, and the translator's layers
    around a model (truecasing, verbatim spans, sentence splitting) wrap the student the same
    way when it translates. A source is cut to the engine's longest."""
    engine, tokenizer = translator.engine, translator.tokenizer
    limit = engine.source_limit()
    ids = [source[:limit] for source in tokenizer.encode_sources(sources)]
    found = engine.hypotheses(ids, settings.beam_size, settings.n_best)
    return [[replace(h, text=tokenizer.decode(h.tokens)) for h in hs] for hs in found]


def closest_by_chrf(
    candidates: Sequence[str], reference: str, chrf: Callable[[str, list[str]], float]
) -> int:
    """The index of the candidate with the highest sentence chrF (``evaluation.sentence_chrf``)
    against ``reference`` (the first of equals: the beam's order breaks ties, so the
    best-scored wins them)."""
    if len(candidates) == 1 or not reference:
        return 0
    scores = [chrf(candidate, [reference]) for candidate in candidates]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def one_field(text: str) -> str:
    """``text`` as one TSV field: tabs and line breaks become spaces (a corpus line never
    holds them after cleaning; this only keeps a stray one from shifting the columns)."""
    return " ".join(text.replace("\t", " ").splitlines())


def completed_lines(output: Path, sources: Sequence[str]) -> int:
    """How many sources ``output`` already holds, checked against ``sources``: the count of
    its complete lines (a last line without its newline, cut by an interruption, is removed).
    A line whose source is not the source at its position is a ``DataError``: the file was
    written from other sources, and resuming would mix two corpora."""
    if not output.exists():
        return 0
    data = output.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        with output.open("r+b") as file:  # drop the half-written line, then go on after it
            file.truncate(len(complete))
    lines = complete.decode("utf-8").splitlines()
    if len(lines) > len(sources):
        raise DataError(f"{output}: holds {len(lines):,} lines for {len(sources):,} sources")
    for number, (line, source) in enumerate(zip(lines, sources, strict=False), start=1):
        if line.split("\t", 1)[0] != one_field(source):
            raise DataError.at(
                str(output),
                number,
                "was distilled from other sources; remove it or choose another --output",
            )
    return len(lines)


def distill(
    translate: Callable[[list[str]], list[list[Hypothesis]]],
    sources: Sequence[str],
    references: Sequence[str] | None,
    output: str | Path,
    settings: DistillSettings = DistillSettings(),  # noqa: B008 (frozen)
    advance: Callable[[int], None] = lambda n: None,
    deadline: float | None = None,
) -> tuple[int, int]:
    """Translate ``sources`` into ``output`` (``source<TAB>translation`` lines, in order),
    resuming after the lines a previous run completed; returns how many lines were there
    before, and how many are there now.

    Args:
        translate: a batch of sources -> each one's n-best hypotheses (``text`` set), best
            first (``teacher_translate``).
        references: one per source, to choose among the n-best by chrF; None: the best.
        advance: called with the number of sources of each chunk written (progress).
        deadline: a ``time.monotonic()`` after which no new chunk starts (a time budget: the
            rest can be distilled by running again, and a student trains on what is there).
    """
    output = Path(output)
    if references is not None and len(references) != len(sources):
        raise DataError(f"{len(sources):,} sources but {len(references):,} references")
    done = now = completed_lines(output, sources)
    advance(done)
    with output.open("a", encoding="utf-8", newline="\n") as file:
        for start in range(done, len(sources), settings.chunk_lines):
            if deadline is not None and time.monotonic() > deadline:
                break
            chunk = list(sources[start : start + settings.chunk_lines])
            refs = references[start : start + len(chunk)] if references is not None else None
            chosen = _chunk_translations(translate, chunk, refs, settings.batch_sentences)
            file.writelines(
                f"{one_field(s)}\t{one_field(t)}\n" for s, t in zip(chunk, chosen, strict=True)
            )
            file.flush()
            os.fsync(file.fileno())  # a chunk is on disk before the next one starts
            advance(len(chunk))
            now = start + len(chunk)
    return done, now


def _chunk_translations(
    translate: Callable[[list[str]], list[list[Hypothesis]]],
    chunk: list[str],
    references: Sequence[str] | None,
    batch_sentences: int,
) -> list[str]:
    """Each source's chosen translation, the chunk searched in batches of similar length
    (less padding) and put back in its order."""
    order = sorted(range(len(chunk)), key=lambda i: len(chunk[i]))
    chosen, chrf = [""] * len(chunk), sentence_chrf()
    for start in range(0, len(order), batch_sentences):
        batch = order[start : start + batch_sentences]
        for i, hypotheses in zip(batch, translate([chunk[i] for i in batch]), strict=True):
            texts = [h.text for h in hypotheses]
            pick = closest_by_chrf(texts, references[i], chrf) if references is not None else 0
            chosen[i] = texts[pick]
    return chosen
