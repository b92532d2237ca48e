"""The section parser holds the model to the contract and names what it broke."""

from __future__ import annotations

import pytest

from tmax.generate.llm.cache import CallCache, call_key
from tmax.generate.llm.sections import SectionError, SectionSpec, parse_sections

TASK = SectionSpec(required=("instruction", "truth"), optional=("note",), repeatable=("file",))


def test_sections_are_read_and_chatter_outside_them_is_ignored() -> None:
    text = (
        "Sure! Here it is.\n<instruction>\nDo <b>this</b>.\n</instruction>\n"
        '<truth>\n```\n42\n```\n</truth>\n<file path="app/a.txt">\nx\n</file>\n'
        '<file path="app/b.txt">y</file>\nThanks.'
    )
    sections = parse_sections(text, TASK)
    assert sections["instruction"] == "Do <b>this</b>."
    assert sections["truth"] == "42"  # one code fence around a body is dropped
    assert sections.get("note") is None
    assert sections.files() == [("app/a.txt", "x\n"), ("app/b.txt", "y\n")]


@pytest.mark.parametrize(
    ("text", "kind", "section"),
    [
        ("<instruction>a</instruction>", "missing section", "truth"),
        (
            "<instruction>a</instruction><truth>b</truth><truth>c</truth>",
            "duplicate section",
            "truth",
        ),
        ("<instruction>a</instruction><truth>\n  \n</truth>", "empty section", "truth"),
        ("<instruction>a</instruction><truth>b", "unclosed section", "truth"),
        ("<instruction>a</instruction><truth>b</truth><file>x</file>", "malformed section", "file"),
        (
            '<instruction>a</instruction><truth>b</truth><file path="x">1</file>'
            '<file path="x">2</file>',
            "duplicate section",
            "file",
        ),
    ],
)
def test_each_breach_is_named(text: str, kind: str, section: str) -> None:
    with pytest.raises(SectionError) as caught:
        parse_sections(text, TASK)
    assert (caught.value.kind, caught.value.section) == (kind, section)
    assert str(caught.value).startswith(f"{kind}: <{section}>")


def test_cache_keys_follow_content_not_dict_order(tmp_path) -> None:
    messages = [{"role": "user", "content": "hi"}]
    key = call_key("m", messages, {"temperature": 0.0, "max_tokens": 8})
    assert key == call_key(
        "m", [{"content": "hi", "role": "user"}], {"max_tokens": 8, "temperature": 0.0}
    )
    assert key != call_key("m", messages, {"temperature": 0.1, "max_tokens": 8})
    assert key != call_key("other", messages, {"temperature": 0.0, "max_tokens": 8})
    cache = CallCache(tmp_path)
    assert cache.get(key) is None
    cache.put(key, {"content": "hello"})
    assert cache.get(key) == {"content": "hello"}
    assert cache.stats() == {"hits": 1, "misses": 1, "hit_rate": 0.5}
    (tmp_path / key[:2] / f"{key}.json").write_text("{not json")
    assert cache.get(key) is None  # a corrupt entry is a miss, not a crash
