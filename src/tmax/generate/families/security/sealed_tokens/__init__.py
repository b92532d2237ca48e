"""The security.sealed_tokens family: probing a stripped binary that seals tokens,
recovering its key and decoding captured tokens. The task's files are the templates
beside this module (``instruction.md``, ``solution/solve.sh``, ``tests/test_task.py``, the
sealer's source ``environment/src/sealer.c``, built and stripped by the Dockerfile); the
reference decoder is ``solution/unseal.{py,sh,c}``, and the functions below are pasted
into it and into the tests."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
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


def seal(text, key, step, level):
    """What the shipped binary prints for ``text``."""
    data = text.encode("latin-1")
    out = bytearray()
    for i, byte in enumerate(data):
        value = byte ^ key[i % len(key)]
        if level >= 3:
            value = (value + step * i) & 0xFF
        out.append(value)
    token = out.hex()
    if level >= 4:
        check = ((sum(data) + len(data)) & 0xFF) ^ key[0]
        token = f"v2:{token}:{check:02x}"
    return token


def unseal(token, key, step, level):
    """The plaintext of a token, or None when it is not a valid token."""
    if level >= 4:
        match = re.fullmatch(r"v2:((?:[0-9a-f]{2})+):([0-9a-f]{2})", token)
        if not match:
            return None
        body, check = match.group(1), int(match.group(2), 16)
    else:
        body, check = token, None
    raw = bytes.fromhex(body)
    out = bytearray()
    for i, value in enumerate(raw):
        if level >= 3:
            value = (value - step * i) & 0xFF
        out.append(value ^ key[i % len(key)])
    if level >= 4:
        if any(c < 0x20 or c > 0x7E for c in out):
            return None
        if ((sum(out) + len(out)) & 0xFF) ^ key[0] != check:
            return None
    return out.decode("latin-1")


def seal_texts(rng, count):
    """Plaintexts like the ones the implant sends: commands and random printable strings."""
    users = ["alice", "bob", "svc_backup", "root", "deploy"]
    words = ["GET /etc/shadow", "GET /var/backups/db.sql", "PUT loot.tar", "PING", "LIST /home"]
    out = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.3:
            out.append(rng.choice(words))
        elif roll < 0.5:
            out.append("USER " + rng.choice(users))
        elif roll < 0.7:
            out.append(
                "PASS " + "".join(rng.choice("abcdefXYZ0123456789!#$%&*+-=?@^_") for _ in range(10))
            )
        else:
            size = rng.randint(1, 48)
            out.append("".join(chr(rng.randint(32, 126)) for _ in range(size)))
    return out


def seal_tamper(rng, token):
    """A corrupted copy of a level-4 token."""
    how = rng.randrange(3)
    if how == 0:
        pos = rng.randrange(3, len(token))
        while token[pos] == ":":
            pos = rng.randrange(3, len(token))
        digit = rng.choice([d for d in "0123456789abcdef" if d != token[pos]])
        return token[:pos] + digit + token[pos + 1 :]
    if how == 1:
        return token[:-1]
    return "v1:" + token[3:]


def seal_session(rng, count, level):
    """Capture-log lines (timestamp, source, destination, token plaintext) of an implant."""
    sources = [f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{rng.randint(30000, 60000)}"]
    while len(sources) < 4:
        candidate = f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{rng.randint(30000, 60000)}"
        if candidate not in sources:
            sources.append(candidate)
    users = ["alice", "bob", "svc_backup", "deploy"]
    paths = ["/etc/shadow", "/var/backups/db.sql", "/home/alice/.ssh/id_rsa", "/srv/app/.env"]
    rows, clock = [], rng.randint(0, 30000)
    while len(rows) < count:
        source = rng.choice(sources)
        roll = rng.random()
        if roll < 0.2:
            text = "USER " + rng.choice(users)
        elif roll < 0.4:
            text = "PASS " + "".join(rng.choice("abcdefXYZ0123456789!#$%&*") for _ in range(9))
        elif roll < 0.7:
            text = "GET " + rng.choice(paths)
        else:
            text = rng.choice(["PING", "HELLO implant-7", "LIST /home", "PUT stage2.bin", "BYE"])
        clock += rng.randint(1, 40)
        stamp = f"2024-03-05T{clock // 3600 % 24:02d}:{clock // 60 % 60:02d}:{clock % 60:02d}Z"
        rows.append((stamp, source, text))
    return rows


_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}


def _seal_consts(language: str, key: list[int], step: int, level: int) -> str:
    if language == "python":
        return f"KEY = {key!r}\nSTEP = {step}\nLEVEL = {level}"
    if language == "bash":
        return f"KEY=({' '.join(str(k) for k in key)})\nSTEP={step}\nLEVEL={level}"
    return (
        f"static const unsigned KEY[] = {{{', '.join(str(k) for k in key)}}};\n"
        f"#define STEP {step}u\n#define LEVEL {level}"
    )


def _decoder(tpl, language: str, key: list[int], step: int, level: int) -> str:
    """The reference decoder ``solution/unseal.<extension>`` with the scheme's constants."""
    values = {"consts": _seal_consts(language, key, step, level)}
    if language == "python":
        values["unseal"] = function_sources(unseal)
    return tpl.render(f"solution/unseal.{_EXTENSIONS[language]}", **values)


_SEAL_DIRS = ["bin", "evidence", "samples", "quarantine"]
_SEAL_NAMES = ["sealer", "tokgen", "wrapd", "encsvc", "update-helper"]
_SEAL_CAPTURE_DIRS = ["capture", "pcap", "netcap", "wire"]
_SEAL_CAPTURE_FILES = {
    "tokens": ["captured.txt", "tokens.txt", "wire_tokens.txt", "intercepted.txt"],
    "session": ["session.log", "traffic.log", "egress.log", "c2_traffic.log"],
}
_SEAL_OUT_DIRS = ["out", "findings", "results", "analysis", "ir_report"]
_SEAL_OUT_FILES = {
    "decoded_txt": ["decoded.txt", "plaintext.txt", "tokens_decoded.txt"],
    "decoded_tsv": ["decoded.tsv", "plaintext.tsv", "session_decoded.tsv"],
    "key": ["key.txt", "secret.txt", "recovered_key.txt"],
    "tampered": ["tampered.txt", "forged_lines.txt", "bad_tokens.txt"],
    "credentials": ["credentials.txt", "logins.txt", "stolen_logins.txt"],
    "exfil": ["exfil.txt", "fetched_paths.txt", "stolen_files.txt"],
}
_SEAL_OPENERS = [
    "During an incident we found an implant's helper program on a host; a copy is at "
    "`{sealer}` (stripped, no source).",
    "While chasing odd outbound traffic we pulled a small helper binary off the affected "
    "machine; it is now at `{sealer}`, stripped and without source.",
    "The intruder left a stripped helper program behind on the compromised host, and we "
    "copied it to `{sealer}` (no symbols, no source).",
    "Among the files planted on the breached server was a little stripped binary, saved "
    "for you at `{sealer}`; we have no source for it.",
    "Triage of the compromised machine turned up the helper an implant calls before it "
    "talks to its server; the copy at `{sealer}` is stripped and came without source.",
]
_SEAL_PROGRAMS = ["unseal", "decode_tokens", "untoken", "desealer"]


@register
class SealedTokens(Family):
    """Reverse a stripped 'sealer' binary by probing it: recover its key and decode captured
    tokens; higher levels add a position-dependent step, an integrity trailer with tampered
    tokens and a capture log to mine for credentials and exfiltrated paths. Code asks for a
    decoder program, fuzzed against the sealing scheme on fresh plaintexts."""

    name = "security.sealed_tokens"
    domain = "security"
    verifier_kinds = frozenset({"exact_text", "fuzz_equivalence"})
    fixture_kinds = frozenset({"stripped_binary"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("inputs_untouched", (r"Leave the binary and the capture unchanged\.",),
             (r"def test_inputs_untouched\(", r"def test_sealer_matches_the_scheme\(")),
        Rule("decoded",
             (r"`(?P<path>/app/\w+/\w+\.(?:txt|tsv))`: (?:the plaintext of each captured token"
              r"|one line `LINE<TAB>SOURCE<TAB>PLAINTEXT` per token)",),
             (r'"decoded": "{path}"', r'read\(OUT\["decoded"\]\)')),
        Rule("key", (r"`(?P<path>/app/\w+/\w+\.txt)`: the secret key as lowercase hex bytes",),
             (r'"key": "{path}"', r'read\(OUT\["key"\]\)\.strip\(\) == bytes\(KEY\)\.hex\(\)'),
             levels=frozenset({1, 2})),
        Rule("integrity_trailer", (r"a token whose trailer does not match its content",),
             (r"if \(\(sum\(out\) \+ len\(out\)\) & 0xFF\) \^ key\[0\] != check:",),
             levels=frozenset({4})),
        Rule("skip_tampered", (r"\(leave out tampered tokens\)",),
             (r"good = \[r for r in rows if r\[2\] is not None\]",), levels=frozenset({4})),
        Rule("tampered",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: the line numbers of the tampered tokens",),
             (r'"tampered": "{path}"', r'read\(OUT\["tampered"\]\)'), levels=frozenset({4})),
        Rule("credentials",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: the implant relays logins as a `USER name`",),
             (r'"credentials": "{path}"', r'read\(OUT\["credentials"\]\)'),
             levels=frozenset({3, 4})),
        Rule("exfil",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: every distinct path the implant fetched",),
             (r'"exfil": "{path}"', r'read\(OUT\["exfil"\]\)'), levels=frozenset({4})),
        Rule("decoder", (r"I also need a decoder",), (r"def test_decoder_on_fresh_tokens\(",),
             when={"code": True}),
        Rule("decoder_invalid", (r"For a tampered or malformed token print `INVALID`",),
             (r'expected\.append\("INVALID" if text is None else text\)',),
             levels=frozenset({4}), when={"code": True}),
        Rule("decoder_without_sealer", (r"It must work without `(?P<sealer>/app/\w+/[\w-]+)`",),
             (r'"sealer": "{sealer}"', r"os\.chmod\(SEALER, 0o600\)"), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "recover XOR-obfuscated strings from a binary blob": "decoded"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        key_len = 1 if level == 1 else rng.randint(3, 5)
        key = [rng.randint(1, 255) for _ in range(key_len)]
        while key_len > 1 and len(set(key)) == 1:
            key = [rng.randint(1, 255) for _ in range(key_len)]
        step = rng.choice([3, 5, 7, 11, 13, 17, 19, 23, 29]) if level >= 3 else 0
        # Where the sample, the capture and the findings live varies from task to task.
        sealer = f"/app/{rng.choice(_SEAL_DIRS)}/{rng.choice(_SEAL_NAMES)}"
        capture_files = _SEAL_CAPTURE_FILES["tokens" if level <= 2 else "session"]
        capture = f"{rng.choice(_SEAL_CAPTURE_DIRS)}/{rng.choice(capture_files)}"
        out_dir = "/app/" + rng.choice(_SEAL_OUT_DIRS)
        if level <= 2:
            wanted = {"decoded": "decoded_txt", "key": "key"}
        else:
            wanted = {"decoded": "decoded_tsv", "credentials": "credentials"}
        if level >= 4:
            wanted |= {"tampered": "tampered", "exfil": "exfil"}
        outputs = {k: f"{out_dir}/{rng.choice(_SEAL_OUT_FILES[v])}" for k, v in wanted.items()}
        opener = rng.choice(_SEAL_OPENERS).format(sealer=sealer)
        tpl = templates(__name__)
        binary_source = tpl.render(
            "environment/src/sealer.c",
            key="{" + ", ".join(str(k) for k in key) + "}",
            level=level,
            step=step,
        )
        files: dict[str, str | bytes] = {"src/sealer.c": binary_source}
        rows: list[tuple[str, str, str]] = []
        tampered: set[int] = set()
        if level <= 2:
            texts = seal_texts(rng, 1 if level == 1 else 4)
            captured = "".join(seal(t, key, step, level) + "\n" for t in texts)
            files[capture] = captured
        else:
            rows = seal_session(rng, 30 if level == 3 else 50, level)
            if level >= 4:
                tampered = set(rng.sample(range(len(rows)), 6))
            dst = f"203.0.113.{rng.randint(2, 250)}:{rng.choice([443, 4444, 8443, 1337])}"
            lines = []
            for i, (stamp, source, text) in enumerate(rows):
                token = seal(text, key, step, level)
                if i in tampered:
                    token = seal_tamper(rng, token)
                lines.append(f"{stamp} {source} -> {dst} {token}\n")
            files[capture] = "".join(lines)
        hashes = {
            f"/app/{rel}": sha256_hex(d) for rel, d in files.items() if not rel.startswith("src/")
        }

        program = None
        if language:
            program = program_path(language, "/app/" + rng.choice(_SEAL_PROGRAMS))
        values = {
            "level": level,
            "code": language is not None,
            "sealer": sealer,
            "capture": capture,
            "outputs": outputs,
        }
        instruction = tpl.render(
            "instruction.md",
            opener=opener,
            program_sentence=program_sentence(language, program) if language else "",
            **values,
        )

        probe_text = "HELLO probe 42"
        if language:
            source = _decoder(tpl, language, key, step, level)
            setup = [program_step(language, program, source), build_step(language, program)]
            decoder = invoke(language, program)
        else:
            source = _decoder(tpl, "bash", key, step, level)
            setup = [heredoc("/tmp/unseal.sh", source)]
            decoder = "bash /tmp/unseal.sh"
        solution = tpl.render(
            "solution/solve.sh",
            out_dir=out_dir,
            setup="\n".join(s for s in setup if s),
            probe=probe_text,
            probe_token=seal(probe_text, key, step, level),
            decoder=decoder,
            log=f"/app/{capture}",
            key_hex=bytes(key).hex(),
            **values,
        )

        params = {
            "level": level,
            "key": key,
            "step": step,
            "sealer": sealer,
            "capture": f"/app/{capture}",
            "outputs": outputs,
            "hashes": hashes,
            "captured": level <= 2,
            "session": level >= 3,
            "code": language is not None,
            "fuzz": {1: 30, 2: 60, 3: 100, 4: 150}[level]
            * (2 if ctx.verifier_kind == "fuzz_equivalence" else 1),
        }
        tests = tpl.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            sources=function_sources(seal, unseal, seal_texts, seal_tamper),
            settings=settings_lines(params),
        )
        return Draft(
            instruction=instruction,
            solution=solution,
            tests={"test_task.py": tests},
            files=files,
            dockerfile_steps=(
                f"RUN mkdir -p {sealer.rsplit('/', 1)[0]} && gcc -O2 -s -o {sealer}"
                " /app/src/sealer.c && rm -rf /app/src",
            ),
        )
