"""Task families of the security domain."""
