"""The decontamination stage: benchmarks cached, hits explained, boilerplate kept apart,
the filter's rules, planted leaks found, missing benchmarks never silently empty."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import FIXTURE_TASKS
from tmax.decontam.ngrams import words
from tmax.decontam.stage import (
    DecontaminationError,
    decontaminate,
    filter_tasks,
    load_benchmark,
    merge_reports,
)

LOG_INSTRUCTION = (FIXTURE_TASKS / "count-error-lines" / "instruction.md").read_text()
CLEAN = (
    "Rename every photo in the album folder so that its name starts with the date it was "
    "taken, then write a manifest listing the old and new names side by side."
)
LEAK = (
    "Please help. THE SERVICE LOG at `/app/service.log` HAS one event per line -- each "
    "line starts\nwith a level in square brackets; such as [INFO] or [ERROR]. Thanks!"
)


def tasks_parquet(path: Path, tasks: dict[str, tuple[str, dict[str, str]]]) -> Path:
    rows: list[dict[str, Any]] = [
        {
            "task_id": task_id,
            "instruction": instruction,
            "files": [
                {"path": p, "data": text.encode(), "executable": False} for p, text in files.items()
            ],
        }
        for task_id, (instruction, files) in tasks.items()
    ]
    file_type = pa.struct(
        [("path", pa.string()), ("data", pa.binary()), ("executable", pa.bool_())]
    )
    schema = pa.schema(
        [("task_id", pa.string()), ("instruction", pa.string()), ("files", pa.list_(file_type))]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


@pytest.fixture
def fixture_benchmark(tmp_path: Path) -> tuple[str, Path, Path]:
    texts, manifest = tmp_path / "tb.parquet", tmp_path / "tb.json"
    info = load_benchmark(
        "terminal-bench-2.0",
        texts,
        manifest,
        work_dir=tmp_path / "work",
        sources={"terminal-bench-2.0": {"path": str(FIXTURE_TASKS)}},
    )
    assert info["status"] == "ok" and str(FIXTURE_TASKS) in info["source"]
    return "terminal-bench-2.0", texts, manifest


def run_check(tmp_path: Path, benchmark: tuple[str, Path, Path], **kwargs: Any) -> dict[str, Any]:
    tasks = tasks_parquet(
        tmp_path / "tasks.parquet",
        {
            "clean": (CLEAN, {"tests/test.sh": "#!/bin/bash\npytest -q /tests\n"}),
            "leaky": (CLEAN, {"environment/notes.md": LEAK}),
            "binary": (CLEAN, {"environment/blob.bin": "\0" + LOG_INSTRUCTION}),
        },
    )
    options = {"ngram_sizes": [13, 8], "boilerplate_min_items": 10, "self_test_leaks": 10}
    options.update(kwargs)
    return decontaminate(
        tasks,
        [benchmark],
        report_json=tmp_path / "report.json",
        report_md=tmp_path / "report.md",
        **options,
    )


def test_a_disguised_leak_is_found_and_explained(
    tmp_path: Path, fixture_benchmark: tuple[str, Path, Path]
) -> None:
    report = run_check(tmp_path, fixture_benchmark)
    flagged = {entry["task_id"]: entry for entry in report["flagged"]["13"]}
    assert set(flagged) == {"leaky"}  # the clean task and the binary file are not flagged
    entry = flagged["leaky"]
    assert entry["items"] == {"terminal-bench-2.0": ["count-error-lines"]}
    [match] = entry["matches"]
    assert (match["item_field"], match["task_field"]) == ("instruction", "environment/notes.md")
    # The spans cut the same words out of both texts, whatever the case and punctuation.
    task_words = words(LEAK[slice(*match["task_span"])])
    item_words = words(LOG_INSTRUCTION[slice(*match["item_span"])])
    assert task_words == item_words == match["text"].split()
    assert match["ngrams"] == len(task_words) - 13 + 1
    rows = {(r["benchmark"], r["n"]): r for r in report["summary"]}
    assert rows["terminal-bench-2.0", 13]["tasks_flagged"] == 1
    assert rows["terminal-bench-2.0", 13]["tasks_flagged_pct"] == pytest.approx(100 / 3)
    assert rows["terminal-bench-2.0", 13]["items_touched"] == 1
    assert report["self_test"]["13"]["passed"] and report["self_test"]["13"]["planted"] == 10
    table = (tmp_path / "report.md").read_text()
    assert "| dataset | terminal-bench-2.0 13-gram | terminal-bench-2.0 8-gram |" in table
    assert "| generated | 33.3% (25.0% items) |" in table
    assert "`leaky`" in table


def test_one_check_per_n_merges_into_the_same_report(
    tmp_path: Path, fixture_benchmark: tuple[str, Path, Path]
) -> None:
    """The workflow checks each n in its own job and merges them: the report is the one a
    single check over every n writes, and a part from other tasks is refused."""
    (tmp_path / "whole").mkdir()
    whole = run_check(tmp_path / "whole", fixture_benchmark)
    parts = []
    for n in (13, 8):
        part = tmp_path / f"n{n}"
        part.mkdir()
        run_check(part, fixture_benchmark, ngram_sizes=[n])
        parts.append(part / "report.json")
    merged = merge_reports(parts, tmp_path / "merged.json", tmp_path / "merged.md")
    assert merged == whole
    assert (tmp_path / "merged.md").read_text() == (tmp_path / "whole/report.md").read_text()
    other = json.loads(parts[1].read_text())
    other["tasks"] += 1
    parts[1].write_text(json.dumps(other))
    with pytest.raises(DecontaminationError, match="checked with another tasks"):
        merge_reports(parts, tmp_path / "m.json", tmp_path / "m.md")


def test_ngrams_common_to_many_items_are_boilerplate(tmp_path: Path) -> None:
    shared = "Write the final answer to the file named answer txt in the app directory now"
    bench = tmp_path / "bench"
    for i in range(12):
        task = bench / f"item-{i}"
        shutil.copytree(FIXTURE_TASKS / "count-error-lines", task)
        text = f"Task {i}: count things numbered {i * 7} in log {i}.\n{shared}.\n"
        (task / "instruction.md").write_text(text)
        toml = (task / "task.toml").read_text().replace("count-error-lines", f"item-{i}")
        (task / "task.toml").write_text(toml)
    benchmark = ("tb-lite", tmp_path / "b.parquet", tmp_path / "b.json")
    load_benchmark("tb-lite", benchmark[1], benchmark[2], work_dir=tmp_path / "w",
                   sources={"tb-lite": {"path": str(bench)}})  # fmt: skip
    tasks = tasks_parquet(tmp_path / "t.parquet", {"polite": (f"{CLEAN} {shared}.", {})})
    report = decontaminate(
        tasks, [benchmark], ngram_sizes=[13], boilerplate_min_items=10, self_test_leaks=0,
        report_json=tmp_path / "r.json", report_md=tmp_path / "r.md",
    )  # fmt: skip
    [entry] = report["flagged"]["13"]
    assert entry["count"] == 0 and entry["boilerplate_ngrams"]["tb-lite"] > 0
    assert report["summary"][0]["tasks_flagged"] == 0
    assert report["boilerplate"]["13"]["tb-lite"][0]["items"] == 12


@pytest.mark.parametrize(
    ("rule", "threshold", "removed"),
    [("any", 0, ["leaky"]), ("count", 5, ["leaky"]), ("count", 500, []), ("fraction", 0.9, [])],
)
def test_the_filter_applies_the_configured_rule(
    tmp_path: Path,
    fixture_benchmark: tuple[str, Path, Path],
    rule: str,
    threshold: float,
    removed: list[str],
) -> None:
    run_check(tmp_path, fixture_benchmark, self_test_leaks=0)
    clean, out = tmp_path / "clean.parquet", tmp_path / "removed.json"
    summary = filter_tasks(tmp_path / "tasks.parquet", tmp_path / "report.json", ngram=13,
                           rule=rule, threshold=threshold, clean=clean, removed=out)  # fmt: skip
    assert [r["task_id"] for r in summary["removed"]] == removed
    kept = pq.read_table(clean).column("task_id").to_pylist()
    assert sorted(kept) == sorted({"clean", "leaky", "binary"} - set(removed))
    if removed:
        reason = json.loads(out.read_text())["removed"][0]["reason"]
        assert "terminal-bench-2.0 item 'count-error-lines'" in reason


def test_a_missing_benchmark_is_an_error_or_a_recorded_skip(tmp_path: Path) -> None:
    sources = {"tb-lite": {"path": str(tmp_path / "nowhere")}}
    with pytest.raises(DecontaminationError, match=r"evaluation\.sources\.tb-lite: \{path: DIR\}"):
        load_benchmark("tb-lite", tmp_path / "t.parquet", tmp_path / "t.json",
                       work_dir=tmp_path, sources=sources)  # fmt: skip
    info = load_benchmark("tb-lite", tmp_path / "t.parquet", tmp_path / "t.json",
                          work_dir=tmp_path, sources=sources, on_missing="skip")  # fmt: skip
    assert info["status"] == "skipped"
    tasks = tasks_parquet(tmp_path / "x.parquet", {"clean": (CLEAN, {})})
    report = decontaminate(
        tasks, [("tb-lite", tmp_path / "t.parquet", tmp_path / "t.json")], ngram_sizes=[13],
        boilerplate_min_items=10, report_json=tmp_path / "r.json", report_md=tmp_path / "r.md",
    )  # fmt: skip
    assert report["summary"] == []
    assert "**tb-lite: not checked**" in (tmp_path / "r.md").read_text()
    summary = filter_tasks(tasks, tmp_path / "r.json", ngram=13, rule="any", threshold=0,
                           clean=tmp_path / "c.parquet", removed=tmp_path / "rm.json")  # fmt: skip
    assert summary["not_checked"] == ["tb-lite"] and summary["kept"] == 1


def test_the_report_is_the_same_in_every_process(tmp_path: Path) -> None:
    """Two benchmarks holding the same item tie on every match; the report must not
    order them by Python's per-process string hashing (a Slurm job and a local run
    of the same inputs wrote different reports before)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    benchmarks = []
    for name in ("terminal-bench-2.0", "tb-lite"):
        texts, manifest = tmp_path / f"{name}.parquet", tmp_path / f"{name}.json"
        load_benchmark(name, texts, manifest, work_dir=tmp_path / "work",
                       sources={name: {"path": str(FIXTURE_TASKS)}})  # fmt: skip
        benchmarks.append([name, str(texts), str(manifest)])
    tasks = tasks_parquet(tmp_path / "tasks.parquet",
                          {"leaky": (LOG_INSTRUCTION, {"environment/notes.md": LEAK})})  # fmt: skip
    script = (
        "import json, sys\nfrom pathlib import Path\n"
        "from tmax.decontam.stage import decontaminate\n"
        "out = Path(sys.argv[1]); out.mkdir()\n"
        f"decontaminate(Path({str(tasks)!r}), [tuple(b) for b in {benchmarks!r}], "
        "report_json=out / 'report.json', report_md=out / 'report.md', ngram_sizes=[13], "
        "boilerplate_min_items=10, self_test_leaks=0)\n"
    )
    reports = []
    for seed in map(str, range(1, 9)):
        out = tmp_path / f"seed{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed,
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}  # fmt: skip
        subprocess.run([sys.executable, "-c", script, str(out)], check=True, env=env)
        reports.append((out / "report.json").read_text())
    assert all(report == reports[0] for report in reports)
    flagged = json.loads(reports[0])["flagged"]["13"][0]
    assert [m["benchmark"] for m in flagged["matches"]][:2] == ["tb-lite", "terminal-bench-2.0"]
