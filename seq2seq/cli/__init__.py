"""The ``seq2seq`` command, the command line floor (the top one): ``fit`` and ``validate``
through LightningCLI, and the inference commands through ``main`` here.

- ``arguments``: the parser, the commands and each command's options (defaults read from
  their one home elsewhere in the toolkit);
- ``shared_options``: the options several commands share (search, device, int8, splitting,
  glossaries);
- ``option_checks``: every option checked before a model loads or input is read;
- ``commands``: the ``run_*`` functions, what each command does;
- ``calibrate``: ``seq2seq calibrate``, a checkpoint's confidence fitted to chrF;
- ``distill``: ``seq2seq distill``, a teacher's translations of its training sources;
- ``shortlist``: ``seq2seq shortlist``, a lexical shortlist learnt, and ``--shortlist``;
- ``confident_lines``: ``translate --with-confidence`` and ``--min-confidence``;
- ``document_checks``: ``translate``'s encoding options checked for the format, and a zipped
  document (``.docx``) translated and written whole;
- ``progress``: progress bars on stderr, ``LineProgress``;
- ``interrupts``: Ctrl+C and SIGTERM as ``KeyboardInterrupt``, and the exit status they give;
- ``__main__``: ``python -m seq2seq.cli``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``seq2seq`` console script."""
    from seq2seq.checks import unknown_options_message
    from seq2seq.cli.arguments import LIGHTNING_COMMANDS, build_parser
    from seq2seq.cli.interrupts import interrupt_status, interrupts_as_keyboard_interrupt
    from seq2seq.cli.option_checks import check_arguments
    from seq2seq.errors import USER_ERRORS

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in LIGHTNING_COMMANDS:
        return _lightning(argv)

    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 1
    if unknown:
        command = parser.subcommand(args.command)
        command.error(unknown_options_message(command, unknown))
    try:
        check_arguments(args)  # before any model is loaded or any input read
        with interrupts_as_keyboard_interrupt():
            return args.run(args)
    except (*USER_ERRORS, MemoryError, OSError, ValueError) as error:
        print(f"seq2seq {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        print(f"seq2seq {args.command}: interrupted", file=sys.stderr)
        return interrupt_status(interrupt)


def _lightning(argv: list[str]) -> int:
    """``seq2seq fit`` / ``validate``: Lightning's own CLI, which parses its own options."""
    try:
        from seq2seq.training.lightning_cli import lightning_command  # seconds: Lightning loads
    except KeyboardInterrupt:
        print(f"seq2seq {argv[0]}: interrupted before training started", file=sys.stderr)
        return 130
    return lightning_command(argv)
