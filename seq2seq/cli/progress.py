"""Progress on stderr while a command works: a rich bar at a terminal, a plain line every few
seconds elsewhere (a log, a pipe, a job's output), or nothing; and ``LineProgress``, which counts
input lines while the work is done sentence by sentence."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

LINE_INTERVAL = 5.0  # seconds between two plain progress lines (stderr not a terminal)


class Bar:
    """What a progress bar offers its work: advance(n) and, once known, set_total(n); without
    a rich progress behind it, each does nothing."""

    def __init__(self, progress=None, task=None) -> None:
        self.progress, self.task = progress, task

    def advance(self, n: int) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, n)

    def set_total(self, total: int) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=total)

    def set_completed(self, completed: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=completed)

    def stop(self) -> None:
        """Leave the bar where it is (before a message that must not be drawn over)."""
        if self.progress is not None:
            self.progress.stop()


class ProgressLines:
    """Progress as plain lines on stderr, for a stderr that is not a terminal (where a rich
    bar shows nothing until the end): ``seq2seq translate: 120/400 sentences (30%), 12 s
    elapsed``, at most one every ``interval`` seconds, written when the work moves. The same
    calls as rich's ``Progress`` (``advance``, ``update``, ``stop``), so ``Bar`` drives either.
    """

    def __init__(self, label: str, unit: str, total: float | None, interval: float) -> None:
        self.label, self.unit, self.total, self.interval = label, unit, total, interval
        self.completed = 0.0
        self.lines = 0  # lines written
        self.started = self._last = time.monotonic()
        self.stopped = False

    def advance(self, task: object, n: float) -> None:
        self.update(task, completed=self.completed + n)

    def update(
        self, task: object, total: float | None = None, completed: float | None = None
    ) -> None:
        self.total = self.total if total is None else total
        self.completed = self.completed if completed is None else completed
        if not self.stopped and time.monotonic() - self._last >= self.interval:
            self.write()

    def stop(self) -> None:
        self.stopped = True

    def write(self) -> None:
        """One line now: the work done (of its total, once known) and the time it took."""
        self._last = time.monotonic()
        done = f"{int(self.completed):,}"
        if self.total:
            percent = int(100 * min(self.completed / self.total, 1.0))
            done = f"{done}/{int(self.total):,} {self.unit} ({percent}%)"
        else:
            done = f"{done} {self.unit}"
        elapsed = self._last - self.started
        print(f"{self.label}: {done}, {elapsed:.0f} s elapsed", file=sys.stderr, flush=True)
        self.lines += 1


@contextmanager
def progress_bar(
    total: int | None,
    unit: str,
    show: bool,
    label: str = "seq2seq",
    interval: float | None = None,
) -> Iterator[Bar]:
    """Progress on stderr: a rich bar at a terminal; elsewhere a plain line every ``interval``
    seconds (``LINE_INTERVAL`` when None) and a last one at the end, none for work done within
    the first interval; nothing when ``show`` is false.

    Args:
        label: what starts each plain line (``seq2seq translate``).
    """
    if not show:
        yield Bar()
        return
    if not sys.stderr.isatty():
        lines = ProgressLines(label, unit, total, LINE_INTERVAL if interval is None else interval)
        yield Bar(lines)
        if lines.lines and not lines.stopped:  # the work is over: say where it ended
            lines.write()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        yield Bar(progress, progress.add_task(unit, total=total))


class LineProgress:
    """A progress bar counting input lines, moved by the sentences decoded in each window
    (a window of L lines and S sentences advances L / S per sentence), and set exactly to the
    lines done when a window is written: blank lines and repeated sentences count right."""

    def __init__(self, bar: Bar) -> None:
        self.bar = bar
        self.done_lines = 0  # lines of the windows already written
        self._window = 0
        self._per_sentence = 0.0

    def start(self, lines: int) -> None:
        self._window, self._per_sentence = lines, 0.0

    def set_total(self, sentences: int) -> None:
        self._per_sentence = self._window / sentences if sentences else 0.0

    def advance(self, sentences: int) -> None:
        self.bar.advance(sentences * self._per_sentence)

    def finish(self) -> None:
        self.done_lines += self._window
        self.bar.set_completed(self.done_lines)
