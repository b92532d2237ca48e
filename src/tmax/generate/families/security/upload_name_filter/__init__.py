"""The security.upload_name_filter family: a gate that accepts or rejects uploaded
file names, one verdict per name. The task's files are the templates beside this module
(``instruction.md``, ``solution/solve.sh``, ``tests/test_task.py``); the reference gate is
``solution/namegate.{py,sh,c}``, and the functions below are pasted into it and into the
tests."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import ALL_LEVELS, Rule
from tmax.generate.builders import (
    asked_program_language,
    build_step,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    program_path,
    program_sentence,
    program_step,
    settings_lines,
    sha256_hex,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


def upload_decode(raw, repeat):
    """Percent-decode a name (bytes); once, or until it stops changing."""
    data = raw.encode("latin-1")
    pattern = re.compile(rb"%([0-9A-Fa-f]{2})")
    while True:
        new = pattern.sub(lambda m: bytes([int(m.group(1), 16)]), data)
        if not repeat or new == data:
            return new
        data = new


def upload_verdict(raw, level, allowed, maxlen):
    """The first rule an uploaded file name breaks, or None when it is acceptable."""
    data = upload_decode(raw, level >= 3) if level >= 2 else raw.encode("latin-1")
    if level >= 2 and any(b < 0x20 or b > 0x7E for b in data):
        return "badbyte"
    text = data.decode("latin-1")
    if level >= 3 and len(data) > maxlen:
        return "length"
    if level >= 2:
        text = text.replace("\\", "/")
    if text.startswith("/"):
        return "absolute"
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if level >= 3 and len(text) >= 2 and text[0] in letters and text[1] == ":":
        return "drive"
    segments = text.split("/")
    if ".." in segments:
        return "traversal"
    if level >= 4:
        reserved = {"CON", "PRN", "AUX", "NUL"}
        reserved |= {f"{p}{i}" for p in ("COM", "LPT") for i in range(1, 10)}
        if "" in segments:
            return "empty"
        if any(s.startswith(".") for s in segments):
            return "hidden"
        if any(s.endswith((".", " ")) for s in segments):
            return "trailing"
        if any(s.split(".")[0].upper() in reserved for s in segments):
            return "reserved"
    if level >= 3:
        last = segments[-1]
        if "." not in last or last.rsplit(".", 1)[1].lower() not in allowed:
            return "extension"
    return None


def upload_line(raw, level, allowed, maxlen):
    rule = upload_verdict(raw, level, allowed, maxlen)
    return "ACCEPT" if rule is None else "REJECT " + rule


def upload_names(rng, count, allowed, level):
    """Uploaded file names: ordinary ones, look-alikes and hostile ones."""
    words = ["report", "invoice", "photo", "scan", "backup", "notes", "draft", "IMG_0042"]
    words += ["q3 summary", "data.2024", "x..y", "contract-final", "CONSOLE", "icon", "COM10"]
    dirs = ["docs", "2024", "team a", "img", "uploads", "a.b"]
    bad_ext = ["php", "exe", "sh", "js", "phtml", "bat"]
    seps = ["../", "..\\", "%2e%2e%2f", "..%2f", "%2E%2E/", "..%5c", "%252e%252e%252f", "%2e%2e/"]
    seps += ["%25252e%25252e%25252f", "..%255c"]
    out = []
    while len(out) < count:
        word, folder = rng.choice(words), rng.choice(dirs)
        ext = rng.choice(allowed) if rng.random() < 0.8 else rng.choice(bad_ext)
        if rng.random() < 0.15:
            ext = ext.upper()
        base = f"{word}.{ext}"
        kind = rng.randint(0, 17)
        if rng.random() < (0.45, 0.3, 0.1, 0.0)[level - 1]:
            up = rng.choice(seps[:2] if level >= 2 else seps[:1]) * rng.randint(1, 3)
            name = rng.choice(
                [up + base, f"{folder}/{up}{base}", f"/{folder}/{base}", "/etc/passwd", up[:-1]]
            )
        elif kind <= 3:
            name = base if kind < 2 else f"{folder}/{base}"
        elif kind == 4:
            name = base.replace(" ", "%20").replace("_", "%5f")
        elif kind == 5:
            name = rng.choice(seps) * rng.randint(1, 3) + rng.choice(["etc/passwd", base])
        elif kind == 6:
            name = f"{folder}/" + rng.choice(seps) + base
        elif kind == 7:
            name = rng.choice(["/", "\\", "%2f", "%5c", "%252f"]) + rng.choice(
                ["etc/shadow", base, "srv\\" + base]
            )
        elif kind == 8:
            name = rng.choice(["C:\\", "d:/", "c:", "Z:%5c"]) + base
        elif kind == 9:
            bad = rng.choice(["%00", "%0a", "%0d", "%7f", "%c3%a9", "%09", "%2500", "%1b"])
            name = word + bad + "." + ext if rng.random() < 0.5 else base + bad + ".jpg"
        elif kind == 10:
            name = "-".join([word] * rng.randint(4, 9)) + "." + ext
        elif kind == 11:
            name = rng.choice(["CON", "aux", "Lpt3", "com1", "nul", "PRN", "COM0", "LPT10"]) + (
                "." + ext if rng.random() < 0.7 else ""
            )
            if rng.random() < 0.3:
                name = f"{folder}/{name}"
        elif kind == 12:
            name = rng.choice([".htaccess", ".env", f"{folder}/.{base}", f".cache/{base}", base])
        elif kind == 13:
            name = rng.choice([base + ".", f"{folder} /{base}", base + "%20", f"{folder}./{base}"])
        elif kind == 14:
            name = rng.choice([f"{folder}//{base}", f"{folder}/", f"{folder}/./{base}"])
        elif kind == 15:
            name = rng.choice([f"100%.{ext}", f"{word}%zz.{ext}", f"50%25 off.{ext}", f"%.{ext}"])
        elif kind == 16:
            name = word if rng.random() < 0.5 else f"{folder}/{word}"
        else:
            name = f"{folder}/{word}..{ext}" if rng.random() < 0.5 else f"{word}.tar.{ext}"
        out.append(name)
    return out


_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}


def _upload_consts(language: str, level: int, allowed: list[str], maxlen: int) -> str:
    if language == "python":
        return f"LEVEL = {level}\nMAXLEN = {maxlen}\nALLOWED = {allowed!r}"
    if language == "bash":
        return f'LEVEL={level}\nMAXLEN={maxlen}\nALLOWED="{" ".join(allowed)}"'
    quoted = ", ".join(f'"{ext}"' for ext in allowed)
    return (
        f"#define LEVEL {level}\n#define MAXLEN {maxlen}\n"
        f"static const char *ALLOWED[] = {{{quoted}}};"
    )


def _gate(tpl, language: str, level: int, allowed: list[str], maxlen: int) -> str:
    """The reference gate ``solution/namegate.<extension>`` with the policy's constants."""
    values = {"consts": _upload_consts(language, level, allowed, maxlen)}
    if language == "python":
        values["core"] = function_sources(upload_decode, upload_verdict, upload_line)
    return tpl.render(f"solution/namegate.{_EXTENSIONS[language]}", **values)


@register
class UploadNameFilter(Family):
    """Gate uploaded file names against path traversal: classify a queue of names under a
    stated policy whose rules grow with the level (percent-decoding, double encoding, drive
    letters, device names, extensions); code asks for a reusable gate program that the tests
    run on hidden hostile and legitimate names."""

    name = "security.upload_name_filter"
    domain = "security"
    verifier_kinds = frozenset({"exact_text", "adversarial_corpus", "fuzz_equivalence"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("inputs_untouched", (r"Leave the input files unchanged\.",),
             (r"def test_inputs_untouched\(",)),
        Rule("first_rule_broken",
             (r"rejected for the first of these rules \(checked in this order\)",),
             (r"def upload_verdict\(", r"def test_rejected\(")),
        *(
            Rule(f"policy_{rule}", (rf"`{rule}`: ",), (rf'return "{rule}"',), levels=levels)
            for rule, levels in (
                ("badbyte", frozenset({2, 3, 4})), ("length", frozenset({3, 4})),
                ("absolute", ALL_LEVELS), ("drive", frozenset({3, 4})),
                ("traversal", ALL_LEVELS), ("empty", frozenset({4})), ("hidden", frozenset({4})),
                ("trailing", frozenset({4})), ("reserved", frozenset({4})),
                ("extension", frozenset({3, 4})),
            )
        ),
        Rule("backslash_separator", (r"Both `/` and `\\` are separators",),
             (r'text = text\.replace\("\\\\", "/"\)',), levels=frozenset({2, 3, 4})),
        Rule("percent_decode", (r"Check the percent-decoded name",),
             (r'pattern = re\.compile\(rb"%\(\[0-9A-Fa-f\]\{{2\}}\)"\)',),
             levels=frozenset({2, 3, 4})),
        Rule("decode_once", (r"Decode exactly once\.",),
             (r"data = upload_decode\(raw, level >= 3\) if level >= 2",), levels=frozenset({2})),
        Rule("decode_repeat", (r"Repeat the decoding until the name no longer changes",),
             (r"data = upload_decode\(raw, level >= 3\) if level >= 2",),
             levels=frozenset({3, 4})),
        Rule("queues_in_order", (r"treat them as one list in that order",),
             (r'for _q in CFG\["queues"\]:',), levels=frozenset({4})),
        Rule("accepted", (r"`/app/out/accepted\.txt`: the accepted names",),
             (r"def test_accepted\(",)),
        Rule("rejected", (r"`/app/out/rejected\.txt`: the rejected names",),
             (r"def test_rejected\(",)),
        Rule("rejected_rule", (r"each as `RULE<TAB>NAME`",),
             (r'expected = "".join\(f"\{{r\}}\\t\{{n\}}\\n"',),
             levels=frozenset({2, 3, 4})),
        Rule("rule_counts", (r"`/app/out/rule_counts\.txt`",),
             (r'read\("/app/out/rule_counts\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r"`/app/out/summary\.json`",), (r'read\("/app/out/summary\.json"\)',),
             levels=frozenset({4})),
        Rule("gate_program", (r"The endpoint itself will call a gate program",),
             (r"def test_gate_on_unseen_names\(",), when={"code": True}),
        Rule("gate_adversarial", (r"every hostile name must be rejected and every legitimate",),
             (r"assert not missed, ", r"assert not blocked, "),
             when={"code": True, "adversarial": True}),
        Rule("gate_line_by_line", (r"compared line by line with our policy",),
             (r"assert not wrong, ",), when={"code": True, "adversarial": False}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "detect path traversal sequences in uploaded file names": "policy_traversal"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        pool = ["jpg", "jpeg", "png", "gif", "pdf", "txt", "csv", "docx", "xlsx", "webp", "odt"]
        allowed = sorted(rng.sample(pool, 6))
        maxlen = rng.choice([40, 48, 56])
        if level >= 4:
            queues = [f"uploads/queue-{i}.txt" for i in (1, 2, 3)]
            sizes = [30, 30, 30]
        else:
            queues = ["uploads/queue.txt"]
            sizes = [{1: 25, 2: 40, 3: 60}[level]]
        files: dict[str, str | bytes] = {}
        for rel, size in zip(queues, sizes, strict=True):
            files[rel] = "\n".join(upload_names(rng, size, allowed, level)) + "\n"
        if level >= 3:
            files["policy/allowed_extensions.txt"] = "\n".join(allowed) + "\n"
        hashes = {f"/app/{rel}": sha256_hex(data) for rel, data in files.items()}

        program = None
        if language:
            program = program_path(language, "/app/namegate")
        values = {"level": level, "code": language is not None}
        tpl = templates(__name__)
        instruction = tpl.render(
            "instruction.md",
            maxlen=maxlen,
            adversarial=ctx.verifier_kind == "adversarial_corpus",
            program_sentence=program_sentence(language, program) if language else "",
            **values,
        )

        if language:
            source = _gate(tpl, language, level, allowed, maxlen)
            setup = [program_step(language, program, source), build_step(language, program)]
            gate = invoke(language, program)
        else:
            setup = [heredoc("/tmp/gate.sh", _gate(tpl, "bash", level, allowed, maxlen))]
            gate = "bash /tmp/gate.sh"
        solution = tpl.render(
            "solution/solve.sh", setup="\n".join(s for s in setup if s), gate=gate, **values
        )

        params = {
            "level": level,
            "allowed": allowed,
            "maxlen": maxlen,
            "queues": [f"/app/{q}" for q in queues],
            "hashes": hashes,
            "adversarial": ctx.verifier_kind == "adversarial_corpus",
            "code": language is not None,
            "hidden": {1: 80, 2: 120, 3: 160, 4: 200}[level],
        }
        tests = tpl.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            sources=function_sources(upload_decode, upload_verdict, upload_line, upload_names),
            settings=settings_lines(params),
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )
