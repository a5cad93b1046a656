"""How a command says that its input is wrong: one line on stderr and exit code 2."""

from __future__ import annotations

import sys

EXIT_BAD_INPUT = 2


def bad_input(command: str, message: str) -> int:
    """Print `COMMAND: error: MESSAGE` (its first line, whitespace folded) and return 2."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    first = " ".join(lines[0].split()) if lines else "failed"
    print(f"{command}: error: {first}", file=sys.stderr)
    return EXIT_BAD_INPUT
