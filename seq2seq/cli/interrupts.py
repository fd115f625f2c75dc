"""Ctrl+C and SIGTERM while a command runs: both end it as ``KeyboardInterrupt``, so a killed
``translate`` keeps what it wrote and says so, and exits as a shell expects (130 or 143)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM (a job killed, a cluster preempting): handled like Ctrl+C."""


@contextmanager
def interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` while a command runs, so a killed ``translate`` keeps
    what it wrote and says so, as after Ctrl+C."""

    def terminate(signum, frame):
        raise Terminated(signum)

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back while the block runs, delivered when it ends."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def interrupt_status(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal, as a shell reports a process a signal ended: 130 Ctrl+C, 143 TERM."""
    signum = interrupt.args[0] if isinstance(interrupt, Terminated) else signal.SIGINT
    return 128 + int(signum)
