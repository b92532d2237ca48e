"""Harness tests run real agents' actions in a bubblewrap sandbox on fixture tasks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import FIXTURE_TASKS
from tests.sandbox.test_sandbox import _available
from tmax.sandbox import Sandbox
from tmax.sandbox.episode import sandbox_for_task

LOG_TASK = FIXTURE_TASKS / "count-error-lines"


@pytest.fixture
def box() -> Iterator[Sandbox]:
    """A started sandbox of the count-error-lines task (skipped without bwrap)."""
    reason = _available("bwrap")
    if reason:
        pytest.skip(reason)
    with sandbox_for_task(LOG_TASK, "bwrap", run_id="pytest") as box:
        yield box
