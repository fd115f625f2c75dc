"""End to end through ``seq2seq export`` on the small fitted run (conftest's ``run``): the
Hugging Face export gives our logits and greedy translations, the CTranslate2 one our
translations through ``seq2seq translate --engine ctranslate2``."""

from __future__ import annotations

import json

import pytest
import torch

from seq2seq.cli import main
from seq2seq.inference.evaluation import score_translations
from seq2seq.inference.options import TranslateOptions
from seq2seq.inference.translator import Translator
from tests.helpers import checkpoint_command, synthetic_pairs

pytestmark = pytest.mark.slow


def test_export_hf_gives_the_same_logits_and_greedy_translations(run, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    checkpoint = run / "checkpoints" / "last.ckpt"
    out = tmp_path / "hf"
    scores = score_translations(["我会买茶。"], [["我会买茶。"]])
    eval_json = tmp_path / "eval.json"
    eval_json.write_text(json.dumps({**scores, "eval_set": "test", "sentences": 1, "beam_size": 5}))
    options = ("--format", "hf", "--output", out, "--eval-json", eval_json)
    assert main(checkpoint_command("export", checkpoint, *options)) == 0
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
    expected = translator.translate(sentences, TranslateOptions(beam_size=1))
    tokenizer = transformers.MarianTokenizer.from_pretrained(out)
    assert translator.tokenizer.source_ends_with_eos  # a model fit now reads sources with </s>
    assert "warning" not in capsys.readouterr().err
    for sentence, want in zip(sentences, expected, strict=True):
        ids = tokenizer(sentence, return_tensors="pt").input_ids
        assert ids[0, -1] == 3 and ids[0].tolist() == translator.encode([sentence])[0]
        # Our limit: a * source length + b tokens, eos included (generate's max_length counts
        # the start token too); the eos is forced at the last position, as ours is.
        limit = int(translator.search.max_lengths(torch.tensor([ids.shape[1]]))[0])
        with torch.no_grad():
            generated = marian.generate(
                input_ids=ids, num_beams=1, do_sample=False, max_length=limit + 1
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
    options = ("--format", "ctranslate2", "--output", out)
    assert main(checkpoint_command("export", checkpoint, *options)) == 0
    lines = [en for en, _ in synthetic_pairs()[:300:11]] + ["", "Tom \U0001f375 \x07."]
    source = tmp_path / "in.en"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs = {}
    for engine, model in (("torch", checkpoint), ("ctranslate2", out)):
        target = tmp_path / f"{engine}.zh"
        assert (
            main(
                [
                    "translate",
                    "--checkpoint",
                    str(model),
                    "--engine",
                    engine,
                    "--beam-size",
                    "1",
                    "--input",
                    str(source),
                    "--output",
                    str(target),
                ]
            )
            == 0
        )
        outputs[engine] = target.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(outputs["torch"]) == len(lines) and outputs["torch"][-2] == ""
    assert outputs["ctranslate2"] == outputs["torch"]  # greedy: identical
    assert main(["evaluate", "--checkpoint", str(out), "--engine", "ctranslate2"]) == 2
    assert "give --src and --ref" in capsys.readouterr().err
