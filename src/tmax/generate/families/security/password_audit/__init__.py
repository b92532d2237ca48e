"""The security.password_audit family: cracking a credential dump's password hashes
with a wordlist."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    asked_program_language,
    bullets,
    fixture_test_head,
    function_sources,
    heredoc,
    invoke,
    numbered,
    program_path,
    program_sentence,
    program_step,
    settings_lines,
    sha256_hex,
)
from tmax.generate.family import Draft, Family, RenderContext, register

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


_PW_PY = (
    """#!/usr/bin/env python3
\"\"\"Crack a credential dump with a wordlist: prints user:password lines, sorted by user.\"\"\"
import hashlib
import sys

LEVEL = @LEVEL@

"""
    + function_sources(pw_forms, pw_suffixes, pw_candidates, pw_hash, pw_parse, pw_crack)
    + """


def main():
    dump = open(sys.argv[1], encoding="utf-8").read()
    words = [w.strip() for w in open(sys.argv[2], encoding="utf-8") if w.strip()]
    for user, password in sorted(pw_crack(dump, words, LEVEL).items()):
        print(f"{user}:{password}")


if __name__ == "__main__":
    main()
"""
)

_PW_SH = r"""#!/bin/bash
# Crack a credential dump with a wordlist: prints user:password lines, sorted by user.
# usage: crack.sh DUMP WORDLIST
set -euo pipefail
export LC_ALL=C
LEVEL=@LEVEL@
dump=$1
wordlist=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

leet() {
  local s=$1
  s=${s//a/4}; s=${s//e/3}; s=${s//i/1}; s=${s//o/0}; s=${s//s/5}
  REPLY=$s
}
reverse() {
  local s=$1 out="" i
  for ((i = ${#s} - 1; i >= 0; i--)); do out+=${s:i:1}; done
  REPLY=$out
}

suffixes=("")
if ((LEVEL >= 2)); then suffixes+=(0 1 2 3 4 5 6 7 8 9); fi
if ((LEVEL >= 3)); then
  count=${#suffixes[@]}
  for ((k = 0; k < count; k++)); do suffixes+=("${suffixes[k]}!"); done
fi

declare -A seen=()
candidates=()
while IFS= read -r word || [[ -n $word ]]; do
  word=${word%$'\r'}
  [[ -z $word ]] && continue
  forms=("$word")
  if ((LEVEL >= 2)); then forms+=("${word^}"); fi
  if ((LEVEL >= 3)); then leet "$word"; forms+=("$REPLY" "${REPLY^}"); fi
  if ((LEVEL >= 4)); then reverse "$word"; forms+=("$REPLY" "${REPLY^}"); fi
  for form in "${forms[@]}"; do
    for suffix in "${suffixes[@]}"; do
      candidate=$form$suffix
      [[ -n ${seen[$candidate]+x} ]] && continue
      seen[$candidate]=1
      candidates+=("$candidate")
    done
  done
done < "$wordlist"
printf '%s\n' "${candidates[@]}" > "$work/candidates"

# one file per candidate (its name is the candidate's index), hashed by one process per tool
write_all() {  # $1 directory, $2 prefix (salt)
  local i
  mkdir -p "$1"
  for i in "${!candidates[@]}"; do printf '%s%s' "$2" "${candidates[i]}" > "$1/$i"; done
}
hash_dir() {  # $1 directory, $2 tool; prints "digest index"
  (cd "$1" && find . -type f -printf '%P\0' | xargs -0 "$2") | awk '{print $1, $2}'
}

: > "$work/found"
written=0
for alg in md5 sha1 sha256; do
  if grep -q ":\\\$$alg\\\$" "$dump"; then
    if ((!written)); then write_all "$work/plain" ""; written=1; fi
    hash_dir "$work/plain" "${alg}sum" > "$work/table.$alg"
    awk -F'$' -v alg="$alg" 'NR == FNR { split($0, p, " "); idx[p[1]] = p[2]; next }
      $2 == alg && ($3 in idx) { sub(/:$/, "", $1); print $1, idx[$3] }' \
      "$work/table.$alg" "$dump" >> "$work/found"
  fi
done
n=0
while IFS='$' read -r user alg salt digest; do
  [[ $alg == sha256s ]] || continue
  user=${user%:}
  n=$((n + 1))
  write_all "$work/salted$n" "$salt"
  hash_dir "$work/salted$n" sha256sum | awk -v d="$digest" -v u="$user" '$1 == d {print u, $2}' \
    >> "$work/found"
  rm -rf "$work/salted$n"
done < "$dump"
awk 'NR == FNR { c[NR - 1] = $0; next } { print $1 ":" c[$2] }' "$work/candidates" "$work/found" \
  | sort -t: -k1,1
"""


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

        algs = "`sha256`" if level <= 2 else "`md5`, `sha1` or `sha256`"
        salted = (
            " Some entries are salted: `user:$sha256s$SALT$HEX` is the SHA-256 of SALT "
            "immediately followed by the password."
            if level >= 4
            else ""
        )
        habits = [f"a word from `{wordlist}`"]
        if level >= 2:
            habits.append("sometimes with its first letter capitalized")
            habits.append("sometimes followed by a single digit")
        if level >= 3:
            habits.append(
                "sometimes in leetspeak: every a, e, i, o, s of the word replaced by 4, 3, 1, "
                "0, 5 (capitalization, if any, is applied after that)"
            )
            habits.append("sometimes ending in a single `!` (after the digit, if there is one)")
        if level >= 4:
            habits.append("sometimes with the word spelled backwards (then possibly capitalized)")
        body = [
            f"{rng.choice(_PW_OPENERS)} `{dump}` has one "
            f"account per line as `user:$ALG$HEX`, where ALG is {algs} and HEX the hex digest "
            f"of the UTF-8 password.{salted} Leave the input files unchanged.",
            f"{rng.choice(_PW_SOURCES)} we know the users' habits: a password is\n"
            + bullets(habits)
            + "\nSome users picked strong random passwords; don't waste time on those.",
        ]
        deliverables = [
            f"`{cracked}`: one `user:password` line per account you recovered, "
            "sorted by user (every line must be right)."
            + (
                f" I need at least {required} of the {len(rows)} accounts recovered."
                if metric
                else " Recover every account whose password follows those habits."
            )
        ]
        if level >= 2:
            deliverables.append(
                f"`{paths['uncracked']}`: the users not in {cracked.rsplit('/', 1)[1]}, "
                "sorted, one per line."
            )
        if level >= 3:
            deliverables.append(
                f"`{paths['shared']}`: for every recovered password used by two or more "
                "accounts, a line `PASSWORD user1,user2,...` (users sorted), lines sorted by "
                "password."
            )
        if level >= 4:
            deliverables.append(
                f"`{paths['report']}`: `total` (accounts), `cracked`, `percent` (100 * "
                "cracked / total, rounded to one decimal) and `by_algorithm`, mapping each ALG "
                'to `{"total": N, "cracked": K}`.'
            )
        body.append("Please write:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, "/app/" + rng.choice(_PW_PROGRAMS))
            goal = (
                f"recover at least {share:.0%} of the accounts that follow those habits"
                if metric
                else "recover every account that follows those habits"
            )
            body.append(
                "We have more dumps like this, so I also want a program: given a dump and a "
                "wordlist as its two arguments, it prints the `user:password` lines (sorted by "
                f"user) for the accounts it recovers; it must {goal} and never print a wrong "
                "password. " + program_sentence(language, program)
            )
        instruction = "\n\n".join(body)

        steps = []
        if level >= 3:
            steps.append(f"wc -l {dump} {wordlist}")
            steps.append(f"head -n 3 {dump}")
        if level >= 4:
            steps.append(f"cut -d'$' -f2 {dump} | sort | uniq -c")
        if language:
            source = {"python": _PW_PY, "bash": _PW_SH}[language].replace("@LEVEL@", str(level))
            steps.append(program_step(language, program, source))
            crack = invoke(language, program)
        else:
            steps.append(heredoc("/tmp/crack.sh", _PW_SH.replace("@LEVEL@", str(level))))
            crack = "bash /tmp/crack.sh"
        steps.append(f"{crack} {dump} {wordlist} > /tmp/cracked.txt")
        steps.append(f"mv /tmp/cracked.txt {cracked}")
        if level >= 2:
            steps += [
                f"cut -d: -f1 {dump} | LC_ALL=C sort > /tmp/users.txt",
                f"cut -d: -f1 {cracked} | LC_ALL=C sort > /tmp/cracked_users.txt",
                f"LC_ALL=C comm -23 /tmp/users.txt /tmp/cracked_users.txt > {paths['uncracked']}",
            ]
        if level >= 3:
            steps += [
                f"awk -F: '{{print $2 \"\\t\" $1}}' {cracked} | LC_ALL=C sort > /tmp/pw_users.txt",
                "awk -F'\\t' '{u[$1] = n[$1]++ ? u[$1] \",\" $2 : $2}"
                " END {for (p in n) if (n[p] > 1) print p, u[p]}' /tmp/pw_users.txt"
                f" | LC_ALL=C sort > {paths['shared']}",
            ]
        if level >= 4:
            steps.append(
                "awk -F: 'NR == FNR {ok[$1] = 1; next}"
                ' {split($2, p, "$"); t[p[2]]++; n++; if ($1 in ok) {c[p[2]]++; k++}}'
                ' END {printf "{\\"total\\": %d, \\"cracked\\": %d, \\"percent\\": %.1f,'
                ' \\"by_algorithm\\": {", n, k, 100 * k / n; s = "";'
                ' for (a in t) {printf "%s\\"%s\\": {\\"total\\": %d, \\"cracked\\": %d}",'
                ' s, a, t[a], c[a] + 0; s = ", "} print "}}"}\''
                f" {cracked} {dump} > {paths['report']}"
            )
            steps.append(f"python3 -m json.tool {paths['report']}")
        solution = "\n".join(steps)

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
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(
                pw_forms,
                pw_suffixes,
                pw_candidates,
                pw_hash,
                pw_accounts,
                pw_dump,
                pw_parse,
                pw_crack,
            )
            + f"\n\nPW_WORDS = {PW_WORDS!r}\n"
            + "\n"
            + settings_lines(params)
            + _PW_TESTS
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_PW_TESTS = '''
LEVEL = CFG["level"]
DUMP = Path(CFG["dump"]).read_text() if os.path.isfile(CFG["dump"]) else ""
WORDS = Path(CFG["wordlist"]).read_text().split() if DUMP else []
ENTRIES = {user: (alg, salt, digest) for user, alg, salt, digest in pw_parse(DUMP)}


def check_lines(text, entries):
    """{user: password} from cracked lines; every line must be a right password."""
    found = {}
    lines = text.splitlines()
    for line in lines:
        user, sep, password = line.partition(":")
        assert sep and user in entries, f"bad line {line!r}"
        assert user not in found, f"{user} is listed twice"
        alg, salt, digest = entries[user]
        assert pw_hash(alg, password, salt) == digest, f"wrong password for {user}: {password!r}"
        found[user] = password
    assert lines == sorted(lines, key=lambda l: l.split(":", 1)[0]), "lines are not sorted by user"
    return found


def cracked():
    return check_lines(read(CFG["cracked"]), ENTRIES)


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_cracked():
    found = cracked()
    if CFG["metric"]:
        print(f"metric: recovered {len(found)} of {len(ENTRIES)} accounts")
        assert len(found) >= CFG["required"], (
            f"recovered {len(found)} accounts, need at least {CFG['required']}"
        )
    else:
        expected = pw_crack(DUMP, WORDS, LEVEL)
        missing = sorted(set(expected) - set(found))
        assert not missing, f"these accounts follow the habits but were not recovered: {missing}"


def test_uncracked():
    if CFG["level"] >= 2:
        found = cracked()
        expected = "".join(u + "\\n" for u in sorted(set(ENTRIES) - set(found)))
        assert read(CFG["uncracked"]) == expected, f"{CFG['uncracked']} is wrong"


def test_shared():
    if CFG["level"] >= 3:
        groups = {}
        for user, password in cracked().items():
            groups.setdefault(password, []).append(user)
        expected = "".join(
            f"{pw} {','.join(sorted(us))}\\n" for pw, us in sorted(groups.items()) if len(us) > 1
        )
        assert read(CFG["shared"]) == expected, f"{CFG['shared']} is wrong"


def test_report():
    if CFG["level"] >= 4:
        found = cracked()
        data = json.loads(read(CFG["report"]))
        assert data.get("total") == len(ENTRIES), f"total: {data.get('total')}"
        assert data.get("cracked") == len(found), f"cracked: {data.get('cracked')}"
        assert abs(float(data.get("percent", -1)) - 100 * len(found) / len(ENTRIES)) < 0.051, (
            f"percent: {data.get('percent')}"
        )
        by = {}
        for user, (alg, _salt, _digest) in ENTRIES.items():
            slot = by.setdefault(alg, {"total": 0, "cracked": 0})
            slot["total"] += 1
            slot["cracked"] += user in found
        assert data.get("by_algorithm") == by, f"by_algorithm: {data.get('by_algorithm')} != {by}"


def test_program_on_a_fresh_dump(tmp_path):
    if not CFG["code"]:
        return
    rng = random.Random(2718)
    words = rng.sample(list(PW_WORDS), CFG["fresh_words"])
    rows = pw_accounts(rng, words, LEVEL, 10)
    dump = tmp_path / "dump.txt"
    dump.write_text(pw_dump(rows))
    wordlist = tmp_path / "words.txt"
    wordlist.write_text("\\n".join(words) + "\\n")
    done = run([dump, wordlist], timeout=120)
    assert done.returncode == 0, f"the program failed: {done.stderr[-1500:]}"
    entries = {u: (a, s, d) for u, a, s, d in pw_parse(dump.read_text())}
    found = check_lines(done.stdout, entries)
    expected = pw_crack(dump.read_text(), words, LEVEL)
    if CFG["metric"]:
        need = -(-int(CFG["share"] * len(expected) * 100) // 100)
        print(f"metric: program recovered {len(found)} of {len(expected)} crackable accounts")
        assert len(found) >= need, f"the program recovered {len(found)}, need {need}"
    else:
        assert set(found) == set(expected), (
            f"the program missed {sorted(set(expected) - set(found))}"
        )
'''
