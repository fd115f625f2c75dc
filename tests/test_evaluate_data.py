"""``evaluate``'s data: hypotheses files named after what was scored (never overwriting each
other), ``--split`` found from any directory through what the checkpoint recorded, a one-line
error when the data is nowhere, and progress lines while it is prepared again."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from seq2seq.cli import main
from seq2seq.data.data_location import DATA_LOCATION
from seq2seq.data.datamodule import TranslationDataModule
from seq2seq.errors import DataError
from seq2seq.inference.checkpoint import read_checkpoint
from seq2seq.inference.evaluation import (
    eval_set_label,
    files_name,
    held_out_split,
    hypotheses_path,
    load_eval_set,
)
from tests.helpers import synthetic_pairs, tiny_checkpoint


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny.ckpt")


# An untrained model decodes to its length limit: a short one keeps the evaluate runs fast.
SHORT = ["--beam-size", "1", "--max-len-a", "0", "--max-len-b", "4", "--json"]


def train_here(tiny: Path) -> Path:
    """A checkpoint laid out as ``seq2seq fit`` in the current directory writes one, given its
    corpus and cache by relative paths: ``pairs.tsv``, ``cache/``; the data cut with ``tiny``'s
    tokenizer (no SentencePiece training: fast). Returns ``run/last.ckpt``."""
    Path("pairs.tsv").write_text(
        "".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), encoding="utf-8"
    )
    settings = dict(corpus="tsv", path="pairs.tsv", cache_dir="cache", max_tokens=400, max_len=40)
    datamodule = TranslationDataModule(**settings, tokenizer_from=str(tiny))
    datamodule.prepare_data()
    datamodule.setup("fit")  # records where the data was found, as fit does
    checkpoint = torch.load(tiny, weights_only=False)
    checkpoint["datamodule_hyper_parameters"] = dict(datamodule.hparams)
    path = Path("run") / "last.ckpt"
    path.parent.mkdir()
    torch.save(checkpoint, path)
    return path.resolve()


@pytest.fixture
def trained(tiny, tmp_path, monkeypatch) -> Path:
    """``train_here`` in ``tmp_path/train``; the test then runs in ``tmp_path/elsewhere``."""
    (tmp_path / "train").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "train")
    checkpoint = train_here(tiny)
    monkeypatch.chdir(tmp_path / "elsewhere")
    return checkpoint


def without_location(checkpoint: Path) -> Path:
    """The checkpoint as saved before the data's location was recorded."""
    raw = read_checkpoint(checkpoint)
    del raw["datamodule_hyper_parameters"][DATA_LOCATION]
    old = checkpoint.with_name("old.ckpt")
    torch.save(raw, old)
    return old


# -- hypotheses named after what was scored --------------------------------------------------


def test_sources_of_one_stem_never_share_a_name_with_each_other_or_a_split(tmp_path):
    a, b = tmp_path / "a" / "test.en", tmp_path / "b" / "test.en"
    ref = tmp_path / "test.zh"
    names = {files_name(a, ref), files_name(b, ref), files_name(a, ref, ref), "test", "dev"}
    assert len(names) == 5
    assert files_name(a, ref).startswith("test-") and files_name(a, ref) == files_name(a, ref)
    ckpt = tmp_path / "last.ckpt"
    assert hypotheses_path(ckpt, "test") == tmp_path / "last.test.hyp.zh"
    assert hypotheses_path(ckpt, files_name(a, ref)).name == f"last.{files_name(a, ref)}.hyp.zh"
    other_data = hypotheses_path(ckpt, "test", data_from=tmp_path / "demo.ckpt")
    assert re.fullmatch(r"last\.test-of-demo-[0-9a-f]{8}\.hyp\.zh", other_data.name)


def test_the_eval_set_label_says_what_was_scored():
    assert eval_set_label("test") == "test"
    assert eval_set_label("test-3f2a9c1d", src="data/test.en") == "data/test.en"
    assert eval_set_label("test", data_from="runs/demo/last.ckpt") == (
        "test split of runs/demo/last.ckpt"
    )


def test_split_then_source_of_its_name_write_two_files(trained, tmp_path, capsys):
    src, ref = Path("test.en"), Path("test.zh")
    pairs = synthetic_pairs()[:5]
    src.write_text("".join(en + "\n" for en, _ in pairs), encoding="utf-8")
    ref.write_text("".join(zh + "\n" for _, zh in pairs), encoding="utf-8")
    base = ["evaluate", "--checkpoint", str(trained), *SHORT]
    assert main([*base, "--split", "test"]) == 0
    split_run = json.loads(capsys.readouterr().out)
    assert main([*base, "--src", str(src), "--ref", str(ref)]) == 0
    source_run = json.loads(capsys.readouterr().out)
    split_hyps, source_hyps = Path(split_run["hypotheses"]), Path(source_run["hypotheses"])
    assert split_hyps.name == "last.test.hyp.zh" and split_hyps != source_hyps
    assert len(split_hyps.read_text(encoding="utf-8").splitlines()) == split_run["sentences"] > 5
    assert len(source_hyps.read_text(encoding="utf-8").splitlines()) == 5
    assert split_run["eval_set"] == "test"
    _, _, name = load_eval_set(trained, src=str(src), refs=[str(ref)])
    assert source_hyps == hypotheses_path(trained, name)


# -- --split from any directory --------------------------------------------------------------


def test_split_is_found_from_another_directory_without_reading_the_corpus(trained, tmp_path):
    expected = held_out_split(trained, "test")  # nothing to prepare: the recorded cache
    (tmp_path / "train" / "pairs.tsv").unlink()  # the cache alone is enough
    lines = []
    assert held_out_split(trained, "test", lines.append) == expected
    assert expected[0] and lines == []


def test_a_moved_project_finds_its_cache_under_cache_dir(trained, tmp_path, monkeypatch):
    expected = held_out_split(trained, "test")
    shutil.move(tmp_path / "train", tmp_path / "moved")
    monkeypatch.chdir(tmp_path / "moved")
    lines = []
    assert held_out_split(Path("run/last.ckpt"), "test", lines.append) == expected
    assert lines == []


def test_without_its_cache_the_split_is_prepared_from_the_recorded_corpus(trained, tmp_path):
    expected = held_out_split(trained, "test")
    shutil.rmtree(tmp_path / "train" / "cache")
    lines = []
    assert held_out_split(trained, "test", lines.append) == expected
    assert lines[0].startswith("preparing the data once (cached in ")
    assert lines[-1].startswith("data prepared in ")
    stages = [line.strip() for line in lines[1:-1]]
    assert stages[0] == f"reading {tmp_path / 'train' / 'pairs.tsv'}"
    assert "cleaning 961 pairs" in stages and any(s.startswith("split: train ") for s in stages)
    assert "tokenizing 961 pairs" in " ".join(stages)
    again = []
    assert held_out_split(trained, "test", again.append) == expected and again == []


def test_a_lost_cache_comes_back_under_its_own_name_where_training_ran(
    trained, tmp_path, monkeypatch
):
    location = read_checkpoint(trained)["datamodule_hyper_parameters"][DATA_LOCATION]
    shutil.rmtree(tmp_path / "train" / "cache")
    monkeypatch.chdir(tmp_path / "train")
    held_out_split(trained, "test", progress=lambda line: None)
    # the corpus as given (not its absolute path): the cache name fit computes there
    assert (Path(location["cache_dir"]) / location["cache_name"] / "report.json").is_file()


def test_evaluate_prints_the_preparation_on_stderr(trained, tmp_path, capsys):
    shutil.rmtree(tmp_path / "train" / "cache")
    code = main(["evaluate", "--checkpoint", str(trained), "--split", "dev", *SHORT])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["eval_set"] == "dev"
    assert "preparing the data once (cached in " in captured.err
    assert "  cleaning 961 pairs" in captured.err and "data prepared in " in captured.err


def test_a_checkpoint_saved_before_locations_were_recorded(trained, tmp_path, monkeypatch):
    old = without_location(trained)
    monkeypatch.chdir(tmp_path / "train")  # where training ran: as before
    expected = held_out_split(old, "test")
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(DataError, match=r"no pairs\.tsv in .*elsewhere\)"):
        held_out_split(old, "test")
    assert expected[0]


def test_data_that_is_nowhere_is_a_one_line_error_naming_what_was_looked_for(
    trained, tmp_path, capsys
):
    shutil.rmtree(tmp_path / "train" / "cache")
    (tmp_path / "train" / "pairs.tsv").unlink()
    errors = {}
    for checkpoint in (trained, without_location(trained)):
        code = main(["evaluate", "--checkpoint", str(checkpoint), "--split", "test"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err, err
        assert err.startswith(f"seq2seq evaluate: error: {checkpoint}: the data it was trained ")
        assert f"pairs.tsv in {tmp_path / 'elsewhere'})" in err
        assert err.endswith("; evaluate with --src and --ref files instead")
        errors[checkpoint.name] = err
    recorded = read_checkpoint(trained)["datamodule_hyper_parameters"][DATA_LOCATION]
    cache = Path(recorded["cache_dir"]) / recorded["cache_name"]
    assert f"no cache {cache}, no {recorded['path']}, no pairs.tsv in " in errors["last.ckpt"]
    assert "no cache" not in errors["old.ckpt"]  # nothing recorded: the path as given only


@pytest.mark.slow
def test_fit_records_where_its_data_is(run):
    hparams = read_checkpoint(run / "checkpoints" / "last.ckpt")["datamodule_hyper_parameters"]
    location = hparams[DATA_LOCATION]
    cache = Path(location["cache_dir"]) / location["cache_name"]
    assert cache.is_absolute() and (cache / "report.json").is_file()
    assert location["path"] == str(Path(hparams["path"]).resolve())
    assert location["tgt_path"] is None and location["hf_name"] is None
