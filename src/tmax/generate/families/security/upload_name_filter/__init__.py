"""The security.upload_name_filter family: a gate that accepts or rejects uploaded
file names, one verdict per name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from tmax.generate.audit import ALL_LEVELS, Rule
from tmax.generate.builders import (
    asked_program_language,
    build_step,
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

UPLOAD_RULES = (
    "badbyte",
    "length",
    "absolute",
    "drive",
    "traversal",
    "empty",
    "hidden",
    "trailing",
    "reserved",
    "extension",
)


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


_UPLOAD_CORE = function_sources(upload_decode, upload_verdict, upload_line)

_UPLOAD_PY = (
    """#!/usr/bin/env python3
\"\"\"Upload-name gate: one verdict line (ACCEPT / REJECT RULE) per name read on stdin.\"\"\"
import re
import sys

@CONSTS@

"""
    + _UPLOAD_CORE
    + """


def main():
    for raw in sys.stdin.buffer.read().decode("latin-1").splitlines():
        print(upload_line(raw, LEVEL, ALLOWED, MAXLEN))


if __name__ == "__main__":
    main()
"""
)

_UPLOAD_SH = r"""#!/bin/bash
# Upload-name gate: one verdict line (ACCEPT / REJECT RULE) per name read on stdin.
export LC_ALL=C
@CONSTS@

decode_once() {  # percent-decode $1 once into OUT; return 1 on a non-printable byte
  local s=$1 i=0 n=${#1} hex v ch
  OUT=""
  while ((i < n)); do
    ch=${s:i:1}
    hex=${s:i+1:2}
    if [[ $ch == % && $hex =~ ^[0-9A-Fa-f][0-9A-Fa-f]$ ]]; then
      v=$((16#$hex))
      if ((v < 32 || v > 126)); then return 1; fi
      printf -v ch "\\x$hex"
      OUT+=$ch
      i=$((i + 3))
    else
      OUT+=$ch
      i=$((i + 1))
    fi
  done
  return 0
}

verdict() {
  local name=$1 prev seg last ext stem rest
  local -a segs=()
  if ((LEVEL >= 2)); then
    while :; do
      decode_once "$name" || { echo badbyte; return; }
      prev=$name
      name=$OUT
      if ((LEVEL < 3)) || [[ $name == "$prev" ]]; then break; fi
    done
  fi
  if ((LEVEL >= 3 && ${#name} > MAXLEN)); then echo length; return; fi
  if ((LEVEL >= 2)); then name=${name//\\//}; fi
  if [[ $name == /* ]]; then echo absolute; return; fi
  if ((LEVEL >= 3)) && [[ $name =~ ^[A-Za-z]: ]]; then echo drive; return; fi
  rest="$name/"
  while [[ -n $rest ]]; do
    segs+=("${rest%%/*}")
    rest=${rest#*/}
  done
  for seg in "${segs[@]}"; do
    if [[ $seg == .. ]]; then echo traversal; return; fi
  done
  if ((LEVEL >= 4)); then
    for seg in "${segs[@]}"; do [[ -z $seg ]] && { echo empty; return; }; done
    for seg in "${segs[@]}"; do [[ $seg == .* ]] && { echo hidden; return; }; done
    for seg in "${segs[@]}"; do
      [[ $seg == *. || $seg == *" " ]] && { echo trailing; return; }
    done
    for seg in "${segs[@]}"; do
      stem=${seg%%.*}
      case ${stem^^} in
        CON | PRN | AUX | NUL | COM[1-9] | LPT[1-9]) echo reserved; return ;;
      esac
    done
  fi
  if ((LEVEL >= 3)); then
    last=${segs[-1]}
    if [[ $last != *.* ]]; then echo extension; return; fi
    ext=${last##*.}
    if [[ " $ALLOWED " != *" ${ext,,} "* ]]; then echo extension; return; fi
  fi
  echo ok
}

while IFS= read -r line || [[ -n $line ]]; do
  rule=$(verdict "$line")
  if [[ $rule == ok ]]; then echo ACCEPT; else echo "REJECT $rule"; fi
done
"""

_UPLOAD_C = r"""/* Upload-name gate: one verdict (ACCEPT / REJECT RULE) per name read on stdin. */
#include <stdio.h>
#include <string.h>

@CONSTS@

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t decode_once(unsigned char *s, size_t n) {
    size_t r = 0, w = 0;
    while (r < n) {
        if (s[r] == '%' && r + 2 < n && hexval(s[r + 1]) >= 0 && hexval(s[r + 2]) >= 0) {
            s[w++] = (unsigned char)(hexval(s[r + 1]) * 16 + hexval(s[r + 2]));
            r += 3;
        } else {
            s[w++] = s[r++];
        }
    }
    return w;
}

static int is_reserved(const unsigned char *seg, size_t len) {
    char stem[8];
    size_t k = 0;
    while (k < len && seg[k] != '.') k++;
    if (k < 3 || k > 4) return 0;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = seg[i];
        stem[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    stem[k] = 0;
    if (k == 3)
        return !strcmp(stem, "CON") || !strcmp(stem, "PRN") || !strcmp(stem, "AUX") ||
               !strcmp(stem, "NUL");
    return (!strncmp(stem, "COM", 3) || !strncmp(stem, "LPT", 3)) && stem[3] >= '1' &&
           stem[3] <= '9';
}

static const char *verdict(unsigned char *s, size_t n) {
    if (LEVEL >= 2) {
        for (;;) {
            size_t m = decode_once(s, n);
            int changed = m != n;
            n = m;
            if (LEVEL < 3 || !changed) break;
        }
        for (size_t i = 0; i < n; i++)
            if (s[i] < 0x20 || s[i] > 0x7e) return "badbyte";
    }
    if (LEVEL >= 3 && n > MAXLEN) return "length";
    if (LEVEL >= 2)
        for (size_t i = 0; i < n; i++)
            if (s[i] == '\\') s[i] = '/';
    if (n > 0 && s[0] == '/') return "absolute";
    if (LEVEL >= 3 && n >= 2 && s[1] == ':' &&
        ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return "drive";
    size_t starts[4096], lens[4096], count = 0, begin = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '/') {
            starts[count] = begin;
            lens[count++] = i - begin;
            begin = i + 1;
        }
    }
    for (size_t k = 0; k < count; k++)
        if (lens[k] == 2 && s[starts[k]] == '.' && s[starts[k] + 1] == '.') return "traversal";
    if (LEVEL >= 4) {
        for (size_t k = 0; k < count; k++)
            if (lens[k] == 0) return "empty";
        for (size_t k = 0; k < count; k++)
            if (s[starts[k]] == '.') return "hidden";
        for (size_t k = 0; k < count; k++) {
            unsigned char c = s[starts[k] + lens[k] - 1];
            if (c == '.' || c == ' ') return "trailing";
        }
        for (size_t k = 0; k < count; k++)
            if (is_reserved(s + starts[k], lens[k])) return "reserved";
    }
    if (LEVEL >= 3) {
        const unsigned char *last = s + starts[count - 1];
        size_t len = lens[count - 1], dot = len;
        for (size_t i = 0; i < len; i++)
            if (last[i] == '.') dot = i;
        if (dot == len) return "extension";
        char ext[64];
        size_t el = len - dot - 1;
        if (el >= sizeof ext) return "extension";
        for (size_t i = 0; i < el; i++) {
            unsigned char c = last[dot + 1 + i];
            ext[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        ext[el] = 0;
        for (size_t i = 0; i < sizeof ALLOWED / sizeof ALLOWED[0]; i++)
            if (!strcmp(ext, ALLOWED[i])) return NULL;
        return "extension";
    }
    return NULL;
}

int main(void) {
    static unsigned char line[8192];
    while (fgets((char *)line, sizeof line, stdin)) {
        size_t n = strlen((char *)line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        const char *rule = verdict(line, n);
        if (rule) printf("REJECT %s\n", rule);
        else printf("ACCEPT\n");
    }
    return 0;
}
"""


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

        rules = {
            "badbyte": "after decoding, the name contains a byte outside printable ASCII "
            "(0x20-0x7E)",
            "length": f"the decoded name is longer than {maxlen} bytes",
            "absolute": "the name starts with a separator",
            "drive": "the name starts with a drive letter and a colon (like `C:`)",
            "traversal": "a segment is exactly `..`",
            "empty": "a segment is empty (`a//b`, or a separator at the end)",
            "hidden": "a segment starts with `.`",
            "trailing": "a segment ends with `.` or a space",
            "reserved": "a segment's text before its first `.` is a Windows device name (CON, "
            "PRN, AUX, NUL, COM1-COM9, LPT1-LPT9) in any letter case",
            "extension": "the last segment has no `.`, or its extension (the text after the "
            "last `.`, compared in lowercase) is not listed in "
            "`/app/policy/allowed_extensions.txt`",
        }
        active = [
            r
            for r in UPLOAD_RULES
            if level >= {"badbyte": 2, "length": 3, "drive": 3, "extension": 3}.get(r, 1)
            and (level >= 4 or r not in ("empty", "hidden", "trailing", "reserved"))
        ]
        prep = []
        if level == 1:
            prep.append("Segments are the parts of the name between `/` separators.")
        else:
            prep.append("Both `/` and `\\` are separators; segments are the parts between them.")
            again = (
                " Repeat the decoding until the name no longer changes (attackers double-encode)."
                if level >= 3
                else " Decode exactly once."
            )
            prep.append(
                "Check the percent-decoded name: each `%` followed by two hex digits stands for "
                "the byte they spell; any other `%` is a literal character." + again
            )
        if len(queues) == 1:
            where = "`/app/uploads/queue.txt` holds the file names users submitted, one per line."
        else:
            where = (
                "The names users submitted are in `/app/uploads/queue-1.txt`, `queue-2.txt` and "
                "`queue-3.txt` (one per line); treat them as one list in that order."
            )
        body = [
            "Our upload endpoint stores files under the name the client sends, and a bug bounty "
            "report showed it can be tricked into writing outside the upload folder. "
            + where
            + " Leave the input files unchanged.",
            " ".join(prep)
            + " A name is rejected for the first of these rules (checked in this order) that "
            "it breaks, identified by the word in front:\n"
            + bullets(f"`{r}`: {rules[r]}" for r in active)
            + "\nAnything else is accepted.",
        ]
        deliverables = [
            "`/app/out/accepted.txt`: the accepted names exactly as submitted, in input order.",
            "`/app/out/rejected.txt`: the rejected names exactly as submitted, in input order"
            + (", each as `RULE<TAB>NAME`." if level >= 2 else "."),
        ]
        if level >= 3:
            deliverables.append(
                "`/app/out/rule_counts.txt`: `RULE COUNT` for every rule that rejected at least "
                "one name, by COUNT descending, ties by RULE in byte order."
            )
        if level >= 4:
            deliverables.append(
                "`/app/out/summary.json`: `total`, `accepted`, `rejected` (numbers of names) and "
                "`rules` (an object mapping each rule of rule_counts.txt to its count)."
            )
        body.append("Please write:\n" + numbered(deliverables))
        program = None
        if language:
            program = program_path(language, "/app/namegate")
            hostile = (
                " It will be tested against hostile and legitimate names you have not seen: "
                "every hostile name must be rejected and every legitimate one accepted."
                if ctx.verifier_kind == "adversarial_corpus"
                else " It will be compared line by line with our policy on names you have not seen."
            )
            body.append(
                "The endpoint itself will call a gate program: it reads names from standard "
                "input, one per line, and prints one line per name, `ACCEPT` or `REJECT RULE`. "
                + program_sentence(language, program)
                + hostile
            )
        instruction = "\n\n".join(body)

        steps = ["mkdir -p /app/out"]
        if language:
            source = {"python": _UPLOAD_PY, "bash": _UPLOAD_SH, "c": _UPLOAD_C}[language]
            source = source.replace("@CONSTS@", _upload_consts(language, level, allowed, maxlen))
            steps.append(program_step(language, program, source))
            steps.append(build_step(language, program))
            gate = invoke(language, program)
        else:
            source = _UPLOAD_SH.replace("@CONSTS@", _upload_consts("bash", level, allowed, maxlen))
            steps.append(heredoc("/tmp/gate.sh", source))
            gate = "bash /tmp/gate.sh"
        if len(queues) > 1:
            steps.append("cat " + " ".join(f"/app/{q}" for q in queues) + " > /tmp/names.txt")
            names = "/tmp/names.txt"
        else:
            names = f"/app/{queues[0]}"
        steps.append(f"paste -d '\\t' <({gate} < {names}) {names} > /tmp/joined.txt")
        steps.append(
            "awk -F'\\t' '$1 == \"ACCEPT\" {print $2}' /tmp/joined.txt > /app/out/accepted.txt"
        )
        if level >= 2:
            steps.append(
                'awk -F\'\\t\' \'$1 != "ACCEPT" {sub(/^REJECT /, "", $1); print $1 "\\t" $2}\' '
                "/tmp/joined.txt > /app/out/rejected.txt"
            )
        else:
            steps.append(
                "awk -F'\\t' '$1 != \"ACCEPT\" {print $2}' /tmp/joined.txt > /app/out/rejected.txt"
            )
        if level >= 3:
            steps.append(
                "cut -f1 /app/out/rejected.txt | LC_ALL=C sort | uniq -c | awk '{print $2, $1}'"
                " | LC_ALL=C sort -k2,2nr -k1,1 > /app/out/rule_counts.txt"
            )
        if level >= 4:
            steps += [
                "total=$(wc -l < /tmp/joined.txt)",
                "acc=$(wc -l < /app/out/accepted.txt)",
                "rej=$(wc -l < /app/out/rejected.txt)",
                'rules=$(awk \'{printf "%s\\"%s\\": %d", (NR > 1 ? ", " : ""), $1, $2}\''
                " /app/out/rule_counts.txt)",
                'printf \'{"total": %d, "accepted": %d, "rejected": %d, "rules": {%s}}\\n\''
                ' "$total" "$acc" "$rej" "$rules" > /app/out/summary.json',
            ]
        solution = "\n".join(s for s in steps if s)

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
        tests = (
            fixture_test_head(language, program)
            + "\n\n"
            + function_sources(upload_decode, upload_verdict, upload_line, upload_names)
            + "\n\n"
            + settings_lines(params)
            + _UPLOAD_TESTS
        )
        return Draft(
            instruction=instruction, solution=solution, tests={"test_task.py": tests}, files=files
        )


_UPLOAD_TESTS = """
NAMES = []
for _q in CFG["queues"]:
    NAMES += Path(_q).read_text().splitlines() if os.path.isfile(_q) else []
RULES = [upload_verdict(n, CFG["level"], CFG["allowed"], CFG["maxlen"]) for n in NAMES]


def test_inputs_untouched():
    check_fixtures(CFG["hashes"])


def test_accepted():
    expected = "".join(n + "\\n" for n, r in zip(NAMES, RULES) if r is None)
    assert read("/app/out/accepted.txt") == expected, "accepted.txt does not match the policy"


def test_rejected():
    if CFG["level"] >= 2:
        expected = "".join(f"{r}\\t{n}\\n" for n, r in zip(NAMES, RULES) if r is not None)
    else:
        expected = "".join(n + "\\n" for n, r in zip(NAMES, RULES) if r is not None)
    got = read("/app/out/rejected.txt")
    assert got == expected, "rejected.txt does not match the policy"


def counts():
    tally = {}
    for r in RULES:
        if r is not None:
            tally[r] = tally.get(r, 0) + 1
    return sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))


def test_rule_counts():
    if CFG["level"] >= 3:
        expected = "".join(f"{r} {c}\\n" for r, c in counts())
        assert read("/app/out/rule_counts.txt") == expected, "rule_counts.txt is wrong"


def test_summary():
    if CFG["level"] >= 4:
        data = json.loads(read("/app/out/summary.json"))
        rejected = sum(r is not None for r in RULES)
        assert data.get("total") == len(NAMES), f"total: {data.get('total')}"
        assert data.get("accepted") == len(NAMES) - rejected, f"accepted: {data.get('accepted')}"
        assert data.get("rejected") == rejected, f"rejected: {data.get('rejected')}"
        assert data.get("rules") == dict(counts()), f"rules: {data.get('rules')}"


def test_gate_on_unseen_names():
    if not CFG["code"]:
        return
    rng = random.Random(90210)
    names = upload_names(rng, CFG["hidden"], CFG["allowed"], CFG["level"])
    want = [upload_line(n, CFG["level"], CFG["allowed"], CFG["maxlen"]) for n in names]
    done = run([], stdin="".join(n + "\\n" for n in names))
    assert done.returncode == 0, f"the gate failed: {done.stderr[-1500:]}"
    got = done.stdout.splitlines()
    assert len(got) == len(names), f"{len(got)} verdict lines for {len(names)} names"
    if CFG["adversarial"]:
        clean = sum(w == "ACCEPT" for w in want)
        assert 0 < clean < len(names)
        rows = list(zip(names, got, want))
        missed = [n for n, g, w in rows if w != "ACCEPT" and g.split()[:1] != ["REJECT"]]
        blocked = [n for n, g, w in rows if w == "ACCEPT" and g.strip() != "ACCEPT"]
        assert not missed, f"{len(missed)} hostile names were not rejected, e.g. {missed[:5]}"
        assert not blocked, f"{len(blocked)} legitimate names were rejected, e.g. {blocked[:5]}"
    else:
        wrong = [(n, g, w) for n, g, w in zip(names, got, want) if g.strip() != w]
        assert not wrong, f"{len(wrong)} verdicts differ (name, got, expected): {wrong[:5]}"
"""
