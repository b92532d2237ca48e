"""Procedural task families: a package per domain, a template folder per family
(tmax.generate.templates); importing registers them all, each domain's in its order."""

from tmax.generate.families import (  # noqa: F401
    data_processing,
    data_querying,
    data_science,
    debugging,
    file_operations,
    scientific_computing,
    security,
    software_engineering,
    system_administration,
)
