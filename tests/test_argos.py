"""``seq2seq export --format argos``: the package's layout, metadata and README here; and, in
LibreTranslate's own environment (scripts/libretranslate_env.sh, made once and cached), the real
argostranslate installing it and the real ``libretranslate`` serving it offline, its answers
compared with our CTranslate2 engine at Argos' settings (docs/libretranslate.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from seq2seq.cli import main
from tests.helpers import tiny_checkpoint, without_byte_rule

pytest.importorskip("ctranslate2", reason="the Argos package holds a CTranslate2 model")
pytest.importorskip("transformers", reason="the CTranslate2 export goes through transformers")

from benchmarks import libretranslate  # noqa: E402 (after the skips)
from benchmarks.harness import free_port  # noqa: E402
from seq2seq.inference.options import TranslateOptions
from seq2seq.tools import argos, minisbd  # noqa: E402

ROOT = Path(__file__).parents[1]
NAME = "translate-en_zh-1_0"


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """The package of a tiny checkpoint, written by the command line."""
    tmp = tmp_path_factory.mktemp("argos")
    checkpoint = tiny_checkpoint(tmp / "model.ckpt", source_ends_with_eos=True)
    out = tmp / "out"
    assert (
        main(["export", "--checkpoint", str(checkpoint), "--format", "argos", "--output", str(out)])
        == 0
    )
    return out / f"{NAME}.argosmodel"


def test_the_package_is_one_directory_as_argos_unzips_it(package):
    names = zipfile.ZipFile(package).namelist()
    assert {name.split("/")[0] for name in names} == {NAME}
    files = {name.removeprefix(f"{NAME}/") for name in names if not name.endswith("/")}
    assert {
        "metadata.json",
        "README.md",
        "sentencepiece.model",
        "minisbd/en.onnx",
        "model/model.bin",
        "model/config.json",
        "model/spm.model",  # the whole CTranslate2 export: our engine reads model/ too
        "model/seq2seq_search.json",
    } <= files
    archive = zipfile.ZipFile(package)
    assert archive.read(f"{NAME}/sentencepiece.model") == archive.read(f"{NAME}/model/spm.model")
    config = json.loads(archive.read(f"{NAME}/model/config.json"))
    assert config["add_source_eos"] is True  # sp.encode(text) pieces are read as trained


def test_the_metadata_has_what_argos_reads(package):
    metadata = json.loads(zipfile.ZipFile(package).read(f"{NAME}/metadata.json"))
    assert metadata["from_code"] == "en" and metadata["to_code"] == "zh"
    assert metadata["from_name"] == "English" and metadata["to_name"] == "Chinese"
    assert metadata["type"] == "translate"
    assert metadata["package_version"] == "1.0" and metadata["argos_version"]
    assert "model.ckpt" in metadata["description"]


def test_the_readme_names_the_data_and_its_licences(package):
    readme = zipfile.ZipFile(package).read(f"{NAME}/README.md").decode("utf-8")
    assert "model.ckpt" in readme and "records no data settings" in readme  # tiny: none kept
    bundled = {"corpus": "bundled", "modifiers": {"dictionary": 2000, "terms": 0.2}}
    lines = "\n".join(argos.data_licences({"datamodule_hyper_parameters": bundled}))
    assert "Tatoeba" in lines and "CC-BY 2.0 FR" in lines
    assert "HSK" in lines and "CC-BY-SA-4.0" in lines
    assert "CC-CEDICT" in lines and "CC BY-SA 4.0" in lines and "ShareAlike" in lines
    plain = {"corpus": "bundled", "modifiers": {}}
    assert "CC-CEDICT" not in "\n".join(argos.data_licences({"datamodule_hyper_parameters": plain}))
    own = {"corpus": "tsv", "path": "mine.tsv", "modifiers": {}}
    lines = argos.data_licences(
        {"datamodule_hyper_parameters": own, "hyper_parameters": {"init_from": "opus.ckpt"}}
    )
    assert any("mine.tsv" in line and "licence not recorded" in line for line in lines)
    assert any("opus.ckpt" in line for line in lines)


def test_the_splitter_is_a_minisbd_model_with_its_metadata():
    model = minisbd.splitter_onnx()
    metadata = minisbd.splitter_metadata()
    for key, value in metadata.items():  # protobuf strings: stored as written
        assert key.encode() in model and value.encode("utf-8") in model
    vocab = json.loads(metadata["vocab"])
    assert vocab["_unit2id"]["<PAD>"] == 0 and vocab["_unit2id"]["<UNK>"] == 1
    assert json.loads(metadata["config"])["feat_funcs"] == ["space_before"]


def test_the_packaged_model_reads_long_sources_and_translates_as_the_plain_export(
    package, tmp_path
):
    """The package's model has a position table of ``ARGOS_POSITIONS`` rows (the tiny model
    has 128): a source of 300 pieces translates, where the plain CTranslate2 export fails as
    LibreTranslate did (HTTP 500); on ordinary sentences both give the same tokens and
    scores."""
    import ctranslate2
    import sentencepiece

    from seq2seq.tools.export import export_ctranslate2

    zipfile.ZipFile(package).extractall(tmp_path)
    checkpoint = package.parents[1] / "model.ckpt"  # what the fixture exported
    plain_dir = export_ctranslate2(checkpoint, tmp_path / "plain")
    packaged = ctranslate2.Translator(str(tmp_path / NAME / "model"))
    plain = ctranslate2.Translator(str(plain_dir))
    sp = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / NAME / "model/spm.model"))
    words = " ".join(["apples", "teacher", "tomorrow", "red"] * 60)
    long = sp.encode(words, out_type=str)[:300]
    assert len(long) == 300
    with pytest.raises(RuntimeError, match="No position encodings"):
        plain.translate_batch([long], max_decoding_length=4)
    read = packaged.translate_batch([long], max_decoding_length=4)  # any 4 tokens: it runs
    assert len(read[0].hypotheses[0]) <= 4

    sources = [sp.encode(line, out_type=str) for line in LINES]
    settings = dict(beam_size=4, length_penalty=0.2, max_decoding_length=100, return_scores=True)
    ours = packaged.translate_batch(sources, **settings)
    theirs = plain.translate_batch(sources, **settings)
    assert [r.hypotheses for r in ours] == [r.hypotheses for r in theirs]
    assert [r.scores for r in ours] == [r.scores for r in theirs]


def test_without_ctranslate2_the_export_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    checkpoint = tiny_checkpoint(tmp_path / "model.ckpt")
    code = main(
        ["export", "--checkpoint", str(checkpoint), "--format", "argos", "--output", str(tmp_path)]
    )
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "seq2seq export: error: --format argos needs: pip install ctranslate2"
    ]


def test_a_model_with_a_sentencepiece_model_per_side_is_refused(tmp_path, capsys):
    """Argos cuts sources and decodes outputs with one SentencePiece model."""
    from seq2seq.tools.pretrained import import_marian
    from tests.opus_mt import build_opus_mt_like

    directory = build_opus_mt_like(tmp_path / "hf")
    checkpoint = import_marian(str(directory), tmp_path / "imported.ckpt", ">>cmn_Hans<<")
    args = ["export", "--checkpoint", str(checkpoint), "--format", "argos"]
    assert main([*args, "--output", str(tmp_path / "out")]) == 2
    assert "own SentencePiece models" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# -- the real LibreTranslate --------------------------------------------------------------------


@pytest.fixture(scope="session")
def libretranslate_python() -> Path:
    """LibreTranslate's own virtualenv (scripts/libretranslate_env.sh), with the CTranslate2
    of this environment: about 40 s the first time with a fast link to PyPI, at once after."""
    import ctranslate2

    script = ROOT / "scripts" / "libretranslate_env.sh"
    # Made from this interpreter, with our CTranslate2: the two searches agree bit for bit.
    env = {**os.environ, "PYTHON": sys.executable, "SEQ2SEQ_CTRANSLATE2": ctranslate2.__version__}
    try:
        made = subprocess.run([script], capture_output=True, text=True, timeout=1200, env=env)
    except subprocess.TimeoutExpired:
        pytest.skip("the LibreTranslate virtualenv could not be made in 20 minutes")
    if made.returncode:
        pytest.skip(f"the LibreTranslate virtualenv could not be made: {made.stderr[-800:]}")
    return Path(made.stdout.strip().splitlines()[-1])


def argos_ready_checkpoint(path: Path) -> Path:
    """A tiny untrained checkpoint, term tags in its vocabulary, changed in two ways so that
    Argos' search and ours look for the same thing. Its positions reach 512 (sinusoids: no
    weight changes), past the 256 tokens Argos lets any output run to; and the rows of <pad>,
    <unk>, <s> and the term tags are zero, so their logit is 0 and no beam ever takes them
    (our engine bans them, Argos bans nothing: a trained model never writes them)."""
    tiny_checkpoint(path, source_ends_with_eos=True, terms=True)
    saved = torch.load(path, weights_only=False)
    saved["seq2seq"]["model_config"]["max_positions"] = 512
    from seq2seq.data.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_bytes(saved["seq2seq"]["tokenizer"])
    unused = [0, 1, 2] + [tokenizer.piece_to_id(t) for t in ("<term>", "<trans>", "</term>")]
    saved["state_dict"]["model.embedding.weight"][unused] = 0.0
    torch.save(saved, path)
    return path


@pytest.fixture(scope="module")
def served(libretranslate_python, tmp_path_factory):
    """The package of :func:`argos_ready_checkpoint` installed by argostranslate and served by
    libretranslate on a free 127.0.0.1 port, offline; yields (url, installed package, home)."""
    tmp = tmp_path_factory.mktemp("libretranslate")
    checkpoint = argos_ready_checkpoint(tmp / "model.ckpt")
    package = argos.export_argos(checkpoint, tmp / "out")
    home = tmp / "home"
    installed = libretranslate.install_package(libretranslate_python, package, home)
    with libretranslate.libretranslate(libretranslate_python, home, free_port()) as (url, _):
        yield url, installed, home


LINES = [
    "I will buy apples today.",
    "Tom can see the red bag at home.",
    "Where is my teacher?",
    "Mr. Smith will cook rice tomorrow!",
    "She should eat some fish. They can find the book.",
]


@pytest.mark.slow
@pytest.mark.serial
def test_libretranslate_answers_as_our_engine_translates_at_argos_settings(
    served, libretranslate_python
):
    """Argos' splitter cuts as ours does; its search is our engine's at beam 4 and length
    penalty 0.2 with a limit of 256 tokens; what is left is how Argos joins sentences (their
    pieces decoded together: a space before each sentence whose first piece starts with ▁)
    and LibreTranslate's touch-ups of the final punctuation and the first letter's case."""
    from libretranslatepy import LibreTranslateAPI

    from seq2seq.data.sentences import split_sentences
    from seq2seq.inference.translator import Translator

    url, installed, home = served
    python = libretranslate_python
    api = LibreTranslateAPI(url)
    languages = {item["code"]: item["targets"] for item in api.languages()}
    assert "zh-Hans" in languages["en"]  # LibreTranslate's name for the package's "zh"
    answers = [api.translate(line, "en", "zh") for line in LINES]
    assert api.translate(LINES[0], "en", "zh-Hans") == answers[0]

    sentences = libretranslate.argos_sentences(python, installed, LINES, home)
    assert sentences == [[s.text for s in split_sentences(line)] for line in LINES]
    translator = Translator.from_ctranslate2(installed / "model").with_search(
        length_penalty=argos.ARGOS_LENGTH_PENALTY,
        max_len_a=0,
        max_len_b=argos.ARGOS_MAX_DECODING_LENGTH + 1,  # + the eos our limit counts
    )
    # CTranslate2 in Argos writes any byte piece, and has no repetition guard
    translator = without_byte_rule(translator).with_search(max_repeats=0)
    ours = translator.translate(LINES, TranslateOptions(beam_size=argos.ARGOS_BEAM_SIZE))
    hypotheses = translator.translate_n_best(
        sum(sentences, []), TranslateOptions(beam_size=argos.ARGOS_BEAM_SIZE, split=False)
    )
    found = iter(hypotheses)
    pieces = [
        [[translator.tokenizer.id_to_piece(t) for t in next(found)[0].tokens] for _ in line]
        for line in sentences
    ]
    joined = [libretranslate.argos_text(p, installed / "sentencepiece.model") for p in pieces]
    assert libretranslate.libretranslate_touch_ups(python, LINES, joined, home) == answers
    # One sentence: Argos' text is ours. More: ours joined with a space where the next
    # sentence's first piece starts with ▁ (ours: with nothing).
    assert joined[:4] == ours[:4]
    first, second = (translator.text(h[0].tokens) for h in hypotheses[4:6])
    gap = " " if pieces[4][1][0].startswith("\u2581") else ""
    assert ours[4] == first + second and joined[4] == first + gap + second
    assert libretranslate.libretranslate_touch_ups(python, LINES[:4], ours[:4], home) == answers[:4]


@pytest.mark.slow
@pytest.mark.serial
def test_libretranslate_translates_a_sentence_past_the_trained_positions(served):
    """A sentence of 600 pieces, past the model's 512 positions (HTTP 500 before the package
    carried ``ARGOS_POSITIONS`` rows): LibreTranslate answers it."""
    import sentencepiece
    from libretranslatepy import LibreTranslateAPI

    url, installed, _ = served
    sp = sentencepiece.SentencePieceProcessor(model_file=str(installed / "sentencepiece.model"))
    text = "apples"
    while len(sp.encode(text)) < 600:
        text += " teacher tomorrow red bag home apples"
    assert 600 <= len(sp.encode(text)) < argos.ARGOS_POSITIONS
    assert isinstance(LibreTranslateAPI(url).translate(text, "en", "zh"), str)  # else HTTPError
