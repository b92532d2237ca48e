"""The packaged taxonomy matches the paper's axis sizes; bad files are named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tmax.taxonomy import Taxonomy, TaxonomyError, load_taxonomy
from tmax.taxonomy.model import packaged_taxonomy_path

DOMAINS = [
    "security",
    "software_engineering",
    "file_operations",
    "data_querying",
    "data_science",
    "debugging",
    "scientific_computing",
    "data_processing",
    "system_administration",
]


def test_nine_domains_in_paper_order(taxonomy: Taxonomy) -> None:
    assert list(taxonomy.domains) == DOMAINS


@pytest.mark.parametrize("domain", DOMAINS)
def test_domain_sizes_match_the_paper(taxonomy: Taxonomy, domain: str) -> None:
    body = taxonomy.domains[domain]
    assert 4 <= len(body.skill_types) <= 7
    assert 20 <= len(body.primitive_skills) <= 40
    assert 6 <= len(body.personas) <= 18


def test_domain_independent_axes(taxonomy: Taxonomy) -> None:
    assert taxonomy.language_weights == {
        "python": 0.35,
        "c": 0.15,
        "bash": 0.15,
        "cpp": 0.10,
        "rust": 0.07,
        "go": 0.07,
        "multi_language": 0.06,
        "any": 0.05,
    }
    assert taxonomy.task_complexities == ("short", "moderate", "complex", "intricate")
    assert taxonomy.command_complexities == ("bash_only", "bash_code", "bash_code_services")
    assert taxonomy.fixture_kinds == (
        "text_only",
        "image",
        "audio",
        "video",
        "stripped_binary",
        "vendored_package",
        "multi_service",
    )
    assert taxonomy.verifier_kinds == (
        "exact_text",
        "metric_threshold",
        "adversarial_corpus",
        "fuzz_equivalence",
        "multi_protocol",
    )


def test_skill_type_labels_are_shared_across_domains(taxonomy: Taxonomy) -> None:
    # "Systems" appears in several domains but is one category for balance.
    assert taxonomy.skill_type_labels.count("Systems") == 1
    assert len(taxonomy.skill_type_labels) == 29


def test_digest_identifies_the_file(tmp_path: Path, taxonomy: Taxonomy) -> None:
    copy = tmp_path / "taxonomy.yaml"
    copy.write_bytes(packaged_taxonomy_path().read_bytes() + b"\n# edited\n")
    assert load_taxonomy(copy).digest != taxonomy.digest


def _broken(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(packaged_taxonomy_path().read_text())
    edit(data)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["domains"]["security"].pop("personas"),
            "domains.security: missing key 'personas'",
        ),
        (
            lambda d: d["domains"]["debugging"]["skill_types"]["forensics"].update(
                primitive_skills="strings"
            ),
            "domains.debugging.skill_types.forensics.primitive_skills: expected list",
        ),
        (
            lambda d: d["languages"]["python"].update(weight=-1),
            "languages.python.weight: must be >= 0",
        ),
        (
            lambda d: d["domains"]["security"]["personas"].append(
                d["domains"]["security"]["personas"][0]
            ),
            "domains.security.personas: duplicate entries",
        ),
        (lambda d: d.pop("verifier_kinds"), "missing key 'verifier_kinds'"),
    ],
)
def test_malformed_taxonomy_names_the_key(tmp_path: Path, edit, message: str) -> None:
    with pytest.raises(TaxonomyError, match=message.replace("(", r"\(")):
        load_taxonomy(_broken(tmp_path, edit))


def test_missing_taxonomy_file(tmp_path: Path) -> None:
    with pytest.raises(TaxonomyError, match="taxonomy file not found"):
        load_taxonomy(tmp_path / "nope.yaml")
