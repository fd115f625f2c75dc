"""What clients send and get back, checked and shaped without HTTP or a model: LibreTranslate's
``/translate`` (arguments from JSON, a form or the query string, the ``q`` shapes, its
errors), our ``/v1/translate`` and OpenAI's ``/v1/completions`` (``../shared/SERVING.md`` and
docs/serving.md list the shapes)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl

from seq2seq.formats.chinese_script import SIMPLIFIED, target_tag

SOURCE_LANGUAGES = {"en": "English"}
# /languages' targets: LibreTranslate's codes and names (zt: its Traditional Chinese), then
# Taiwan's and Hong Kong's; every name target_tag reads is taken (zh-Hans, zh-Hant, zh_TW...).
TARGET_LANGUAGES = {
    "zh": "Chinese",
    "zt": "Chinese (traditional)",
    "zh-TW": "Chinese (Taiwan)",
    "zh-HK": "Chinese (Hong Kong)",
}
MAX_ALTERNATIVES = 10
SURROGATE = re.compile("[\ud800-\udfff]")
MAX_BEAM = 32


class ApiError(Exception):
    """An answer other than 200: ``status`` and a one-line message."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())  # always one line
        self.param = param


@dataclass(frozen=True)
class Limits:
    """Per-request limits (LibreTranslate's ``--char-limit`` and ``--batch-limit``)."""

    char_limit: int = 5000
    batch_limit: int = 1000

    def check(self, texts: list[str]) -> None:
        if len(texts) > self.batch_limit:
            raise ApiError(
                400,
                f"Invalid request: request ({len(texts)} texts) exceeds batch "
                f"limit ({self.batch_limit})",
            )
        chars = sum(len(text) for text in texts)
        if chars > self.char_limit:
            raise ApiError(
                400,
                f"Invalid request: request ({chars} characters) exceeds text "
                f"limit ({self.char_limit})",
            )


def parse_body(body: bytes, content_type: str, query: dict[str, str]) -> dict[str, Any]:
    """Arguments as LibreTranslate reads them: the query string, then a form or JSON body.

    A form body that is not valid UTF-8 is read with U+FFFD for the bad bytes (answered, not
    refused); form and query ``q`` have their line endings normalised to ``\\n``.
    """
    args: dict[str, Any] = dict(query)
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json" or (not kind and body.lstrip()[:1] in (b"{", b"[")):
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise ApiError(400, f"Invalid request: malformed JSON body ({error})") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Invalid request: the JSON body must be an object")
        args.update(data)
        return args
    if kind == "application/x-www-form-urlencoded" or (body and not kind):
        text = body.decode("utf-8", errors="replace")
        form = parse_qsl(text, keep_blank_values=True, errors="replace")
        args.update({name: value for name, value in reversed(form)})  # first value wins
    if isinstance(args.get("q"), str):
        args["q"] = args["q"].replace("\r\n", "\n").replace("\r", "\n")
    return args


@dataclass(frozen=True)
class TranslateArgs:
    """A checked LibreTranslate ``/translate`` request."""

    texts: list[str]
    batch: bool  # q was an array: answer arrays
    detect: bool  # source was "auto": add detectedLanguage
    alternatives: int
    format: str = "text"  # text or html (LibreTranslate's two)
    target: str = SIMPLIFIED  # the script written (seq2seq.formats.chinese_script)


def translate_args(args: dict[str, Any], limits: Limits) -> TranslateArgs:
    """Check LibreTranslate's arguments in its order, with its messages."""
    q = args.get("q")
    for name in ("q", "source", "target"):
        if args.get(name) in (None, "") and not (name == "q" and q == ""):
            raise ApiError(400, f"Invalid request: missing {name} parameter", name)
    batch = isinstance(q, list)
    texts = q if batch else [q]
    if not all(isinstance(text, str) for text in texts):
        raise ApiError(400, "Invalid request: q must be a string or an array of strings", "q")
    source = str(args["source"]).strip().lower()
    if source != "auto" and source not in SOURCE_LANGUAGES:
        raise ApiError(
            400,
            f"{args['source']} is not supported (source languages: auto, "
            f"{', '.join(SOURCE_LANGUAGES)})",
            "source",
        )
    try:
        target = target_tag(str(args["target"]))
    except ValueError:
        raise ApiError(
            400,
            f"{args['target']} is not supported (target languages: zh, zh-Hans, zh-CN, zt, "
            "zh-Hant, zh-TW, zh-HK)",
            "target",
        ) from None
    text_format = str(args.get("format") or "text").lower()
    if text_format not in ("text", "html"):
        raise ApiError(
            400, f"format {text_format} is not supported (formats: text, html)", "format"
        )
    given = args.get("alternatives")
    alternatives = 0 if given in (None, "") else integer(given, "alternatives", 0, MAX_ALTERNATIVES)
    limits.check(texts)
    return TranslateArgs(texts, batch, source == "auto", alternatives, text_format, target)


def integer(value: Any, name: str, low: int, high: int) -> int:
    """An int argument (JSON number or form string) within [low, high], or a 400."""
    try:
        if isinstance(value, bool):  # JSON true is not the integer 1
            raise TypeError
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ApiError(400, f"Invalid request: {name} must be an integer", name) from None
    if not low <= number <= high:
        raise ApiError(400, f"Invalid request: {name} must be in [{low}, {high}]", name)
    return number


def valid_text(text: str) -> str:
    """``text`` with lone surrogates (JSON allows ``"\\ud800"``, Unicode does not) replaced
    by U+FFFD, so that the tokenizer never sees a string it cannot encode."""
    return SURROGATE.sub("\ufffd", text)


def detect_languages(text: str) -> list[dict[str, Any]]:
    """LibreTranslate's ``/detect`` answer, by script: among the letters, the share that are
    CJK ideographs is ``zh``, the share that are Latin is ``en`` (0-100, as LibreTranslate);
    the languages present, most confident first. No Latin letter or ideograph (digits,
    punctuation, another script): ``en`` with confidence 0, as LibreTranslate answers when it
    detects nothing."""
    letters = [char for char in text if char.isalpha()]
    found = Counter(script for script in map(_script, letters) if script is not None)
    ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
    return [
        {"confidence": round(100.0 * count / len(letters), 1), "language": language}
        for language, count in ranked
    ] or [{"confidence": 0.0, "language": "en"}]


def detected_language(text: str) -> dict[str, Any]:
    """``/translate``'s ``detectedLanguage`` for ``source: auto``: the most confident one."""
    return detect_languages(text)[0]


@lru_cache(maxsize=8192)  # a text repeats its letters: a third of the time on long ones
def _script(letter: str) -> str | None:
    """``zh`` for a CJK ideograph, ``en`` for a Latin letter (fullwidth ones too), else None."""
    name = unicodedata.name(letter, "")
    if name.startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH")):
        return "zh"
    return "en" if name.startswith(("LATIN ", "FULLWIDTH LATIN ")) else None


def languages() -> list[dict[str, Any]]:
    targets = list(TARGET_LANGUAGES)
    return [
        {"code": code, "name": name, "targets": targets} for code, name in SOURCE_LANGUAGES.items()
    ] + [{"code": code, "name": name, "targets": []} for code, name in TARGET_LANGUAGES.items()]


def openai_error(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    code = {404: "model_not_found", 429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
