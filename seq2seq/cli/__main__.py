"""``python -m seq2seq.cli``: the same as the ``seq2seq`` command."""

import sys

from seq2seq.cli import main

sys.exit(main())
