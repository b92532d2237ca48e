"""Task families of the software_engineering domain."""
