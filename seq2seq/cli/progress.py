"""Progress on stderr while a command works: a rich bar (or nothing), and ``LineProgress``,
which counts input lines while the work is done sentence by sentence."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


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


@contextmanager
def progress_bar(total: int | None, unit: str, show: bool) -> Iterator[Bar]:
    """A rich progress bar on stderr (nothing when ``show`` is false)."""
    if not show:
        yield Bar()
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
