"""Task families of the file_operations domain."""
