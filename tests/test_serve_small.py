"""``seq2seq serve`` refuses a bad option in one line before it loads the model: the settings,
the key file, and the address (a port in use is found by binding it, before the load)."""

from __future__ import annotations

import socket

import pytest

from seq2seq.cli import main
from seq2seq.serve.handling import ServerSettings
from seq2seq.serve.protocol import Limits
from seq2seq.serve.served_model import ServedModel
from seq2seq.serve.server import ServeOptions, bind, read_api_keys, serve


@pytest.fixture
def no_load(monkeypatch) -> list:
    """Loading the model is recorded and refused: a check that comes after it fails the test."""
    loads: list = []

    def load(cls, *args, **kwargs):  # noqa: ANN001, ANN202
        loads.append(args)
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr(ServedModel, "load", classmethod(load))
    return loads


@pytest.fixture
def taken_port():
    with socket.create_server(("127.0.0.1", 0)) as listener:  # listening, as a server would
        yield listener.getsockname()[1]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"beam_size": 0}, "--beam-size must be >= 1, got 0"),
        ({"max_batch_tokens": 0}, "--max-batch-tokens must be >= 1, got 0"),
        ({"max_queue": 0, "limits": Limits(batch_limit=1)}, "--max-queue must be >= 1, got 0"),
        ({"limits": Limits(char_limit=0)}, "--char-limit must be >= 1, got 0"),
        ({"limits": Limits(batch_limit=0)}, "--batch-limit must be >= 1, got 0"),
        ({"file_limit": 0}, "--file-limit must be >= 1, got 0"),
        ({"max_wait_ms": -1.0}, "--max-wait-ms must be >= 0, got -1.0"),
        ({"max_wait_ms": float("inf")}, "--max-wait-ms must be a finite number, got inf"),
        ({"max_wait_ms": float("nan")}, "--max-wait-ms must be a finite number, got nan"),
        (
            {"max_queue": 10, "limits": Limits(batch_limit=50)},
            "--batch-limit (50) must not exceed --max-queue (10)",
        ),
    ],
)
def test_settings_refuse_a_bad_value_naming_its_option(settings, message):
    with pytest.raises(ValueError) as caught:
        ServerSettings(**settings)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_bind_finds_a_taken_port_an_unknown_host_and_a_port_out_of_range(taken_port):
    with pytest.raises(
        ValueError,
        match=f"cannot listen on --host 127.0.0.1 --port {taken_port}: Address already in use",
    ):
        bind("127.0.0.1", taken_port)
    with pytest.raises(ValueError, match="--port must be between 0 and 65535, got 70000"):
        bind("127.0.0.1", 70000)
    with pytest.raises(ValueError, match="--host no-such-host.invalid: cannot resolve it"):
        bind("no-such-host.invalid", 0)
    listener = bind("127.0.0.1", 0)  # bound, not listening: clients are refused, not kept
    with listener, pytest.raises(ConnectionRefusedError):
        socket.create_connection(listener.getsockname(), timeout=5).close()


def test_an_ipv6_host_binds_ipv6():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        listener = bind("::1", 0)
    except ValueError as error:  # a container without an IPv6 loopback
        pytest.skip(str(error))
    with listener:
        assert listener.family == socket.AF_INET6


def test_a_taken_port_fails_before_the_load(taken_port, no_load, tmp_path):
    with pytest.raises(ValueError, match="Address already in use"):
        serve(ServeOptions(str(tmp_path / "model.ckpt"), port=taken_port))
    assert no_load == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--port", "70000"], "--port must be between 0 and 65535, got 70000"),
        (["--beam-size", "0"], "--beam-size must be >= 1, got 0"),
        (["--max-batch-tokens", "0"], "--max-batch-tokens must be >= 1, got 0"),
        (["--char-limit", "0"], "--char-limit must be >= 1, got 0"),
        (["--max-wait-ms", "inf"], "--max-wait-ms must be a finite number, got inf"),
        (["--api-keys", "no-such-keys.txt"], "no-such-keys.txt"),
        (
            ["--batch-limit", "50", "--max-queue", "10"],
            "--batch-limit (50) must not exceed --max-queue (10)",
        ),
    ],
)
def test_bad_options_are_one_line_errors_before_the_load(
    options, message, no_load, tmp_path, capsys
):
    checkpoint = tmp_path / "model.ckpt"
    checkpoint.write_bytes(b"")  # never read: the options fail first
    assert main(["serve", "--checkpoint", str(checkpoint), *options]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert no_load == []


def test_a_taken_port_is_a_one_line_error_from_the_command(taken_port, no_load, tmp_path, capsys):
    checkpoint = tmp_path / "model.ckpt"
    checkpoint.write_bytes(b"")
    assert main(["serve", "--checkpoint", str(checkpoint), "--port", str(taken_port)]) == 2
    expected = f"cannot listen on --host 127.0.0.1 --port {taken_port}: Address already in use"
    assert capsys.readouterr().err == f"seq2seq serve: error: {expected}\n"
    assert no_load == []


def test_a_missing_checkpoint_is_a_one_line_error(capsys):
    assert main(["serve", "--checkpoint", "missing.ckpt"]) == 2
    error = capsys.readouterr().err
    assert "missing.ckpt" in error and error.count("\n") == 1


def test_key_files_skip_comments_and_refuse_what_is_not_text(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# team\n  # indented comment\nk-1\n\n  k-2  \n", encoding="utf-8")
    assert read_api_keys(keys) == {"k-1", "k-2"}
    keys.write_bytes(b"\xffkey\n")
    with pytest.raises(ValueError, match=r"--api-keys .*keys.txt: not UTF-8 text \(byte 0\)"):
        read_api_keys(keys)
    keys.write_text("# only comments\n")
    with pytest.raises(ValueError, match="no keys in the file"):
        read_api_keys(keys)
