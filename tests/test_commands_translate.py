"""End to end through ``seq2seq translate``, ``evaluate`` and ``average`` on the small fitted run
(conftest's ``run``): one output line per input line, scores as JSON, the parameter mean, and
one-line errors for bad checkpoints and inputs."""

from __future__ import annotations

import json

import pytest
import torch

from seq2seq.cli import main
from seq2seq.inference.checkpoint import read_checkpoint
from seq2seq.inference.translator import Translator
from tests.helpers import checkpoint_command, synthetic_pairs

pytestmark = pytest.mark.slow


def test_translate_keeps_one_line_per_input_line(run, tmp_path, capsys):
    ugly = [
        b"I will buy apples today.",
        b"",
        b"   \t ",
        b"She can see the small dog tomorrow.\r",
        b"We \xff\xfe will cook rice.",
        "我会买苹果。".encode(),
        "Tea \U0001f375 at home.".encode(),
        b"Tom\x00 \x07 can find\x1b the book.",
        b"apples " * 3000,  # 21,000 characters, no punctuation: in windows, with a warning
        b"He should eat some fish.",
    ]
    source = tmp_path / "in.en"
    source.write_bytes(b"\n".join(ugly) + b"\n")
    output = tmp_path / "out.zh"
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    files = ("--input", source, "--output", output)
    code = main(checkpoint_command("translate", checkpoint, *files, "--beam-size", 3))
    assert code == 0
    lines = output.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(ugly)
    assert lines[1] == "" and lines[2] == ""
    assert lines[0] and lines[-2]
    assert len(lines[8]) > 100  # all of it translated, not cut at the model's limit
    warnings = [line for line in capsys.readouterr().err.splitlines() if "windows" in line]
    assert len(warnings) == 1 and warnings[0].endswith("line 9")


def test_evaluate_json_with_files(run, tmp_path, capsys):
    pairs = synthetic_pairs()[:25]
    src, ref = tmp_path / "t.en", tmp_path / "t.zh"
    src.write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    ref.write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    hyps = tmp_path / "hyps.zh"
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    files = ("--src", src, "--ref", ref, "--ref", ref, "--hyps", hyps)
    code = main(checkpoint_command("evaluate", checkpoint, *files, "--json", "--beam-size", 2))
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert 0.0 <= result["bleu"] <= 100.0 and 0.0 <= result["chrf"] <= 100.0
    assert "tok:zh" in result["bleu_signature"] and "nrefs:2" in result["bleu_signature"]
    assert result["sentences"] == 25
    assert len(hyps.read_text(encoding="utf-8").splitlines()) == 25


def test_evaluate_held_out_test_split(run, capsys):
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    assert main(["evaluate", "--checkpoint", checkpoint, "--split", "test", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["eval_set"] == "test" and result["sentences"] > 0
    assert result["references"] >= result["sentences"]  # one item per distinct English
    assert main(["evaluate", "--checkpoint", checkpoint, "--split", "dev"]) == 0
    assert " references, beam " in capsys.readouterr().out  # "1,264 sentences, 1,264 references"


def test_average_is_the_parameter_mean(run, tmp_path):
    a, b = run / "checkpoints" / "step00010.ckpt", run / "checkpoints" / "step00020.ckpt"
    out = tmp_path / "avg.ckpt"
    assert main(["average", "--checkpoints", str(a), str(b), "--output", str(out)]) == 0
    averaged, first, second = (read_checkpoint(p) for p in (out, a, b))
    assert "optimizer_states" not in averaged
    for key, value in averaged["state_dict"].items():
        expected = (first["state_dict"][key].double() + second["state_dict"][key].double()) / 2
        torch.testing.assert_close(value.double(), expected, rtol=0, atol=1e-6)
    assert Translator.from_checkpoint(out).translate(["I will buy tea."])[0]


def test_bad_checkpoint_is_one_line_error(run, tmp_path, capsys):
    good = run / "checkpoints" / "last.ckpt"
    bogus = tmp_path / "bogus.ckpt"
    bogus.write_bytes(b"not a checkpoint")
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    other_model = tmp_path / "other.ckpt"  # a torch file, but not one of ours
    torch.save({"state_dict": {"w": torch.zeros(2)}, "epoch": 1}, other_model)
    mismatch = tmp_path / "mismatch.ckpt"
    checkpoint = read_checkpoint(good)
    checkpoint["seq2seq"]["model_config"]["vocab_size"] += 1
    torch.save(checkpoint, mismatch)
    problems = {
        tmp_path / "missing.ckpt": "checkpoint not found",
        bogus: "cannot read checkpoint",
        truncated: "cannot read checkpoint",
        other_model: "not a seq2seq checkpoint",
        mismatch: "disagrees with the tokenizer",
    }
    for path, problem in problems.items():
        code = main(["translate", "--checkpoint", str(path), "--input", str(bogus)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and str(path) in err and problem in err, err


def test_evaluate_input_errors_are_one_line(run, tmp_path, capsys):
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    src, ref = tmp_path / "test.en", tmp_path / "test.zh"
    src.write_text("I will buy tea.\nHe can cook rice.\n", encoding="utf-8")
    ref.write_text("我会买茶。\n", encoding="utf-8")
    cases = {
        ("--src", str(src), "--ref", str(ref)): f"{ref}: 1 reference lines but {src} has 2",
        ("--src", str(src)): "--src needs at least one --ref file",
        ("--src", str(tmp_path / "none.en"), "--ref", str(ref)): "none.en",
    }
    for extra, problem in cases.items():
        code = main(["evaluate", "--checkpoint", checkpoint, *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and problem in err, err


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("book.doc", b"Hello.\n", ".doc is not a format seq2seq reads"),
        ("notes", b"PK\x03\x04\x14\x00rest", "a zip file"),
        ("scan", b"%PDF-1.7\n...", "a PDF"),
        ("raw", b"ab\x00\x00\x00\x00c\x00def\x00\x00", "binary data"),
    ],
)
def test_a_file_of_no_known_format_is_refused_unless_read_as_text(
    translation_checkpoint, tmp_path, capsys, name, content, says
):
    source = tmp_path / name
    source.write_bytes(content)
    argv = ["translate", "--checkpoint", str(translation_checkpoint), "--input", str(source)]
    output = tmp_path / "out.txt"
    assert main([*argv, "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert says in err and "--format text" in err and len(err.strip().splitlines()) == 1
    assert not output.exists()
    if name == "book.doc":  # asked for, it is read as plain text
        assert main([*argv, "--output", str(output), "--format", "text", "--beam-size", "1"]) == 0
        assert len(output.read_text(encoding="utf-8").splitlines()) == 1
