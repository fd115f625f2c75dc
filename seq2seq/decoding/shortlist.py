"""A lexical shortlist: the target pieces a sentence's translation may be made of, chosen by
its source pieces (Marian's lexical shortlist, CTranslate2's vocabulary map).

A decoder step's output projection scores every vocabulary entry, though a sentence's
translation uses few of them. With a shortlist the searches run over the batch's union of its
sentences' candidate sets (``Narrowed``: the projection, the log-softmax and the top-k over
those columns alone), and each sentence's log-softmax over its OWN candidates (the others at
-inf), so that no sentence's output depends on its batch-mates.

The file is CTranslate2's vocabulary mapping (``vmap.txt``), so one file serves both engines::

    <TAB>T1 T2 ...             a line with an empty source: targets that are always candidates
    SOURCE<TAB>T1 T2 ...       a source piece and its candidates

UTF-8, pieces as SentencePiece writes them (``▁`` for a space), targets separated by single
spaces; no comments (CTranslate2 would read one as a rule). The end of sentence is always a
candidate, as in CTranslate2. ``seq2seq shortlist`` learns one (``seq2seq.data.shortlist``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from seq2seq.decoding.search import Hypothesis, SpecialTokens
from seq2seq.errors import DataError
from seq2seq.textio import read_text, split_lines


class Shortlist:
    """Candidate target ids per source id, plus ids that are always candidates.

    Args:
        always: ids every sentence may write (the end of sentence is added).
        candidates: source id -> the target ids it makes candidates.
        vocab_size: the vocabulary both sides share.
        eos: the end-of-sentence id.
    """

    def __init__(
        self,
        always: Iterable[int],
        candidates: Mapping[int, Iterable[int]],
        vocab_size: int,
        eos: int,
    ) -> None:
        self.vocab_size = vocab_size
        self.always = torch.tensor(sorted({*always, eos}), dtype=torch.long)
        lists = [sorted(set(candidates.get(source, ()))) for source in range(vocab_size)]
        self.offsets = torch.tensor([0, *_cumulative(map(len, lists))], dtype=torch.long)
        self.targets = torch.tensor([t for row in lists for t in row], dtype=torch.long)
        every = torch.cat((self.always, self.targets))
        if len(every) and (int(every.min()) < 0 or int(every.max()) >= vocab_size):
            raise ValueError(f"shortlist ids must be in [0, {vocab_size})")
        if any(not 0 <= source < vocab_size for source in candidates):
            raise ValueError(f"shortlist source ids must be in [0, {vocab_size})")

    @classmethod
    def full(cls, vocab_size: int, eos: int) -> Shortlist:
        """Every entry always a candidate: decodes exactly as no shortlist (a test's peer)."""
        return cls(range(vocab_size), {}, vocab_size, eos)

    def candidates_of(self, source: int) -> list[int]:
        """The target ids ``source`` makes candidates (without the ``always`` ones)."""
        return self.targets[self.offsets[source] : self.offsets[source + 1]].tolist()

    def allowed(self, src_ids: Tensor, pad: int) -> Tensor:
        """(B, S) padded source ids -> (B, V) bool: each sentence's own candidates."""
        batch = src_ids.shape[0]
        allowed = torch.zeros(batch, self.vocab_size, dtype=torch.bool)
        allowed[:, self.always] = True
        sources = src_ids.cpu()
        rows, columns = (sources != pad).nonzero(as_tuple=True)
        tokens = sources[rows, columns]
        starts, counts = self.offsets[tokens], self.offsets[tokens + 1] - self.offsets[tokens]
        # Each source token's run of targets, flattened: start + 0, 1, ... count - 1.
        sentence = rows.repeat_interleave(counts)
        first = torch.cumsum(counts, dim=0) - counts
        within = torch.arange(int(counts.sum())) - first.repeat_interleave(counts)
        allowed[sentence, self.targets[starts.repeat_interleave(counts) + within]] = True
        return allowed.to(src_ids.device)

    @classmethod
    def read(
        cls, path: str | Path, pieces: Mapping[str, int], vocab_size: int, eos: int
    ) -> Shortlist:
        """Read a vocabulary mapping file (the module's format); ``pieces``: a tokenizer's
        piece -> id (``vocabulary_of``).

        Raises:
            DataError: naming the file and line: not UTF-8, a line without its tab, a
                multi-piece source (CTranslate2 reads n-grams; we do not), a piece the
                vocabulary lacks, or no rule at all.
        """
        always: set[int] = set()
        candidates: dict[int, list[int]] = {}
        lines = split_lines(read_text(path, "shortlist file"))
        for number, line in enumerate(lines, start=1):
            if not line:
                continue
            source, tab, targets = line.partition("\t")
            if not tab:
                raise DataError.at(path, number, "expected SOURCE<TAB>TARGETS (no tab found)")
            if " " in source:
                raise DataError.at(path, number, f"one source piece per line, got {source!r}")
            ids = [_piece_id(path, number, piece, pieces) for piece in targets.split()]
            if source:
                candidates.setdefault(_piece_id(path, number, source, pieces), []).extend(ids)
            else:
                always.update(ids)
        if not always and not candidates:
            raise DataError.at(path, None, "no shortlist rules (an empty file)")
        return cls(always, candidates, vocab_size, eos)

    def write(self, path: str | Path, id_to_piece: Callable[[int], str]) -> None:
        """Write the module's format: the ``always`` line first, then one line per source id
        that has candidates, in id order."""
        lines = ["\t" + " ".join(id_to_piece(t) for t in self.always.tolist())]
        for source in range(self.vocab_size):
            targets = self.candidates_of(source)
            if targets:
                lines.append(id_to_piece(source) + "\t" + " ".join(map(id_to_piece, targets)))
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class Narrowed:
    """A batch's shortlist as a vocabulary of its own, which the searches run over: the union
    of its sentences' candidates (``columns``, ascending vocabulary ids) and, per sentence,
    which of them are its own (``allowed``). A token is a position in ``columns``.

    Every per-step cost of a search that grows with the vocabulary (the output projection,
    the log-softmax, the top-k, the masks) then grows with the union instead; the scorer
    sets a row's scores outside its sentence's own candidates to -inf, so that its
    log-softmax and its choices are those over its own candidates whatever the batch holds.
    """

    columns: Tensor  # (U,) vocabulary ids
    allowed: Tensor  # (B, U) bool

    @classmethod
    def of(cls, allowed: Tensor, specials: SpecialTokens) -> Narrowed:
        """(B, V) each sentence's candidates -> their union, with the special and byte ids
        always in it (the search's rules name them; they stay -inf where not allowed)."""
        keep = allowed.any(dim=0)
        keep[[*specials.never_generated, specials.eos, *specials.bytes]] = True
        columns = keep.nonzero()[:, 0]
        return cls(columns, allowed[:, columns])

    def specials(self, specials: SpecialTokens) -> SpecialTokens:
        """``specials`` as positions in ``columns``; ids not in the union dropped (no row can
        write them). The term tags go: only a source holds them."""
        position = torch.full((int(self.columns.max()) + 1,), -1, dtype=torch.long)
        position[self.columns.cpu()] = torch.arange(len(self.columns))

        def among(ids: Iterable[int]) -> tuple[int, ...]:
            found = (int(position[i]) if i < len(position) else -1 for i in ids)
            return tuple(p for p in found if p >= 0)

        pad, unk, bos, eos = among((specials.pad, specials.unk, specials.bos, specials.eos))
        return SpecialTokens(
            pad=pad,
            unk=unk,
            bos=bos,
            eos=eos,
            blank=among(specials.blank),
            banned=among(specials.banned),
            bytes=among(specials.bytes),
            symbols=among(specials.symbols),
        )

    def restore(self, found: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """The hypotheses' tokens as vocabulary ids again, in place."""
        columns = self.columns.tolist()
        for hypotheses in found:
            for hypothesis in hypotheses:
                hypothesis.tokens = [columns[t] for t in hypothesis.tokens]
        return found


def _cumulative(counts: Iterable[int]) -> list[int]:
    total, out = 0, []
    for count in counts:
        total += count
        out.append(total)
    return out


def vocabulary_of(id_to_piece: Callable[[int], str], vocab_size: int) -> dict[str, int]:
    """piece -> id of a tokenizer's ``id_to_piece`` (what ``Shortlist.read`` looks pieces up
    in: SentencePiece's own ``piece_to_id`` answers unk's id for an unknown piece)."""
    return {id_to_piece(token): token for token in range(vocab_size)}


def _piece_id(path: str | Path, line: int, piece: str, pieces: Mapping[str, int]) -> int:
    if piece not in pieces:
        raise DataError.at(
            path, line, f"{piece!r} is no piece of this model's vocabulary (another model's?)"
        )
    return pieces[piece]
