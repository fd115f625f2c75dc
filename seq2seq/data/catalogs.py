"""Short segments for training: real UI strings with their Chinese, from gettext catalogs.

A program's interface is translated in gettext catalogs (``.po`` files): each entry an English
``msgid`` ("Log in", "Delete all Features", "This field cannot be blank.") and its ``msgstr``.
Django ships 13 simplified-Chinese catalogs in its wheel (``locale/zh_Hans``, BSD-3-Clause,
579 usable entries in 5.2); a user's own application's catalogs are the best short segments of
all for translating that application. A folder of catalogs is read for its Chinese ones only
(a ``zh``, ``zh_CN``, ``zh_Hans``... folder or file name): an application's ``locale/`` holds
every language, and Japanese would pass for Chinese.

An entry is kept when it is a translation a model can learn from as it stands: not fuzzy, not
obsolete, not the header, with a Chinese ``msgstr``, and free of what the sentence would
have to carry through untranslated (``%(name)s``, ``{0}`` and ``%s`` placeholders, HTML tags,
line breaks). A plural entry gives its singular and ``msgstr[0]`` (Chinese has one form).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from seq2seq.data.clean import normalize_en, normalize_zh
from seq2seq.errors import DataError

DJANGO_LOCALE = "zh_Hans"
_FIELD = re.compile(r"^(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s+(\".*\")\s*$")
_NOT_TEXT = re.compile(r"%|\{|\}|<[^>]*>|\n|\t")  # placeholders, tags, breaks
_CHINESE = re.compile(r"[\u4e00-\u9fff]")
_NOT_CHINESE = re.compile(r"[\u3040-\u30ff\uac00-\ud7af\u1100-\u11ff]")  # kana, Hangul
_CHINESE_LOCALE = re.compile(r"zh([_-][A-Za-z]+)?", re.IGNORECASE)
MAX_WORDS = 12  # a longer msgid is help text, not a UI string


def read_po(path: str | Path) -> list[tuple[str, str]]:
    """The (msgid, msgstr) pairs of a ``.po`` file that are translations: not fuzzy, not
    obsolete (``#~``), not the header, msgstr not empty; a plural entry as its singular and
    ``msgstr[0]``. Strings are unescaped as C strings (``\\"``, ``\\n``).

    Raises:
        DataError: the file cannot be read, or a line is not gettext syntax (file and line).
    """
    path = Path(path)
    try:
        # Lines end at "\n" alone: str.splitlines would also cut at U+2028 inside a string.
        lines = [line.rstrip("\r") for line in path.read_text(encoding="utf-8-sig").split("\n")]
    except (OSError, UnicodeDecodeError) as error:
        raise DataError.at(str(path), None, f"cannot read the catalog: {error}") from None
    pairs: list[tuple[str, str]] = []
    entry: dict[str, str] = {}
    fuzzy, field = False, None
    for number, raw in enumerate([*lines, ""], start=1):
        line = raw.strip()
        if not line or (line.startswith("#") and entry.get("msgstr") is not None):
            _keep(entry, fuzzy, pairs)
            entry, fuzzy, field = {}, False, None
            if not line:
                continue
        if line.startswith("#~"):  # an obsolete entry: a fuzzy flag before it was its own
            fuzzy = False
            continue
        if line.startswith("#"):
            fuzzy |= line.startswith("#,") and "fuzzy" in line
            continue
        match = _FIELD.match(line)
        if match:
            field = "msgstr" if match.group(2) == "0" else match.group(1)
            if field in entry:  # the next entry begins without a blank line between
                _keep(entry, fuzzy, pairs)
                entry, fuzzy = {}, False
            entry[field] = _string(match.group(3), path, number)
        elif line.startswith('"') and field is not None:
            entry[field] += _string(line, path, number)
        else:
            raise DataError.at(str(path), number, f"not gettext syntax: {line[:60]!r}")
    return pairs


def ui_string_pairs(limit: int, catalogs: Sequence[str | Path] = ()) -> list[tuple[str, str]]:
    """Up to ``limit`` (english, chinese) UI string pairs, normalised as the corpus is: those of
    ``catalogs`` (``.po`` files, or folders searched for them) first, then Django's
    simplified-Chinese catalogs when Django is installed. Each English string once (its first
    translation), in catalog order.

    Raises:
        DataError: a catalog is missing or malformed, or neither a catalog nor Django is there.
    """
    files = catalog_files(catalogs) + django_catalogs(required=not catalogs)
    pairs, seen = [], set()
    for file in files:
        for english, chinese in read_po(file):
            en, zh = normalize_en(english), normalize_zh(chinese)
            if en in seen or not usable(en, zh):
                continue
            seen.add(en)
            pairs.append((en, zh))
            if len(pairs) >= limit:
                return pairs
    return pairs


def usable(english: str, chinese: str) -> bool:
    """Whether a catalog entry is a plain translation: Chinese on one side (no kana or Hangul),
    no placeholder, tag or line break on either, at most ``MAX_WORDS`` English words."""
    return (
        bool(english.strip())
        and bool(_CHINESE.search(chinese))
        and not _NOT_CHINESE.search(chinese)
        and not _NOT_TEXT.search(english)
        and not _NOT_TEXT.search(chinese)
        and len(english.split()) <= MAX_WORDS
    )


def django_catalogs(required: bool = True) -> list[Path]:
    """Django's ``zh_Hans`` ``.po`` files, sorted; [] when Django is not installed and
    ``required`` is false.

    Raises:
        DataError: Django is not installed and ``required``.
    """
    import importlib.util

    spec = importlib.util.find_spec("django")
    if spec is None or not spec.submodule_search_locations:
        if not required:
            return []
        raise DataError.at(
            "django", None, "data.modifiers.ui_strings reads Django's catalogs: pip install django"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(root.glob(f"**/locale/{DJANGO_LOCALE}/LC_MESSAGES/*.po"))


def django_version() -> str | None:
    """The installed Django's version (it names the catalogs in the data cache's key)."""
    from importlib import metadata

    try:
        return metadata.version("django")
    except metadata.PackageNotFoundError:
        return None


def catalog_fingerprints(catalogs: Sequence[str | Path]) -> dict[str, Any]:
    """What names the catalogs in the data cache's key: each file's path, size and time, and
    the installed Django's version."""
    from seq2seq.data.cache_dir import fingerprint

    files = [fingerprint(str(file)) for file in catalog_files(catalogs)]
    return {"files": files, "django": django_version()}


def catalog_files(catalogs: Sequence[str | Path]) -> list[Path]:
    """The ``.po`` files of ``catalogs``: each file as given, each folder's Chinese ones."""
    return [file for catalog in catalogs for file in _po_files(Path(catalog))]


def _po_files(path: Path) -> Iterator[Path]:
    """A file as given; a folder's Chinese catalogs (a ``zh*`` locale in the path), sorted."""
    if path.is_dir():
        for file in sorted(path.rglob("*.po")):
            names = [*file.resolve().parent.parts, file.stem]
            if any(_CHINESE_LOCALE.fullmatch(name) for name in names):
                yield file
    elif path.is_file():
        yield path
    else:
        raise DataError.at(str(path), None, "no such catalog (a .po file or a folder of them)")


def _keep(entry: dict[str, str], fuzzy: bool, pairs: list[tuple[str, str]]) -> None:
    english, chinese = entry.get("msgid"), entry.get("msgstr")
    if english and chinese and not fuzzy:
        pairs.append((english, chinese))


def _string(quoted: str, path: Path, number: int) -> str:
    try:
        value = ast.literal_eval(quoted)
    except (SyntaxError, ValueError):
        value = None
    if not isinstance(value, str):
        raise DataError.at(str(path), number, f"not a quoted string: {quoted[:60]!r}")
    return value
