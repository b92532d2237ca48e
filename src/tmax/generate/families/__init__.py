"""Procedural task families, one module per domain; importing registers them all."""

from tmax.generate.families import (  # noqa: F401
    data_processing,
    data_querying,
    data_science,
    debugging,
    file_operations,
    file_operations_more,
    scientific_computing,
    security,
    software_engineering,
    system_administration,
)
