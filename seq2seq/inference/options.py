"""How to translate: ``TranslateOptions``, the one object every ``Translator`` entry point, the
CLI, the server and the scripts pass, and ``Progress``, what reports the work as it goes.

Before 0.3 each ``Translator.translate*`` method took the same settings as its own positional
arguments, in orders that differed; ``old_arguments`` keeps those calls working, with a
``DeprecationWarning``, for one release (removed in 0.4).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Protocol

from seq2seq.formats import FORMATS, chinese_script
from seq2seq.formats.chinese_script import SIMPLIFIED, target_tag, to_simplified
from seq2seq.formats.verbatim import Verbatim
from seq2seq.inference.glossary import Glossary, Term
from seq2seq.inference.pieces import MAX_TOKENS


@dataclass(frozen=True, kw_only=True)
class TranslateOptions:
    """What a translation call decodes with (every field keyword-only).

    Attributes:
        beam_size: 1 = greedy search.
        max_tokens: padded decoder rows x source length per batch: a batch holds
            ``max_tokens / beam_size`` source tokens, so memory and speed do not depend on the
            beam (beam 5 on the demo test set: 6.7 s at 800 source tokens per batch, 7.7 s at
            4,000, 9.5 s at 8,000).
        split: split each line or paragraph into sentences and translate those (the model was
            trained on sentences); False: each line is one sentence.
        glossary: terms each translation must use where its sentence holds their English side
            (constrained beam search; with a model trained on term annotation, also annotated
            in the source); a term that could not be placed is named in a warning.
        format: what the texts are: "text" (plain lines), "html", "markdown" or "srt".
        n_best: hypotheses per line for ``translate_n_best`` (searched with a beam of at least
            ``n_best``).
        truecase: read SHOUTED and Title Cased English in sentence case, with the word forms
            the checkpoint learnt (``seq2seq.data.truecase``); False: every line as written.
            A checkpoint without learnt forms (an imported OPUS-MT model) reads as written
            either way.
        verbatim: URLs, e-mail and network addresses, paths, numbers, versions, dates and
            times, identifiers, flags, keyboard shortcuts, placeholders and acronyms come
            through exactly as written (``seq2seq.formats.verbatim``). True: the translator's
            rules (``Translator.verbatim``: the built-in kinds, or a server's ``--verbatim``
            file); a ``Verbatim``: these rules (``Verbatim.read(path)`` adds a file's terms and
            patterns); False: nothing is kept (the output is the model's alone).
        target: the Chinese written: "zh-Hans" (the model's own Simplified), "zh-Hant",
            "zh-TW" (with Taiwan's words) or "zh-HK"; other names are read too ("zt",
            "zh_tw", ``seq2seq.formats.chinese_script.target_tag``) and kept as these. A
            Traditional target is the Simplified translation converted by OpenCC after the
            search; verbatim spans and markup stay as written, and a glossary term given in
            Traditional is searched in Simplified and written as given (one in Simplified is
            written in the target's script).
    """

    beam_size: int = 5
    max_tokens: int = MAX_TOKENS
    split: bool = True
    glossary: Glossary | None = None
    format: str = "text"
    n_best: int = 1
    truecase: bool = True
    verbatim: bool | Verbatim = True
    target: str = SIMPLIFIED

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "target", target_tag(self.target))
        except ValueError as error:
            raise ValueError(f"TranslateOptions.target: {error}") from None
        if not isinstance(self.truecase, bool):
            raise ValueError(
                f"TranslateOptions.truecase must be True or False, got {self.truecase!r}"
            )
        if not isinstance(self.verbatim, (bool, Verbatim)):
            raise ValueError(
                "TranslateOptions.verbatim must be True, False or a Verbatim, "
                f"got {self.verbatim!r}"
            )
        for name in ("beam_size", "max_tokens", "n_best"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TranslateOptions.{name} must be an integer >= 1, got {value!r}")
        if self.format not in FORMATS:
            raise ValueError(
                f"TranslateOptions.format must be one of {', '.join(FORMATS)}, got {self.format!r}"
            )

    def verbatim_rules(self, default: Verbatim | None) -> Verbatim | None:
        """The rules a call keeps spans by: ``default`` (the translator's) for True, None for
        False, else ``verbatim`` itself."""
        if self.verbatim is True:
            return default
        return self.verbatim or None

    @functools.cached_property
    def searched_terms(self) -> tuple[Glossary | None, dict[Term, str]]:
        """The glossary the search forces, and how each of its terms is written in the output.

        For zh-Hans, ``glossary`` itself and nothing rewritten. For a Traditional target each
        term is searched in Simplified (OpenCC ``t2s``: the model writes Simplified); a term
        given with Traditional characters is written as given, one given in Simplified in
        the target's script (where the conversion writes it otherwise, the map says how)."""
        if self.glossary is None or self.target == SIMPLIFIED:
            return self.glossary, {}
        terms, written = [], {}
        for term in self.glossary:
            searched = Term(term.source, to_simplified(term.target))
            converted = chinese_script.convert(searched.target, self.target)
            if term.target not in (searched.target, converted):  # given in Traditional
                written[searched] = term.target
            terms.append(searched)
        return Glossary(terms), written

    @property
    def search_beam(self) -> int:
        """The beam searched: ``beam_size``, widened to ``n_best`` when that is larger."""
        return max(self.beam_size, self.n_best)


class Progress(Protocol):
    """Told how many sentences a call decodes, then how many each batch finished (the CLI's
    progress bars implement it)."""

    def set_total(self, sentences: int) -> None: ...

    def advance(self, sentences: int) -> None: ...


@dataclass(frozen=True)
class CallbackProgress:
    """``Progress`` from two optional callables (the pre-0.3 ``on_total`` and ``on_batch``)."""

    on_total: Callable[[int], None] | None = None
    on_batch: Callable[[int], None] | None = None

    def set_total(self, sentences: int) -> None:
        if self.on_total is not None:
            self.on_total(sentences)

    def advance(self, sentences: int) -> None:
        if self.on_batch is not None:
            self.on_batch(sentences)


NO_PROGRESS = CallbackProgress()
_OPTION_FIELDS = {field.name for field in fields(TranslateOptions)}
_CALLBACKS = {"on_batch", "on_total"}
_OLD_NAMES = _OPTION_FIELDS | _CALLBACKS  # keywords only the pre-0.3 signatures take


def old_arguments(*order: str, replacement: str | None = None) -> Callable:
    """Decorate an entry point whose pre-0.3 parameters after its first were ``order``: a call
    passing them (positionally, or by a name the new signature lacks) is converted, with a
    ``DeprecationWarning`` saying what to write instead; a call in the new form passes through.
    ``replacement``: the new call to name, for a method that is itself deprecated (always
    converted and warned about)."""

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def call(self: Any, first: Any, *args: Any, **kwargs: Any) -> Any:
            new_style = not args or isinstance(args[0], TranslateOptions)
            if replacement is None and new_style and not _OLD_NAMES & set(kwargs):
                return method(self, first, *args, **kwargs)
            if len(args) > len(order):
                raise TypeError(f"{method.__name__}() takes at most {len(order) + 1} arguments")
            given = dict(zip(order, args, strict=False)) | kwargs
            warnings.warn(
                f"Translator.{method.__name__}(..., {', '.join(given) or '...'}) is deprecated "
                "since 0.3 and goes in 0.4: "
                + (replacement or f"call {method.__name__}(texts, TranslateOptions(...))"),
                DeprecationWarning,
                stacklevel=2,
            )
            return method(self, first, **convert(given))

        return call

    return decorate


def convert(given: dict[str, Any]) -> dict[str, Any]:
    """Pre-0.3 keyword arguments -> ``options``, ``progress`` and the rest as they were."""
    settings = {name: given.pop(name) for name in list(given) if name in _OPTION_FIELDS}
    converted: dict[str, Any] = {"options": TranslateOptions(**settings)}
    callbacks = {name: given.pop(name) for name in list(given) if name in _CALLBACKS}
    if callbacks:
        converted["progress"] = CallbackProgress(**callbacks)
    return converted | given
