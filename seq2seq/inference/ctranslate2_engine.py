"""CTranslate2 as a second decoding engine for ``Translator``: reads a directory written by
``seq2seq export --format ctranslate2`` (see ``seq2seq.tools.export``) and decodes with
CTranslate2's search in place of ours; line handling, batching and truncation stay
``Translator``'s.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import ModelConfig
from seq2seq.data.terms import term_tag_ids
from seq2seq.data.tokenizer import SOURCE_EOS_KEY, TokenizerLike
from seq2seq.decoding.repetition import tandem_repeats
from seq2seq.decoding.search import Hypothesis, SearchConfig, written_lengths
from seq2seq.errors import CheckpointError
from seq2seq.inference.checkpoint import search_from_dict
from seq2seq.inference.engines import whole_characters

SETTINGS_FILE = "seq2seq_search.json"  # our decoding defaults and model config, beside CT2's
SPM_FILE = "spm.model"
VMAP_FILE = "vmap.txt"  # CTranslate2's vocabulary map: a lexical shortlist (decoding.shortlist)
# Searches again of the outputs that break max_repeats (each round suppresses what it found).
GUARD_ROUNDS = 16  # a round that finds nothing new to suppress ends sooner


class CTranslate2Engine:
    """A CTranslate2 model directory as an ``Engine`` (``seq2seq.inference.engines``).

    Greedy output equals ours exactly: the source pieces are the same (ending with ``</s>``
    exactly when the model was trained so), and a greedy output cut
    to a sentence's own length limit is what our search gives (CTranslate2 takes one limit per
    batch). Beam search differs in its length penalty: CTranslate2 divides by length^alpha,
    GNMT's penalty is ((5 + length) / 6)^alpha.

    The repetition guard: ``no_repeat_ngram_size`` and ``repetition_penalty`` are
    CTranslate2's own options. ``max_repeats`` is not, so an output that breaks it is searched
    again, alone, with what it repeated in CTranslate2's ``suppress_sequences``, until it
    repeats none (``GUARD_ROUNDS`` at most; a warning if one still does). Each suppressed run
    is one our guard forbids too, so greedy output still equals ours.
    """

    def __init__(
        self,
        model_dir: str | Path,
        device: str = "cpu",
        compute_type: str = "default",
        use_vmap: bool | None = None,
        threads: int = 1,
    ):
        import ctranslate2

        from seq2seq.data.tokenizer import byte_piece_ids, load_tokenizer, symbol_ids

        directory = Path(model_dir)
        if not (directory / "model.bin").is_file() or not (directory / SPM_FILE).is_file():
            raise CheckpointError(f"{directory}: not a CTranslate2 export of seq2seq")
        settings = json.loads((directory / SETTINGS_FILE).read_text(encoding="utf-8"))
        # The source tokens CTranslate2 gets end with </s> exactly when the model was trained
        # so; exports written before the key existed came from models trained without.
        with_eos = bool(settings.get(SOURCE_EOS_KEY, False))
        self.tokenizer = load_tokenizer(directory / SPM_FILE, with_eos)
        self.search, self.config = read_settings(settings, self.tokenizer)
        self.byte_ids = byte_piece_ids(self.tokenizer)  # its outputs' half characters dropped
        self.symbols = frozenset(symbol_ids(self.tokenizer))  # free to repeat (the guard)
        # Exports since 0.3 say add_source_eos in CTranslate2's own config.json, so that
        # translate_batch(sp.encode(text, out_type=str)) reads sources as the model was
        # trained; ours then leave the eos the tokenizer appended to CTranslate2.
        self.adds_source_eos = adds_source_eos(directory)
        self.truecase: dict[str, str] | None = settings.get("truecase")  # exports since 0.3
        self.device = device
        # The export's vocabulary map (seq2seq export --shortlist), used when it is there
        # unless use_vmap says otherwise. CTranslate2 takes the union of a batch's candidates
        # (no per-sentence mask, unlike ours): an output may change with its batch-mates.
        has_vmap = (directory / VMAP_FILE).is_file()
        if use_vmap and not has_vmap:
            raise CheckpointError(f"{directory}: no {VMAP_FILE} (export with --shortlist FILE)")
        self.use_vmap = has_vmap if use_vmap is None else use_vmap
        # CTranslate2's threads (``threads``): its default of 4 was slower everywhere on 2
        # cores. One for batch work (Translator.from_ctranslate2, distillation): the demo's
        # teacher in int8, test split, beam 5, through this engine: 11.8 s at 1 thread, 36.8
        # s at 2 (single-sentence searches of looping outputs again are slower still across
        # threads). The server gives it its compute threads: one client, beam 4, p50 23 ms at
        # 2 threads, 42 at 1 (ServedModel.load).
        self.translator = ctranslate2.Translator(
            str(directory),
            device=device,
            compute_type=compute_type,
            inter_threads=1,
            intra_threads=threads,
        )

    def with_search(self, **changes: Any) -> CTranslate2Engine:
        """This engine (the same loaded model) with some search settings changed."""
        import copy

        changed = copy.copy(self)
        changed.search = replace(self.search, **changes)
        return changed

    def batch_budget(self, max_tokens: int, beam_size: int) -> int:
        """CTranslate2 sizes its beams itself: whole batches run faster there (demo test set,
        beam 5: 3.7 s with 4,000 source tokens per batch, 5.4 s with 800)."""
        return max_tokens

    def source_limit(self) -> int:
        """The export's position table, as for our model."""
        return self.config.max_positions

    def hypotheses(
        self, sources: list[list[int]], beam_size: int, n_best: int = 1
    ) -> list[list[Hypothesis]]:
        sp, config = self.tokenizer, self.config
        # Our search's limits exactly (float32 arithmetic, capped at the positions), minus the
        # eos it forces at the limit.
        width = max(map(len, sources))
        ids = torch.tensor([[*source, *[-1] * (width - len(source))] for source in sources])
        lengths = written_lengths(ids, -1, term_tag_ids(self.tokenizer) or ())  # -1: padding
        limits = (self.search.max_lengths(lengths, cap=config.max_positions) - 1).tolist()
        if self.adds_source_eos:  # CTranslate2 appends the </s> our tokenizer did
            sources = [
                source[:-1] if source[-1:] == [config.eos_id] else source for source in sources
            ]
        pieces = [[sp.id_to_piece(t) for t in source] for source in sources]
        never = [(token,) for token in self._never_generated()]
        found = self._whole(self._search(pieces, limits, beam_size, n_best, never))
        for i, runs in self._looping(found).items():
            search = (pieces[i], limits[i], beam_size, n_best)
            found[i] = self._without_runs(*search, never, found[i], runs)
        return found

    def _without_runs(
        self,
        pieces: list[str],
        limit: int,
        beam_size: int,
        n_best: int,
        never: list[tuple[int, ...]],
        found: list[Hypothesis],
        runs: list[tuple[int, ...]],
    ) -> list[Hypothesis]:
        """One looping sentence searched again, alone (its output never depends on its
        batch), each round with the runs it repeated so far suppressed, until it repeats none
        or a round finds nothing new (a run written around a byte later dropped)."""
        suppressed = list(never)
        for _ in range(GUARD_ROUNDS):
            new = [run for run in dict.fromkeys(runs) if run not in suppressed]
            if not new:
                break
            suppressed += new
            found = self._whole(self._search([pieces], [limit], beam_size, n_best, suppressed))[0]
            runs = self._looping([found]).get(0, [])
            if not runs:
                return found
        print(
            "warning: a CTranslate2 output still repeats a run past max_repeats after "
            f"{len(suppressed) - len(never)} suppressed",
            file=sys.stderr,
        )
        return found

    def _whole(self, found: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """Without byte pieces that form no character, before runs are read: dropping them
        can join two runs into one."""
        return whole_characters(found, self.byte_ids, "CTranslate2")

    def _search(
        self,
        pieces: list[list[str]],
        limits: list[int],
        beam_size: int,
        n_best: int,
        suppressed: list[tuple[int, ...]],
    ) -> list[list[Hypothesis]]:
        """One ``translate_batch`` call with our search settings, each output cut to its
        sentence's limit (eos not counted); ``suppressed``: token sequences it may not write
        (our never-generated tokens, the guard's runs)."""
        sp, search = self.tokenizer, self.search
        longest = max(limits)  # 0 when every sentence may hold only its eos
        results = self.translator.translate_batch(
            pieces,
            beam_size=beam_size,
            num_hypotheses=n_best,
            return_scores=True,
            length_penalty=search.length_penalty,
            no_repeat_ngram_size=search.no_repeat_ngram_size,
            repetition_penalty=search.repetition_penalty,
            # Our rules: at least one token before the eos unless the limit leaves none (those
            # outputs are cut to [] by the caller), never unk, pad or bos.
            max_decoding_length=max(1, longest),
            min_decoding_length=min(1, longest),
            disable_unk=True,
            use_vmap=self.use_vmap,
            suppress_sequences=[[sp.id_to_piece(t) for t in run] for run in suppressed],
        )
        return [
            [
                Hypothesis([sp.piece_to_id(p) for p in out][:limit], score, score)
                for out, score in zip(result.hypotheses, result.scores, strict=True)
            ]
            for result, limit in zip(results, limits, strict=True)
        ]

    def _looping(self, found: list[list[Hypothesis]]) -> dict[int, list[tuple[int, ...]]]:
        """Sentence index -> the runs its hypotheses repeat past ``max_repeats`` (none: not
        listed)."""
        looping = {}
        for i, hypotheses in enumerate(found):
            runs = [
                run
                for h in hypotheses
                for run in tandem_repeats(h.tokens, self.search.max_repeats, self.symbols)
            ]
            if runs:
                looping[i] = runs
        return looping

    def _never_generated(self) -> list[int]:
        """pad, bos and the term tags (``seq2seq.data.terms``); an imported model's appended
        pad is no row of the export at all."""
        config = self.config
        tags = list(term_tag_ids(self.tokenizer) or ())
        if self.tokenizer.appended_pad:
            return [config.bos_id, *tags]
        return [config.pad_id, config.bos_id, *tags]


def adds_source_eos(directory: Path) -> bool:
    """Whether CTranslate2 appends ``</s>`` to the sources it is given (its ``config.json``)."""
    path = directory / "config.json"
    if not path.is_file():
        return False
    return bool(json.loads(path.read_text(encoding="utf-8")).get("add_source_eos", False))


def read_settings(
    settings: dict[str, Any], tokenizer: TokenizerLike
) -> tuple[SearchConfig, ModelConfig]:
    """The decoding defaults and the model config (positions, special ids) of an export's
    settings file."""
    search = search_from_dict(settings["search"])
    if "model_config" in settings:
        return search, ModelConfig.from_dict(settings["model_config"])
    # Written by an older version: the positions apart, the special ids with the search.
    ids = {
        k: v for k, v in settings["search"].items() if k in ("pad_id", "unk_id", "bos_id", "eos_id")
    }
    positions = int(settings["max_positions"])
    return search, ModelConfig(vocab_size=tokenizer.vocab_size, max_positions=positions, **ids)
