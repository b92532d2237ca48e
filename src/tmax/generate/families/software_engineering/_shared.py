"""Helpers shared by several software_engineering families (and only by them)."""

from __future__ import annotations

import re


def renamer(names: dict[str, str]):
    """Replace each default name by the drawn one in one pass (no chained replacements)."""
    pattern = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: names[m.group(0)], text)
