"""``documents-office --speed``: a 50-page .docx against its text alone, and 100 MB files.

- Speed: ``--pages`` pages (default 50) of ``--words-per-page`` English words (default 500)
  from the bundled corpus, no line twice (the test split's lines first, then dev's, then
  train's, each line once), five sentences a paragraph, the first one bold, a page break
  after each page. The same paragraphs, one a line, are the text file. Each goes through
  ``python -m seq2seq translate --checkpoint C --input F --output O`` in turn, ``--rounds``
  times (default 2), alternating text and docx; the best wall seconds of each, and their
  ratio (goal: docx at most 1.2 times the text).
- Memory: a real .docx, .xlsx and .epub of tests/data/office with one stored member of
  random bytes added (``word/media/filler.bin`` and the like) to make ``--big-mb`` MB
  (default 100), each translated by the CLI: exit status, seconds, the process's peak
  resident set (``ru_maxrss`` from ``wait4``) and the last line on stderr; then the same
  .docx past ``seq2seq.formats.zipped.MAX_TOTAL`` (its one-line refusal).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path

DATA = Path("data_cache")
OFFICE = Path("tests/data/office")
CHUNK = 16 * 1024 * 1024
BIG = {
    "docx": ("python-docx--fnt-color.docx", "word/media/filler.bin"),
    "xlsx": ("xlsxwriter--hyperlink01.xlsx", "xl/media/filler.bin"),
    "epub": ("epubcheck--lorem.epub", "EPUB/filler.bin"),
}


def corpus_lines(words: int) -> list[str]:
    """English lines of the bundled corpus, each once, test split first, ``words`` in all."""
    seen, taken, count = set(), [], 0
    for split in ("test", "dev", "train"):
        for path in sorted(DATA.glob(f"*/{split}.en")):
            for line in path.read_text(encoding="utf-8").splitlines():
                line = line.strip()
                if line and line not in seen:
                    seen.add(line)
                    taken.append(line)
                    count += len(line.split())
                    if count >= words:
                        return taken
    return taken


def build_pair(folder: Path, pages: int, per_page: int) -> tuple[Path, Path, int]:
    """The .docx and the .txt of the same paragraphs; their number."""
    import docx
    from docx.enum.text import WD_BREAK

    lines = corpus_lines(pages * per_page)
    paragraphs = [lines[i : i + 5] for i in range(0, len(lines), 5)]
    per_page_paragraphs = max(1, len(paragraphs) // pages)
    document = docx.Document()
    for index, sentences in enumerate(paragraphs, 1):
        paragraph = document.add_paragraph()
        paragraph.add_run(sentences[0]).bold = True
        if sentences[1:]:
            paragraph.add_run(" " + " ".join(sentences[1:]))
        if index % per_page_paragraphs == 0:
            paragraph.add_run().add_break(WD_BREAK.PAGE)
    text = folder / "pages.txt"
    text.write_text("".join(" ".join(p) + "\n" for p in paragraphs), encoding="utf-8")
    document.save(folder / "pages.docx")
    return folder / "pages.docx", text, len(paragraphs)


def translate(checkpoint: str, source: Path, target: Path) -> dict:
    """One CLI run: exit status, wall seconds, peak RSS in MiB, the last stderr line."""
    command = [sys.executable, "-m", "seq2seq", "translate", "--checkpoint", checkpoint]
    command += ["--input", str(source), "--output", str(target)]
    target.unlink(missing_ok=True)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = process.stderr.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(process.pid, 0)
    lines = [line for line in stderr.splitlines() if line.strip() and "━" not in line]
    return {
        "returncode": os.waitstatus_to_exitcode(status),
        "seconds": round(time.perf_counter() - start, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "last_line": lines[-1] if lines else "",
    }


def speed(checkpoint: str, folder: Path, pages: int, per_page: int, rounds: int) -> dict:
    """Alternating text and docx runs: every run, the best of each and their ratio."""
    document, text, count = build_pair(folder, pages, per_page)
    runs = {"text": [], "docx": []}
    for round_ in range(rounds):
        for name, source in (("text", text), ("docx", document)):
            runs[name].append(translate(checkpoint, source, folder / f"out.{source.suffix[1:]}"))
            print(f"round {round_ + 1} {name}: {runs[name][-1]}", flush=True)
    best = {name: min(r["seconds"] for r in done) for name, done in runs.items()}
    words = len(text.read_text(encoding="utf-8").split())
    return {
        "paragraphs": count,
        "words": words,
        "docx_kb": round(document.stat().st_size / 1024, 1),
        "runs": runs,
        "best_s": best,
        "ratio": round(best["docx"] / best["text"], 3),
    }


def padded(kind: str, folder: Path, megabytes: float) -> Path:
    """A real ``kind`` file with a stored member of random bytes making it ``megabytes``."""
    name, member = BIG[kind]
    target = folder / f"big-{megabytes:g}MB.{kind}"
    with zipfile.ZipFile(OFFICE / name) as source, zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            out.writestr(info, source.read(info))
        room = int(megabytes * 1024 * 1024) - (OFFICE / name).stat().st_size
        chunk = random.Random(57).randbytes(CHUNK)  # stored: repeats do not compress
        with out.open(zipfile.ZipInfo(member), "w", force_zip64=True) as filler:
            for start in range(0, max(room, 0), CHUNK):
                filler.write(chunk[: room - start])
    return target


def memory(checkpoint: str, folder: Path, megabytes: float) -> dict:
    """Each zipped kind padded to ``megabytes`` through the CLI, then a .docx past the limit."""
    from seq2seq.formats.zipped import MAX_TOTAL

    found = {}
    for kind in BIG:
        source = padded(kind, folder, megabytes)
        found[source.name] = translate(checkpoint, source, folder / f"out-{source.name}")
        print(f"{source.name}: {found[source.name]}", flush=True)
        source.unlink()
        (folder / f"out-{source.name}").unlink(missing_ok=True)
    over = padded("docx", folder, MAX_TOTAL / 1024 / 1024 + 8)
    found[over.name] = translate(checkpoint, over, folder / f"out-{over.name}")
    print(f"{over.name}: {found[over.name]}", flush=True)
    over.unlink()
    probe = folder / "one_word.txt"
    probe.write_text("Hello\n", encoding="utf-8")
    found["one_word.txt"] = translate(checkpoint, probe, folder / "one_word.out")
    return found


def measure(args, out: Path) -> dict:
    """``--speed``: the speed pair, then the big files."""
    pair = args.checkpoint, out, args.pages, args.words_per_page, args.rounds
    return {
        "speed": speed(*pair) if args.rounds else None,  # --rounds 0: the big files only
        "memory": memory(args.checkpoint, out, args.big_mb),
    }
