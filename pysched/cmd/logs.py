"""Logging for every command: structlog to stderr, JSON for collectors or lines for a person.

`pysched run` logs at the level it is given; the other commands at warning, so a simulation's
millions of scheduling cycles never print their debug lines."""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import TextIO, cast

import structlog


class _Stderr:
    """Whatever `sys.stderr` is when a line is written, not when logging was configured: a host
    that swaps the stream (a test runner, an embedding program) keeps receiving the lines."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except OSError:  # stderr closed (a reader gone): a log line must not stop the scheduler
            return 0

    def flush(self) -> None:
        with contextlib.suppress(OSError):
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
    # The libraries' own records (aiohttp, the Kubernetes client) in the same format, a traceback
    # inside its line; a request the HTTP server could not parse is the client's error, answered 400.
    handler = logging.StreamHandler(cast(TextIO, _Stderr()))
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
            ],
        )
    )
    handler.addFilter(_not_a_bad_request)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(old)
    setattr(handler, _OURS, True)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


_OURS = "pysched_handler"


def _not_a_bad_request(record: logging.LogRecord) -> bool:
    error = record.exc_info[1] if record.exc_info else None
    return error is None or not type(error).__module__.startswith("aiohttp.http_exceptions")
