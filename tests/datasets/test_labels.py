"""Labelling prior datasets with the taxonomy: strict answers, bounded retries that end
in ``unlabelled``, a cache that makes reruns free, and balance exp(H)/N by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tmax.datasets.labels import (
    BASE_URL_ENV,
    MODEL_ENV,
    LabelError,
    LabelSettings,
    label_prompt,
    parse_label,
)
from tmax.datasets.measure_stage import label_dataset, read_manifest
from tmax.models.client import ModelError
from tmax.models.scripted_server import Reply, error, scripted_server
from tmax.taxonomy import Taxonomy

#: Four tasks: one answered well at once, one after a retry, one never (it ends
#: unlabelled), and one that carries its axes in tmax.json (no call at all).
INSTRUCTIONS = {
    "harden-ssh": "Disable password logins for sshd and keep key logins working.",
    "fix-crash": "The parser in /app crashes on empty lines; find the bug and fix it.",
    "write-poem": "Write a short poem about terminals into /app/poem.txt.",
    "our-task": "Find the leaked token in /var/log/app.log.",
}
GOOD = {
    "harden-ssh": {"domain": "security", "skill_types": ["Systems", "Testing"]},
    "fix-crash": {"domain": "debugging", "skill_types": ["Debugging"]},
    "our-task": {"domain": "security", "skill_types": ["Web Security"]},
}


def write_manifest(
    root: Path,
    dataset: str = "prior",
    *,
    has_environments: bool = True,
    instructions: dict[str, str] = INSTRUCTIONS,
    axes: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """``results/datasets/<dataset>/manifest.json`` as the adapters write it; tasks in
    ``axes`` get a task folder whose tmax.json carries those axes."""
    dataset_dir = root / dataset
    tasks = []
    for task_id, instruction in instructions.items():
        path = None
        if axes and task_id in axes:
            path = f"tasks/{task_id}"
            folder = dataset_dir / path
            folder.mkdir(parents=True)
            meta = {"format": "tmax-task/1", "spec_id": task_id, "axes": axes[task_id]}
            (folder / "tmax.json").write_text(json.dumps(meta))
        tasks.append({"id": task_id, "instruction": instruction, "path": path})
    manifest = {
        "dataset": dataset,
        "layout": "harbor",
        "source": {"path": "fixture"},
        "revision": "sha256:fixture",
        "has_environments": has_environments,
        "sample": None,
        "seed": 0,
        "tasks": tasks,
        "skipped": [],
    }
    path = dataset_dir / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest))
    return path


OUR_AXES = {"our-task": {"domain": "security", "skill_type": "Web Security"}}


def labeller(request: dict[str, Any]) -> Reply:
    """Answers by task: fix-crash names an unknown domain first, write-poem never
    answers in JSON."""
    messages = request["messages"]
    prompt = messages[0]["content"]
    task = next(t for t, text in INSTRUCTIONS.items() if text in prompt)
    if task == "write-poem":
        return Reply(content="Sure! This looks like a creative writing task.")
    if task == "fix-crash" and len(messages) == 1:
        return Reply(content=json.dumps({"domain": "networking", "skill_types": ["Network"]}))
    return Reply(content="```json\n" + json.dumps(GOOD[task]) + "\n```")


def settings_for(base_url: str | None, cache: Path, **overrides: Any) -> LabelSettings:
    return LabelSettings(
        base_url=base_url,
        model="labeller" if base_url else None,
        cache_dir=str(cache),
        concurrency=2,
        **overrides,
    )


# --- the answer format --------------------------------------------------------------------


def test_a_valid_answer_gives_the_domain_and_its_skill_types(taxonomy: Taxonomy) -> None:
    answer = '{"domain": "data_querying", "skill_types": ["Query Construction"]}'
    assert parse_label(answer, taxonomy) == ("data_querying", ("Query Construction",))
    fenced = "```json\n" + answer + "\n```"
    assert parse_label(fenced, taxonomy) == ("data_querying", ("Query Construction",))


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("security, Systems", "not a JSON object"),
        ('["security"]', "not an object"),
        ('{"domain": "security"}', "missing skill_types"),
        ('{"domain": "security", "skill_types": ["Systems"], "why": "x"}', "unexpected why"),
        ('{"domain": "networking", "skill_types": ["Network"]}', "domain 'networking'"),
        ('{"domain": "security", "skill_types": []}', "1 to 3 distinct"),
        ('{"domain": "security", "skill_types": ["Systems", "Systems"]}', "distinct"),
        # a real skill type, but of another domain: not guessed into this one
        ('{"domain": "security", "skill_types": ["Network"]}', "not a skill type of domain"),
    ],
)
def test_an_invalid_answer_names_its_problem(answer: str, problem: str, taxonomy: Taxonomy) -> None:
    with pytest.raises(LabelError, match=problem):
        parse_label(answer, taxonomy)


def test_the_prompt_lists_every_allowed_label(taxonomy: Taxonomy) -> None:
    prompt = label_prompt("Do the thing.", taxonomy)
    for name, domain in taxonomy.domains.items():
        assert f"- {name}:" in prompt
        for skill_type in domain.skill_types.values():
            assert skill_type.label in prompt
    assert "<task>\nDo the thing.\n</task>" in prompt


# --- labelling a dataset ----------------------------------------------------------------------


def test_labels_retries_unlabelled_balance_and_a_free_rerun(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "datasets", axes=OUR_AXES)
    output = manifest.parent / "labels.json"
    cache = tmp_path / "cache"
    with scripted_server(labeller) as server:
        settings = settings_for(server.base_url, cache, max_retries=2)
        first = label_dataset(manifest, output, settings, progress=False)
        # harden-ssh 1 call, fix-crash 2 (one retry), write-poem 1 + 2 retries, our-task 0
        assert server.request_count == 6
        # Tasks are labelled concurrently: the retries come in any order.
        retries = [r["messages"][2]["content"] for r in server.requests if len(r["messages"]) == 3]
        assert any("domain 'networking' is not one of" in text for text in retries), retries
        assert all(r["temperature"] == 0 for r in server.requests)

        again = label_dataset(manifest, output, settings, progress=False)
        assert server.request_count == 6  # every call answered from the cache
        assert again["tasks"] == first["tasks"]
        assert again["cache"]["misses"] == 0

    document = json.loads(output.read_text())
    tasks = {t["id"]: t for t in document["tasks"]}
    assert tasks["harden-ssh"]["domain"] == "security"
    assert tasks["harden-ssh"]["skill_types"] == ["Systems", "Testing"]
    assert tasks["harden-ssh"]["skill_type"] == "Systems"  # the primary one is counted
    assert (tasks["fix-crash"]["domain"], tasks["fix-crash"]["attempts"]) == ("debugging", 2)
    poem = tasks["write-poem"]
    assert (poem["status"], poem["domain"], poem["attempts"]) == ("unlabelled", None, 3)
    assert "not a JSON object" in poem["reason"]
    assert (tasks["our-task"]["source"], tasks["our-task"]["attempts"]) == ("axes", 0)

    # Labelled: security (Systems), debugging (Debugging), security (Web Security).
    # domain: p = (2/3, 1/3) over N = 9 domains, H = -(2/3 ln 2/3 + 1/3 ln 1/3) = 0.6365,
    #   exp(H) = 1.8899, exp(H)/N = 0.20999.
    # skill type: three different ones over N = 29 labels, exp(H) = 3, 3/29 = 0.10345.
    balance = document["balance"]
    assert (balance["n_labelled"], balance["n_unlabelled"]) == (3, 1)
    assert balance["domain"] == pytest.approx(0.2099868, abs=1e-6)
    assert balance["skill_type"] == pytest.approx(3 / 29)
    assert balance["domain"] == pytest.approx(math.exp(0.6365142) / 9, abs=1e-6)
    assert balance["counts"]["domain"]["security"] == 2
    assert document["status"] == "labelled"


def test_labelling_off_records_why_and_still_uses_known_axes(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "datasets", axes=OUR_AXES)
    document = label_dataset(
        manifest, manifest.parent / "labels.json", settings_for(None, tmp_path), progress=False
    )
    assert document["status"] == "off"
    assert "labelling.base_url is null" in document["reason"]
    statuses = {t["id"]: t["status"] for t in document["tasks"]}
    assert statuses == {
        "harden-ssh": "unlabelled",
        "fix-crash": "unlabelled",
        "write-poem": "unlabelled",
        "our-task": "labelled",
    }
    assert document["balance"]["domain"] == pytest.approx(1 / 9)  # one category of nine


def test_our_own_tasks_need_no_labeller(tmp_path: Path) -> None:
    only_ours = {"our-task": INSTRUCTIONS["our-task"]}
    manifest = write_manifest(tmp_path / "datasets", instructions=only_ours, axes=OUR_AXES)
    document = label_dataset(
        manifest, manifest.parent / "labels.json", settings_for(None, tmp_path), progress=False
    )
    assert document["status"] == "labelled" and document["reason"] is None


def test_an_endpoint_that_keeps_failing_stops_the_job(tmp_path: Path) -> None:
    """Outages are not the task's fault: no labels.json that looks complete."""
    manifest = write_manifest(tmp_path / "datasets")
    output = manifest.parent / "labels.json"
    with scripted_server(lambda _: error(503)) as server:
        settings = settings_for(server.base_url, tmp_path / "cache", request_retries=0)
        with pytest.raises(ModelError):
            label_dataset(manifest, output, settings, progress=False)
    assert not output.exists()


def test_settings_from_config_and_environment() -> None:
    config = {"labelling": {"base_url": None, "model": None, "max_retries": 1}}
    assert LabelSettings.from_config(config, environ={}).off_reason is not None
    env = {BASE_URL_ENV: "http://127.0.0.1:9/v1", MODEL_ENV: "m"}
    settings = LabelSettings.from_config(config, environ=env)
    assert (settings.base_url, settings.model, settings.max_retries) == (env[BASE_URL_ENV], "m", 1)
    assert settings.off_reason is None
    with pytest.raises(ValueError, match="no model is set"):
        LabelSettings.from_config({"labelling": {"base_url": "http://x/v1"}}, environ={})


def test_a_manifest_without_instructions_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"dataset": "d", "has_environments": False, "tasks": [{"id": "a"}]}))
    with pytest.raises(ValueError, match="needs an 'instruction'"):
        read_manifest(path)
