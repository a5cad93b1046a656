"""The libraries' log records come out in pysched's own format, one line each."""

import json
import logging

import pytest
import structlog
from aiohttp.http_exceptions import BadStatusLine

from pysched.cmd.logs import configure_logging


def test_library_records_are_json_lines_and_a_bad_request_is_no_error(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "info")
    configure_logging("json", "info")  # configured twice (the CLI, then `run`): one handler
    server = logging.getLogger("aiohttp.server")
    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError:
        server.exception("Error handling request")
    try:
        raise BadStatusLine("a" * 9000)  # a client's malformed request, answered 400 by the server
    except BadStatusLine:
        server.exception("Error handling request")
    logging.getLogger("kubernetes_asyncio.config").info("below the libraries' warning level")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["event"] == "Error handling request" and record["logger"] == "aiohttp.server"
    assert record["level"] == "error" and "ZeroDivisionError: division by zero" in record["exception"]


def test_a_closed_stderr_stops_no_log_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader of stderr gone (`pysched run ... | head`): log calls go on, so a signal handler
    that logs still stops the run."""

    class Closed:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        def isatty(self) -> bool:
            return False

    configure_logging("json", "info")
    monkeypatch.setattr("sys.stderr", Closed())
    structlog.get_logger("test").info("still logging")
    logging.getLogger("aiohttp.server").error("and the libraries too")
