"""The libraries' log records come out in pysched's own format, one line each."""

import json
import logging

import pytest
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
