"""End to end through the real commands: fit a tiny model, then translate, evaluate, average,
resume. One small run is shared by the module; each test checks one promise of the README."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import torch

from helpers import synthetic_pairs
from seq2seq.checkpoint import read_checkpoint
from seq2seq.cli import main
from seq2seq.evaluation import score_translations
from seq2seq.translator import Translator

pytestmark = pytest.mark.slow

CONFIG = """
seed_everything: 3
model:
  config:
    d_model: 32
    n_heads: 2
    n_encoder_layers: 1
    n_decoder_layers: 1
    d_ff: 64
    dropout: 0.0
    max_positions: 64
  warmup_steps: 10
  lr_scale: 0.5
  val_bleu_sentences: 20
data:
  corpus: tsv
  path: {corpus}
  vocab_size: 556  # 300 before byte fallback took 256 ids
  max_tokens: 400
  max_len: 40
  cache_dir: {root}/cache
trainer:
  accelerator: cpu
  devices: 1
  max_steps: {max_steps}
  val_check_interval: 10
  check_val_every_n_epoch: null
  num_sanity_val_steps: 0
  limit_val_batches: 2
  log_every_n_steps: 5
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint
      init_args:
        dirpath: {root}/checkpoints
        filename: "step{{step:05d}}"
        every_n_train_steps: 10
        save_top_k: -1
        auto_insert_metric_name: false
  logger:
    class_path: lightning.pytorch.loggers.CSVLogger
    init_args:
      save_dir: {root}
      name: logs
checkpoint:
  dirpath: {root}/checkpoints
"""


def write_config(root: Path, corpus: Path, max_steps: int) -> str:
    config = root / f"config{max_steps}.yaml"
    config.write_text(CONFIG.format(corpus=corpus, root=root, max_steps=max_steps))
    return str(config)


def fit(root: Path, corpus: Path, max_steps: int, *extra: str) -> None:
    assert main(["fit", "--config", write_config(root, corpus, max_steps), *extra]) == 0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "pairs.tsv"
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, corpus) -> Path:
    root = tmp_path_factory.mktemp("run")
    fit(root, corpus, max_steps=30)
    return root


def metrics(root: Path) -> list[dict[str, str]]:
    (path,) = root.glob("logs/version_*/metrics.csv")
    with open(path) as f:
        return list(csv.DictReader(f))


def column(rows: list[dict[str, str]], name: str) -> list[float]:
    return [float(r[name]) for r in rows if r.get(name)]


def test_fit_writes_checkpoints_and_metrics(run):
    names = {p.name for p in (run / "checkpoints").iterdir()}
    assert "last.ckpt" in names
    assert {"step00010.ckpt", "step00020.ckpt", "step00030.ckpt"} <= names
    assert any(n.startswith("best-") for n in names)
    rows = metrics(run)
    losses = column(rows, "train_loss")
    assert losses[-1] < losses[0] - 1.0, losses  # it learns
    for name in ("val_loss", "val_bleu", "val_ppl", "tok_per_s", "lr-AdamW"):
        assert column(rows, name), f"{name} never logged"
    assert all(rate > 0 for rate in column(rows, "tok_per_s"))


def test_every_validation_is_considered_for_the_best_checkpoint(corpus, tmp_path):
    """Validations at 10 and 20 fall on steps where last.ckpt is also refreshed (every 10,
    and the final step): each still gets its best-by-BLEU check (save_top_k -1 keeps all)."""
    fit(tmp_path, corpus, 20, "--checkpoint.save_top_k", "-1",
        "--checkpoint.last_every_n_train_steps", "10")  # fmt: skip
    names = sorted(p.name for p in (tmp_path / "checkpoints").glob("best-*"))
    assert [n.split("-bleu")[0] for n in names] == ["best-step10", "best-step20"], names
    assert read_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 20


def test_tensorboard_logs_beside_csv_when_installed(run):
    pytest.importorskip("tensorboard")
    (version,) = run.glob("logs/version_*")
    assert (version / "metrics.csv").is_file()
    assert list(version.glob("events.out.tfevents.*"))


def test_logged_learning_rate_follows_the_paper_schedule(run):
    from seq2seq.schedule import inverse_sqrt_schedule

    rows = [r for r in metrics(run) if r.get("lr-AdamW")]
    for row in rows:
        step = int(row["step"])  # the rate used for the update after `step` updates
        assert float(row["lr-AdamW"]) == pytest.approx(inverse_sqrt_schedule(step + 1, 32, 10, 0.5))


def test_checkpoint_is_self_contained(run, tmp_path):
    checkpoint = read_checkpoint(run / "checkpoints" / "last.ckpt")
    section = checkpoint["seq2seq"]
    assert section["model_config"]["vocab_size"] == 556
    assert section["tokenizer"][:2] and len(section["tokenizer"]) > 1000
    # Nothing else is needed: move the data cache away and translate.
    (run / "cache").rename(tmp_path / "cache")
    try:
        translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
        (out,) = translator.translate(["I will buy apples today."], beam_size=2)
        assert out and "\n" not in out
    finally:
        (tmp_path / "cache").rename(run / "cache")


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
        b"apples " * 3000,  # 21,000 characters: truncated with a warning
        b"He should eat some fish.",
    ]
    source = tmp_path / "in.en"
    source.write_bytes(b"\n".join(ugly) + b"\n")
    output = tmp_path / "out.zh"
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    code = main(["translate", "--checkpoint", checkpoint, "--input", str(source),
                 "--output", str(output), "--beam-size", "3"])  # fmt: skip
    assert code == 0
    lines = output.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(ugly)
    assert lines[1] == "" and lines[2] == ""
    assert lines[0] and lines[-2]
    warnings = [line for line in capsys.readouterr().err.splitlines() if "truncat" in line]
    assert len(warnings) == 1 and "9" in warnings[0]


def test_batching_does_not_change_translations(run):
    translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
    lines = [en for en, _ in synthetic_pairs()[:40:3]]
    together = translator.translate(lines, beam_size=3, max_tokens=4000)
    alone = [translator.translate([line], beam_size=3)[0] for line in lines]
    tiny_batches = translator.translate(lines, beam_size=3, max_tokens=30)
    assert together == alone == tiny_batches


def test_evaluate_json_with_files(run, tmp_path, capsys):
    pairs = synthetic_pairs()[:25]
    src, ref = tmp_path / "t.en", tmp_path / "t.zh"
    src.write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    ref.write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    hyps = tmp_path / "hyps.zh"
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    code = main(["evaluate", "--checkpoint", checkpoint, "--src", str(src), "--ref", str(ref),
                 "--ref", str(ref), "--hyps", str(hyps), "--json", "--beam-size", "2"])  # fmt: skip
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


def test_evaluation_scores_perfect_hypotheses_100():
    refs = ["我今天会买苹果。", "他明天能看见那本书。"]
    assert score_translations(refs, [refs])["bleu"] == pytest.approx(100.0)


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


def test_resume_from_last_continues_exactly(run, corpus, tmp_path_factory):
    """25 steps + resume to 40 == 40 steps straight (dropout 0, same seed).

    25 is between two validations (every 10 steps): last.ckpt must still hold step 25, and
    resuming it mid-epoch must replay the same data order."""
    straight = tmp_path_factory.mktemp("straight")
    fit(straight, corpus, max_steps=40)
    resumed = tmp_path_factory.mktemp("resumed")
    fit(resumed, corpus, max_steps=25)
    assert read_checkpoint(resumed / "checkpoints" / "last.ckpt")["global_step"] == 25
    fit(resumed, corpus, 40, "--ckpt_path", "last")
    a = read_checkpoint(straight / "checkpoints" / "last.ckpt")
    b = read_checkpoint(resumed / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 40
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=1e-5, atol=1e-6)


def test_a_batch_out_of_memory_is_split_and_retried(run, monkeypatch, capsys):
    import seq2seq.translator as translator_module

    translator = Translator.from_checkpoint(run / "checkpoints" / "last.ckpt")
    lines = ["I will buy apples today.", "", "He should eat some fish.", "We can cook rice."] * 3
    expected = translator.translate(lines, beam_size=2)
    real = translator_module.translate_ids
    tried, done = [], []

    def small_memory(model, src, *args):  # as if the GPU held at most 2 sentences
        tried.append(src.shape[0])
        if src.shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        done.append(src.shape[0])
        return real(model, src, *args)

    monkeypatch.setattr(translator_module, "translate_ids", small_memory)
    assert translator.translate(lines, beam_size=2) == expected
    assert tried[0] == 9 and sum(done) == 9 and max(done) <= 2  # 9 non-empty lines, split
    assert capsys.readouterr().err.count("ran out of memory and were split") == 1

    def no_memory(model, src, *args):
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(translator_module, "translate_ids", no_memory)
    with pytest.raises(MemoryError, match="single sentence"):
        translator.translate(["I will buy apples today."])


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
        mismatch: "disagrees with the SentencePiece model",
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


def test_fit_config_errors_are_one_line(run, corpus, tmp_path, capsys):
    config = write_config(tmp_path, corpus, 5)
    bad = {
        ("--model.config.n_heads", "3"): "d_model (32) must be divisible by n_heads (3)",
        ("--model.config.d_model", "wide"): "model.config.d_model",  # wrong type
        ("--model.config.colour", "blue"): "unrecognized arguments",  # unknown key
    }
    for extra, problem in bad.items():
        try:
            code = main(["fit", "--config", config, *extra])
        except SystemExit as exit:  # jsonargparse's own parse errors
            code = exit.code
        err = capsys.readouterr().err
        assert code == 2 and problem in err and "Traceback" not in err, err


def test_a_new_run_refuses_a_directory_with_checkpoints(run, corpus, tmp_path, capsys):
    import shutil

    shutil.copytree(run / "checkpoints", tmp_path / "checkpoints")  # another run's files
    last = tmp_path / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    assert main(["fit", "--config", write_config(tmp_path, corpus, 12)]) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert error.startswith("seq2seq fit: error: ") and str(tmp_path / "checkpoints") in error
    assert "already holds checkpoints" in error and "--checkpoint.overwrite true" in error
    assert last.read_bytes() == before  # nothing was overwritten


def test_overwrite_is_explicit_and_a_live_run_is_never_clobbered(corpus, tmp_path, capsys):
    import os
    import socket
    import subprocess

    config = write_config(tmp_path, corpus, 5)
    assert main(["fit", "--config", config]) == 0
    assert main(["fit", "--config", config, "--checkpoint.overwrite", "true"]) == 0
    lock = tmp_path / "checkpoints" / ".run.lock"
    assert not lock.exists()  # released when the run ended
    # A lock left by a process that is gone (a killed run) does not block a resume.
    gone = subprocess.Popen(["true"])
    gone.wait()
    lock.write_text(f"{socket.gethostname()} {gone.pid}\n")
    assert main(["fit", "--config", write_config(tmp_path, corpus, 8), "--ckpt_path", "last"]) == 0
    assert read_checkpoint(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 8
    # A live one blocks even overwrite and resume.
    lock.write_text(f"{socket.gethostname()} {os.getppid()}\n")
    capsys.readouterr()
    longer = write_config(tmp_path, corpus, 11)  # a resume that would train and save
    argv = ["fit", "--config", longer, "--checkpoint.overwrite", "true", "--ckpt_path", "last"]
    assert main(argv) == 2
    assert (
        f"in use by another training run (process {os.getppid()}, see .run.lock"
        in capsys.readouterr().err
    )


def test_fit_data_errors_are_one_line_naming_file_and_line(tmp_path, capsys):
    good = "I will buy tea.\t我会买茶。\n"
    (tmp_path / "en.txt").write_text("One.\nTwo.\nThree.\n", encoding="utf-8")
    (tmp_path / "zh.txt").write_text("一。\n二。\n", encoding="utf-8")
    files = {
        "fields.tsv": good * 3 + "He can cook.\t他会做饭。\textra\n",
        "broken.jsonl": '{"en": "Hi.", "zh": "嗨。"}\n{"en": "Hi.", \n',
        "empty.tsv": "\n\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    cases = {
        ("tsv", "fields.tsv"): "fields.tsv:4: expected 2 tab-separated fields, found 3",
        ("jsonl", "broken.jsonl"): "broken.jsonl:2: not valid JSON",
        ("tsv", "empty.tsv"): "empty.tsv: corpus is empty",
        ("tsv", "missing.tsv"): "missing.tsv: file not found",
        ("text", "en.txt"): "zh.txt:3: file ends here but",
    }
    for (kind, name), problem in cases.items():
        extra = ["--data.tgt_path", str(tmp_path / "zh.txt")] if kind == "text" else []
        config = write_config(tmp_path, tmp_path / name, 5)
        code = main(["fit", "--config", config, "--data.corpus", kind, *extra])
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "error" in line.lower()]  # not INFO lines
        assert code == 2 and "Traceback" not in err, err
        assert len(errors) == 1 and problem in errors[0], err


def test_export_hf_gives_the_same_logits_and_greedy_translations(run, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    checkpoint = run / "checkpoints" / "last.ckpt"
    out = tmp_path / "hf"
    scores = score_translations(["我会买茶。"], [["我会买茶。"]])
    eval_json = tmp_path / "eval.json"
    eval_json.write_text(json.dumps({**scores, "eval_set": "test", "sentences": 1,
                                     "beam_size": 5}))  # fmt: skip
    assert main(["export", "--checkpoint", str(checkpoint), "--format", "hf",
                 "--output", str(out), "--eval-json", str(eval_json)]) == 0  # fmt: skip
    marian = transformers.MarianMTModel.from_pretrained(out).eval()
    translator = Translator.from_checkpoint(checkpoint)
    ours = translator.engine.model
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, ours.config.vocab_size, (3, 9), generator=generator)
    tgt = torch.randint(4, ours.config.vocab_size, (3, 6), generator=generator)
    src[1, 6:] = 0
    with torch.no_grad():
        theirs = marian(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt)
        assert torch.allclose(theirs.logits, ours(src, tgt), atol=1e-4)
    sentences = [en for en, _ in synthetic_pairs()[:60:7]]
    expected = translator.translate(sentences, beam_size=1)
    tokenizer = transformers.MarianTokenizer.from_pretrained(out)
    for sentence, want in zip(sentences, expected, strict=True):
        ids = tokenizer(sentence, return_tensors="pt").input_ids
        assert ids[0, -1] == 3 and ids[0, :-1].tolist() == translator.tokenizer.encode(sentence)
        search = translator.search  # our limit: a * source length + b tokens, eos included
        limit = int((ids.shape[1] - 1) * search.max_len_a) + search.max_len_b
        with torch.no_grad():  # our models take the source without Marian's eos; its eos
            generated = marian.generate(  # is forced at the last position, as ours is
                input_ids=ids[:, :-1], num_beams=1, do_sample=False, max_length=limit + 1
            )
        assert tokenizer.decode(generated[0], skip_special_tokens=True) == want
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "MarianMTModel export" in card and "| d_model | 32 |" in card
    assert "BLEU 100.00" in card and scores["bleu_signature"] in card  # from --eval-json
    assert "Corpus `tsv`" in card


def test_ctranslate2_export_translates_like_ours(run, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    checkpoint = run / "checkpoints" / "last.ckpt"
    out = tmp_path / "ct2"
    assert main(["export", "--checkpoint", str(checkpoint), "--format", "ctranslate2",
                 "--output", str(out)]) == 0  # fmt: skip
    lines = [en for en, _ in synthetic_pairs()[:300:11]] + ["", "Tom \U0001f375 \x07."]
    source = tmp_path / "in.en"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs = {}
    for engine, model in (("torch", checkpoint), ("ctranslate2", out)):
        target = tmp_path / f"{engine}.zh"
        assert main(["translate", "--checkpoint", str(model), "--engine", engine, "--beam-size",
                     "1", "--input", str(source), "--output", str(target)]) == 0  # fmt: skip
        outputs[engine] = target.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(outputs["torch"]) == len(lines) and outputs["torch"][-2] == ""
    assert outputs["ctranslate2"] == outputs["torch"]  # greedy: identical
    assert main(["evaluate", "--checkpoint", str(out), "--engine", "ctranslate2"]) == 2
    assert "give --src and --ref" in capsys.readouterr().err


def test_attention_and_plot_commands_write_pictures(run, tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    checkpoint = str(run / "checkpoints" / "last.ckpt")
    attention = tmp_path / "attention.png"
    assert main(["attention", "--checkpoint", checkpoint, "--text", "Tom will buy apples.",
                 "--output", str(attention), "--beam-size", "1"]) == 0  # fmt: skip
    one_layer = tmp_path / "layer0.png"
    assert main(["attention", "--checkpoint", checkpoint, "--text", "Tom will buy apples.",
                 "--output", str(one_layer), "--layer", "0", "--head", "1",
                 "--beam-size", "1"]) == 0  # fmt: skip
    with image_module.open(attention) as mean, image_module.open(one_layer) as head:
        assert mean.format == head.format == "PNG" and head.width > 300
        assert mean.size == head.size  # the test model has one decoder layer
        assert mean.tobytes() != head.tobytes()  # one head is not the mean of both
    curves = tmp_path / "curves.png"
    assert main(["plot", "--run", str(run / "logs"), "--output", str(curves)]) == 0
    with image_module.open(curves) as image:
        assert image.width > image.height > 300
    assert main(["attention", "--checkpoint", checkpoint, "--text", "x", "--layer", "7"]) == 2


def test_fit_log_is_clean_and_says_when_max_time_stopped_it(corpus, tmp_path):
    """A real ``seq2seq fit`` process whose time budget ends it long before max_steps: one
    plain line says where it stopped and that the schedule annealed; the log holds no product
    tips and no deprecation warnings."""
    import subprocess
    import sys

    config = write_config(tmp_path, corpus, max_steps=100_000)
    command = [
        sys.executable, "-m", "seq2seq", "fit", "--config", config,
        "--trainer.max_time", "00:00:00:03", "--model.cooldown_steps", "1000",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stdout + done.stderr
    (line,) = [x for x in log.splitlines() if "stopped by max_time" in x]
    assert re.fullmatch(
        r"stopped by max_time \(0:00:\d\d\) at step \d+/100000; schedule annealed to \S+ "
        r"\(peak \S+\)",
        line,
    ), line
    assert "💡" not in log and "Tip:" not in log
    assert "deprecated" not in log.lower(), [x for x in log.splitlines() if "deprecat" in x]
