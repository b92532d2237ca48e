"""Task families of the scientific_computing domain."""
