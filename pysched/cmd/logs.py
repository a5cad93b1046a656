"""Logging for every command: structlog to stderr, JSON for collectors or lines for a person.

`pysched run` logs at the level it is given; the other commands at warning, so a simulation's
millions of scheduling cycles never print their debug lines."""

from __future__ import annotations

import logging
import sys
from typing import TextIO, cast

import structlog


class _Stderr:
    """Whatever `sys.stderr` is when a line is written, not when logging was configured: a host
    that swaps the stream (a test runner, an embedding program) keeps receiving the lines."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(fmt: str, level: str) -> None:
    """structlog to stderr: JSON for log collectors, coloured lines for a person at a terminal."""
    human = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer() if human else structlog.processors.JSONRenderer()
    )
    numeric = logging.getLevelName(level.upper())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(cast(TextIO, _Stderr())),
        # Not cached: a later configure (an embedder's, a test's) still applies to every logger;
        # the engine binds its hot-path logger once anyway.
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
