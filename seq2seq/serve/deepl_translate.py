"""DeepL's ``POST /v2/translate``, EN to ZH: ``text`` (list), ``target_lang`` ZH, ZH-HANS or
ZH-HANT (the Simplified translation converted by OpenCC: ``seq2seq.formats.chinese_script``),
``source_lang`` EN or none (answered as detected EN), ``split_sentences``, ``tag_handling``
html, a glossary; each parameter checked with DeepL's messages, and those whose meaning this
model cannot honour refused, never silently dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from seq2seq.inference.glossary import Glossary
from seq2seq.inference.options import TranslateOptions
from seq2seq.serve.deepl_glossary_routes import found_glossary
from seq2seq.serve.deepl_requests import Arguments
from seq2seq.serve.files import TranslateTexts
from seq2seq.serve.glossaries import GlossaryStore
from seq2seq.serve.handling import ServerSettings
from seq2seq.serve.protocol import ApiError
from seq2seq.serve.served_model import ServedModel
from seq2seq.serve.text_translation import TextResult, keep_below, min_confidence

# target_lang -> its name and the script written (seq2seq.formats.chinese_script)
TARGETS = {
    "ZH": ("Chinese (simplified)", "zh-Hans"),
    "ZH-HANS": ("Chinese (simplified)", "zh-Hans"),
    "ZH-HANT": ("Chinese (traditional)", "zh-Hant"),
}
# Parameters with a meaning we cannot honour: refused, never silently dropped.
REFUSED = {
    "ignore_tags": "translating all text (ignore_tags)",
    "style_id": "style rules (style_id)",
    "translation_memory_id": "translation memories (translation_memory_id)",
    "custom_instructions": "custom instructions",
}
# Accepted and ignored, as having no meaning for this model: context (no context-conditioned
# decoding), preserve_formatting (the output's formatting is never corrected), model_type (one
# model), formality default/prefer_more/prefer_less (Chinese has no formality setting, as at
# DeepL; "more"/"less" are refused there and here), outline_detection, splitting_tags,
# non_splitting_tags, tag_handling_version (XML tag handling, which is refused), and any
# parameter this server does not know (DeepL ignores those too).
FORMALITY_REFUSED = ("more", "less", "formal", "informal")


@dataclass
class Usage:
    """Characters sent to ``/v2/translate`` since the server started."""

    characters: int = 0


@dataclass(frozen=True)
class _Checked:
    """A ``/v2/translate`` request, checked: its texts as sent and as they are translated."""

    texts: list[str]
    sent: list[str]  # line endings made \n, newlines made spaces with nonewlines
    text_format: str
    split: bool
    glossary: Glossary | None
    billed: bool  # show_billed_characters
    target: str  # the script written: zh-Hans or zh-Hant


@dataclass(eq=False)  # handlers: compared and hashed as themselves
class DeeplTranslate:
    """The ``/v2/translate`` handler, with the texts' translator, the glossaries and the
    characters counted for ``/v2/usage``."""

    served: ServedModel
    settings: ServerSettings
    arguments: Arguments
    translate_texts: TranslateTexts
    store: GlossaryStore
    usage: Usage

    async def translate(self, request: Request) -> JSONResponse:
        """DeepL's text translation, EN to ZH."""
        args = await self.arguments(request)
        if not self.served.translates:
            raise ApiError(
                400,
                f"{self.served.name} is a language model, not a translator: "
                "use POST /v1/completions",
            )
        checked = self._checked(args)
        options = TranslateOptions(
            beam_size=self.settings.beam_size,
            format=checked.text_format,
            split=checked.split,
            glossary=checked.glossary,
            target=checked.target,
        )
        minimum = min_confidence(args.get("min_confidence"))  # ours: below it, the source
        results = await self.translate_texts(request, checked.sent, options)
        keep_below(checked.texts, results, minimum)
        self.usage.characters += sum(map(len, checked.texts))
        out = [
            _translation(text, result, checked.billed)
            for text, result in zip(checked.texts, results, strict=True)
        ]
        return JSONResponse({"translations": out})

    def _checked(self, args: dict[str, Any]) -> _Checked:
        """The parameters checked in DeepL's order, then the texts against the limits."""
        texts = _texts(args)
        target = _languages(args)
        text_format = _tag_handling(args.get("tag_handling"))
        split, no_newlines = _split_sentences(args.get("split_sentences"))
        _refuse_unsupported(args)
        glossary = _glossary(args, self.store)
        billed = _flag(args.get("show_billed_characters"), "show_billed_characters")
        self.settings.limits.check(texts)
        sent = [text.replace("\r\n", "\n").replace("\r", "\n") for text in texts]
        if no_newlines and text_format == "text":
            sent = [text.replace("\n", " ") for text in sent]
        return _Checked(texts, sent, text_format, split, glossary, billed, target)


def _translation(text: str, result: TextResult, billed: bool) -> dict[str, Any]:
    """One text's answer; ``glossary_terms_not_met`` and ``windowed`` are our additions."""
    item: dict[str, Any] = {"detected_source_language": "EN", "text": result.text}
    item["confidence"] = result.confidence  # ours: clients that do not know it ignore it
    if result.below_min_confidence:
        item["below_min_confidence"] = True
    if billed:
        item["billed_characters"] = len(text)
    if result.missing:  # the English sides, as the glossary's entries have them
        item["glossary_terms_not_met"] = [term.source for term in result.missing]
    if result.windowed:
        item["windowed"] = True
    return item


def _texts(args: dict[str, Any]) -> list[str]:
    text = args.get("text")
    texts = [text] if isinstance(text, str) else text
    if not texts:
        raise ApiError(400, "Parameter 'text' not specified.")
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "Invalid request: 'text' must be an array of strings")
    return texts


def _languages(args: dict[str, Any]) -> str:
    """EN (or none, detected as EN) to ZH, ZH-HANS or ZH-HANT: the script written."""
    target = args.get("target_lang")
    if not target:
        raise ApiError(400, "Parameter 'target_lang' not specified.")
    if str(target).upper() not in TARGETS:
        raise ApiError(
            400,
            f"Value for 'target_lang' not supported: {target} (this server "
            f"translates into {', '.join(TARGETS)})",
        )
    source = args.get("source_lang")
    if source and str(source).upper() != "EN":
        raise ApiError(
            400, f"Value for 'source_lang' not supported: {source} (this server translates from EN)"
        )
    return TARGETS[str(target).upper()][1]


def _tag_handling(value: Any) -> str:
    """Our text format: html for ``tag_handling`` html, else plain text; xml is refused."""
    if value in (None, ""):
        return "text"
    if str(value).lower() == "html":
        return "html"
    if str(value).lower() == "xml":
        raise ApiError(
            400,
            "tag_handling 'xml' is not supported by this server: send HTML "
            "with tag_handling 'html', or plain text",
        )
    raise ApiError(400, f"Value for 'tag_handling' not supported: {value} (html)")


def _split_sentences(value: Any) -> tuple[bool, bool]:
    """(split into sentences, newlines read as spaces): "0" takes each line whole, "1" (the
    default) splits on punctuation and newlines, "nonewlines" on punctuation only."""
    value = "1" if value in (None, "") else str(value).lower()
    if value not in ("0", "1", "nonewlines"):
        raise ApiError(
            400, f"Value for 'split_sentences' not supported: {value} (0, 1 or nonewlines)"
        )
    return value != "0", value == "nonewlines"


def _refuse_unsupported(args: dict[str, Any]) -> None:
    for name, what in REFUSED.items():
        if args.get(name) not in (None, "", []):
            raise ApiError(400, f"This server does not support {what}")
    formality = str(args.get("formality") or "default").lower()
    if formality in FORMALITY_REFUSED:
        raise ApiError(
            400,
            "'formality' is not supported for given 'target_lang' (use prefer_more or prefer_less)",
        )


def _glossary(args: dict[str, Any], store: GlossaryStore) -> Glossary | None:
    """The glossary of ``glossary_id`` (or a one-id ``glossary_ids``); DeepL requires
    ``source_lang`` with one."""
    ids = args.get("glossary_ids") or []
    if isinstance(ids, str):  # a form sends a comma-separated list
        ids = [part for part in ids.split(",") if part]
    if args.get("glossary_id"):
        ids = [args["glossary_id"], *ids]
    if not ids:
        return None
    if not args.get("source_lang"):
        raise ApiError(
            400, "Use of a glossary requires the 'source_lang' parameter to be specified"
        )
    if len(ids) > 1 or not isinstance(ids[0], str):
        raise ApiError(400, "This server applies one glossary per request")
    stored = found_glossary(store, ids[0])
    return stored.glossary or None


def _flag(value: Any, name: str) -> bool:
    """A boolean parameter: JSON true/false, or a form's 1/0/true/false."""
    if value in (None, ""):
        return False
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("1", "true"):
        return True
    if str(value).lower() in ("0", "false"):
        return False
    raise ApiError(400, f"Value for '{name}' not supported: {value} (true or false)")
