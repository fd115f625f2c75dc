"""Office, EPUB and localisation files nobody here wrote, translated as a user runs it.

    python scripts/bench.py documents-office --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py documents-office --checkpoint C --dir tests/data/office --table T

Every ``.docx``, ``.pptx``, ``.xlsx``, ``.odt``, ``.odp``, ``.ods``, ``.epub``, ``.po``/``.pot``
and ``.xlf``/``.xliff`` under ``--dir`` (recursively; where each file of tests/data/office
comes from: tests/data/documents/README.md) goes through its own ``python -m seq2seq translate
--checkpoint C --input F --output O`` (``documents-wild``'s runner), then input and output
are read by readers that are not ours (``documents_office_readers``: python-docx,
python-pptx, openpyxl, EbookLib, polib, lxml, zipfile) and compared. Per file and in total
(``n / m``: n of m):

- rc, s: the CLI's exit status and wall seconds (interpreter start and model load included).
- units: text units in → out: paragraphs (docx: body, tables, headers, footers; ODF: every
  ``text:p``/``text:h`` of content.xml and styles.xml; EPUB: p, h1-h6, li, td, th, dt, dd,
  caption of each XHTML document), pptx paragraphs of shapes, tables and notes, xlsx string
  cells, PO entries, XLIFF trans-units (1.2) or segments (2.0).
- untranslated: units whose input has an ASCII letter and whose output text equals the input
  (PO/XLIFF: msgstr/target equal to msgid/source, or empty; each plural form counts).
- counts: the structure's counts that differ (tables, cells, slides, shapes, notes, sheets,
  merged ranges, sections, hyperlinks, documents, entries); ``=`` when all are equal.
- links: the multiset of hyperlink targets (OOXML external relationships, pptx run links,
  xlsx cell links, ODF ``xlink:href``, EPUB a/img/link) lost or added.
- members: zip members missing, added, or, other than the XML/XHTML parts the format
  rewrites, not byte-identical (images, fonts, media).
- styles changed, runs changed: units (paired in order) whose style, or whose number of
  formatting runs, differs. Style: docx paragraph style name; pptx paragraph level; xlsx cell
  style ids; ODF element and style name; EPUB tag and class; PO comments and references;
  XLIFF the source's inline codes. Runs: docx runs with text; pptx runs; xlsx rich-text runs;
  ODF spans; EPUB descendant elements (PO, XLIFF: none). A run count changes where the
  translation puts a run's words into another run, or has none for it.
- formats lost: docx, pptx and xlsx units one of whose formattings with words (a run's
  properties but editing ids and language, and its link; an xlsx rich-text block's font)
  has no words in the output: a bold word that comes back in plain text.
- placeholders: printf and brace placeholders of the msgid/source missing from the
  msgstr/target, and (XLIFF) inline codes of the source missing from the target.
- check: PO ``msgfmt -c`` of the output; XLIFF well-formed (lxml; no XSD is at hand here, so
  not validated against the schema); xlsx numbers, formulas and dates changed.

``--compare-only``: the outputs already in ``--out`` (its runs.json) compared again.
``--json FILE`` writes every count; ``--table FILE`` the table as printed. ``--speed``: no
table, but a 50-page .docx against its text and 100 MB files (``documents_office_speed``).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import documents_office_speed
from benchmarks.documents_office_readers import KINDS, Reading, placeholders, read
from benchmarks.documents_wild import markdown_table, report, run_all
from benchmarks.harness import described_parser, machine, write_json

DEFAULT_DIR = Path("tests/data/office")
# Parts the formats rewrite; every other member must come back byte for byte.
REWRITTEN = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".xlf", ".xliff")
LETTER = re.compile(r"[A-Za-z]")
DJANGO = [
    ("humanize", "django.po"),
    ("admindocs", "django.po"),
    ("postgres", "django.po"),
    ("admin", "djangojs.po"),
]
COLUMNS = [
    "file",
    "format",
    "KB",
    "rc",
    "s",
    "units in → out",
    "untranslated",
    "counts",
    "links lost / added",
    "members changed",
    "styles changed",
    "runs changed",
    "formats lost",
    "placeholders lost",
    "check",
]


@dataclass
class Row:
    """One file's run and what its output kept."""

    name: str
    kind: str
    size: int
    returncode: int
    seconds: float
    error: str = ""
    units_in: int = 0
    units_out: int = 0
    translatable: int = 0
    untranslated: int = 0
    counts_changed: list[str] = field(default_factory=list)
    links: int = 0
    links_lost: int = 0
    links_added: int = 0
    members_changed: list[str] = field(default_factory=list)
    styles_changed: int = 0
    runs_changed: int = 0
    formats_lost: int = 0
    placeholders: int = 0
    placeholders_lost: int = 0
    check: str = "-"


def untranslated(before: Reading, after: Reading, kind: str) -> tuple[int, int]:
    """(units with a letter to translate, those of them left as they were)."""
    if kind in ("po", "xliff"):
        pairs = [(s, t) for s, t in after.pairs if LETTER.search(s)]
        return len(pairs), sum(1 for s, t in pairs if not t.strip() or t == s)
    pairs = [(a[0], b[0]) for a, b in zip(before.units, after.units, strict=False)]
    pairs = [(a, b) for a, b in pairs if LETTER.search(a)]
    return len(pairs), sum(1 for a, b in pairs if a == b)


def members_changed(before: Reading, after: Reading) -> list[str]:
    """Zip members missing (``-name``), added (``+name``) or, not rewritten, changed."""
    lost = [f"-{n}" for n in before.members if n not in after.members]
    added = [f"+{n}" for n in after.members if n not in before.members]
    changed = [
        n
        for n, data in before.members.items()
        if n in after.members and not n.lower().endswith(REWRITTEN) and after.members[n] != data
    ]
    return lost + added + changed if len(before.members) > 1 else []


def placeholders_lost(after: Reading, kind: str) -> tuple[int, int]:
    """(placeholders in the sources, those missing from their targets), XLIFF codes added."""
    total = lost = 0
    for source, target in after.pairs:
        wanted = placeholders(source)
        total += sum(wanted.values())
        lost += sum((wanted - placeholders(target)).values())
    if kind == "xliff":
        total += after.counts["source codes"]
        lost += after.counts["codes lost"]
    return total, lost


def checked(output: Path, kind: str, before: Reading, after: Reading) -> str:
    """The format's own check of the output: msgfmt -c, well-formed, cells that are not text."""
    if kind == "po":
        done = subprocess.run(
            ["msgfmt", "-c", "-o", "/dev/null", str(output)], capture_output=True, text=True
        )
        lines = done.stderr.strip().splitlines()
        return "msgfmt -c ok" if not done.returncode else f"msgfmt -c: {lines[-1] if lines else ''}"
    if kind == "xliff":
        return "well-formed"  # read() parsed it with lxml
    if kind == "xlsx":
        kept = dict(before.other_cells)
        changed = sum(1 for k, v in after.other_cells if kept.get(k) != v)
        changed += len(set(kept) - {k for k, _ in after.other_cells})
        return f"{changed} / {len(kept)} other cells changed"
    return "-"


def compare_one(path: Path, output: Path, run: dict) -> Row:
    """The counts of one file against its output."""
    kind = KINDS[path.suffix.lower()]
    row = Row(path.name, kind, path.stat().st_size, run["returncode"], run["seconds"])
    row.error = run["error"]
    if row.returncode:
        return row
    try:
        before, after = read(path), read(output)
    except Exception as error:  # noqa: BLE001 - an unreadable output is what we count
        row.returncode, row.error = -1, f"output unreadable: {type(error).__name__}: {error}"
        return row
    row.units_in, row.units_out = len(before.units), len(after.units)
    row.translatable, row.untranslated = untranslated(before, after, kind)
    keys = set(before.counts) | set(after.counts)
    keys -= {"fuzzy", "codes lost", "source codes"}
    row.counts_changed = sorted(
        f"{k} {before.counts[k]}→{after.counts[k]}"
        for k in keys
        if before.counts[k] != after.counts[k]
    )
    lost = Counter(before.links) - Counter(after.links)
    row.links = len(before.links)
    row.links_lost = sum(lost.values())
    row.links_added = sum((Counter(after.links) - Counter(before.links)).values())
    row.members_changed = members_changed(before, after)
    pairs = list(zip(before.units, after.units, strict=False))
    row.styles_changed = sum(1 for a, b in pairs if a[1] != b[1])
    row.runs_changed = sum(1 for a, b in pairs if a[2] != b[2])
    formats = zip(before.formats, after.formats, strict=False)
    row.formats_lost = sum(1 for a, b in formats if not a <= b)
    row.placeholders, row.placeholders_lost = placeholders_lost(after, kind)
    row.check = checked(output, kind, before, after)
    return row


def _cells(row: Row) -> list[str]:
    head = [row.name, row.kind, f"{row.size / 1024:.1f}", str(row.returncode)]
    head.append(f"{row.seconds:.1f}")
    if row.returncode:
        return head + ["failed"] * (len(COLUMNS) - len(head))
    moved = f"{row.units_in} → {row.units_out}"
    share = f" ({100 * row.untranslated / row.translatable:.0f}%)" if row.translatable else ""
    return head + [
        moved,
        f"{row.untranslated} / {row.translatable}{share}",
        "; ".join(row.counts_changed) or "=",
        f"{row.links_lost} / {row.links_added} of {row.links}",
        f"{len(row.members_changed)}"
        + (f" ({', '.join(row.members_changed[:3])})" * bool(row.members_changed)),
        f"{row.styles_changed} / {row.units_in}",
        f"{row.runs_changed} / {row.units_in}",
        f"{row.formats_lost} / {row.units_in}",
        f"{row.placeholders_lost} / {row.placeholders}",
        row.check,
    ]


def total_cells(rows: list[Row]) -> list[str]:
    """Sums over the files that ran."""
    ran = [r for r in rows if not r.returncode]
    translatable = sum(r.translatable for r in ran)
    left = sum(r.untranslated for r in ran)
    share = f" ({100 * left / translatable:.1f}%)" if translatable else ""
    checks = [r for r in ran if r.kind in ("po", "xliff")]
    passed = sum(1 for r in checks if r.check in ("msgfmt -c ok", "well-formed"))
    cells = sum(1 for r in ran if r.kind == "xlsx" and not r.check.startswith("0 /"))
    return [
        f"**total ({len(rows)} files)**",
        "",
        f"{sum(r.size for r in rows) / 1024:.1f}",
        f"{len(rows) - len(ran)} failed",
        f"{sum(r.seconds for r in rows):.1f}",
        f"{sum(r.units_in for r in ran)} → {sum(r.units_out for r in ran)}",
        f"{left} / {translatable}{share}",
        f"{sum(1 for r in ran if r.counts_changed)} files differ",
        f"{sum(r.links_lost for r in ran)} / {sum(r.links_added for r in ran)} of "
        f"{sum(r.links for r in ran)}",
        str(sum(len(r.members_changed) for r in ran)),
        f"{sum(r.styles_changed for r in ran)} / {sum(r.units_in for r in ran)}",
        f"{sum(r.runs_changed for r in ran)} / {sum(r.units_in for r in ran)}",
        f"{sum(r.formats_lost for r in ran)} / {sum(r.units_in for r in ran)}",
        f"{sum(r.placeholders_lost for r in ran)} / {sum(r.placeholders for r in ran)}",
        f"{passed} / {len(checks)} PO/XLIFF pass; {cells} xlsx with other cells changed",
    ]


def table(rows: list[Row]) -> str:
    """The Markdown table: a row per file, the totals, then each failure's message."""
    return markdown_table(COLUMNS, [_cells(row) for row in rows], total_cells(rows), rows)


def documents(folder: Path) -> list[Path]:
    """The files of the formats measured under ``folder``, by format then name."""
    found = [p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in KINDS]
    return sorted(found, key=lambda p: (KINDS[p.suffix.lower()], p.name))


def django_catalogs(out: Path) -> list[Path]:
    """Copies of the installed Django's English catalogs ``DJANGO`` (msgstr empty, printf
    placeholders and plural forms), named ``django--APP--FILE``, in ``out/inputs``."""
    import django

    root, folder = Path(django.__file__).parent, out / "inputs"
    folder.mkdir(exist_ok=True)
    copies = []
    for app, name in DJANGO:
        source = root / "contrib" / app / "locale/en/LC_MESSAGES" / name
        copies.append(folder / f"django--{app}--{name}")
        copies[-1].write_bytes(source.read_bytes())
    return copies


def main(argv: list[str] | None = None) -> int:
    parser = described_parser(__doc__)
    parser.add_argument("--checkpoint", required=True, help="a .ckpt for seq2seq translate")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="default %(default)s")
    parser.add_argument(
        "--skip", action="append", default=[], metavar="NAME", help="a file name left out"
    )
    parser.add_argument("--out", type=Path, help="folder for the outputs (default: a new one)")
    parser.add_argument("--translate-args", default="", help="more options for the CLI")
    parser.add_argument("--json", type=Path, help="write every count to this file")
    parser.add_argument("--table", type=Path, help="write the table to this file")
    parser.add_argument(
        "--django", action="store_true", help="add Django's catalogs DJANGO (4 .po files)"
    )
    parser.add_argument("--speed", action="store_true", help="the speed and memory runs")
    parser.add_argument("--pages", type=int, default=50, help="--speed: pages (%(default)s)")
    parser.add_argument("--words-per-page", type=int, default=500, help="(%(default)s)")
    parser.add_argument("--rounds", type=int, default=2, help="--speed: rounds (%(default)s)")
    parser.add_argument("--big-mb", type=float, default=100, help="--speed: MB (%(default)s)")
    parser.add_argument(
        "--compare-only", action="store_true", help="compare the outputs already in --out"
    )
    args = parser.parse_args(argv)
    args.checkpoint = str(Path(args.checkpoint).resolve())  # the runs start in --out
    if args.compare_only and not args.out:
        parser.error("--compare-only needs --out")
    out = args.out or Path(tempfile.mkdtemp(prefix="documents_office_"))
    out.mkdir(parents=True, exist_ok=True)
    if args.speed:
        found = documents_office_speed.measure(args, out)
        print(json.dumps(found, indent=1, ensure_ascii=False))
        write_json(args.json, found, 1)
        return 0
    files = [p for p in documents(args.dir.expanduser()) if p.name not in args.skip]
    files += django_catalogs(out) if args.django else []
    if not files:
        parser.error(f"no office, EPUB, PO or XLIFF files under {args.dir}")
    header, runs = run_all(files, out, args, shlex.split(args.translate_args))
    described = machine(0)
    header.append(f"machine: {described['cpu']}, {described['cores']} cores")
    rows = [compare_one(path, out / path.name, runs[path.name]) for path in files]
    report(header, rows, table(rows), out, args)
    return 0
