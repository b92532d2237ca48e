"""Task families of the data_querying domain."""
