"""Task families of the debugging domain."""
