"""TranslationDataModule: prepare → cache → loaders, and mid-epoch resume under Lightning."""

import json
import logging
import time
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback, LightningModule

from seq2seq.data import UNK_ID, Batch, DataError, Tokenizer, TranslationDataModule, prepare
from seq2seq.data.data_location import DATA_LOCATION
from seq2seq.data.split import split_name
from tests.helpers import quiet_trainer, synthetic_pairs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "pairs.tsv"
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), encoding="utf-8")
    return path


def make_dm(corpus, cache_dir, **kwargs):
    args = dict(corpus="tsv", path=str(corpus), vocab_size=556, max_tokens=256, max_len=40)
    return TranslationDataModule(cache_dir=str(cache_dir), **{**args, **kwargs})


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    dm = make_dm(corpus, tmp_path_factory.mktemp("cache"))
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_prepare_writes_cache_and_report(prepared):
    files = {p.name for p in prepared.cache_path.iterdir()}
    assert {"spm.model", "report.json", "train", "dev", "test"} <= files
    arrays = {"src", "tgt", "src_offsets", "tgt_offsets", "lengths", "order"}
    assert {p.stem for p in (prepared.cache_path / "train").iterdir()} == arrays
    assert not (prepared.cache_path / "tables").exists()  # the Arrow scratch tables are gone
    assert {f"{s}.{lang}" for s in ("train", "dev", "test") for lang in ("en", "zh")} <= files
    assert not list(prepared.cache_path.parent.glob("*.tmp-*"))
    report = json.loads((prepared.cache_path / "report.json").read_text())
    assert report["clean"]["total"] == 961 and report["clean"]["duplicate"] == 1
    assert sum(report["split"].values()) + report["held_out_english_dropped"] == 960
    assert report == prepared.report


def test_prepare_data_reports_each_stage(corpus, tmp_path):
    lines = []
    dm = make_dm(corpus, tmp_path)
    dm.prepare_data(lines.append)
    assert lines[0] == f"preparing the data once (cached in {dm.cache_path})"
    assert lines[1:4] == [
        f"  reading {corpus}",
        "  cleaning 961 pairs",
        "  split: train 923, dev 24, test 13 pairs",
    ]
    assert lines[4].startswith("  training the tokenizer: 556 pieces on ")
    assert lines[5] == "  tokenizing 961 pairs"
    assert lines[6].startswith("data prepared in ") and len(lines) == 7
    dm.prepare_data(lines.append)  # cached: nothing to say
    assert len(lines) == 7
    log = logging.getLogger(prepare.__name__)  # left as it was
    assert not log.handlers and log.propagate and log.level == logging.NOTSET


def test_setup_records_where_the_data_was_found(prepared, corpus):
    location = prepared.hparams[DATA_LOCATION]
    assert Path(location["cache_dir"]) / location["cache_name"] == prepared.cache_path.resolve()
    assert location["path"] == str(corpus.resolve()) and location["tgt_path"] is None
    assert location["hf_name"] is None


def test_trained_with_reads_the_recorded_cache_without_the_corpus(prepared, tmp_path):
    gone = str(tmp_path / "gone.tsv")
    hparams = {**prepared.hparams, "path": gone, "_instantiator": "lightning"}
    hparams[DATA_LOCATION] = {**hparams[DATA_LOCATION], "path": gone}
    dm = TranslationDataModule.trained_with(hparams, tmp_path / "last.ckpt")
    assert dm.cache_path == prepared.cache_path.resolve()
    assert dm.split_texts("test") == prepared.split_texts("test")
    with pytest.raises(DataError, match="not a prepared data cache"):
        dm.use_cache(tmp_path)


def test_tokenizer_and_splits(prepared):
    assert prepared.tokenizer.vocab_size == prepared.vocab_size == 556
    for split in ("train", "dev", "test"):
        en, zh = prepared.split_texts(split)
        assert len(en) == len(zh) == prepared.report["split"][split]
        assert all(split_name(z) == split for z in zh)
    en, zh = prepared.split_texts("test")
    src, tgt = prepared.dataset("test")[0]
    assert prepared.tokenizer.decode(src) == en[0] and prepared.tokenizer.decode(tgt) == zh[0]


def test_second_prepare_hits_cache(prepared, corpus):
    again = make_dm(corpus, prepared.cache_dir)
    assert again.cache_path == prepared.cache_path and again.is_prepared()
    start = time.perf_counter()
    again.prepare_data()
    again.setup("fit")
    assert time.perf_counter() - start < 1.0
    assert again.tokenizer.to_bytes() == prepared.tokenizer.to_bytes()
    assert make_dm(corpus, prepared.cache_dir, vocab_size=566).cache_path != prepared.cache_path


def test_a_new_pipeline_version_never_reuses_an_old_cache(prepared, corpus, monkeypatch):
    current = prepared.cache_path
    monkeypatch.setattr(prepare, "CACHE_VERSION", prepare.CACHE_VERSION - 1)
    assert make_dm(corpus, prepared.cache_dir).cache_path != current


def test_the_tokenizer_spells_unseen_characters_in_bytes(prepared):
    text = "蜻蜓 😀 Привет"  # none of it in the corpus
    ids = prepared.tokenizer.encode(text)
    assert UNK_ID not in ids and prepared.tokenizer.decode(ids) == text


def test_max_len_drops_are_counted(prepared, corpus, tmp_path):
    lengths = sorted(prepared.dataset("train").lengths().tolist())  # (longer side + 1) per pair
    max_len = lengths[len(lengths) // 2] - 1
    dm = make_dm(corpus, tmp_path, max_len=max_len)
    dm.setup()  # prepares on demand outside a Trainer
    dropped = dm.report["too_long"]
    assert dropped["train"] > 0 and dropped["test"] == 0
    assert len(dm.dataset("train")) == dm.report["split"]["train"] - dropped["train"]
    assert max(dm.dataset("train").lengths()) <= max_len + 1
    assert dropped["train"] == sum(n > max_len + 1 for n in lengths)


def test_loaders(prepared):
    loader = prepared.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader)
    assert all(
        isinstance(b, Batch)
        and b.src.numel()
        and len(b) * max(b.src.size(1), b.tgt_in.size(1)) <= 256
        for b in batches
    )
    assert sum(len(b) for b in batches) == len(prepared.dataset("train"))
    val = list(prepared.val_dataloader())
    assert sum(len(b) for b in val) == len(prepared.dataset("dev"))


def test_bad_corpus_errors(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\nc\td\te\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.tsv:2: expected 2 tab-separated fields"):
        make_dm(bad, tmp_path / "c").prepare_data()
    empty = tmp_path / "empty.tsv"
    empty.write_text("\t你好\nHi.\t \n", encoding="utf-8")  # each pair has an empty side
    with pytest.raises(DataError, match=r"empty\.tsv: no training pairs left"):
        make_dm(empty, tmp_path / "c").prepare_data()
    assert not list((tmp_path / "c").iterdir())  # nothing half-written left behind
    with pytest.raises(ValueError, match="max_tokens"):
        make_dm(bad, tmp_path, max_tokens=16, max_len=20)


class Recorder(LightningModule):
    """Records each training batch's source ids; learns nothing useful."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen = []

    def training_step(self, batch, batch_idx):
        assert isinstance(batch, Batch)
        self.seen.append((self.current_epoch, batch.src.tolist()))
        return self.w.sum() * batch.n_tgt_tokens

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


class SaveAtStep(Callback):
    """Saves a checkpoint right after training step ``step``, as a preempted job would."""

    def __init__(self, step, path):
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def fit(dm, max_steps=-1, ckpt_path=None, callbacks=()):
    model = Recorder()
    trainer = quiet_trainer(
        max_epochs=2,
        max_steps=max_steps,
        devices=1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
    )
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return model.seen


@pytest.fixture(scope="module")
def uninterrupted(prepared, corpus):
    return fit(make_dm(corpus, prepared.cache_dir))


@pytest.mark.slow
def test_lightning_sets_epoch_every_epoch(prepared, uninterrupted):
    epoch0 = [src for e, src in uninterrupted if e == 0]
    epoch1 = [src for e, src in uninterrupted if e == 1]
    assert len(epoch0) == len(epoch1) == len(prepared.train_dataloader())
    assert epoch0 != epoch1  # Lightning called loader.sampler.set_epoch(1)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["first epoch", "epoch end", "second epoch"])
def test_lightning_resumes_exactly(prepared, corpus, uninterrupted, tmp_path, where):
    n = len(prepared.train_dataloader())
    stop = {"first epoch": 3, "epoch end": n, "second epoch": n + 3}[where]
    ckpt = tmp_path / "preempted.ckpt"
    first = fit(make_dm(corpus, prepared.cache_dir), stop, callbacks=[SaveAtStep(stop, ckpt)])
    loops = torch.load(ckpt, weights_only=False)["loops"]["fit_loop"]
    assert loops["state_dict"]["combined_loader"] == [
        {"epoch": stop // (n + 1), "batches_yielded": stop - n * (stop // (n + 1))}
    ]
    rest = fit(make_dm(corpus, prepared.cache_dir), ckpt_path=ckpt)
    assert first + rest == uninterrupted


def test_tokenizer_in_cache_is_plain_sentencepiece(prepared):
    tok = Tokenizer.load(prepared.cache_path / "spm.model")
    assert tok.encode("我今天会买苹果。") == prepared.tokenizer.encode("我今天会买苹果。")
