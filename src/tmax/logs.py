"""Logging set-up shared by the CLI and the Snakemake scripts."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

CHATTY = ("httpx", "httpcore", "httpx2", "httpcore2", "openai", "urllib3")
"""Libraries that log a line per request at INFO: on the console only their warnings
show (the workflow's output is progress and results); the job's log file keeps all.
(openai 3 sends its requests through httpx2 and httpcore2, the forks it ships with.)"""


def _not_chatty(record: logging.LogRecord) -> bool:
    if record.levelno >= logging.WARNING:
        return True
    return not any(record.name == name or record.name.startswith(f"{name}.") for name in CHATTY)


def setup_logging(log_file: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    """Log to stderr and, when given, to ``log_file`` (Snakemake's ``log:``); the
    per-request lines of HTTP clients (:data:`CHATTY`) go to the file only."""
    console = logging.StreamHandler(sys.stderr)
    console.addFilter(_not_chatty)
    handlers: list[logging.Handler] = [console]
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w", encoding="utf-8"))
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    return logging.getLogger("tmax")


def progress_bar(*, disable: bool = False) -> Any:
    """A rich progress bar with a description, the bar, done/total and elapsed time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    return Progress(*columns, disable=disable)
