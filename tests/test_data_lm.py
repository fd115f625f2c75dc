"""Data for decoder-only models: packed language-model blocks and joined translation pairs."""

import json

import numpy as np
import pytest
import torch

from seq2seq.config import ModelConfig
from seq2seq.data import DataError
from seq2seq.data.batching import collate_blocks, collate_joined
from seq2seq.data.datamodule import TranslationDataModule
from seq2seq.data.lm import clean_document_batch, pack_flat
from seq2seq.data.sources import CorpusSpec, text_batches
from seq2seq.decoding.decode import translation_prompt
from seq2seq.errors import ConfigError
from tests.helpers import synthetic_pairs

PAD, BOS, EOS, SEP = 0, 2, 3, 4


def test_packed_blocks_predict_every_token_once_with_document_boundaries():
    docs = [[10, 11, 12], [20], [30, 31, 32, 33, 34], [40, 41]]
    stream = [t for doc in docs for t in (BOS, *doc, EOS)]  # 19 tokens
    ids, lengths = [t for doc in docs for t in doc], [len(doc) for doc in docs]
    blocks = pack_flat(np.array(ids), np.array(lengths), 4, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert blocks.shape == (5, 5)  # ceil(18 / 4) blocks of 4 + 1
    batch = collate_blocks(list(blocks))
    inputs, targets = batch.tgt_in.tolist(), batch.tgt_out.tolist()
    predicted = [t for row in targets for t in row if t != PAD]
    assert predicted == stream[1:]  # every token but the first is a target exactly once
    # Each target is the token after its input in the stream.
    pairs = zip(inputs, targets, strict=True)
    fed = [t for row, out in pairs for t, o in zip(row, out, strict=True) if o]
    assert fed == stream[:-1]
    assert blocks[1, 0] == blocks[0, -1]  # consecutive blocks overlap by one token
    assert batch.n_tgt_tokens == len(stream) - 1 and batch.src.shape == (5, 0)


def test_documents_are_normalised_flagged_empty_and_keyed_for_deduplication():
    cleaned = clean_document_batch(["我們走吧!", "  ", "我们走吧！", "你好。"], "zh")
    assert cleaned["text"][0] == "我们走吧！"  # traditional -> simplified, full-width punctuation
    assert cleaned["empty"] == [False, True, False, False]
    keys = list(zip(cleaned["key_hi"].tolist(), cleaned["key_lo"].tolist(), strict=True))
    assert keys[0] == keys[2] and len(set(keys)) == 3  # the same text after cleaning, one key


def test_joined_pairs_put_the_loss_on_exactly_the_target():
    batch = collate_joined([([10, 11, 12], [20, 21]), ([13], [22, 23, 24])], sep_id=SEP)
    assert batch.tgt_in.tolist() == [[BOS, 10, 11, 12, SEP, 20, 21], [BOS, 13, SEP, 22, 23, 24, 0]]
    assert batch.tgt_out.tolist() == [[0, 0, 0, 0, 20, 21, EOS], [0, 0, 22, 23, 24, EOS, 0]]
    loss_mask = batch.tgt_out != PAD
    # The positions under the loss are those fed the separator or a target token.
    fed = batch.tgt_in[loss_mask].tolist()
    assert fed == [SEP, 20, 21, SEP, 22, 23, 24]
    assert batch.n_tgt_tokens == int(loss_mask.sum()) == 7
    # The prompt translation feeds is the same prefix the model was trained on.
    config = ModelConfig(vocab_size=32, sep_id=SEP)
    assert batch.tgt_in[0, :5].tolist() == translation_prompt([10, 11, 12], config)


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def load_texts(spec: CorpusSpec, side: str = "zh", text_field: str | None = None) -> list[str]:
    """All of a corpus's monolingual text, as the language-model pipeline reads it."""
    return [text for batch in text_batches(spec, side, text_field) for text in batch]


def test_monolingual_text_from_files_jsonl_fields_and_one_side_of_pairs(tmp_path):
    text = write(tmp_path / "mono.txt", "第一行。\n\n第二行。\n")
    assert load_texts(CorpusSpec(kind="text", path=str(text))) == ["第一行。", "", "第二行。"]
    jsonl = write(tmp_path / "docs.jsonl", json.dumps({"text": "文档。"}) + "\n")
    spec = CorpusSpec(kind="jsonl", path=str(jsonl))
    assert load_texts(spec, text_field="text") == ["文档。"]
    tsv = write(tmp_path / "pairs.tsv", "Hello.\t你好。\n")
    spec = CorpusSpec(kind="tsv", path=str(tsv))
    assert load_texts(spec, "zh") == ["你好。"] and load_texts(spec, "en") == ["Hello."]
    with pytest.raises(DataError, match="lm_side 'fr'"):
        load_texts(spec, "fr")
    bad = write(tmp_path / "bad.jsonl", '{"text": "ok"}\n{"body": 1}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: missing string key 'text'"):
        load_texts(CorpusSpec(kind="jsonl", path=str(bad)), text_field="text")
    empty = write(tmp_path / "empty.txt", "\n \n")
    dm = TranslationDataModule(
        corpus="text", path=str(empty), task="lm", decoder_only=True, cache_dir=str(tmp_path)
    )
    with pytest.raises(DataError, match="corpus is empty"):
        dm.prepare_data()


def test_hf_text_column_from_a_saved_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    path = tmp_path / "wiki"
    datasets.Dataset.from_dict({"text": ["甲。", "乙。"]}).save_to_disk(str(path))
    spec = CorpusSpec(kind="hf", hf_name=str(path))
    assert load_texts(spec, text_field="text") == ["甲。", "乙。"]
    with pytest.raises(DataError, match="no 'body' column"):
        load_texts(spec, text_field="body")


@pytest.fixture(scope="module")
def chinese_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "zh.txt"
    # A blank document, and the synthetic pairs' traditional duplicate: both cleaned away.
    path.write_text(" \n" + "".join(zh + "\n" for _, zh in synthetic_pairs()), encoding="utf-8")
    return path


def test_language_model_datamodule_packs_blocks_and_caches_them(tmp_path, chinese_text):
    dm = TranslationDataModule(
        corpus="text",
        path=str(chinese_text),
        task="lm",
        decoder_only=True,
        block_size=16,
        vocab_size=376,
        max_tokens=17 * 8,
        cache_dir=str(tmp_path),
    )
    dm.prepare_data()
    dm.setup("fit")
    assert dm.cache_path.name.startswith("lm-text-")
    assert dm.report["blocks"]["train"] == len(dm.dataset("train"))
    assert dm.report["clean"] == {"total": 962, "empty": 1, "duplicates": 1, "kept": 960}
    split = dm.report["split"]  # by each document's hash
    assert sum(split.values()) == 960 and split["dev"] and split["test"]
    batch = next(iter(dm._loader("train", shuffle=True)))
    assert batch.tgt_in.shape == (8, 16) and batch.tgt_out.shape == (8, 16)
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert (batch.tgt_in == BOS).any() and (batch.tgt_out == EOS).any()
    with pytest.raises(ValueError, match="no translation pairs"):
        dm.split_texts("test")


def test_decoder_only_translation_data_has_a_separator_piece(tmp_path):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), "utf-8")
    settings = {"corpus": "tsv", "path": str(corpus), "cache_dir": str(tmp_path)}
    sizes = {"vocab_size": 456, "max_tokens": 600, "max_len": 40}
    dm = TranslationDataModule(decoder_only=True, **settings, **sizes)
    plain = TranslationDataModule(**settings, **sizes)
    assert dm.cache_path != plain.cache_path
    dm.setup("fit")
    sep = dm.tokenizer.sep_id
    assert sep is not None and sep not in {
        t for en, _ in synthetic_pairs()[:50] for t in dm.tokenizer.encode(en)
    }
    batch = next(iter(dm._loader("dev", shuffle=False)))
    assert ((batch.tgt_in == sep).sum(dim=1) == 1).all()  # one separator per sequence
    # The token budget counts the joined sequence: [bos] src [sep] tgt.
    src, tgt = dm.dataset("train")[0]
    assert dm.layout.lengths(dm.dataset("train"))[0] == len(src) + len(tgt) + 2


def test_language_model_task_needs_the_decoder_only_flag(tmp_path):
    with pytest.raises(ConfigError, match="needs a decoder-only model"):
        TranslationDataModule(task="lm", cache_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="data.task must be one of"):
        TranslationDataModule(task="summarise", cache_dir=str(tmp_path))
