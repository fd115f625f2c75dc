"""The benchmarks' one entry point: ``python scripts/bench.py NAME [options]`` runs bench NAME
(``scripts/benchmarks/NAME.py``); without NAME it lists them, ``NAME --help`` says what one
measures. The figures of docs/benchmarks.md each name the command that measured them."""

import sys
from pathlib import Path

# This checkout's seq2seq and the benchmarks package beside this file, without an install.
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

if __name__ == "__main__":  # not in a child that multiprocessing spawns, which imports this
    from benchmarks import main

    sys.exit(main())
