"""A process tree's memory and a directory's disk use, read from ``/proc`` and the filesystem;
and killing a tree this benchmark started."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def smaps(pid: int) -> dict[str, int]:
    """``/proc/PID/smaps_rollup`` in bytes (``Rss``, ``Pss``, ``Private_Dirty``, ...); {} if the
    process is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    return {m[1]: int(m[2]) * KIB for m in re.finditer(r"^(\w+):\s+(\d+) kB", text, re.M)}


def uss(memory: dict[str, int]) -> int:
    """Unique set size: the pages only this process maps."""
    return memory.get("Private_Clean", 0) + memory.get("Private_Dirty", 0)


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from the parent links in ``/proc/*/stat``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command name, in parentheses, may hold spaces: the fields follow its last ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


def tree_memory(pid: int) -> dict[int, dict[str, int]]:
    """``smaps`` of ``pid`` and each of its descendants still there, by process id."""
    found = {p: smaps(p) for p in descendants(pid)}
    return {p: memory for p, memory in found.items() if memory}


def disk_bytes(path: Path) -> int:
    """Sum of the sizes of the files under ``path`` (files vanishing meanwhile count 0)."""
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                pass
    return total


def kill_tree(pid: int) -> None:
    """SIGKILL to ``pid`` (a child this bench started) and everything below it."""
    for p in descendants(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
