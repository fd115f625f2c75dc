"""``seq2seq translate`` as a stream (windows of lines written as they are done), interrupted
by real signals, and every mistake a newcomer can type answered in one line before any work.

Uses conftest's untrained tiny ``translation_checkpoint``: its outputs are arbitrary but
deterministic, and a sentence's output does not depend on the batch it is decoded in, so the
streamed output must equal the one-pass output exactly."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seq2seq.cli import main
from seq2seq.cli.progress import LineProgress
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import synthetic_pairs

SENTENCES = [en for en, _ in synthetic_pairs()]


def lines_with_blanks(count: int) -> list[str]:
    """Sentences, paragraphs of two, blank lines and a repeat, ``count`` lines in all."""
    lines = []
    for i in range(count):
        if i % 7 == 3:
            lines.append("")
        elif i % 5 == 0:
            lines.append(f"{SENTENCES[i % len(SENTENCES)]} {SENTENCES[(i * 3) % len(SENTENCES)]}")
        else:
            lines.append(SENTENCES[i % len(SENTENCES)])
    return lines


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "seq2seq", *args]


def translate(checkpoint: Path, source: Path | None, output: Path | None, *options) -> list[str]:
    """``seq2seq translate --checkpoint CHECKPOINT [--input SOURCE] [--output OUTPUT]
    OPTIONS...``'s arguments, as strings (None: no --input, or no --output)."""
    files = [("--input", source), ("--output", output)]
    paths = [str(part) for option, path in files if path for part in (option, path)]
    return ["translate", "--checkpoint", str(checkpoint), *paths, *map(str, options)]


def test_streamed_output_equals_the_one_pass_translation(translation_checkpoint, tmp_path):
    lines = lines_with_blanks(16)
    source = tmp_path / "in.en"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = Translator.from_checkpoint(translation_checkpoint).translate(
        lines, TranslateOptions(beam_size=2)
    )
    for window in ("1", "5", "1000"):
        output = tmp_path / f"out{window}.zh"
        code = main(
            translate(translation_checkpoint, source, output, "--beam-size", 2, "--window", window)
        )
        assert code == 0
        assert output.read_text(encoding="utf-8").split("\n")[:-1] == expected, window


def test_a_pipe_sees_each_window_before_the_input_ends(translation_checkpoint):
    process = subprocess.Popen(
        command(*translate(translation_checkpoint, None, None, "--window", 2, "--beam-size", 1)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        process.stdin.write(b"I will buy apples today.\nHe can see the book.\n")
        process.stdin.flush()  # stdin stays open: the rest of the "file" has not come yet
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, "no output while the input was still open"
        first = [process.stdout.readline(), process.stdout.readline()]
        assert all(line.endswith(b"\n") and line.strip() for line in first)
        process.stdin.write(b"She will cook rice.\n")
        process.stdin.close()
        rest = process.stdout.read()
        assert process.wait(timeout=60) == 0
        assert rest.count(b"\n") == 1
    finally:
        process.kill()


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_translation_keeps_every_finished_line(
    translation_checkpoint, tmp_path, signum, status
):
    lines = lines_with_blanks(3000)
    source, output = tmp_path / "big.en", tmp_path / "big.zh"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    process = subprocess.Popen(
        command(
            *translate(translation_checkpoint, source, output, "--window", 4, "--beam-size", 2)
        ),
        stderr=subprocess.PIPE,
        # Ctrl+C's SIGINT at its default, as in a terminal: a pytest-xdist worker ignores
        # SIGINT, and a child inherits that (as one started by nohup or `&` does).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not output.exists() or output.stat().st_size < 200):
        time.sleep(0.05)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == status, err
    message = [line for line in err.decode().splitlines() if "interrupted" in line]
    assert len(message) == 1 and "Traceback" not in err.decode(), err
    written = output.read_text(encoding="utf-8")
    assert written.endswith("\n")
    done = written.split("\n")[:-1]
    assert 0 < len(done) < len(lines)
    assert f"the first {len(done):,} input line(s)" in message[0]
    expected = Translator.from_checkpoint(translation_checkpoint).translate(
        lines[: len(done)], TranslateOptions(beam_size=2)
    )
    assert done == expected


def test_n_best_lists_every_line_best_first(translation_checkpoint, tmp_path, capsys):
    lines = ["I will buy apples today.", "", "He can see the book. She will cook rice."]
    source = tmp_path / "in.en"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(translate(translation_checkpoint, source, None, "--n-best", 3, "--beam-size", 2))
    assert code == 0
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    assert all(len(row) == 4 and row[2].startswith("F0= ") for row in rows)
    numbers = [int(row[0]) for row in rows]
    assert numbers == sorted(numbers) and set(numbers) == {0, 1, 2}
    assert numbers.count(0) == 3 and numbers.count(1) == 1  # a blank line: one empty entry
    assert rows[numbers.index(1)][1] == ""
    for line in (0, 2):
        scores = [float(row[3]) for row in rows if int(row[0]) == line]
        assert scores == sorted(scores, reverse=True)
    # The first of each list is the 1-best translation with the beam widened to 3.
    best = Translator.from_checkpoint(translation_checkpoint).translate(
        lines, TranslateOptions(beam_size=3)
    )
    firsts = [next(row[1] for row in rows if int(row[0]) == i) for i in range(3)]
    assert firsts == best


def test_hypotheses_carry_their_text(translator):
    lines = ["I will buy apples today.", "He can see the book."]
    found = translator.translate_n_best(lines, TranslateOptions(beam_size=3, n_best=2, split=False))
    texts = translator.translate(lines, TranslateOptions(beam_size=3, split=False))
    assert [hyps[0].text for hyps in found] == texts
    assert all(h.text == translator.text(h.tokens) for hyps in found for h in hyps)


def test_line_progress_counts_lines_blank_ones_included():
    class Bar:
        completed = 0.0

        def advance(self, n):
            self.completed += n

        def set_completed(self, n):
            self.completed = n

    bar = Bar()
    progress = LineProgress(bar)
    for window_lines, sentences in [(4, 6), (3, 0), (5, 2)]:  # (3, 0): only blank lines
        before = bar.completed
        progress.start(window_lines)
        progress.set_total(sentences)
        for _ in range(sentences):
            progress.advance(1)
        if sentences:  # the window's sentences add up to its lines
            assert bar.completed - before == pytest.approx(window_lines)
        progress.finish()
        assert bar.completed == progress.done_lines
    assert bar.completed == 12


def test_errors_before_work_are_one_line(translation_checkpoint, tmp_path, capsys, monkeypatch):
    """Each mistake is refused before the model is loaded (loading would fail the test)."""

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr(Translator, "from_checkpoint", no_load)
    checkpoint = str(translation_checkpoint)
    text = tmp_path / "in.en"
    text.write_text("I will buy apples.\n", encoding="utf-8")
    ct2 = tmp_path / "ct2"
    ct2.mkdir()
    (ct2 / "model.bin").write_bytes(b"")
    runs = tmp_path / "checkpoints"
    runs.mkdir()
    (runs / "last.ckpt").write_bytes(b"")
    base = ["translate", "--checkpoint", checkpoint, "--input", str(text)]
    cases = {
        (*base, "--output", str(tmp_path)): "is a directory",
        (*base, "--output", str(tmp_path / "no" / "such" / "x.zh")): "does not exist",
        (*base, "--output", str(text)): "is the --input file",
        (*base, "--beam-size", "0"): "--beam-size must be >= 1, got 0",
        (*base, "--beam-size", "-1"): "--beam-size must be >= 1, got -1",
        (*base, "--max-tokens", "0"): "--max-tokens must be >= 1",
        (*base, "--length-penalty", "inf"): "--length-penalty must be a finite number",
        (*base, "--n-best", "0"): "--n-best must be >= 1",
        (*base, "--device", "gpu"): "not a torch device",
        (*base, "--device", "cuda:7"): "--device cuda:7",
        (*base, "--format", "html", "--n-best", "2"): "--n-best takes plain text",
        ("translate", "--checkpoint", str(ct2)): "translate it with --engine ctranslate2",
        ("translate", "--checkpoint", str(runs)): f"e.g. {runs / 'last.ckpt'}",
        (
            "translate",
            "--checkpoint",
            checkpoint,
            "--engine",
            "ctranslate2",
        ): "--engine ctranslate2 takes the directory",
        (
            "translate",
            "--checkpoint",
            checkpoint,
            "--input",
            str(tmp_path / "none.en"),
        ): "none.en: input file not found",
        (
            "evaluate",
            "--checkpoint",
            checkpoint,
            "--src",
            str(text),
            "--ref",
            str(tmp_path / "none.zh"),
        ): "none.zh: reference file not found",
        ("evaluate", "--checkpoint", checkpoint, "--hyps", str(tmp_path)): "is a directory",
        ("generate", "--checkpoint", checkpoint, "--max-new-tokens", "0"): "--max-new-tokens",
        (
            "attention",
            "--checkpoint",
            checkpoint,
            "--text",
            "Hi.",
            "--output",
            str(tmp_path / "no" / "a.png"),
        ): "does not exist",
        ("serve", "--checkpoint", checkpoint, "--port", "70000"): "--port must be between",
        ("serve", "--checkpoint", checkpoint, "--max-batch-tokens", "0"): "--max-batch-tokens",
        ("serve", "--checkpoint", checkpoint, "--api-keys", str(tmp_path / "k")): "not found",
        ("export", "--checkpoint", checkpoint, "--output", str(text)): "not a directory",
        (
            "export",
            "--checkpoint",
            checkpoint,
            "--output",
            str(tmp_path / "out"),
            "--eval-json",
            str(text),
        ): "in.en: not JSON",
        (
            "import",
            "--hf",
            str(tmp_path / "none"),
            "--output",
            str(tmp_path / "x.ckpt"),
        ): "no such directory",
        ("import", "--hf", str(tmp_path), "--output", str(tmp_path / "x.ckpt")): "no config.json",
        (
            "average",
            "--checkpoints",
            checkpoint,
            str(tmp_path / "b.ckpt"),
            "--output",
            str(tmp_path / "avg.ckpt"),
        ): "b.ckpt: checkpoint not found",
    }
    if os.geteuid() != 0:  # root reads and writes whatever the permissions say
        locked = tmp_path / "locked.en"
        locked.write_text("x\n")
        locked.chmod(0)
        cases[("translate", "--checkpoint", checkpoint, "--input", str(locked))] = "not readable"
    for argv, problem in cases.items():
        code = main(list(argv))
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and problem in err, (argv, err)


@pytest.mark.parametrize(
    "argv, problem",
    [
        (
            ["translate", "--checkpoint", "x.ckpt", "--beam", "3"],
            "unknown option --beam; did you mean --beam-size?",
        ),
        (
            ["translate", "--checkpoint", "x.ckpt", "--max-token", "3"],
            "unknown option --max-token; did you mean --max-tokens?",
        ),
        (["evaluate", "--checkpoint", "x.ckpt", "--refs", "a"], "did you mean --ref?"),
        (["translate"], "the following arguments are required: --checkpoint"),
        (["translate", "--checkpoint", "x", "--format", "htm"], "invalid choice: 'htm'"),
    ],
)
def test_misspelled_and_abbreviated_options_are_one_line(argv, problem, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit.value.code == 2 and "\n" not in err and problem in err, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    out = capsys.readouterr().out
    assert exit.value.code == 0 and out.startswith("seq2seq 0.") and "torch 2." in out


def test_a_pipe_as_input_is_read_once_and_translated(translation_checkpoint, tmp_path):
    """--input <(zcat news.en.gz): a FIFO can be read once only (no line count first)."""
    import threading

    lines = lines_with_blanks(6)
    fifo, output = tmp_path / "fifo.en", tmp_path / "out.zh"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "w", encoding="utf-8") as pipe:
            pipe.write("\n".join(lines) + "\n")

    writer = threading.Thread(target=feed)
    writer.start()
    code = main(translate(translation_checkpoint, fifo, output, "--beam-size", 1))
    writer.join(timeout=30)
    expected = Translator.from_checkpoint(translation_checkpoint).translate(
        lines, TranslateOptions(beam_size=1)
    )
    assert code == 0 and output.read_text(encoding="utf-8").split("\n")[:-1] == expected


def test_warnings_name_lines_of_the_file_not_of_the_window(
    translation_checkpoint, tmp_path, capsys
):
    lines = ["I will buy apples today."] * 4 + ["apples " * 400, "He can see the book."]
    source = tmp_path / "in.en"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.zh"
    code = main(translate(translation_checkpoint, source, output, "--window", 2, "--beam-size", 1))
    warnings = [line for line in capsys.readouterr().err.splitlines() if "windows" in line]
    assert code == 0 and len(warnings) == 1 and warnings[0].endswith("line 5"), warnings


def test_n_best_of_a_repeated_sentence_takes_one_hypothesis_for_both(translator):
    sentence = "I will buy apples today."
    [alone] = translator.translate_n_best([sentence], TranslateOptions(beam_size=3, n_best=3))
    [twice] = translator.translate_n_best(
        [f"{sentence} {sentence}"], TranslateOptions(beam_size=3, n_best=3)
    )
    assert [h.text for h in twice] == [h.text * 2 for h in alone]
    assert [h.score for h in twice] == pytest.approx([2 * h.score for h in alone])


def test_outputs_the_writer_can_make_or_a_device_are_accepted(translation_checkpoint, tmp_path):
    from seq2seq import checks

    assert checks.writable_file("/dev/null", "--output") == Path("/dev/null")
    nested = tmp_path / "new" / "dir" / "avg.ckpt"
    with pytest.raises(Exception, match="does not exist"):
        checks.writable_file(nested, "--output")  # translate's writer makes no directories
    code = main(
        [
            "average",
            "--checkpoints",
            str(translation_checkpoint),
            str(translation_checkpoint),
            "--output",
            str(nested),
        ]
    )
    assert code == 0 and nested.is_file()
