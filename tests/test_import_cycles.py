"""Import cycles in the whole of ``tmax`` (the graph and its reading:
tests/generate/test_imports.py).

At import time there are none. Counting the imports inside functions too (a function
that imports a module which imports the function's own module back), the cycles left
are listed below with why they remain; a new one fails here, and so does one of the
list that is gone (strike it off)."""

from __future__ import annotations

from tests.generate.test_imports import SRC, import_graph, strongly_connected

KNOWN_CYCLES_THROUGH_FUNCTIONS = {
    # the dataset registry imports its readers when first asked; each reader
    # registers itself with the registry. Both sides are hashed byte for byte into
    # converter_fingerprint, so moving the lookup out reconverts every dataset.
    "tmax.datasets.base",
    # an audit by family name looks the family up in the registered families; audit.py
    # and procedural.py are hashed into generator_fingerprint, so moving it regenerates
    # every task (and retrains every model).
    "tmax.generate.audit",
}
"""One module of each remaining cycle (its members: the test's message)."""


def _components(in_functions: bool) -> list[list[str]]:
    graph = import_graph(SRC, "tmax", in_functions=in_functions)
    return [c for c in strongly_connected(graph) if len(c) > 1]


def test_tmax_imports_no_module_in_a_cycle() -> None:
    cycles = _components(in_functions=False)
    assert not cycles, f"import cycles in tmax: {cycles}"


def test_imports_in_functions_close_only_the_known_cycles() -> None:
    """Sandboxes (episode, preflight, the backends, the red team), the model clients and
    RL (the launcher starts ``python -m tmax.rl.stage``; it does not import the stage
    back) are free of cycles, the imports in their functions included."""
    components = _components(in_functions=True)
    found = {module for c in components for module in c if module in KNOWN_CYCLES_THROUGH_FUNCTIONS}
    new = [c for c in components if not set(c) & KNOWN_CYCLES_THROUGH_FUNCTIONS]
    assert not new, f"new import cycles through functions: {new}"
    assert found == KNOWN_CYCLES_THROUGH_FUNCTIONS, (
        f"gone, strike them off: {sorted(KNOWN_CYCLES_THROUGH_FUNCTIONS - found)}"
    )
    for component in components:
        assert not any(
            m.startswith(("tmax.sandbox", "tmax.models", "tmax.rl")) for m in component
        ), component
