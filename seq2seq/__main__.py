"""python -m seq2seq: the same as the seq2seq command (torchrun launches it this way)."""

import sys

from seq2seq.cli import main

sys.exit(main())
