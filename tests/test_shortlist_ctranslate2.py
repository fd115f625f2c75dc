"""A shortlist in CTranslate2: ``seq2seq export --format ctranslate2 --shortlist FILE`` writes
it as the model's vocabulary map (``vmap.txt``), ``CTranslate2Engine`` passes ``use_vmap`` when
it is there, a whole-vocabulary map decodes exactly as none, a learnt one keeps every output
within its batch's candidates, and where a shortlist cannot apply the command says so in one
line."""

from __future__ import annotations

import pytest
import torch

from seq2seq.cli import main
from seq2seq.data.tokenizer import checkpoint_tokenizer
from seq2seq.decoding.shortlist import Shortlist, vocabulary_of
from seq2seq.inference.ctranslate2_engine import VMAP_FILE
from seq2seq.inference.translator import Translator
from tests.helpers import checkpoint_command, synthetic_pairs, tiny_checkpoint

pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.slow

SENTENCES = [en for en, _ in synthetic_pairs()[:200:9]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny checkpoint exported three times: with no map, with the whole vocabulary's and
    with a small random one (a few candidates per source piece)."""
    root = tmp_path_factory.mktemp("ct2_shortlist")
    checkpoint = tiny_checkpoint(root / "tiny.ckpt", seed=3)
    tokenizer = checkpoint_tokenizer(checkpoint)
    size, eos = tokenizer.vocab_size, tokenizer.eos_id
    Shortlist.full(size, eos).write(root / "whole.txt", tokenizer.id_to_piece)
    small = Shortlist(range(4, 30), {s: [s, (7 * s) % size] for s in range(4, size)}, size, eos)
    small.write(root / "small.txt", tokenizer.id_to_piece)
    directories = {}
    for name in ("none", "whole", "small"):
        out = root / name
        options = ["--format", "ctranslate2", "--output", out]
        if name != "none":
            options += ["--shortlist", root / f"{name}.txt"]
        assert main(checkpoint_command("export", checkpoint, *options)) == 0
        directories[name] = out
    return checkpoint, directories, small


def hypotheses(directory, beam: int, use_vmap: bool | None = None) -> list[list[int]]:
    translator = Translator.from_ctranslate2(directory)
    engine = translator.engine
    if use_vmap is not None:
        engine.use_vmap = use_vmap
    sources = [translator.tokenizer.encode_source(s) for s in SENTENCES]
    return [hyps[0].tokens for hyps in engine.hypotheses(sources, beam)]


def test_the_export_holds_the_map_and_the_engine_uses_it_when_there(exported):
    _, directories, _ = exported
    assert not (directories["none"] / VMAP_FILE).exists()
    assert (directories["small"] / VMAP_FILE).read_text("utf-8").startswith("\t</s> ")
    assert Translator.from_ctranslate2(directories["small"]).engine.use_vmap
    assert not Translator.from_ctranslate2(directories["none"]).engine.use_vmap


def test_ctranslate2_threads_one_for_batches_and_the_servers_for_a_server(exported, monkeypatch):
    """Never CTranslate2's default of 4: one for batch work (fastest on a few cores), the
    server's compute threads (torch's) for a server answering one sentence at a time."""
    import ctranslate2

    from seq2seq.serve.served_model import ServedModel

    made = []
    real = ctranslate2.Translator
    monkeypatch.setattr(
        ctranslate2, "Translator", lambda *a, **kw: made.append(kw) or real(*a, **kw)
    )
    threads = torch.get_num_threads()
    Translator.from_ctranslate2(exported[1]["none"])
    try:
        torch.set_num_threads(3)
        ServedModel.load(exported[1]["none"], engine="ctranslate2")
    finally:
        torch.set_num_threads(threads)
    assert [(kw["inter_threads"], kw["intra_threads"]) for kw in made] == [(1, 1), (1, 3)]


@pytest.mark.parametrize("beam", [1, 4])
def test_a_whole_vocabulary_map_decodes_as_none_in_ctranslate2(exported, beam):
    _, directories, _ = exported
    assert hypotheses(directories["whole"], beam) == hypotheses(directories["none"], beam)


def test_a_small_map_keeps_outputs_within_the_batchs_candidates(exported):
    checkpoint, directories, small = exported
    tokenizer = checkpoint_tokenizer(checkpoint)
    sources = [tokenizer.encode_source(s) for s in SENTENCES]
    width = max(map(len, sources))
    padded = torch.tensor([s + [0] * (width - len(s)) for s in sources])
    union = small.allowed(padded, 0).any(dim=0)  # CTranslate2 takes the batch's union
    found = hypotheses(directories["small"], 4)
    assert all(union[t] for tokens in found for t in tokens)
    # And the map changed something: the same model without it writes other pieces.
    assert found != hypotheses(directories["small"], 4, use_vmap=False)
    pieces = vocabulary_of(tokenizer.id_to_piece, tokenizer.vocab_size)
    assert Shortlist.read(directories["small"] / VMAP_FILE, pieces, len(pieces), 3)


@pytest.mark.parametrize(
    ("command", "options", "said"),
    [
        ("export", ("--format", "argos", "--output", "x"), "Argos Translate"),
        ("export", ("--format", "hf", "--output", "x"), "Hugging Face"),
        ("translate", ("--engine", "ctranslate2", "--input", "in.en"), "reads its own map"),
    ],
)
def test_where_a_shortlist_cannot_apply_it_is_one_line(
    exported, tmp_path, capsys, command, options, said
):
    checkpoint, directories, _ = exported
    (tmp_path / "in.en").write_text("Tom will buy apples.\n", encoding="utf-8")
    given = directories["small"] if "ctranslate2" in options else checkpoint
    options = [tmp_path / o if o in ("x", "in.en") else o for o in options]
    shortlist = directories["small"] / VMAP_FILE
    assert main(checkpoint_command(command, given, *options, "--shortlist", shortlist)) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err
