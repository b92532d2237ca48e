"""semverlite: small semantic-versioning helpers (vendored copy, 0.9.2)."""

from .core import compare, max_satisfying, parse, satisfies, sort_versions

__all__ = ["compare", "max_satisfying", "parse", "satisfies", "sort_versions"]
__version__ = "0.9.2"
