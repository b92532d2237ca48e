"""TMAX-15K as released (Hugging Face ``allenai/TMax-15K``).

The release is not in the Harbor layout: besides a Parquet table of the tasks' text,
``tasks.zip`` holds one folder per task in TMAX's native layout
(``task_NNNNNN_<hex>/`` with ``task.json``, ``test_initial_state.py``,
``test_final_state.py``, ``container.def``, ``setup.sh``, ``fixtures/``), the same
files Endless Terminals writes. This adapter is therefore the native one
(:mod:`tmax.datasets.endless_terminals`) under its own name, reading the folders from
``tasks.zip`` (or an unpacked copy). The nine axes each task was generated from stay
in the source's labels (``task.json``'s domain, skill_type, …); the Harbor copy
(``tmax/TMax-15K-Harbor``) reads with the ``harbor`` layout.
"""

from __future__ import annotations

from tmax.datasets.base import register
from tmax.datasets.endless_terminals import EndlessTerminalsAdapter


@register("tmax15k")
class TMax15KAdapter(EndlessTerminalsAdapter):
    """TMAX-15K's native task folders (``tasks.zip``)."""

    layout = "tmax15k"
