"""gettext catalogs (``.po``, ``.pot``) as a ``Document``: each untranslated entry's msgid is a
segment whose translation fills its msgstr; every other line stays byte for byte.

- Untouched: msgid, msgid_plural, msgctxt, every comment (translator ``#``, extracted ``#.``,
  references ``#:``, previous ``#|``), obsolete entries (``#~``), and in a Chinese catalog
  (its header's ``Language``) the entries that have a translation already (a person's, fuzzy
  or not), and its plural rule. Any other catalog has every entry translated from its msgid
  (its translations would be in another language, with that language's plural forms).
- Filled: an entry whose msgstr is empty gets its msgid's translation; a plural entry gets
  ``nplurals`` forms (Chinese has one: ``msgstr[0]`` from msgid_plural, the form a count
  reads; with more, form 0 takes the singular and the others the plural).
- Marked: each filled entry gets the ``fuzzy`` flag (gettext's "a translator must review
  this"; ``msgfmt`` leaves fuzzy entries out of the compiled catalog) unless ``fuzzy=False``.
- The header: ``Language``, ``Plural-Forms`` and the charset set (the file is written in UTF-8).

Placeholders (``%s``, ``%(name)s``, ``{0}``) are kept by the verbatim spans
(``seq2seq.formats.verbatim``), so that ``msgfmt -c`` finds the msgid's in the msgstr.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from seq2seq.errors import DataError
from seq2seq.formats.inline import Document, Segment

CHINESE_PLURALS = "nplurals=1; plural=0;"
_KEYWORD = re.compile(r"(msgctxt|msgid_plural|msgid|msgstr(?:\[(\d+)\])?)\s*(\".*)$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"\s*$')
_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    '"': '"',
    "\\": "\\",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}
# A Symfony choice's interval: {0}, {1,2,3}, [1,Inf[, ]1,19], -Inf..., with spaces after it.
_INTERVAL = re.compile(
    r"\s*(?:\{[-\d, ]+\}|[\[\]]\s*-?(?:\d+|Inf)\s*,\s*\+?(?:\d+|Inf)\s*[\[\]])\s*"
)
_LETTERS = {char: letter for letter, char in _ESCAPES.items() if letter not in '"\\'}


@dataclass
class _Entry:
    """One entry's lines ``[start, end)`` and where its parts are."""

    start: int
    end: int = 0
    values: dict[str, str] = field(default_factory=dict)  # msgid, msgctxt, msgstr[0]...
    msgstr_line: int | None = None  # the first msgstr line
    obsolete: bool = False


def parse_po(
    document: str,
    source: str = "<po>",
    language: str = "zh_CN",
    plural_forms: str = CHINESE_PLURALS,
    fuzzy: bool = True,
) -> Document:
    """``document`` as raw lines and one segment per msgstr to fill.

    Raises:
        DataError: a line that is not PO, naming ``source`` and the line.
    """
    # Lines end at "\n" only: str.splitlines also cuts at U+2028, form feeds, U+0085 and
    # other characters a msgid can hold, and the two halves of such a string read as not PO.
    lines = [line for line in re.split("(?<=\n)", document) if line]
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    parts: Document = []
    position = 0
    entries = _entries(lines, source)
    # A Chinese catalog keeps the translations it has (and its plural rule when it states
    # one); any other (a template, a catalog in French) is translated whole from its msgids:
    # its translations would be in another language, with that language's plural forms.
    header = _header_text(entries)
    keep = _field(header, "Language").lower().startswith("zh")
    stated = _field(header, "Plural-Forms")
    if keep and re.search(r"nplurals\s*=\s*\d+", stated):
        plural_forms = stated
    nplurals = int(re.search(r"nplurals\s*=\s*(\d+)", plural_forms).group(1))
    for entry in entries:
        parts.append("".join(lines[position : entry.start]))
        position = entry.end
        block = lines[entry.start : entry.end]
        if entry.obsolete or entry.msgstr_line is None:
            parts.append("".join(block))
        elif _is_header(entry):
            parts.append("".join(_header(block, entry, language, plural_forms, newline)))
        elif keep and any(v for k, v in entry.values.items() if k.startswith("msgstr")):
            parts.append("".join(block))  # translated already
        else:
            filled = _filled(block, entry, nplurals, fuzzy, newline)
            for part in filled:
                if isinstance(part, Segment):
                    part.line = entry.start + 1
            parts += filled
    parts.append("".join(lines[position:]))
    return [part for part in parts if part != ""]


def _is_header(entry: _Entry) -> bool:
    return entry.values.get("msgid") == "" and "msgctxt" not in entry.values and not entry.obsolete


def _header_text(entries: list[_Entry]) -> str:
    header = next((entry for entry in entries if _is_header(entry)), None)
    return header.values.get("msgstr[0]", "") if header else ""


def _field(header: str, name: str) -> str:
    """A header field's value ("" when the header has none)."""
    found = re.search(rf"^{name}:[ \t]*(.*)$", header, re.M)
    return found.group(1).strip() if found else ""


def _entries(lines: list[str], source: str) -> list[_Entry]:
    """The entries of a catalog: from an entry's first comment or keyword to its last string."""
    found: list[_Entry] = []
    current: _Entry | None = None
    key = None  # the keyword a continuation line adds to
    for number, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            current, key = _close(current, number), None
            continue
        starts_entry = stripped.startswith("#") or stripped.startswith(("msgctxt", "msgid "))
        if current is not None and starts_entry and current.msgstr_line is not None:
            current, key = _close(current, number), None
        if current is None:
            current = _Entry(number)
            found.append(current)
        if stripped.startswith("#"):
            current.obsolete |= stripped.startswith("#~")
            continue
        key = _read_line(current, key, stripped, number, source)
    _close(current, len(lines))
    return found


def _close(entry: _Entry | None, number: int) -> None:
    if entry is not None and not entry.end:
        entry.end = number
    return None


def _read_line(entry: _Entry, key: str | None, stripped: str, number: int, source: str) -> str:
    """Reads a keyword or continuation line into ``entry``; the keyword it belongs to."""
    keyword = _KEYWORD.match(stripped)
    string = keyword.group(3) if keyword else stripped
    value = _STRING.match(string)
    if value is None or (keyword is None and key is None):
        raise DataError.at(source, number + 1, f"not a PO line: {stripped[:40]!r}")
    if keyword:
        key = keyword.group(1)
        if key == "msgstr":
            key = "msgstr[0]"
        if key.startswith("msgstr") and entry.msgstr_line is None:
            entry.msgstr_line = number
        entry.values[key] = ""
    entry.values[key] += unescape(value.group(1))
    return key


def unescape(text: str) -> str:
    """A PO string's C escapes decoded."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def escape(text: str) -> str:
    """Text as the inside of a PO string: one line, the characters PO has an escape for
    written as it (a newline ``\\n``, a form feed ``\\f``, as msgcat writes them), other
    control characters, which a model can write and a catalog should not hold, dropped."""
    text = re.sub("[\x00-\x06\x0e-\x1f\x7f]", "", text)
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return re.sub("[\a\b\t\n\v\f\r]", lambda m: "\\" + _LETTERS[m.group()], text)


def _filled(block: list[str], entry: _Entry, nplurals: int, fuzzy: bool, newline: str) -> Document:
    """An untranslated entry: its lines up to its msgstr (the fuzzy flag added), then its
    msgstr lines with the translations, then what followed them."""
    head = block[: entry.msgstr_line - entry.start]
    if fuzzy:
        head = _flagged(head, newline)
    singular = entry.values.get("msgid", "")
    plural = entry.values.get("msgid_plural")
    parts: Document = ["".join(head)]
    if plural is None:
        parts += ['msgstr "', *_translated(singular), f'"{newline}']
        return parts
    for form in range(nplurals):
        text = singular if form == 0 and nplurals > 1 else plural
        parts += [f'msgstr[{form}] "', *_translated(text), f'"{newline}']
    return parts


def _translated(text: str) -> Document:
    """A msgstr's inside: the msgid's text as a segment, white space at its edges (a leading
    or trailing ``\\n``, which ``msgfmt -c`` checks) kept as written around it. A message of
    choices split by ``|`` (Symfony's plurals: ``{0} none|one foo|%count% foos``, each choice
    perhaps led by its interval, ``{0}`` or ``]1,Inf[``) is a segment per choice, the pipes
    and intervals kept, so each choice is translated as itself."""
    parts: Document = []
    for number, choice in enumerate(text.split("|")):
        if number:
            parts.append("|")
        interval = _INTERVAL.match(choice)
        kept = interval.group(0) if interval else ""
        rest = choice[len(kept) :]
        body = rest.strip()
        if not body:
            parts.append(escape(choice))
            continue
        lead, trail = rest[: len(rest) - len(rest.lstrip())], rest[len(rest.rstrip()) :]
        parts += [escape(kept + lead), Segment(body, escape=escape), escape(trail)]
    return parts


def _flagged(head: list[str], newline: str) -> list[str]:
    """The entry's lines with ``fuzzy`` first among its flags (``#, fuzzy, c-format``): on its
    flags line, or on a new one before its previous-msgid lines and keywords."""
    for index, line in enumerate(head):
        if line.startswith("#,"):
            flags = [flag.strip() for flag in line[2:].strip().split(",") if flag.strip()]
            if "fuzzy" in flags:
                return head
            ending = line[len(line.rstrip("\r\n")) :]
            return [
                *head[:index],
                "#, " + ", ".join(["fuzzy", *flags]) + ending,
                *head[index + 1 :],
            ]
    at = next(
        (i for i, line in enumerate(head) if line.startswith("#|") or not line.startswith("#")),
        len(head),
    )
    return [*head[:at], f"#, fuzzy{newline}", *head[at:]]


def _header(
    block: list[str], entry: _Entry, language: str, plural_forms: str, newline: str
) -> list[str]:
    """The header entry with ``Language``, ``Plural-Forms`` and the charset set: each on the
    line that holds it when one does, else added after the last field."""
    values = {
        "Language": language,
        "Plural-Forms": plural_forms,
        "Content-Type": "text/plain; charset=UTF-8",
    }
    lines = list(block)
    done = set()
    last = None
    for index in range(entry.msgstr_line - entry.start, len(lines)):
        field_match = re.match(r'(\s*(?:msgstr\s*)?")([\w-]+):(.*?)((?:\\n)?"\s*)$', lines[index])
        if field_match is None:
            continue
        last = index
        name = field_match.group(2)
        if name in values:
            line = f"{field_match.group(1)}{name}: {escape(values[name])}{field_match.group(4)}"
            lines[index] = line
            done.add(name)
    at = (last if last is not None else entry.msgstr_line - entry.start) + 1
    added = [
        f'"{name}: {escape(value)}\\n"{newline}'
        for name, value in values.items()
        if name not in done
    ]
    return [*lines[:at], *added, *lines[at:]]
