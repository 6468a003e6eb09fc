"""Argument types of the management commands: each parses one value strictly and says what it accepts.

Commands built on `ValidatedCommand` report a bad or unknown argument as one line (`CommandError: ...`, exit
status 1), never a usage dump or a traceback: a negative limit, a number of days that overflows a date, or
`nan` seconds are refused where they are parsed, not deep in a query."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Callable

from django.core.management.base import BaseCommand, CommandError

DAY = 86_400


def integer(*, minimum: int, maximum: int) -> Callable[[str], int]:
    """A whole number in [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give {minimum} to {maximum}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{value} is out of range; give {minimum} to {maximum}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


def seconds(*, maximum: float, minimum: float = 0.0) -> Callable[[str], float]:
    """A finite number of seconds greater than `minimum`, at most `maximum` (no nan, no inf)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or not minimum < value <= maximum:
            raise argparse.ArgumentTypeError(f"{text} is out of range; give more than {minimum:g} and at most {maximum:g} seconds")
        return value

    parse.__name__ = "seconds"
    return parse


port = integer(minimum=1, maximum=65_535)


class ValidatedCommand(BaseCommand):
    """A command whose argument errors (a bad value, an unknown option, a missing argument) are one-line
    CommandErrors, from the command line and from call_command alike."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)

        def error(message: str):
            raise CommandError(message)

        parser.error = error
        return parser

    def run_from_argv(self, argv):
        try:
            super().run_from_argv(argv)
        except CommandError as exc:  # raised by the parser, before Django's own handler around execute()
            self.stderr.write(f"CommandError: {exc}")
            sys.exit(exc.returncode)
