"""The verifier-network classifier on small synthetic Harbor task directories."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tmax.benchmarks.network import (
    DATA_FILE,
    ReleaseTrial,
    classify_log,
    classify_task,
    main,
    measure_release,
    read_release,
    scan_text,
)

# The usual shape of a Terminal-Bench 2.0 verifier, written for this test.
DOWNLOADING = """\
#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf \\
  https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env
uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  pytest /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""
LOCAL = """\
#!/bin/bash
# apt-get install -y curl   (not needed: the image has it)
curl -s http://localhost:8080/health && curl -s http://api:5000/items
git clone /app/repo /tmp/copy
pip install --no-index /tests/wheels/checker.whl
python3 -m pytest /tests/test_outputs.py && echo 1 > /logs/verifier/reward.txt
"""


def make_task(root: Path, name: str, test_sh: str, toml: str = "", **files: str) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text(toml)
    (task / "tests" / "test.sh").write_text(test_sh)
    for relative, text in files.items():
        (task / "tests" / relative).write_text(text)
    return task


def test_a_tb2_style_verifier_needs_the_network(tmp_path: Path) -> None:
    result = classify_task(make_task(tmp_path, "tb2-like", DOWNLOADING))
    assert result.needs_network
    assert result.kinds() == ["apt", "download", "uvx"]
    assert "download astral.sh" in result.commands()
    uvx = next(use for use in result.uses if use.kind == "uvx")
    assert (uvx.file, uvx.line) == ("tests/test.sh", 7)  # a continued line: its first
    # the task says nothing: Harbor gives the verifier the network, our RL default not
    assert result.verifier_mode == {"harbor": "public", "task": "no-network", "off": "no-network"}
    assert result.fails_under("task") and not result.fails_under("harbor")


def test_local_urls_comments_and_offline_installs_need_no_network(tmp_path: Path) -> None:
    result = classify_task(make_task(tmp_path, "local", LOCAL))
    assert not result.needs_network, result.uses
    assert not result.fails_under("off")


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("pip3 install -q requests", "pip"),
        ("python3 -m pip install numpy==2.0", "pip"),
        ("uv pip install --system pytest", "uv"),
        ("uv run --with pytest pytest", "uv"),
        ("wget -q https://example.org/data.tar.gz", "download"),
        ("git clone https://github.com/org/repo.git /tmp/r", "git"),
        ("npm install -g tsx", "npm"),
        ("apk add --no-cache curl", "apk"),
        ("cargo install ripgrep", "cargo"),
        ("go install example.com/tool@latest", "go"),
        ("curl -fsSL http://8.8.8.8/x", "download"),
    ],
)
def test_each_kind_of_download_is_found(line: str, kind: str) -> None:
    assert [use.kind for use in scan_text(line, "tests/test.sh")] == [kind]


@pytest.mark.parametrize(
    "line",
    [
        "curl http://127.0.0.1:9000/",
        "curl http://10.0.0.5/",
        "wget http://db/dump.sql",
        'curl "http://${HOST}/x"',
        "echo see https://example.org for details",  # a URL, but no download
        "uv run pytest",  # runs the locked project; no extra packages named
    ],
)
def test_lines_that_stay_local(line: str) -> None:
    assert scan_text(line, "tests/test.sh") == []


def test_python_tests_that_fetch_count_and_local_ones_do_not(tmp_path: Path) -> None:
    fetching = 'from urllib.request import urlopen\nurlopen("https://pypi.org/simple/")\n'
    local = 'import requests\n\ndef test_app():\n    requests.get("http://localhost:8000/")\n'
    files = {"test_a.py": fetching, "test_b.py": local, "notes": "see https://pypi.org\n"}
    task = make_task(tmp_path, "py", "#!/bin/bash\npytest /tests\n", **files)
    uses = classify_task(task).uses
    assert [(u.label(), u.file, u.line) for u in uses] == [
        ("python-fetch pypi.org", "tests/test_a.py", 2)
    ]


def test_the_task_toml_decides_what_each_policy_gives_the_verifier(tmp_path: Path) -> None:
    offline = '[environment]\nnetwork_mode = "no-network"\n'
    result = classify_task(make_task(tmp_path, "a", DOWNLOADING, offline))
    assert result.fails_under("harbor") and result.fails_under("task")
    opened = offline + '[verifier]\nnetwork_mode = "public"\n'
    result = classify_task(make_task(tmp_path, "b", DOWNLOADING, opened))
    assert not result.fails_under("harbor") and not result.fails_under("task")
    assert result.fails_under("off")


def test_cli_prints_a_table_and_records_facts_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_task(tmp_path / "bench", "downloads", DOWNLOADING)
    make_task(tmp_path / "bench", "local", LOCAL)
    (tmp_path / "bench" / "not-a-task").mkdir()
    out = tmp_path / "verifier_network.yaml"
    args = ["--update", str(out), "--benchmark", "bench", "--commit", "abc123"]
    assert main([str(tmp_path / "bench"), *args]) == 0
    printed = capsys.readouterr().out
    assert "downloads" in printed and "1 of 2 verifiers need the network" in printed
    entry = yaml.safe_load(out.read_text())["benchmarks"]["bench"]
    assert entry["commit"] == "abc123" and entry["tasks"] == 2
    assert entry["verifier_needs_network"] == 1
    assert entry["fails_offline"] == {"harbor": 0, "task": 1, "off": 1}
    assert entry["by_kind"] == {"apt": 1, "download": 1, "uvx": 1}
    assert list(entry["needs_network"]) == ["downloads"]
    assert "pytest==8.4.1" not in out.read_text()  # no script text in the data


def test_cli_without_tasks_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main([str(tmp_path)])


def test_the_committed_data_names_its_commits() -> None:
    data = yaml.safe_load(DATA_FILE.read_text())["benchmarks"]
    assert data["terminal-bench-2.0"]["commit"] == "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c"
    assert data["tb-lite"]["commit"] == "f075e463472c7790b85793b392dff1fff20cc0e3"
    for entry in data.values():
        assert entry["status"] in ("measured", "not measured")
        if entry["status"] == "measured":
            assert entry["verifier_needs_network"] == len(entry["needs_network"])


# --- Verifier logs: synthetic text in the shapes apt, the uv installer, uv, pip, curl,
# wget and git print (written for these tests, not copied from any run).

TB2_LOG = """\
Hit:1 http://deb.example.org/debian bookworm InRelease
Get:2 http://deb.example.org/debian bookworm-updates InRelease [55.4 kB]
Fetched 9,312 kB in 1s (8,020 kB/s)
Reading package lists...
Get:7 http://deb.example.org/debian bookworm/main amd64 curl amd64 7.88.1-10 [316 kB]
Setting up curl (7.88.1-10) ...
downloading uv 0.9.5 x86_64-unknown-linux-gnu
no checksums to verify
installing to /root/.local/bin
everything's installed!
Downloading cpython-3.13.7-linux-x86_64-gnu (download) (33.6MiB)
 Downloading cpython-3.13.7-linux-x86_64-gnu (download)
Downloading pygments (1.2MiB)
 Downloading pygments
Installed 6 packages in 21ms
============================= test session starts ==============================
collected 3 items
../tests/test_outputs.py ...                                             [100%]
"""


def test_a_tb2_style_verifier_log_shows_apt_the_uv_installer_and_uv() -> None:
    verifier = classify_log(TB2_LOG)
    assert verifier.kinds == {"apt": 4, "download": 1, "uv": 3}
    assert verifier.state == "network" and verifier.used_network and verifier.tests_ran
    assert verifier.unreachable == 0


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("Hit:3 http://archive.example.com/ubuntu noble-updates InRelease", "apt"),
        ("Get:12 https://cdn.example.net/debian stable/main amd64 Packages [8,792 kB]", "apt"),
        ("Ign:4 http://mirror.example.org/ubuntu noble InRelease", "apt"),
        ("Fetched 48.2 MB in 3s (15.1 MB/s)", "apt"),
        ("downloading uv 0.9.5 x86_64-unknown-linux-gnu", "download"),
        ("downloading ruff 0.6.1 aarch64-unknown-linux-musl", "download"),
        (
            "100 38.8M  100 38.8M    0     0  86.9M      0 --:--:-- --:--:-- --:--:-- 86.9M",
            "download",
        ),
        (
            "Connecting to files.example.org (files.example.org)|93.184.216.34|:443... connected.",
            "download",
        ),
        ("Downloading numpy (15.9MiB)", "uv"),
        ("  Downloading cpython-3.12.11-linux-x86_64-gnu (download) (32.1MiB)", "uv"),
        ("Installed 46 packages in 511ms", "uv"),
        ("Installed 1 package in 2.31s", "uv"),
        ("Prepared 12 packages in 4.02s", "uv"),
        ("Collecting pytest==8.4.1", "pip"),
        ("  Downloading pytest-8.4.1-py3-none-any.whl.metadata (7.7 kB)", "pip"),
        ("Downloading requests-2.32.5-py3-none-any.whl (64 kB)", "pip"),
        ("Downloading pygments-2.19.2-py3-none-any.whl (1.2 MB)", "pip"),  # not uv's MiB
        ("  Downloading https://files.example.org/pkg-1.0.tar.gz", "pip"),
        ("+ git clone https://git.example.org/org/repo.git /tmp/repo", "git"),
        ("   Updating https://git.example.org/org/model.git (34bbbfdf)", "git"),
    ],
)
def test_each_kind_of_network_activity_in_a_log_is_found(line: str, kind: str) -> None:
    assert dict(classify_log(line + "\n").kinds) == {kind: 1}


@pytest.mark.parametrize(
    "line",
    [
        "Hit:1 http://localhost:3142/debian bookworm InRelease",  # a local apt cache
        "Connecting to localhost (localhost)|127.0.0.1|:8000... connected.",
        "spawn git clone git@localhost:/git/project project-test",
        "Cloning into 'project-test'...",  # says nothing of where from
        "Updating files: 100% (4635/4635), done.",
        "E       AssertionError: Collecting results failed",
        "Reading package lists...",
        "Setting up curl (8.5.0-2ubuntu10.9) ...",
        "  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0",
        "everything's installed!",
    ],
)
def test_log_lines_that_show_no_network(line: str) -> None:
    verifier = classify_log(line + "\n")
    assert not verifier.used_network and verifier.unreachable == 0


@pytest.mark.parametrize(
    "line",
    [
        "curl: (6) Could not resolve host: astral.sh",
        "curl: (28) Failed to connect to example.org port 443 after 13 ms: Timeout",
        "W: Failed to fetch http://deb.example.org/debian/dists/x/InRelease  Temporary failure "
        "resolving 'deb.example.org'",
        "  Could not connect to mirror.example.org:80 (10.1.2.3), connection timed out",
        "ERROR: Could not install packages due to an OSError: [Errno 101] Network is unreachable",
        "error: Request failed: error sending request for url (https://pypi.example.org/simple/x/)",
        "fatal: unable to access 'https://git.example.org/org/repo/': Could not resolve host",
        "socket.gaierror: [Errno -3] Temporary failure in name resolution",
    ],
)
def test_failures_to_reach_the_network_are_counted(line: str) -> None:
    verifier = classify_log(line + "\n")
    assert verifier.unreachable == 1 and not verifier.used_network
    assert verifier.state == "unreachable"


@pytest.mark.parametrize(
    "line",
    [
        "ssh: Could not resolve hostname localhost: Name or service not known",
        "E   requests.exceptions.ConnectionError: Failed to connect to 127.0.0.1 port 5000",
        "E   ConnectionRefusedError: [Errno 111] Connection refused",
    ],
)
def test_a_test_that_cannot_reach_its_own_service_is_not_a_network_failure(line: str) -> None:
    assert classify_log(line + "\n").unreachable == 0


def test_colour_codes_and_carriage_returns_do_not_hide_a_line() -> None:
    text = "\x1b[32mInstalled 3 packages in 9ms\x1b[0m\rProgress 50%\rCollecting numpy\n"
    assert dict(classify_log(text).kinds) == {"uv": 1, "pip": 1}


def test_the_state_of_a_log_without_downloads() -> None:
    ran = "============================= test session starts ==============================\n"
    assert classify_log(ran + "1 passed in 0.1s\n").state == "offline"
    broken = "bash: line 1: /tests/test.sh: Permission denied\n"
    assert classify_log(broken).state == "inconclusive"
    assert classify_log("").state == "inconclusive"


# --- Released Harbor jobs: a tiny release written here, as a folder and as a git repo.

OFFLINE_LOG = "============================= test session starts ==============================\n"


def write_release(root: Path) -> Path:
    """Two jobs of one dataset (one model each) and a job of another dataset."""

    def job(name: str, dataset: dict[str, str]) -> Path:
        folder = root / "evaluation_assets" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"datasets": [dataset]}))
        return folder

    def trial(folder: Path, task: str, tid: str, log: str | None, reward: str = "0") -> None:
        path = folder / f"{task}__{tid}"
        (path / "verifier").mkdir(parents=True)
        source = {
            "path": task,
            "git_url": "https://git.example.org/bench.git",
            "git_commit_id": "abc",
        }
        (path / "config.json").write_text(json.dumps({"task": source, "trial_name": path.name}))
        if log is not None:
            (path / "verifier" / "test-stdout.txt").write_text(log)
            (path / "verifier" / "reward.txt").write_text(reward)

    bench = {"name": "bench", "version": "2.0"}
    for model in ("model-a", "model-b"):
        folder = job(f"{model}/bench", bench)
        trial(folder, "always-downloads", f"a{model[-1]}1", TB2_LOG, reward="1")
        trial(folder, "always-downloads", f"a{model[-1]}2", "Permission denied\n")
        trial(folder, "sometimes", f"s{model[-1]}1", TB2_LOG if model == "model-a" else OFFLINE_LOG)
        trial(folder, "never", f"n{model[-1]}1", OFFLINE_LOG, reward="1")
        trial(folder, "never", f"n{model[-1]}2", None)  # the verifier never ran
    other = job("model-a/other", {"name": "other", "version": "1.0"})
    trial(other, "elsewhere", "x1", TB2_LOG)
    return root


def check_release(trials: list[ReleaseTrial]) -> None:
    assert len(trials) == 10 and {t.task for t in trials} == {
        "always-downloads",
        "sometimes",
        "never",
    }
    tasks = measure_release(trials)
    assert {name: entry.task_class for name, entry in tasks.items()} == {
        "always-downloads": "needs network at verification",
        "never": "none seen",
        "sometimes": "mixed",
    }
    never = tasks["never"]
    assert (never.trials, never.logs, never.states["offline"]) == (4, 2, 2)
    assert tasks["always-downloads"].states == {"network": 2, "inconclusive": 2}
    assert tasks["always-downloads"].passed_with_network == 2


def test_a_release_folder_is_read_per_trial(tmp_path: Path) -> None:
    trials, commit = read_release(write_release(tmp_path), "bench@2.0")
    assert commit is None
    check_release(trials)
    first = next(t for t in trials if t.trial == "always-downloads__aa1")
    assert (first.job, first.git_commit, first.reward) == ("model-a/bench", "abc", 1.0)


def git(*args: str, cwd: Path) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_a_release_git_mirror_is_read_at_its_head(tmp_path: Path) -> None:
    work = write_release(tmp_path / "work")
    git("init", "-q", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "release", cwd=work)
    git("clone", "-q", "--bare", str(work), str(tmp_path / "owner+name" / "repo"), cwd=tmp_path)
    mirror = tmp_path / "owner+name" / "repo"
    trials, commit = read_release(mirror, "bench@2.0")
    assert commit == git("rev-parse", "HEAD", cwd=work).strip()
    check_release(trials)
    local = {t.trial: t for t in read_release(work, "bench@2.0")[0]}
    assert {t.trial: t for t in trials} == local  # the same trials as from the folder


def test_cli_records_the_measured_section_beside_the_static_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = write_release(tmp_path / "release")
    out = tmp_path / "verifier_network.yaml"
    static = {"commit": "abc", "status": "not measured", "reason": "no checkout"}
    out.write_text(yaml.safe_dump({"benchmarks": {"bench": static}}))
    args = ["--release", str(release), "--dataset", "bench@2.0", "--repository", "o/r"]
    assert main([*args, "--update", str(out), "--benchmark", "bench"]) == 0
    assert "1 needs network at verification; 1 mixed; 1 none seen" in capsys.readouterr().out
    entry = yaml.safe_load(out.read_text())["benchmarks"]["bench"]
    assert {key: entry[key] for key in static} == static
    measured = entry["measured_from_release_logs"]
    assert measured["source"] == {"repository": "o/r", "commit": None, "jobs": 2}
    assert measured["same_commit_as_pin"] is True  # "abc", the static entry's pin
    assert (measured["trials"], measured["verifier_logs"], measured["tasks"]) == (10, 8, 3)
    assert measured["trials_without_verifier_log"] == 2
    assert measured["logs_by_state"] == {
        "network": 3,
        "unreachable": 0,
        "offline": 3,
        "inconclusive": 2,
    }
    assert measured["logs_by_kind"] == {"apt": 3, "download": 3, "uv": 3}
    assert measured["classes"]["mixed"] == ["sometimes"]
    assert measured["per_task"]["never"] == {"trials": 4, "logs": 2, "offline": 2, "kinds": []}
    assert measured["passed_trials"] == 4 and measured["passed_trials_with_network"] == 2
    assert "downloading uv" not in out.read_text()  # counts, never the logs' text
    # the static analysis, run again, keeps the measured section
    make_task(tmp_path / "bench", "downloads", DOWNLOADING)
    assert (
        main(
            [
                str(tmp_path / "bench"),
                "--update",
                str(out),
                "--benchmark",
                "bench",
                "--commit",
                "abc",
            ]
        )
        == 0
    )
    entry = yaml.safe_load(out.read_text())["benchmarks"]["bench"]
    assert entry["status"] == "measured" and entry["measured_from_release_logs"] == measured


def test_cli_release_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--release", str(tmp_path / "missing")])
    with pytest.raises(SystemExit):
        main(["--release", str(write_release(tmp_path)), "--dataset", "absent@1"])
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--release", str(tmp_path)])


def test_the_committed_measurement_is_consistent() -> None:
    entry = yaml.safe_load(DATA_FILE.read_text())["benchmarks"]["terminal-bench-2.0"]
    measured = entry["measured_from_release_logs"]
    assert measured["same_commit_as_pin"] is (
        [source["git_commit"] for source in measured["benchmark_source"]] == [entry["commit"]]
    )
    classes = measured["classes"]
    assert sum(len(names) for names in classes.values()) == measured["tasks"]
    assert {name: len(names) for name, names in classes.items()} == measured["tasks_by_class"]
    assert set(measured["per_task"]) == {name for names in classes.values() for name in names}
    assert sum(measured["logs_by_state"].values()) == measured["verifier_logs"]
    assert measured["verifier_logs"] + measured["trials_without_verifier_log"] == measured["trials"]
    assert sum(task["trials"] for task in measured["per_task"].values()) == measured["trials"]
