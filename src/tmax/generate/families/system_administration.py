"""Task families of the system_administration domain."""
