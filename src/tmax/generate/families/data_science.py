"""Task families of the data_science domain."""
