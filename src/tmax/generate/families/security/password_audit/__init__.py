"""The security.password_audit family: cracking a credential dump's password hashes
with a wordlist. The task's files are the templates beside this module
(``instruction.md``, ``solution/solve.sh``, ``tests/test_task.py``); the reference
cracker is ``solution/crack.py`` or ``solution/crack.sh``, and the functions below are
pasted into it and into the tests."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
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

_PW_TEXT = (
    "sunshine dragon monkey letmein football shadow master summer winter autumn spring "
    "princess welcome freedom whatever trustno hunter ranger soccer hockey killer george "
    "charlie andrew michelle jessica pepper ginger banana orange purple silver golden "
    "matrix secret tigger thunder cookie coffee pirate rocket falcon diamond bailey "
    "maggie buster jordan harley ashley yankees dallas austin boston chelsea arsenal "
    "liverpool london berlin paris madrid toronto denver phoenix samsung computer internet "
    "office company finance payroll welcome backup server admin access garden flower "
    "butterfly chocolate cheese pizza burger castle kingdom wizard legend forest river "
    "ocean mountain rainbow sparkle starlight midnight blue green yellow marble canyon"
)
PW_WORDS = tuple(sorted(set(_PW_TEXT.split())))


def pw_forms(word, level):
    forms = [word]
    if level >= 2:
        forms.append(word[:1].upper() + word[1:])
    if level >= 3:
        leet = word
        for a, b in (("a", "4"), ("e", "3"), ("i", "1"), ("o", "0"), ("s", "5")):
            leet = leet.replace(a, b)
        forms += [leet, leet[:1].upper() + leet[1:]]
    if level >= 4:
        back = word[::-1]
        forms += [back, back[:1].upper() + back[1:]]
    return forms


def pw_suffixes(level):
    out = [""]
    if level >= 2:
        out += [str(n) for n in range(10)]
    if level >= 3:
        out += [s + "!" for s in out]
    return out


def pw_candidates(words, level):
    seen, out = set(), []
    suffixes = pw_suffixes(level)
    for word in words:
        for form in pw_forms(word, level):
            for suffix in suffixes:
                candidate = form + suffix
                if candidate not in seen:
                    seen.add(candidate)
                    out.append(candidate)
    return out


def pw_hash(alg, password, salt=""):
    name = "sha256" if alg == "sha256s" else alg
    return hashlib.new(name, (salt + password).encode()).hexdigest()


def pw_accounts(rng, words, level, count):
    """(user, password, alg, salt, crackable) rows of a leaked credential dump."""
    firsts = "abcdefghjklmnprstw"
    lasts = ["smith", "jones", "brown", "lee", "garcia", "miller", "davis", "wilson", "moore"]
    lasts += ["taylor", "clark", "lewis", "walker", "young", "king", "wright", "hill", "green"]
    users = set()
    while len(users) < count:
        users.add(rng.choice(firsts) + rng.choice(lasts) + rng.choice(["", "", "2", "7"]))
    algs = ["sha256"] if level <= 2 else ["md5", "sha1", "sha256"]
    rows = []
    for user in sorted(users):
        if rng.random() < 0.75:
            form = rng.choice(pw_forms(rng.choice(words), level))
            password, crackable = form + rng.choice(pw_suffixes(level)), True
        else:
            alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789#%&*+=?@"
            password = "".join(rng.choice(alphabet) for _ in range(rng.randint(12, 16)))
            crackable = False
        rows.append([user, password, rng.choice(algs), "", crackable])
    if level >= 3:
        cracked = [r for r in rows if r[4]]
        for row in rng.sample(rows, 3):
            source = rng.choice(cracked)
            row[1], row[4] = source[1], True
    if level >= 4:
        for row in rng.sample(rows, 2):
            row[2], row[3] = "sha256s", "".join(rng.choice("0123456789abcdef") for _ in range(8))
    return [tuple(r) for r in rows]


def pw_dump(rows):
    lines = []
    for user, password, alg, salt, _crackable in rows:
        if alg == "sha256s":
            lines.append(f"{user}:$sha256s${salt}${pw_hash(alg, password, salt)}")
        else:
            lines.append(f"{user}:${alg}${pw_hash(alg, password)}")
    return "\n".join(lines) + "\n"


def pw_parse(text):
    """[(user, alg, salt, digest)] from a dump."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        user, rest = line.split(":", 1)
        parts = rest.split("$")
        if parts[1] == "sha256s":
            out.append((user, "sha256s", parts[2], parts[3]))
        else:
            out.append((user, parts[1], "", parts[2]))
    return out


def pw_crack(dump_text, words, level):
    """{user: password} for every account whose password follows the stated habits."""
    entries = pw_parse(dump_text)
    candidates = pw_candidates(words, level)
    tables = {}
    found = {}
    for user, alg, salt, digest in entries:
        if alg == "sha256s":
            for candidate in candidates:
                if pw_hash(alg, candidate, salt) == digest:
                    found[user] = candidate
                    break
            continue
        if alg not in tables:
            tables[alg] = {pw_hash(alg, c): c for c in candidates}
        if digest in tables[alg]:
            found[user] = tables[alg][digest]
    return found


_PW_DIRS = ["audit", "leak", "breach", "pwaudit", "incident"]
_PW_FILES = {
    "dump": ["dump.txt", "hashes.txt", "portal_users.txt", "leaked.txt"],
    "wordlist": ["wordlist.txt", "words.txt", "common_words.txt", "dictionary.txt"],
    "cracked": ["cracked.txt", "recovered.txt", "weak_accounts.txt"],
    "uncracked": ["uncracked.txt", "not_recovered.txt", "strong_accounts.txt"],
    "shared": ["shared.txt", "reused.txt", "shared_passwords.txt"],
    "report": ["report.json", "summary.json", "stats.json"],
}
_PW_PROGRAMS = ["crack", "pwcheck", "audit_dump", "weakpw"]
_PW_OPENERS = [
    "A credential dump from the legacy customer portal leaked, and I need to know how weak "
    "those passwords are before we force resets.",
    "The old customer portal's password hashes turned up on a forum; before anyone decides "
    "on resets I need to see how many of them fall to a simple wordlist.",
    "After the breach of the old customer login database, I have to report how many of the "
    "leaked passwords are trivially weak.",
    "Someone posted the password table of the retired customer portal online, and I want to "
    "know which customers must change their passwords first.",
    "We have a copy of the customer portal's leaked password hashes and need a quick audit "
    "of how guessable they are.",
]
_PW_SOURCES = [
    "From the old helpdesk tickets",
    "From the password-reset requests we used to handle",
    "From what customers told the support desk over the years",
    "From interviews with the support team",
]


def _crack_sources() -> str:
    """The reference cracker's functions, pasted into solution/crack.py."""
    return function_sources(pw_forms, pw_suffixes, pw_candidates, pw_hash, pw_parse, pw_crack)


@register
class PasswordAudit(Family):
    """Audit a leaked credential dump by cracking unsalted hashes with a wordlist and the
    users' known password habits (more habits, mixed algorithms and salted entries with each
    level), then report uncracked accounts, shared passwords and per-algorithm statistics.
    metric_threshold scores the share of accounts recovered; code asks for a cracker
    program that the tests run on a fresh dump."""

    name = "security.password_audit"
    domain = "security"
    verifier_kinds = frozenset({"exact_text", "metric_threshold"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    rules = (
        Rule("inputs_untouched", (r"Leave the input files unchanged\.",),
             (r"def test_inputs_untouched\(",)),
        Rule("dump_format", (r"one account per line as `user:\$ALG\$HEX`",),
             (r"def pw_parse\(",)),
        Rule("salted", (r"Some entries are salted: `user:\$sha256s\$SALT\$HEX`",),
             (r"pw_hash\(alg, candidate, salt\) == digest",), levels=frozenset({4})),
        Rule("wordlist", (r"a word from `(?P<path>/app/\w+/\w+\.txt)`",),
             (r'"wordlist": "{path}"', r'WORDS = Path\(CFG\["wordlist"\]\)')),
        Rule("capitalized", (r"sometimes with its first letter capitalized",),
             (r"forms\.append\(word\[:1\]\.upper\(\) \+ word\[1:\]\)",),
             levels=frozenset({2, 3, 4})),
        Rule("digit", (r"sometimes followed by a single digit",),
             (r"out \+= \[str\(n\) for n in range\(10\)\]",), levels=frozenset({2, 3, 4})),
        Rule("leetspeak", (r"sometimes in leetspeak",),
             (r'\("a", "4"\), \("e", "3"\), \("i", "1"\), \("o", "0"\), \("s", "5"\)',),
             levels=frozenset({3, 4})),
        Rule("bang", (r"sometimes ending in a single `!`",),
             (r'out \+= \[s \+ "!" for s in out\]',), levels=frozenset({3, 4})),
        Rule("backwards", (r"sometimes with the word spelled backwards",),
             (r"back = word\[::-1\]",), levels=frozenset({4})),
        Rule("cracked",
             (r"`(?P<path>/app/\w+/\w+\.txt)`: one `user:password` line per account",
              r"sorted by user \(every line must be right\)"),
             (r"def test_cracked\(", r'"cracked": "{path}"', r'read\(CFG\["cracked"\]\)',
              r'wrong password for \{{user\}}', r"lines are not sorted")),
        Rule("crack_at_least", (r"I need at least \d+ of the \d+ accounts recovered",),
             (r'assert len\(found\) >= CFG\["required"\]',), when={"metric": True}),
        Rule("crack_every", (r"Recover every account whose password follows those habits",),
             (r"expected = pw_crack\(DUMP, WORDS, LEVEL\)",), when={"metric": False}),
        Rule("uncracked", (r"`(?P<path>/app/\w+/\w+\.txt)`: the users not in",),
             (r'"uncracked": "{path}"', r'read\(CFG\["uncracked"\]\)'),
             levels=frozenset({2, 3, 4})),
        Rule("shared", (r"`(?P<path>/app/\w+/\w+\.txt)`: for every recovered password used",),
             (r'"shared": "{path}"', r'read\(CFG\["shared"\]\)'), levels=frozenset({3, 4})),
        Rule("report", (r"`(?P<path>/app/\w+/\w+\.json)`: `total` \(accounts\)",),
             (r'"report": "{path}"', r'read\(CFG\["report"\]\)'), levels=frozenset({4})),
        Rule("program", (r"so I also want a program: given a dump and a wordlist",),
             (r"def test_program_on_a_fresh_dump\(",), when={"code": True}),
    )  # fmt: skip
    skills: ClassVar[Mapping[str, str]] = {
        "crack weak unsalted password hashes with a small wordlist": "cracked"
    }

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        language = asked_program_language(ctx)
        metric = ctx.verifier_kind == "metric_threshold"
        vocabulary = list(PW_WORDS)
        words = rng.sample(vocabulary, {1: 40, 2: 50, 3: 50, 4: 50}[level])
        rows = pw_accounts(rng, words, level, {1: 12, 2: 20, 3: 28, 4: 36}[level])
        crackable = sum(1 for r in rows if r[4])
        share = {1: 0.5, 2: 0.7, 3: 0.85, 4: 1.0}[level]
        required = -(-int(share * crackable * 100) // 100)
        # Where the dump lives and what the findings are called varies from task to task.
        folder = rng.choice(_PW_DIRS)
        paths = {k: f"/app/{folder}/{rng.choice(names)}" for k, names in _PW_FILES.items()}
        dump, wordlist, cracked = paths["dump"], paths["wordlist"], paths["cracked"]
        files: dict[str, str | bytes] = {
            dump.removeprefix("/app/"): pw_dump(rows),
            wordlist.removeprefix("/app/"): "\n".join(words) + "\n",
        }
        hashes = {f"/app/{rel}": sha256_hex(d) for rel, d in files.items()}

        opener, source = rng.choice(_PW_OPENERS), rng.choice(_PW_SOURCES)
        program = None
        if language:
            program = program_path(language, "/app/" + rng.choice(_PW_PROGRAMS))
        tpl = templates(__name__)
        instruction = tpl.render(
            "instruction.md",
            level=level,
            metric=metric,
            code=language is not None,
            opener=opener,
            source=source,
            **paths,
            cracked_name=cracked.rsplit("/", 1)[1],
            required=required,
            accounts=len(rows),
            share_percent=f"{share:.0%}",
            program_sentence=program_sentence(language, program) if language else "",
        )

        crack_sh = tpl.render("solution/crack.sh", level=level)
        if language:
            if language == "python":
                code = tpl.render("solution/crack.py", level=level, sources=_crack_sources())
            else:
                code = crack_sh
            program_step_ = program_step(language, program, code)
            crack = invoke(language, program)
        else:
            program_step_ = heredoc("/tmp/crack.sh", crack_sh)
            crack = "bash /tmp/crack.sh"
        solution = tpl.render(
            "solution/solve.sh", level=level, program_step=program_step_, crack=crack, **paths
        )

        params = {
            "level": level,
            "hashes": hashes,
            **paths,
            "metric": metric,
            "code": language is not None,
            "required": required,
            "share": share,
            "fresh_words": {1: 30, 2: 20, 3: 8, 4: 5}[level],
        }
        tests = tpl.render(
            "tests/test_task.py",
            head=fixture_test_head(language, program),
            sources=function_sources(
                pw_forms,
                pw_suffixes,
                pw_candidates,
                pw_hash,
                pw_accounts,
                pw_dump,
                pw_parse,
                pw_crack,
            ),
            words=PW_WORDS,
            settings=settings_lines(params),
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )
