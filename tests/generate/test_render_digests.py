"""Every task the procedural generator renders keeps its bytes (render_digests.py)."""

from __future__ import annotations

import pytest

from tests.generate.render_digests import SCALES, committed, render_digests


@pytest.mark.parametrize("scale", sorted(SCALES))
def test_every_task_renders_to_its_committed_bytes(scale: str) -> None:
    expected = committed()[scale]
    found = render_digests(scale)
    assert sorted(found) == sorted(expected), f"{scale}: other task names were rendered"
    changed = sorted(name for name in found if found[name] != expected[name])
    assert changed == [], (
        f"{scale}: {len(changed)} of {len(found)} tasks render to other bytes (first: "
        f"{changed[:5]}); a change that must alter them rewrites the digests in its own "
        "commit: python -m tests.generate.render_digests --write"
    )
