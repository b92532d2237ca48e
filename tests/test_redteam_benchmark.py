"""benchmarks/redteam.py --results: the full matrix (hours on podman) runs in pieces, an
outcome recorded at this commit is not tried again, and one of another commit is not
counted."""

from __future__ import annotations

from pathlib import Path

from tests.rl.test_benchmark_script import load_script
from tmax.sandbox.redteam import Outcome

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "redteam.py"


def test_recorded_outcomes_of_this_commit_are_kept_and_others_are_not(tmp_path: Path) -> None:
    bench = load_script(SCRIPT)
    results = tmp_path / "results.jsonl"
    assert bench.recorded(results, "abc") == {}
    kept = Outcome("task-a", "podman", "shadowing modules", 0.0, reason="tests failed",
                   leaked=False, host_reached=None)  # fmt: skip
    bench.record(results, kept, "abc")
    bench.record(results, Outcome("task-b", "podman", "symlinks", 1.0), "older")
    found = bench.recorded(results, "abc")
    assert found == {("podman", "task-a", "shadowing modules"): kept}
    assert len(results.read_text().splitlines()) == 2  # the other commit's line stays
