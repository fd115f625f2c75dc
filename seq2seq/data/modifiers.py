"""Training-time data modifiers: the text a real page holds besides clean sentences.

A model that has only seen clean, sentence-case, full sentences answers a heading in capitals
with garbage and a one-word button with a looping sentence. Production pipelines fix this in the
data (OpusTrainer's *modifiers*, OpenNMT's and eole's *transforms*); these are ours, set in the
YAML as ``data.modifiers`` (:class:`Modifiers`, each a share of the training pairs):

- ``uppercase``: the pair in capitals, source and target (Latin letters in the Chinese too);
- ``titlecase``: every word capitalised, both sides;
- ``no_end_punctuation``: the final stop removed from both sides (only where both have one), so
  a source without one is translated without one;
- ``dictionary``: up to this many word and phrase pairs from CC-CEDICT (common HSK 3.0 words,
  :mod:`seq2seq.data.dictionary`) added to the training split, a capped share of short segments;
- ``ui_strings``: up to this many UI strings with their Chinese from gettext catalogs
  (:mod:`seq2seq.data.catalogs`) added likewise: ``catalogs`` (a user's ``.po`` files or folders
  of them) first, then Django's simplified-Chinese ones;
- ``distilled``: a corpus ``seq2seq distill`` wrote (``source<TAB>translation`` lines, a
  teacher's translations of the training sources): each of its pairs takes the place of the
  training pair with its source (sequence-level knowledge distillation, docs/distillation.md);
  a source it does not hold keeps its reference, dev and test keep the corpus's references,
  and the other modifiers apply to the distilled pairs as to the others;
- ``copy_spans``: a span a translation keeps as written (a URL, a version, a number, an
  identifier, a placeholder, an acronym, a name the model cannot know) made up and put on both
  sides, in place of one they share or of a word and its dictionary translation
  (:mod:`seq2seq.data.copying`): the model learns to copy what it cannot translate;
- ``terms``: a term of the source (no function word) annotated inline with the Chinese word the
  reference uses for it (or a synonym of the same sense put in its place), between tags the
  vocabulary holds (:mod:`seq2seq.data.terms`): the model learns to copy a glossary's terms.
  Terms are found last, on the text the other modifiers wrote. ``termbase``: a
  user's ``english<TAB>chinese`` file whose terms are annotated too (before the dictionary's).
  ``aligned_terms``: up to this many more term pairs learnt from the training split itself by
  word association (:mod:`seq2seq.data.alignment`), for a corpus whose words CC-CEDICT's
  common ones miss; written to ``terms.tsv`` in the data cache, after the termbase's.
  ``terms_per_pair``: at most this many terms annotated in one pair (default 1).
  ``unrelated_terms``: S puts an unrelated dictionary word in place of a share
  ``SWAP_SHARE * S`` of the annotated dictionary terms (those without a synonym too), so that
  only copying works; the rest of ``SWAP_SHARE`` still takes a synonym where there is one
  (default 0).

Only the training split is modified (dev and test stay as written), and the SentencePiece model
is learnt from the text before any modifier (as OpusTrainer's pipeline does). Which pairs a
modifier touches follows from the seed and the pair's row in the corpus alone (a counter-based
hash, :func:`seq2seq.data.permutation.uniforms`): the same in every process, epoch and resume.
The modified text is what preparation tokenizes into the cache, so the loader, the sampler and
DDP see ordinary token ids and nothing per example is held in Python memory. OpusTrainer itself
is not used: it draws from Python's global ``random`` stream, one sentence after another, which
neither a resumed run nor preparation in worker processes could reproduce.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from seq2seq.data.cache_dir import fingerprint
from seq2seq.data.copying import copy_span
from seq2seq.data.permutation import uniforms
from seq2seq.data.terms import TERM_FORMAT, TermSpan, find_terms
from seq2seq.errors import ConfigError

# Settings added after caches were written: at their defaults they stay out of the cache's key.
_HOW_TERMS_ARE_DRAWN = {"terms_per_pair": 1, "unrelated_terms": 0.0}
_ADDED_LATER = {
    **_HOW_TERMS_ARE_DRAWN,
    "ui_strings": 0,
    "catalogs": (),
    "copy_spans": 0.0,
    "distilled": None,
}
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_EN_END = re.compile(r"[.!?。！？]+$")
_ZH_END = re.compile(r"[。！？.!?]+$")


@dataclasses.dataclass(frozen=True)
class Modifiers:
    """The shares of training pairs each modifier rewrites; see the module docstring.

    ``uppercase`` and ``titlecase`` never touch the same pair (their shares add up);
    ``no_end_punctuation`` is drawn on its own. ``dictionary`` is a count of pairs added.
    """

    uppercase: float = 0.0
    titlecase: float = 0.0
    no_end_punctuation: float = 0.0
    dictionary: int = 0
    ui_strings: int = 0
    catalogs: tuple[str, ...] = ()
    terms: float = 0.0
    termbase: str | None = None
    aligned_terms: int = 0
    terms_per_pair: int = 1
    unrelated_terms: float = 0.0
    copy_spans: float = 0.0
    distilled: str | None = None

    def __post_init__(self) -> None:
        shares = ("uppercase", "titlecase", "no_end_punctuation", "terms", "unrelated_terms")
        for name in (*shares, "copy_spans"):
            share = getattr(self, name)
            if not isinstance(share, int | float) or not 0.0 <= share <= 1.0:
                raise ConfigError(f"data.modifiers.{name} must be a share in [0, 1], got {share!r}")
        if self.uppercase + self.titlecase > 1.0:
            raise ConfigError("data.modifiers: uppercase + titlecase must be at most 1")
        for name in ("termbase", "aligned_terms", "unrelated_terms"):
            if getattr(self, name) and not self.terms:
                raise ConfigError(f"data.modifiers.{name} needs a share of pairs in terms (> 0)")
        if not isinstance(self.catalogs, tuple) or not all(
            isinstance(path, str) for path in self.catalogs
        ):
            raise ConfigError(
                "data.modifiers.catalogs must be a .po path or a list of them, "
                f"got {self.catalogs!r}"
            )
        if self.catalogs and not self.ui_strings:
            raise ConfigError("data.modifiers.catalogs needs a count of pairs in ui_strings (> 0)")
        for name in ("dictionary", "ui_strings", "aligned_terms", "terms_per_pair"):
            count = getattr(self, name)
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ConfigError(f"data.modifiers.{name} must be a count >= 0, got {count!r}")
        if self.terms_per_pair < 1:
            raise ConfigError("data.modifiers.terms_per_pair must be at least 1")
        if self.terms_per_pair > 1 and not self.terms:
            raise ConfigError("data.modifiers.terms_per_pair needs a share of pairs in terms (> 0)")

    @classmethod
    def from_dict(cls, settings: dict[str, Any] | None) -> Modifiers:
        """From the YAML's ``data.modifiers`` mapping; an unknown key is a one-line error."""
        settings = dict(settings or {})
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(
                f"data.modifiers: unknown modifier {unknown[0]!r}; expected one of {sorted(known)}"
            )
        for name in ("dictionary", "ui_strings", "aligned_terms", "terms_per_pair"):
            count = settings.get(name)
            if isinstance(count, float) and count.is_integer():  # a YAML or JSON 1000.0
                settings[name] = int(count)
        if "catalogs" in settings:  # one path, a list of them, or nothing (an empty YAML key)
            catalogs = settings["catalogs"]
            if catalogs is None:
                catalogs = ()
            elif isinstance(catalogs, str):
                catalogs = (catalogs,)
            elif isinstance(catalogs, list | tuple):
                catalogs = tuple(catalogs)
            settings["catalogs"] = catalogs
        return cls(**settings)

    @property
    def active(self) -> bool:
        """Whether any modifier changes the data (none: the cache is today's, byte for byte)."""
        # terms_per_pair and unrelated_terms only say how terms are drawn: alone they change nothing
        fields = dataclasses.fields(self)
        return any(getattr(self, f.name) for f in fields if f.name not in _HOW_TERMS_ARE_DRAWN)

    def cache_key(self) -> dict[str, Any]:
        """What enters the cache's hash: nothing when inactive (old caches stay valid); a
        termbase by its path, size and time (an edited file prepares again)."""
        if not self.active:
            return {}
        key: dict[str, Any] = {"modifiers": dataclasses.asdict(self)}
        for name, default in _ADDED_LATER.items():
            if key["modifiers"][name] == default:  # caches prepared before it existed stay valid
                del key["modifiers"][name]
        if self.copy_spans:  # how spans are made and placed
            from seq2seq.data.copying import COPY_FORMAT

            key["copy_format"] = COPY_FORMAT
        if self.terms:  # how the annotation is written and drawn (terms.TERM_FORMAT)
            key["term_format"] = TERM_FORMAT
        for name in ("termbase", "distilled"):  # an edited file prepares again
            if getattr(self, name) is not None:
                key[name] = fingerprint(getattr(self, name))
        if self.ui_strings:  # an edited catalog or another Django version prepares again
            from seq2seq.data.catalogs import catalog_fingerprints

            key["catalogs"] = catalog_fingerprints(self.catalogs)
        return key

    def apply(
        self, sources: list[str], targets: list[str], rows: np.ndarray, seed: int
    ) -> tuple[list[str], list[str], list[list[TermSpan]]]:
        """The pairs with the modifiers drawn for their ``rows`` (each pair's row in the corpus,
        (N,) int) under ``seed``, and each source's term annotations (none: an empty list)."""
        u_case, u_stop, u_term, u_copy = (uniforms(seed, rows, salt) for salt in (1, 2, 4, 7))
        # A term's pick and swap; the first term's salts are those of one term per pair, so
        # terms_per_pair 1 draws what it always drew.
        salts = [(5, 6)] + [(100 + 2 * k, 101 + 2 * k) for k in range(1, self.terms_per_pair)]
        picks = np.stack([uniforms(seed, rows, p) for p, _ in salts], axis=1)  # (N, terms)
        swaps = np.stack([uniforms(seed, rows, s) for _, s in salts], axis=1)  # (N, terms)
        out_src, out_tgt, out_spans = [], [], []
        for n, (en, zh) in enumerate(zip(sources, targets, strict=True)):
            if u_case[n] < self.uppercase:
                en, zh = en.upper(), zh.upper()
            elif u_case[n] < self.uppercase + self.titlecase:
                en, zh = title_case(en), title_case(zh)
            if u_stop[n] < self.no_end_punctuation:
                en, zh = remove_end_punctuation(en, zh)
            if u_copy[n] < self.copy_spans:  # the span's draw: the rest of the same uniform
                en, zh = copy_span(en, zh, u_copy[n] / self.copy_spans) or (en, zh)
            # Terms last, on the text as trained: a case change (ß -> SS) or a dropped stop
            # after them moved or cut the annotation, and the reference kept its swapped word.
            spans: list[TermSpan] = []
            if u_term[n] < self.terms:
                found = find_terms(
                    en,
                    zh,
                    picks[n].tolist(),
                    swaps[n].tolist(),
                    self.termbase,
                    self.unrelated_terms,
                )
                if found is not None:
                    zh, spans = found
            out_src.append(en)
            out_tgt.append(zh)
            out_spans.append(spans)
        return out_src, out_tgt, out_spans


def title_case(text: str) -> str:
    """Every word's first letter capitalised, the rest as written (``str.title`` would write
    ``Don'T`` and lower-case ``NASA``'s other letters); Chinese has no case and stays."""
    return _WORD.sub(lambda match: match.group()[:1].upper() + match.group()[1:], text)


def remove_end_punctuation(en: str, zh: str) -> tuple[str, str]:
    """Both sides without their final stop, where both have one (a pair whose English ends in
    a stop and whose Chinese does not is left alone: it would teach dropping it)."""
    en_end, zh_end = _EN_END.search(en), _ZH_END.search(zh)
    if en_end is None or zh_end is None or en_end.start() == 0 or zh_end.start() == 0:
        return en, zh
    return en[: en_end.start()].rstrip(), zh[: zh_end.start()].rstrip()
