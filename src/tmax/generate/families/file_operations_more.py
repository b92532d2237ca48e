"""More task families of the file_operations domain (kept apart from file_operations.py,
which another engineer may extend at the same time)."""
