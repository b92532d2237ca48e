"""Task families of the data_processing domain."""
