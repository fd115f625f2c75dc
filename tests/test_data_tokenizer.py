"""The joint SentencePiece tokenizer: fixed specials, exact size, lossless round trips."""

import pytest

from seq2seq.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, clean_pairs

VOCAB = 3000  # HSK needs ~1.8k single characters at 0.9995 coverage


@pytest.fixture(scope="module")
def hsk_pairs():
    hsk = pytest.importorskip("hsk_sentences_audio")
    import json
    from pathlib import Path

    rows = json.loads((Path(hsk.__file__).parent / "data" / "sentences.json").read_text("utf-8"))
    pairs, _ = clean_pairs((row["translation"]["en"], row["chinese"]) for row in rows)
    return pairs


@pytest.fixture(scope="module")
def tokenizer(hsk_pairs):
    return Tokenizer.train([text for pair in hsk_pairs for text in pair], vocab_size=VOCAB)


def test_special_ids_and_exact_vocab_size(tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert tokenizer.vocab_size == VOCAB
    assert [tokenizer.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


def test_round_trip_both_languages(tokenizer, hsk_pairs):
    for en, zh in hsk_pairs[::50]:
        for text in (en, zh):
            ids = tokenizer.encode(text)
            assert ids and not {PAD_ID, BOS_ID, EOS_ID} & set(ids)
            if UNK_ID not in ids:
                assert tokenizer.decode(ids) == text


def test_chinese_decodes_without_spaces(tokenizer):
    text = "我们明天去北京，好吗？"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    # Only the sentence-initial piece carries the word-boundary mark "▁" (dropped on decode).
    pieces = [tokenizer.id_to_piece(i) for i in tokenizer.encode(text)]
    assert all("▁" not in piece for piece in pieces[1:])


def test_decode_strips_specials_and_stops_at_eos(tokenizer):
    ids = tokenizer.encode("Hello, teacher!")
    noisy = [BOS_ID, *ids, EOS_ID, *tokenizer.encode("junk"), PAD_ID, PAD_ID]
    assert tokenizer.decode(noisy) == "Hello, teacher!"
    assert tokenizer.encode_batch(["Hello, teacher!", "你好"]) == [ids, tokenizer.encode("你好")]


def test_serialization(tokenizer, tmp_path):
    again = Tokenizer.from_bytes(tokenizer.to_bytes())
    tokenizer.save(tmp_path / "spm.model")
    loaded = Tokenizer.load(tmp_path / "spm.model")
    for tok in (again, loaded):
        assert tok.encode("老师，您好！") == tokenizer.encode("老师，您好！")
        assert tok.vocab_size == VOCAB


def test_training_is_deterministic(hsk_pairs, tokenizer):
    texts = [text for pair in hsk_pairs for text in pair]
    assert Tokenizer.train(texts, vocab_size=VOCAB).to_bytes() == tokenizer.to_bytes()


def test_too_small_corpus_for_vocab_raises():
    with pytest.raises(RuntimeError):
        Tokenizer.train(["ab", "ba"], vocab_size=5000)
