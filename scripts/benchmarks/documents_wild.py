"""Real documents nobody here wrote, translated as a user would: what a reader loses.

    python scripts/data/fetch_documents.py        # the corpus, once (~/.cache/seq2seq/documents)
    python scripts/bench.py documents-wild --checkpoint runs/demo/checkpoints/last.ckpt
    python scripts/bench.py documents-wild --checkpoint C --dir tests/data/documents --quick

The corpus (``scripts/data/documents_corpus.tsv``: 11 HTML pages, 12 Markdown files, 7 SubRip
files from Debian packages and PyPI sdists, with their source, licence and encoding) is
translated file by file, each by its own ``python -m seq2seq translate --checkpoint C --input
FILE --output OUT`` (``--translate-args`` adds options; the format comes from the extension),
run with this process's environment (``PYTHONPATH`` picks the ``seq2seq`` measured; the first
line printed names the one imported) in the ``--out`` folder. ``--dir``: any folder of
``.html``/``.htm``/``.xhtml``/``.md``/``.markdown``/``.srt`` files, searched recursively (a
``README.md`` directly in it describes the folder and is skipped); ``--quick``: the two smallest
files of each format. An input whose sha256 is in the manifest is decoded in the encoding
recorded there; any other by its byte-order mark, its declared charset (HTML), UTF-8, else
windows-1252. Outputs are decoded by their byte-order mark, else as UTF-8.

Counts, per file (a Markdown table; ``n / m`` is n lost of m in the input, ``→k`` the output's
number when it differs from m; ``-``: not applicable to the format) and in total:

- rc: the CLI's exit status; a file whose run fails (rc != 0) has no other counts, and its last
  stderr line is listed under the table.
- s, words/s: wall seconds of the CLI run, interpreter start and model load included (one
  one-word run is timed first and printed, to show that share), and English words per second.
  Words: white-space separated words of the text to translate: HTML text outside ``script``,
  ``style``, ``pre``, ``code``, ``kbd``, ``samp``, ``textarea``, ``svg``, ``math``,
  ``template``; Markdown text tokens (markdown-it, as below; not code spans, HTML or image
  alt texts); SRT cue text without tags. Total words/s: words over seconds of the runs that
  succeeded.
- links lost: link targets of the input missing from the output, as a multiset: HTML ``<a
  href>`` and ``<img src>`` (``html.parser``); Markdown link and image destinations
  (reference links resolved, autolinks included) and the ``<a href>``/``<img src>`` of its
  inline and block HTML.
- inline emptied: inline elements with non-white-space text in the input whose partner in the
  output has none or is missing, over those with text in the input (goal: at most 1%). HTML and
  SRT cues: a abbr b bdi bdo big cite code data del dfn em font i ins kbd label mark q s samp
  small span strike strong sub sup time tt u var, an element's text being all text between its
  start and end tags (an element left open ends at the next block tag; SRT: at its cue's end);
  Markdown: links, em, strong, strikethrough (text, code spans and image alt texts inside). The
  k-th element of a tag in the input is paired with the k-th of that tag in the output.
- code spans lost: contents of the input's code spans missing from the output's, as a multiset
  (white space collapsed in HTML): Markdown ``code_inline`` tokens; HTML ``<code>``, ``<tt>``,
  ``<kbd>``, ``<var>``; ``→k``: the output's count.
- emphasis lost (Markdown): em, strong and s (strikethrough) tokens of the input missing from
  the output's, per kind, parsed by markdown-it-py ``MarkdownIt("commonmark").enable("table")``
  with the strikethrough rule and mdit-py-plugins' footnotes (as GitHub reads Markdown): an
  emphasis whose delimiters no longer flank (``_很重要_`` between Chinese characters) is not
  emphasis there, so it counts. Inline HTML ``<em>``, ``<strong>``, ``<del>``/``<s>`` pairs
  count as the emphasis they render.
- front matter (Markdown): a YAML (``---`` ... ``---``/``...``) or TOML (``+++`` ... ``+++``)
  block at the very top of the input: ``kept`` if the output starts with the same characters,
  else ``changed``.
- notes/tasks lost (Markdown): footnote references ``[^x]`` and definitions ``[^x]:`` (at a
  line start) in inline text outside code spans, and task-list markers ``[ ]``/``[x]`` that
  open a list item followed by white space; per kind, the input's count minus the output's
  when positive.
- U+FFFD added: U+FFFD characters in the decoded output minus those in the decoded input.
- encoding errors: a byte-order mark of the input missing (or another, but UTF-8's in an
  output written in UTF-8) in the output; the output not decodable, strictly, in the
  encoding it declares (its byte-order mark, else for
  HTML its first ``<meta>`` charset or XML declaration, else UTF-8); or, decodable there, a
  declared non-UTF-8 charset over non-ASCII bytes that are valid UTF-8. At most 2 per file.
- tags/cues changed: HTML: the sequence of start and end tags with their attributes
  (``html.parser`` events, attribute values as parsed, a ``<meta>``'s charset label left
  out: an output in UTF-8 says so there, checked under encoding errors); SRT: the sequence
  of (cue number, timing line); the items inserted, deleted or replaced between input and output
  (``difflib`` opcodes; m items replaced by n count max(m, n)), over the input's count.

``--json FILE`` writes every count; ``--table FILE`` the table as printed.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from hashlib import sha256
from pathlib import Path

from benchmarks.documents_compare import FORMATS, Comparison, compare, words
from benchmarks.harness import timed, write_json

MANIFEST = Path(__file__).resolve().parents[1] / "data" / "documents_corpus.tsv"
DEFAULT_DIR = Path("~/.cache/seq2seq/documents/files")


@dataclass
class Row:
    """One file's run and counts (``comparison`` None when the run failed)."""

    name: str
    format: str
    encoding: str
    size: int
    words: int
    seconds: float
    returncode: int
    error: str = ""
    comparison: Comparison | None = None


COLUMNS = [
    "file",
    "format",
    "encoding",
    "KB",
    "words",
    "rc",
    "s",
    "words/s",
    "links lost",
    "inline emptied",
    "code spans lost",
    "emphasis lost",
    "front matter",
    "notes/tasks lost",
    "U+FFFD added",
    "encoding errors",
    "tags/cues changed",
]


def _of(lost_: int | None, total: int | None, out: int | None = None) -> str:
    if lost_ is None or total is None:
        return "-"
    return f"{lost_} / {total}" + (f" →{out}" if out is not None and out != total else "")


def _cells(row: Row) -> list[str]:
    rate = f"{row.words / row.seconds:.0f}" if row.seconds and not row.returncode else "-"
    head = [
        row.name,
        row.format,
        row.encoding,
        f"{row.size / 1024:.1f}",
        str(row.words),
        str(row.returncode),
        f"{row.seconds:.1f}",
        rate,
    ]
    c = row.comparison
    if c is None:
        return head + ["failed"] * (len(COLUMNS) - len(head))
    fm = (
        "-" if c.front_matter_changed is None else ("changed" if c.front_matter_changed else "kept")
    )
    return head + [
        _of(c.links_lost, c.links),
        _of(c.inline_emptied, c.inline_with_text),
        _of(c.code_lost, c.code, c.code_out),
        _of(c.emphasis_lost, c.emphasis, c.emphasis_out),
        fm,
        _of(c.notes_lost, c.notes),
        str(c.fffd_added),
        f"{len(c.encoding)}" + (f" ({'; '.join(c.encoding)})" if c.encoding else ""),
        _of(c.structure_changed, c.structure),
    ]


def _sum(rows: list[Row], name: str) -> int | None:
    values = [getattr(r.comparison, name) for r in rows if r.comparison is not None]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def total_cells(rows: list[Row]) -> list[str]:
    """The totals over ``rows``: sums over the files that ran (words/s: their words over their
    seconds)."""
    ran = [r for r in rows if not r.returncode]
    seconds, words_ = sum(r.seconds for r in ran), sum(r.words for r in ran)
    failed = len(rows) - len(ran)
    emptied_, with_text = _sum(rows, "inline_emptied"), _sum(rows, "inline_with_text")
    share = f" ({100 * emptied_ / with_text:.1f}%)" if with_text else ""
    fm = [r.comparison.front_matter_changed for r in ran if r.comparison]
    fm = [v for v in fm if v is not None]
    return [
        f"**total ({len(rows)} files)**",
        "",
        "",
        f"{sum(r.size for r in rows) / 1024:.1f}",
        str(sum(r.words for r in rows)),
        f"{failed} failed",
        f"{sum(r.seconds for r in rows):.1f}",
        f"{words_ / seconds:.0f}" if seconds else "-",
        _of(_sum(rows, "links_lost"), _sum(rows, "links")),
        _of(emptied_, with_text) + share,
        _of(_sum(rows, "code_lost"), _sum(rows, "code"), _sum(rows, "code_out")),
        _of(_sum(rows, "emphasis_lost"), _sum(rows, "emphasis"), _sum(rows, "emphasis_out")),
        f"{sum(fm)} / {len(fm)} changed" if fm else "-",
        _of(_sum(rows, "notes_lost"), _sum(rows, "notes")),
        str(_sum(rows, "fffd_added") or 0),
        str(sum(len(r.comparison.encoding) for r in ran if r.comparison)),
        _of(_sum(rows, "structure_changed"), _sum(rows, "structure")),
    ]


def table(rows: list[Row]) -> str:
    """The Markdown table: a row per file, then the totals, then each failure's message."""
    return markdown_table(COLUMNS, [_cells(row) for row in rows], total_cells(rows), rows)


def markdown_table(columns: list[str], cells: list[list[str]], totals: list[str], rows) -> str:
    """A Markdown table of ``cells`` (escaped) under ``columns``, the ``totals`` line, then
    the message of each of ``rows`` (with ``name``, ``returncode``, ``error``) that failed."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in cells:
        lines.append("| " + " | ".join(_escape(cell) for cell in row) + " |")
    lines.append("| " + " | ".join(totals) + " |")
    failures = [row for row in rows if row.returncode]
    if failures:
        lines += ["", "Failed files:"]
        lines += [f"- `{r.name}`: exit {r.returncode}: {r.error}" for r in failures]
    return "\n".join(lines) + "\n"


def _escape(cell: str) -> str:
    return html.escape(cell, quote=False).replace("|", "\\|")


def documents(folder: Path, quick: bool = False) -> list[Path]:
    """The documents under ``folder`` by format then name (``quick``: the two smallest of each
    format); a ``README.md`` directly in ``folder`` is skipped."""
    found = [
        path
        for path in folder.rglob("*")
        if path.is_file()
        and path.suffix.lower() in FORMATS
        and not (path.parent == folder and path.name == "README.md")
    ]
    found.sort(key=lambda p: (FORMATS[p.suffix.lower()], p.name))
    if not quick:
        return found
    taken = []
    for format in dict.fromkeys(FORMATS.values()):
        same = [p for p in found if FORMATS[p.suffix.lower()] == format]
        taken += sorted(sorted(same, key=lambda p: p.stat().st_size)[:2], key=lambda p: p.name)
    return taken


def manifest_encodings(path: Path) -> dict[str, str]:
    """sha256 -> encoding, from the corpus manifest (empty when it is missing)."""
    if not path.is_file():
        return {}
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = csv.DictReader([line for line in lines if not line.startswith("#")], delimiter="\t")
    return {row["sha256"]: row["encoding"] for row in rows}


def cli(args: list[str], cwd: Path) -> tuple[int, float, str]:
    """``python -m seq2seq ARGS`` in ``cwd`` with this environment: (exit status, wall
    seconds, its last stderr line that is not a progress bar)."""
    command = [sys.executable, "-m", "seq2seq", *args]
    run = dict(cwd=cwd, env=os.environ.copy(), capture_output=True, text=True, errors="replace")
    done, seconds = timed(subprocess.run, command, **run)
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    lines = [line for line in lines if "━" not in line]
    return done.returncode, seconds, lines[-1] if lines else ""


def which_seq2seq(cwd: Path) -> str:
    """Where the subprocesses import ``seq2seq`` from."""
    done = subprocess.run(
        [sys.executable, "-c", "import seq2seq; print(seq2seq.__file__)"],
        cwd=cwd,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def run_one(path: Path, out: Path, checkpoint: str, extra: list[str]) -> dict:
    """Translates one document with the CLI into ``out``: its exit status, seconds, error."""
    target = out / path.name
    target.unlink(missing_ok=True)  # a failed run must not leave an old output to compare
    command = ["translate", "--checkpoint", checkpoint, "--input", str(path.resolve())]
    code, seconds, error = cli([*command, "--output", str(target.resolve()), *extra], out)
    return {"returncode": code, "seconds": seconds, "error": error if code else ""}


def compare_one(path: Path, out: Path, run: dict, encoding: dict[str, str]) -> Row:
    """The counts of one document against its output in ``out``."""
    format = FORMATS[path.suffix.lower()]
    target = out / path.name
    code, seconds, error = run["returncode"], run["seconds"], run["error"]
    raw = path.read_bytes()
    known = encoding.get(sha256(raw).hexdigest())
    row = Row(
        path.name,
        format,
        known or "?",
        len(raw),
        words(raw, format, known),
        seconds,
        code,
        error,
    )
    if not code and target.is_file():
        row.comparison = compare(raw, target.read_bytes(), format, known)
    elif not code:
        row.returncode, row.error = -1, "no output file written"
    return row


def run_all(files: list[Path], out: Path, args, extra: list[str]) -> tuple[list[str], dict]:
    """Every file through the CLI (or, ``--compare-only``, the runs recorded in
    ``out/runs.json``): the header lines and each file's run."""
    record = out / "runs.json"
    if args.compare_only:
        saved = json.loads(record.read_text(encoding="utf-8"))
        return saved["header"], saved["runs"]
    header = [f"seq2seq imported from: {which_seq2seq(out)}"]
    probe = out / "one_word.txt"
    probe.write_text("Hello\n", encoding="utf-8")
    command = ["translate", "--checkpoint", args.checkpoint, "--input", str(probe.resolve())]
    _, seconds, _ = cli([*command, "--output", str(out.resolve() / "one_word.out"), *extra], out)
    header.append(f"one-word CLI run (start + model load, in every file's s): {seconds:.1f} s")
    print("\n".join(header), flush=True)
    runs = {}
    for index, path in enumerate(files, 1):
        runs[path.name] = run = run_one(path, out, args.checkpoint, extra)
        print(
            f"[{index}/{len(files)}] {path.name}: rc {run['returncode']}, {run['seconds']:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    record.write_text(json.dumps({"header": header, "runs": runs}, indent=1), encoding="utf-8")
    return header, runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, help="a .ckpt for seq2seq translate")
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help="the documents (default %(default)s)"
    )
    parser.add_argument("--out", type=Path, help="folder for the outputs (default: a new one)")
    parser.add_argument("--quick", action="store_true", help="the 2 smallest files per format")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="inputs' encodings")
    parser.add_argument("--translate-args", default="", help="more options for the CLI")
    parser.add_argument("--json", type=Path, help="write every count to this file")
    parser.add_argument("--table", type=Path, help="write the table to this file")
    parser.add_argument(
        "--compare-only",
        action="store_true",
        help="translate nothing: compare the outputs already in --out (their runs.json)",
    )
    args = parser.parse_args(argv)
    folder = args.dir.expanduser()
    files = documents(folder, args.quick)
    if not files:
        parser.error(f"no .html/.md/.srt documents under {folder}")
    if args.compare_only and not args.out:
        parser.error("--compare-only needs --out")
    out = args.out or Path(tempfile.mkdtemp(prefix="documents_wild_"))
    out.mkdir(parents=True, exist_ok=True)
    encodings = manifest_encodings(args.manifest)
    header, runs = run_all(files, out, args, shlex.split(args.translate_args))
    rows = [compare_one(path, out, runs[path.name], encodings) for path in files]
    report(header, rows, table(rows), out, args)
    return 0


def report(header: list[str], rows: list, text: str, out: Path, args) -> None:
    """Prints the table ``text``; writes it to ``--table`` and ``rows`` to ``--json``."""
    print(f"outputs in {out}\n\n{text}")
    if args.table:
        args.table.write_text("\n".join(header) + f"\n\n{text}", encoding="utf-8")
    write_json(args.json, {"header": header, "rows": [asdict(r) for r in rows]}, 1)
