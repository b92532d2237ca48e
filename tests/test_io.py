"""built_once: a cached folder is either absent or complete, and made only once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tmax.io import built_once


def test_a_failed_build_leaves_nothing_and_the_next_one_builds(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "key"

    def broken(staging: Path) -> None:
        (staging / "half").write_text("written before the failure")
        raise ValueError("not a gzip file")

    with pytest.raises(ValueError, match="not a gzip file"):
        built_once(target, broken)
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir()] == [".key.lock"]  # no staging left

    calls: list[Path] = []

    def build(staging: Path) -> None:
        calls.append(staging)
        (staging / "done").write_text("complete")

    assert built_once(target, build) == target
    assert built_once(target, build) == target  # cached: not built again
    assert len(calls) == 1 and (target / "done").read_text() == "complete"
