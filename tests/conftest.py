from pathlib import Path

import pytest
import torch

# tests/helpers.py is imported by the test files (``tests`` is a package); pytest rewrites its
# asserts (fit's) as it does the tests' own.
pytest.register_assert_rewrite("tests.helpers")
# Two cores: keep torch from oversubscribing them when pytest runs.
torch.set_num_threads(min(2, torch.get_num_threads()))


# The small fitted run that the end-to-end tests share (test_commands_*.py, test_translator.py):
# one ``seq2seq fit`` of 30 steps per session, only when a test asks for it.
@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    from tests.helpers import synthetic_pairs

    path = tmp_path_factory.mktemp("corpus") / "pairs.tsv"
    path.write_text("".join(f"{en}\t{zh}\n" for en, zh in synthetic_pairs()), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def run(tmp_path_factory, corpus) -> Path:
    from tests.helpers import fit

    root = tmp_path_factory.mktemp("run")
    fit(root, corpus, max_steps=30)
    return root


# Servers for the serving tests (tests/test_serve_*.py): untrained tiny checkpoints, served by
# a real ``seq2seq serve`` process on a free 127.0.0.1 port, one per session.
@pytest.fixture(scope="session")
def translation_checkpoint(tmp_path_factory) -> Path:
    from tests.helpers import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("serve") / "translator.ckpt")


@pytest.fixture(scope="session")
def lm_checkpoint(tmp_path_factory) -> Path:
    from tests.helpers import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("serve") / "lm.ckpt", lm=True)


@pytest.fixture(scope="session")
def translation_server(translation_checkpoint):
    pytest.importorskip("fastapi")
    from tests.serving import running_server

    with running_server(translation_checkpoint, "--char-limit", "30000") as server:
        yield server


@pytest.fixture(scope="session")
def lm_server(lm_checkpoint):
    pytest.importorskip("fastapi")
    from tests.serving import running_server

    with running_server(lm_checkpoint, "--model-name", "tiny-lm") as server:
        yield server


@pytest.fixture(scope="module")
def translator(translation_checkpoint):
    """The translator ``translation_server`` serves, loaded in the test process."""
    from seq2seq.inference.translator import Translator

    return Translator.from_checkpoint(translation_checkpoint)


@pytest.fixture(scope="module")
def url(translation_server) -> str:
    """The server ``http`` talks to: ``translation_server``, unless a module says another."""
    return translation_server.url


@pytest.fixture(scope="module")
def http(url):
    """An httpx client of ``url``."""
    import httpx

    with httpx.Client(base_url=url, timeout=60) as client:
        yield client
