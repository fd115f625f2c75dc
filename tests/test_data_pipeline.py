"""The preparation pipeline on Arrow tables (``datasets``): same results as the plain list
pipeline, the same for any number of processes and any source, safe when killed or raced, and
one memory-mapped copy of the ids shared by the ranks."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from seq2seq.data import tables
from seq2seq.data.cache_dir import is_prepared
from seq2seq.data.clean import clean_pairs
from seq2seq.data.datamodule import TranslationDataModule
from seq2seq.data.sources import _load_hsk, _load_tatoeba
from seq2seq.data.split import SPLITS, split_pairs
from seq2seq.data.tokenizer import EOS_ID, Tokenizer

MAX_LEN = 24


@pytest.fixture(scope="module")
def pairs():
    """Real pairs with everything cleaning and the split handle: traditional script, repeats,
    an empty side, an over-long side, a gross length mismatch, English with two translations."""
    real = _load_tatoeba()[:5000] + _load_hsk()[:1500]
    odd = [("Hello.", "你好。")] * 3 + [("", "空的。"), ("x" * 500, "长。"), ("A.", "甲" * 30)]
    return real + odd


@pytest.fixture(scope="module")
def tsv(pairs, tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "pairs.tsv"
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in pairs), encoding="utf-8")
    return path


def datamodule(cache_dir, **kwargs):
    settings = dict(corpus="tsv", vocab_size=3000, max_len=MAX_LEN, max_tokens=512, num_proc=1)
    return TranslationDataModule(cache_dir=str(cache_dir), **{**settings, **kwargs})


@pytest.fixture(scope="module")
def prepared(tsv, tmp_path_factory):
    dm = datamodule(tmp_path_factory.mktemp("cache"), path=str(tsv))
    dm.setup()
    return dm


def cache_files(cache: Path) -> dict[str, bytes]:
    """Every file of a cache by relative path; the report without its timing."""
    files = {str(p.relative_to(cache)): p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    report = json.loads(files.pop("report.json"))
    del report["tokenizer_seconds"], report["corpus"]
    files["report.json"] = json.dumps(report, sort_keys=True).encode()
    return files


def test_the_arrays_pipeline_equals_the_list_pipeline(prepared, pairs):
    """Cleaning with sets of strings, the split on lists, SentencePiece on every training
    sentence and encoding pair by pair: what preparation did before it ran on tables."""
    cleaned, report = clean_pairs(pairs)
    splits = split_pairs(cleaned)
    assert prepared.report["clean"] == report.to_dict()
    assert prepared.report["split"] == {name: len(split) for name, split in splits.items()}
    train_texts = [text for pair in splits["train"] for text in pair]
    tokenizer = Tokenizer.train(train_texts, 3000, seed=1)
    assert (prepared.cache_path / "spm.model").read_bytes() == tokenizer.to_bytes()
    for name in SPLITS:
        assert prepared.split_texts(name) == tuple(map(list, zip(*splits[name], strict=True)))
        expected = [
            (tokenizer.encode(en) + [EOS_ID], tokenizer.encode(zh)) for en, zh in splits[name]
        ]
        if name != "test":  # test keeps every pair
            expected = [(s, t) for s, t in expected if max(len(s), len(t)) <= MAX_LEN]
        data = prepared.dataset(name)
        assert [data[i] for i in range(len(data))] == expected
        assert prepared.report["too_long"][name] == len(splits[name]) - len(expected)


def test_sources_end_with_eos_and_the_report_says_so(prepared):
    assert prepared.report["source_ends_with_eos"] is True
    assert prepared.tokenizer.source_ends_with_eos
    src, tgt = prepared.dataset("train")[0]
    assert src[-1] == EOS_ID and EOS_ID not in tgt


def test_ids_are_memory_mapped_and_the_length_order_is_stored(prepared):
    data = prepared.dataset("train")
    ids = data._ids["src"]
    assert (
        isinstance(ids, np.memmap) and Path(ids.filename) == prepared.cache_path / "train/src.npy"
    )
    lengths = prepared.layout.lengths(data)
    assert isinstance(lengths, np.memmap)
    assert np.array_equal(
        lengths, np.maximum(data.side_lengths("src"), data.side_lengths("tgt")) + 1
    )
    assert np.array_equal(prepared.layout.order(data), np.argsort(lengths, kind="stable"))


def test_one_and_two_processes_write_the_same_cache(tsv, prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "ROWS_PER_PROCESS", 1000)  # two workers even for these pairs
    dm = datamodule(tmp_path, path=str(tsv), num_proc=2)
    dm.prepare_data()
    assert dm.cache_path.name == prepared.cache_path.name  # num_proc is not in the cache key
    assert cache_files(dm.cache_path) == cache_files(prepared.cache_path)


@pytest.mark.parametrize("streaming", [False, True], ids=["saved", "streaming"])
def test_a_datasets_corpus_prepares_like_the_same_pairs_in_a_tsv(
    pairs, prepared, tmp_path, streaming
):
    import datasets

    rows = [{"translation": {"en": en, "zh": zh}} for en, zh in pairs]
    directory = tmp_path / "hub-shaped"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(directory)
    dm = datamodule(tmp_path / "cache", corpus="hf", hf_name=str(directory), hf_streaming=streaming)
    dm.prepare_data()
    assert cache_files(dm.cache_path) == cache_files(prepared.cache_path)


PREPARE = """
import sys
from seq2seq.data.datamodule import TranslationDataModule
dm = TranslationDataModule(corpus="tsv", path=sys.argv[1], cache_dir=sys.argv[2], vocab_size=3000,
                           max_len=24, max_tokens=512, num_proc=1)
dm.prepare_data()
print(dm.cache_path)
"""


def start_preparing(tsv: Path, cache_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PREPARE, str(tsv), str(cache_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow  # subprocesses that import Lightning: seconds each
def test_a_killed_preparation_leaves_no_cache_and_the_next_one_cleans_up(tsv, tmp_path):
    process = start_preparing(tsv, tmp_path)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("*.tmp-*/tables")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob("*.tmp-*")), "the preparation never started"
    process.send_signal(signal.SIGKILL)
    process.wait()
    caches = [p for p in tmp_path.iterdir() if ".tmp-" not in p.name]
    assert caches == []  # half-written work is only ever under a temporary name
    dm = datamodule(tmp_path, path=str(tsv))
    dm.prepare_data()
    assert is_prepared(dm.cache_path)
    assert [p.name for p in tmp_path.iterdir()] == [dm.cache_path.name]  # the dead one's removed


@pytest.mark.slow  # subprocesses that import Lightning: seconds each
def test_two_preparers_racing_leave_one_good_cache(tsv, prepared, tmp_path):
    racers = [start_preparing(tsv, tmp_path) for _ in range(2)]
    outputs = [racer.communicate(timeout=300) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], [err for _, err in outputs]
    (cache,) = tmp_path.iterdir()
    assert {out.strip() for out, _ in outputs} == {str(cache)}
    assert cache_files(cache) == cache_files(prepared.cache_path)


def test_a_malformed_line_is_one_error_naming_file_and_line(tmp_path):
    from seq2seq.errors import DataError

    path = tmp_path / "bad.tsv"
    path.write_text("Hi.\t嗨。\nno tab here\nBye.\t再见。\n", encoding="utf-8")
    with pytest.raises(DataError) as error:
        datamodule(tmp_path / "cache", path=str(path)).prepare_data()
    assert str(error.value) == f"{path}:2: expected 2 tab-separated fields, found 1"
    assert not any((tmp_path / "cache").iterdir())


def test_preparing_once_per_node_or_once_per_job_is_a_setting(tsv, tmp_path):
    assert datamodule(tmp_path, path=str(tsv)).prepare_data_per_node is True
    assert (
        datamodule(tmp_path, path=str(tsv), prepare_per_node=False).prepare_data_per_node is False
    )


RANK = """
import json, os, sys
import torch.distributed as dist
from seq2seq.data.datamodule import TranslationDataModule

rank = int(sys.argv[3])
dist.init_process_group("gloo", init_method=f"file://{sys.argv[4]}", rank=rank, world_size=2)


class Trainer:  # what the data module reads of Lightning's trainer
    world_size, global_rank = 2, rank


dm = TranslationDataModule(corpus="tsv", path=sys.argv[1], cache_dir=sys.argv[2], vocab_size=3000,
                           max_len=24, max_tokens=512, num_proc=1)
dm.setup()
dm.trainer = Trainer()
batches = list(dm.train_dataloader().batch_sampler)
everyone = [None, None]
dist.all_gather_object(everyone, batches)
mapped = sorted({line.split()[-1] for line in open("/proc/self/maps") if line.endswith(".npy\\n")})
print(json.dumps({"batches": everyone, "mapped": mapped, "n": len(dm.dataset("train"))}))
"""


@pytest.mark.slow  # subprocesses that import Lightning: seconds each
def test_two_ranks_map_one_copy_and_build_disjoint_batches_covering_the_epoch(
    prepared, tsv, tmp_path
):
    ranks = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                RANK,
                str(tsv),
                str(prepared.cache_path.parent),
                str(rank),
                str(tmp_path / "rendezvous"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        for rank in range(2)
    ]
    outputs = [rank.communicate(timeout=300) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], [err[-2000:] for _, err in outputs]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    train = str(prepared.cache_path / "train")
    for result in results:  # both map the cache's files: one copy in the page cache
        assert {f"{train}/src.npy", f"{train}/tgt.npy"} <= set(result["mapped"])
    mine, theirs = results[0]["batches"]
    assert results[1]["batches"] == [mine, theirs]  # each rank built its own, they agree
    assert len(mine) == len(theirs)  # lockstep
    seen = [i for batch in mine + theirs for i in batch]
    assert set(seen) == set(range(results[0]["n"]))  # the epoch is covered ...
    repeats = len(seen) - len(set(seen))
    assert repeats <= max(map(len, mine + theirs))  # ... each pair once, bar the padding batch
