"""Each deliverable must hold exactly what was asked for."""

from pathlib import Path

import pytest

EXPECTED = {{ expected }}


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_deliverable(path):
    target = Path(path)
    if EXPECTED[path] is None:
        assert target.is_dir(), f"{path} is not a folder"
    else:
        assert target.is_file(), f"{path} is missing"
        assert target.read_text() == EXPECTED[path]
