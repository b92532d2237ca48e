"""Logging: the console shows progress and results, the job's log file everything."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tmax.logs import setup_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:], root.level = handlers, level


@pytest.mark.usefixtures("restore_logging")
def test_request_lines_reach_the_log_file_and_not_the_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # tmax.rl.engines.remote, once imported, keeps the RL jobs' httpx2 lines out of their logs
    # too (one per rollout turn); here the logger is as a job without it has it
    monkeypatch.setattr(logging.getLogger("httpx2"), "level", logging.NOTSET)
    log = tmp_path / "job.log"
    setup_logging(log)
    logging.getLogger("httpx").info('HTTP Request: POST http://127.0.0.1:1/v1 "200 OK"')
    # the openai client's own (openai 3: its httpx2 fork)
    logging.getLogger("httpx2").info('HTTP Request: POST http://127.0.0.1:2/v1 "200 OK"')
    logging.getLogger("openai._base_client").info("Retrying request")
    logging.getLogger("httpx").warning("connection refused")
    logging.getLogger("tmax.evaluate").info("12 of 40 trials done")
    logging.getLogger("httpxy").info("a library whose name only starts alike")
    console = capsys.readouterr().err
    assert "HTTP Request" not in console and "Retrying request" not in console
    assert "connection refused" in console and "12 of 40 trials done" in console
    assert "httpxy" in console
    written = log.read_text()
    for line in ("127.0.0.1:1/v1", "127.0.0.1:2/v1", "Retrying request", "connection refused",
                 "12 of 40"):  # fmt: skip
        assert line in written
