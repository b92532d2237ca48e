"""Benchmarks as task sets: local Harbor directories, pinned git repositories, SWE-bench
and AIME converted into tasks (graded for real), held-out tasks, and the registry."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURE_TASKS
from tmax import benchmarks
from tmax.benchmarks import (
    BenchmarkError,
    TaskSet,
    aime,
    aime_tasks,
    harbor_directory,
    harbor_git,
    heldout,
    known_benchmarks,
    resolve_benchmark,
    swe_bench_image,
    swe_bench_tasks,
    swe_bench_verified,
)
from tmax.benchmarks.data import swe_bench_grade
from tmax.sandbox.episode import LayeredImage, layered_image, run_episode, sandbox_for_task
from tmax.tasks import read_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "benchmarks"
SWE_JSONL = FIXTURES / "swe_bench_verified.jsonl"
AIME_FILES = {"2024": FIXTURES / "aime_2024.jsonl", "2025": FIXTURES / "aime_2025.jsonl"}
LOGS = FIXTURES / "logs"
GRADER = benchmarks.DATA_DIR / "swe_bench_grade.py"


USER_CACHE = os.environ.get("TMAX_CACHE")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkouts and dataset caches go to the test's own directory."""
    monkeypatch.setenv("TMAX_CACHE", str(tmp_path / "cache"))


def use_user_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sandbox images and root file systems are shared, expensive artefacts."""
    if USER_CACHE is None:
        monkeypatch.delenv("TMAX_CACHE")
    else:
        monkeypatch.setenv("TMAX_CACHE", USER_CACHE)


def swe_rows() -> list[dict]:
    return [json.loads(line) for line in SWE_JSONL.read_text().splitlines()]


def copy_fixture_tasks(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for task in FIXTURE_TASKS.iterdir():
        shutil.copytree(task, dest / task.name)
    return dest


# --- local Harbor directories -----------------------------------------------------------


def test_harbor_directory_lists_valid_tasks_sorted_with_domains(tmp_path: Path) -> None:
    root = copy_fixture_tasks(tmp_path / "bench")
    (root / ".git").mkdir()  # hidden directories are not tasks
    task_set = harbor_directory(root)
    assert task_set.name == "bench"
    assert task_set.names == tuple(sorted(p.name for p in FIXTURE_TASKS.iterdir()))
    assert task_set.tasks[0].parent == root
    assert task_set.source == str(root.resolve())
    assert task_set.domains["sum-csv-column"] == "data_processing"  # tmax.json
    assert task_set.domains["count-error-lines"] == "file_operations"  # [metadata].category
    assert task_set.domains["answer-checked-by-pytest"] == "unknown"
    assert len(task_set) == 4


def test_harbor_directory_finds_tasks_one_level_down(tmp_path: Path) -> None:
    copy_fixture_tasks(tmp_path / "repo" / "tasks")
    (tmp_path / "repo" / "README.md").write_text("a benchmark\n")
    task_set = harbor_directory(tmp_path / "repo", name="nested")
    assert task_set.name == "nested"
    assert "sum-csv-column" in task_set.names
    assert all(path.parent.name == "tasks" for path in task_set.tasks)


def test_malformed_task_is_named_with_its_problem(tmp_path: Path) -> None:
    root = copy_fixture_tasks(tmp_path / "bench")
    toml = root / "count-error-lines" / "task.toml"
    toml.write_text(toml.read_text().replace("cpus = 1", 'cpus = "two"'))
    with pytest.raises(BenchmarkError, match=r"bench: task count-error-lines is malformed.*cpus"):
        harbor_directory(root)
    toml.write_text(toml.read_text().replace('cpus = "two"', "cpus = 1"))
    (root / "sum-csv-column" / "instruction.md").unlink()
    with pytest.raises(BenchmarkError, match=r"sum-csv-column.*instruction.md"):
        harbor_directory(root)


def test_empty_or_missing_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty" / "docs").mkdir(parents=True)
    with pytest.raises(BenchmarkError, match="no tasks in"):
        harbor_directory(tmp_path / "empty")
    with pytest.raises(BenchmarkError, match="not a directory"):
        harbor_directory(tmp_path / "absent", name="absent")


# --- git repositories at a pinned commit ------------------------------------------------


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid"]
    result = subprocess.run(
        ["git", *identity, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


@pytest.fixture
def task_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A git repository of Harbor tasks under tasks/: commit A with two tasks, then
    commit B that adds a task and changes an instruction."""
    repo = tmp_path / "origin"
    (repo / "tasks").mkdir(parents=True)
    git(repo, "init", "-q")
    for name in ("count-error-lines", "sum-csv-column"):
        shutil.copytree(FIXTURE_TASKS / name, repo / "tasks" / name)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two tasks")
    first = git(repo, "rev-parse", "HEAD")
    shutil.copytree(FIXTURE_TASKS / "answer-checked-by-pytest", repo / "tasks" / "answer-later")
    (repo / "tasks" / "sum-csv-column" / "instruction.md").write_text("Changed later.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a third task")
    return repo, first, git(repo, "rev-parse", "HEAD")


def test_harbor_git_materialises_exactly_the_pinned_commit(
    task_repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, first, second = task_repo
    url = repo.as_uri()
    cache = tmp_path / "checkouts"
    old = harbor_git(url, first, subdir="tasks", cache=cache)
    assert old.names == ("count-error-lines", "sum-csv-column")
    assert old.source == f"{url}@{first}:tasks"
    assert "Changed later" not in (old.tasks[1] / "instruction.md").read_text()
    new = harbor_git(url, second, subdir="tasks", cache=cache, name="tb")
    assert new.name == "tb"
    assert new.names == ("answer-later", "count-error-lines", "sum-csv-column")
    # The later commit left the old checkout alone; a second resolution reuses it.
    again = harbor_git(url, first, subdir="tasks", cache=cache)
    assert again == old
    assert not any(p.name.startswith(".") and p.is_dir() for p in cache.iterdir())
    shutil.rmtree(repo)  # no network needed once materialised
    assert harbor_git(url, first, subdir="tasks", cache=cache).names == old.names


def test_harbor_git_resolves_a_prefix_and_falls_back_to_a_full_fetch(
    task_repo: tuple[Path, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, first, _ = task_repo
    # Protocol v0 servers refuse fetching an unadvertised sha: the full fetch takes over.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.version")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "0")
    full = harbor_git(repo.as_uri(), first, subdir="tasks", cache=tmp_path / "a")
    prefix = harbor_git(repo.as_uri(), first[:10], subdir="tasks", cache=tmp_path / "b")
    assert full.names == prefix.names == ("count-error-lines", "sum-csv-column")
    assert prefix.source == f"{repo.as_uri()}@{first}:tasks"


def test_harbor_git_errors_name_the_commit_or_the_url(
    task_repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, first, _ = task_repo
    missing = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(BenchmarkError, match=f"commit {missing} is not in {repo.as_uri()}"):
        harbor_git(repo.as_uri(), missing, cache=tmp_path / "c")
    with pytest.raises(BenchmarkError, match="not a hexadecimal git sha"):
        harbor_git(repo.as_uri(), "main", cache=tmp_path / "c")
    absent = (tmp_path / "no-such-repo").as_uri()
    with pytest.raises(BenchmarkError, match=rf"cannot fetch {re.escape(absent)}: .*"):
        harbor_git(absent, first, cache=tmp_path / "c")
    assert not [p for p in (tmp_path / "c").iterdir() if p.is_dir()]  # nothing half-made
    with pytest.raises(BenchmarkError, match="has no directory 'benchmarks'"):
        harbor_git(repo.as_uri(), first, subdir="benchmarks", cache=tmp_path / "c")


# --- SWE-bench Verified -----------------------------------------------------------------


def test_swe_bench_image_follows_the_harness_naming() -> None:
    assert (
        swe_bench_image("django__django-11099")
        == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    )
    assert swe_bench_image("Some__Repo-1") == "swebench/sweb.eval.x86_64.some_1776_repo-1:latest"


def test_swe_bench_conversion_makes_valid_tasks(tmp_path: Path) -> None:
    task_set = swe_bench_verified(tmp_path / "swe", data_files=SWE_JSONL)
    assert task_set.names == ("django__django-13447", "psf__requests-6190")
    assert task_set.domains == {
        "django__django-13447": "django/django",
        "psf__requests-6190": "psf/requests",
    }
    assert str(SWE_JSONL) in task_set.source
    rows = {row["instance_id"]: row for row in swe_rows()}
    for path in task_set.tasks:
        task = read_task(path)
        row = rows[task.name]
        dockerfile = task.environment["Dockerfile"].data.decode()
        assert f"FROM {swe_bench_image(task.name)}\n" in dockerfile
        assert dockerfile.rstrip().endswith("WORKDIR /testbed")
        assert task.tests["test.patch"].data.decode() == row["test_patch"]
        assert task.tests["test.sh"].executable
        spec = json.loads(task.tests["tests.json"].data)
        assert spec["fail_to_pass"] == json.loads(row["FAIL_TO_PASS"])
        assert spec["pass_to_pass"] == json.loads(row["PASS_TO_PASS"])
        assert task.tests["swe_bench_grade.py"].data == GRADER.read_bytes()
        assert task.config.get("verifier", "timeout_sec") == 1800
        assert task.config.get("agent", "timeout_sec") == 3000
        assert task.config.metadata["benchmark"] == "swe-bench-verified"
        assert task.config.metadata["repo"] == row["repo"]
        assert task.config.metadata["instance_id"] == task.name
        assert "/testbed" in task.instruction
        assert row["problem_statement"].strip() in task.instruction
        assert task.solution is not None
        assert task.solution["fix.patch"].data.decode() == row["patch"]
        script = path / "tests" / "test.sh"
        subprocess.run(["bash", "-n", str(script)], check=True)  # valid shell


def test_swe_bench_test_script_runs_the_patched_tests_of_each_repo(tmp_path: Path) -> None:
    task_set = swe_bench_tasks(swe_rows(), tmp_path / "swe")
    requests_sh = (task_set.tasks[1] / "tests" / "test.sh").read_text()
    assert "git checkout 0192aac24123735b3eaf9b08df46429bb770c283 -- tests/test_utils.py" in (
        requests_sh
    )
    assert "rm -f -- tests/data/no_proxy.txt" in requests_sh  # new in the patch
    assert "git apply -v /tests/test.patch" in requests_sh
    # The data file the patch adds is not run as a test.
    assert re.search(r"^pytest -rA tests/test_utils.py 2>&1", requests_sh, re.MULTILINE)
    assert "python -m pip install ." in requests_sh
    assert "/logs/verifier/reward.txt" in requests_sh
    django_sh = (task_set.tasks[0] / "tests" / "test.sh").read_text()
    assert "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 " in django_sh
    assert "utils_tests.test_text 2>&1" in django_sh  # a module, not a path
    assert "export LC_ALL=en_US.UTF-8" in django_sh  # Django 3.x needs the locale


def test_swe_bench_conversion_is_a_no_op_unless_an_instance_changed(tmp_path: Path) -> None:
    dest = tmp_path / "swe"
    rows = swe_rows()
    first = swe_bench_tasks(rows, dest)
    inodes = {path.name: path.stat().st_ino for path in first.tasks}
    second = swe_bench_tasks(swe_rows(), dest)
    assert second == first
    assert {path.name: path.stat().st_ino for path in second.tasks} == inodes  # untouched
    rows[1]["problem_statement"] = "A different description of the bug."
    swe_bench_tasks(rows, dest)
    after = {path.name: path.stat().st_ino for path in first.tasks}
    assert after["psf__requests-6190"] == inodes["psf__requests-6190"]
    assert after["django__django-13447"] != inodes["django__django-13447"]
    instruction = (dest / "django__django-13447" / "instruction.md").read_text()
    assert "A different description" in instruction


def test_swe_bench_bad_instances_are_named(tmp_path: Path) -> None:
    row = swe_rows()[0]
    with pytest.raises(BenchmarkError, match=r"psf__requests-6190: missing field.*test_patch"):
        swe_bench_tasks([{**row, "test_patch": ""}], tmp_path)
    with pytest.raises(BenchmarkError, match=r"'octo/cat' is not one of .*sympy/sympy"):
        swe_bench_tasks([{**row, "repo": "octo/cat"}], tmp_path)
    with pytest.raises(BenchmarkError, match="FAIL_TO_PASS is not a JSON list"):
        swe_bench_tasks([{**row, "FAIL_TO_PASS": "[oops"}], tmp_path)
    with pytest.raises(BenchmarkError, match=r"data file.*not found"):
        swe_bench_verified(tmp_path, data_files=tmp_path / "absent.jsonl")


# --- the in-sandbox SWE-bench grader ----------------------------------------------------


def test_grader_parsers_read_each_log_format() -> None:
    pytest_log = (LOGS / "requests_unresolved.log").read_text()
    statuses = swe_bench_grade.parse_pytest_options(pytest_log)
    assert statuses["tests/test_utils.py::test_super_len_io_streams"] == "PASSED"
    failed = "tests/test_utils.py::test_should_bypass_proxies_ipv6_literal[http://[::1]:5000/-True]"
    assert statuses[failed] == "FAILED"
    # Path-like parameters are cut to their last component, as the harness does.
    options = swe_bench_grade.parse_pytest_options("PASSED t.py::test_read[/tmp/x/data.csv]\n")
    assert options == {"t.py::test_read[/data.csv]": "PASSED"}
    coloured = "\x1b[32mPASSED\x1b[0m a.py::test_one\nb.py::test_two FAILED\n"
    assert swe_bench_grade.parse_pytest_v2(coloured) == {
        "a.py::test_one": "PASSED",
        "b.py::test_two": "FAILED",
    }
    django = swe_bench_grade.parse_django((LOGS / "django_unresolved.log").read_text())
    assert django["test_slugify (utils_tests.test_text.TestUtilsText)"] == "PASSED"
    assert django["test_slugify_collapses_underscores (utils_tests.test_text.TestUtilsText)"] == (
        "FAILED"
    )
    sympy = swe_bench_grade.parse_sympy((LOGS / "sympy_mixed.log").read_text())
    assert sympy["test_Rational_new"] == "PASSED"
    assert sympy["test_Float_issue_2107"] == "FAILED"
    assert sympy["test_mod_inverse"] == "ERROR"
    assert set(swe_bench_grade.PARSERS) >= {
        entry["parser"] for entry in yaml.safe_load(
            (benchmarks.DATA_DIR / "swe_bench_repos.yaml").read_text()
        )["repos"].values()
    }  # fmt: skip


@pytest.mark.parametrize(
    ("instance", "log", "resolved"),
    [
        ("psf__requests-6190", "requests_resolved.log", True),
        ("psf__requests-6190", "requests_unresolved.log", False),
        ("django__django-13447", "django_resolved.log", True),
        ("django__django-13447", "django_unresolved.log", False),  # also misses test_wrap
        ("psf__requests-6190", "django_resolved.log", False),  # nothing it lists ran
    ],
)
def test_grader_script_decides_from_the_shipped_spec(
    instance: str, log: str, resolved: bool, tmp_path: Path
) -> None:
    task_set = swe_bench_tasks(swe_rows(), tmp_path / "swe")
    tests = task_set.tasks[task_set.names.index(instance)] / "tests"
    result = subprocess.run(
        [sys.executable, str(tests / "swe_bench_grade.py"), str(tests / "tests.json"),
         str(LOGS / log)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == (0 if resolved else 1), result.stdout + result.stderr
    assert ("NOT RESOLVED" not in result.stdout) == resolved


def test_grader_rejects_bad_usage(tmp_path: Path) -> None:
    spec = tmp_path / "tests.json"
    spec.write_text(json.dumps({"parser": "nose", "fail_to_pass": []}))
    result = subprocess.run([sys.executable, str(GRADER), str(spec), str(spec)], check=False)
    assert result.returncode == 2
    assert subprocess.run([sys.executable, str(GRADER)], check=False).returncode == 2


# --- AIME -------------------------------------------------------------------------------


def test_aime_conversion_makes_valid_fast_path_tasks(tmp_path: Path) -> None:
    task_set = aime(tmp_path / "aime", data_files=AIME_FILES)
    assert task_set.name == "aime"
    assert task_set.names == ("aime-2024-60", "aime-2024-61", "aime-2025-0", "aime-2025-1")
    assert task_set.domains["aime-2024-61"] == "aime-2024"
    assert task_set.domains["aime-2025-0"] == "aime-2025"
    base = (benchmarks.definitions_dir() / "base" / "Dockerfile").read_text()
    for path in task_set.tasks:
        task = read_task(path)
        assert task.environment["Dockerfile"].data.decode().startswith(base)
        # The base definition itself: the task runs on the bwrap fast path.
        assert layered_image(path) == LayeredImage("base", ())
        assert "/app/answer.txt" in task.instruction
        assert task.config.metadata["benchmark"] == "aime"
        assert task.config.network_mode == "no-network"
        assert "expected_answer.txt" in task.tests
        assert "expected_answer" not in task.instruction
    answers = {p.name: (p / "tests" / "expected_answer.txt").read_text() for p in task_set.tasks}
    assert answers == {"aime-2024-60": "8\n", "aime-2024-61": "376\n", "aime-2025-0": "15\n",
                       "aime-2025-1": "64\n"}  # fmt: skip
    assert read_task(task_set.tasks[0]).config.metadata["year"] == "2024"


def test_aime_takes_other_column_names_and_rejects_bad_answers(tmp_path: Path) -> None:
    renamed = [
        {"question": "What is $1+1$?", "answer": 2},
        {"problem": "What is $1+2$?", "answer": 3, "ID": "2025-II-4"},
    ]
    task_set = aime_tasks(renamed, tmp_path, year="2025")
    assert task_set.names == ("aime-2025-01", "aime-2025-ii-4")
    assert task_set.name == "aime-2025"
    with pytest.raises(BenchmarkError, match=r"aime-2024 problem 1: answer '12\.5'"):
        aime_tasks([{"problem": "p", "answer": "12.5"}], tmp_path, year="2024")
    with pytest.raises(BenchmarkError, match="answer 1000 is not an integer from 0 to 999"):
        aime_tasks([{"problem": "p", "answer": 1000}], tmp_path, year="2024")
    with pytest.raises(BenchmarkError, match="no problem text"):
        aime_tasks([{"answer": "5"}], tmp_path, year="2024")
    with pytest.raises(BenchmarkError, match=r"no dataset for year '1999'"):
        aime(tmp_path, years=("1999",))


def _sandbox_unavailable() -> str | None:
    # As tests/sandbox/test_sandbox.py decides for the bwrap backend.
    if os.geteuid() != 0:
        return "sandbox tests need root (rootful podman, cgroups for bwrap)"
    if shutil.which("bwrap") is None or shutil.which("debootstrap") is None:
        return "bwrap or debootstrap is not installed (./setup.sh installs them)"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_sandbox_unavailable() is not None, reason=str(_sandbox_unavailable()))
def test_aime_oracle_passes_and_wrong_answers_fail_in_bwrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_user_cache(monkeypatch)
    task_set = aime_tasks(
        [json.loads(line) for line in AIME_FILES["2025"].read_text().splitlines()],
        tmp_path / "aime",
        year="2025",
    )
    task_dir = task_set.tasks[1]  # answer 64, published as "064"
    cases = [
        (["bash /solution/solve.sh"], 1.0),  # the oracle
        (["printf ' 0064\\n\\n' > /app/answer.txt"], 1.0),  # whitespace, leading zeros
        (["echo 7 > /app/answer.txt"], 0.0),  # wrong
        (["echo '64 subsets' > /app/answer.txt"], 0.0),  # not only the integer
        ([], 0.0),  # no answer at all
    ]
    for commands, reward in cases:
        with sandbox_for_task(task_dir, "bwrap", run_id="pytest-aime") as box:
            box.upload(task_dir / "solution", "/solution")
            episode = run_episode(box, commands, task_dir / "tests")
        assert episode.reward == reward, (commands, episode.reason, episode.verification)


# --- held-out generated tasks -----------------------------------------------------------


def make_generated_tasks(root: Path) -> Path:
    """results/tasks/shards/<NNNNN>/<task> with tmax.json domains."""
    for shard, name, domain in [
        ("00000", "spec-aaa", "data_processing"),
        ("00000", "spec-bbb", "security"),
        ("00001", "spec-ccc", "debugging"),
    ]:
        task = root / "shards" / shard / name
        shutil.copytree(FIXTURE_TASKS / "sum-csv-column", task)
        meta = json.loads((task / "tmax.json").read_text())
        meta["axes"]["domain"] = domain
        (task / "tmax.json").write_text(json.dumps(meta))
    return root


def test_heldout_restricts_to_named_tasks_with_their_domains(tmp_path: Path) -> None:
    root = make_generated_tasks(tmp_path / "results" / "tasks")
    everything = heldout(root)
    assert everything.names == ("spec-aaa", "spec-bbb", "spec-ccc")
    chosen = heldout(root, ["spec-ccc", "spec-aaa"])
    assert chosen.names == ("spec-aaa", "spec-ccc")
    assert dict(chosen.domains) == {"spec-aaa": "data_processing", "spec-ccc": "debugging"}
    assert chosen.tasks[1] == root / "shards" / "00001" / "spec-ccc"
    with pytest.raises(BenchmarkError, match=r"1 task.*not under .*: spec-zzz"):
        heldout(root, ["spec-aaa", "spec-zzz"])
    with pytest.raises(BenchmarkError, match="no tasks under"):
        heldout(root, [])


# --- the registry -----------------------------------------------------------------------


def test_registry_pins_sources() -> None:
    registry = benchmarks.load_registry()
    assert set(known_benchmarks()) == {
        "terminal-bench-2.0", "tb-lite", "swe-bench-verified", "aime", "heldout",
    }  # fmt: skip
    for name in ("terminal-bench-2.0", "tb-lite"):
        assert registry[name]["url"].startswith("https://github.com/")
        assert re.fullmatch(r"[0-9a-f]{40}", registry[name]["commit"])
    assert registry["swe-bench-verified"]["dataset"] == "princeton-nlp/SWE-bench_Verified"
    assert registry["aime"]["years"]["2024"]["dataset"] == "HuggingFaceH4/aime_2024"
    repos = yaml.safe_load((benchmarks.DATA_DIR / "swe_bench_repos.yaml").read_text())["repos"]
    assert {repo.split("/")[1] for repo in repos} == {
        "astropy", "django", "matplotlib", "seaborn", "flask", "requests", "xarray",
        "pylint", "pytest", "scikit-learn", "sphinx", "sympy",
    }  # fmt: skip


def test_resolve_benchmark_dispatches_and_honours_overrides(
    tmp_path: Path, task_repo: tuple[Path, str, str]
) -> None:
    local = copy_fixture_tasks(tmp_path / "tb2")
    tb2 = resolve_benchmark(
        "terminal-bench-2.0", overrides={"terminal-bench-2.0": {"path": local}}, work_dir=tmp_path
    )
    assert tb2.name == "terminal-bench-2.0" and len(tb2) == 4
    repo, first, _ = task_repo
    override = {"git_url": repo.as_uri(), "commit": first, "subdir": "tasks"}
    lite = resolve_benchmark("tb-lite", overrides={"tb-lite": override}, work_dir=tmp_path)
    assert lite.names == ("count-error-lines", "sum-csv-column")
    assert lite.source == f"{repo.as_uri()}@{first}:tasks"
    swe = resolve_benchmark(
        "swe-bench-verified",
        overrides={"swe-bench-verified": {"data_files": str(SWE_JSONL)}},
        work_dir=tmp_path / "work",
    )
    assert swe.tasks[0].parent == tmp_path / "work" / "swe-bench-verified"
    assert len(swe) == 2
    one_year = resolve_benchmark(
        "aime",
        overrides={"aime": {"data_files": {"2024": AIME_FILES["2024"]}}},
        work_dir=tmp_path / "work",
    )
    assert set(one_year.domains.values()) == {"aime-2024"}
    root = make_generated_tasks(tmp_path / "results" / "tasks")
    held = resolve_benchmark(
        "heldout", work_dir=tmp_path, heldout_root=root, heldout_names=["spec-bbb"]
    )
    assert held.names == ("spec-bbb",) and held.domains["spec-bbb"] == "security"


def test_resolve_benchmark_errors_are_explicit(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match=r"unknown benchmark 'tb3'; known benchmarks: aime,"):
        resolve_benchmark("tb3", work_dir=tmp_path)
    with pytest.raises(BenchmarkError, match=r"unknown override key.*branch; allowed: path"):
        resolve_benchmark("tb-lite", overrides={"tb-lite": {"branch": "main"}}, work_dir=tmp_path)
    with pytest.raises(BenchmarkError, match="needs heldout_root"):
        resolve_benchmark("heldout", work_dir=tmp_path)
    with pytest.raises(BenchmarkError, match="data_files applies only"):
        resolve_benchmark("heldout", overrides={"heldout": {"data_files": "x"}}, work_dir=tmp_path)
    with pytest.raises(BenchmarkError, match="map a year"):
        resolve_benchmark("aime", overrides={"aime": {"data_files": "a.jsonl"}}, work_dir=tmp_path)


def test_task_set_is_immutable() -> None:
    task_set = TaskSet("x", (Path("a"),), "here", {"a": "d"})
    with pytest.raises(TypeError):
        task_set.domains["a"] = "other"  # type: ignore[index]
