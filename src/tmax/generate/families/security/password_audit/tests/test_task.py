{{ head }}

{{ sources }}

PW_WORDS = {{ words | py }}

{{ settings }}
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
        expected = "".join(u + "\n" for u in sorted(set(ENTRIES) - set(found)))
        assert read(CFG["uncracked"]) == expected, f"{CFG['uncracked']} is wrong"


def test_shared():
    if CFG["level"] >= 3:
        groups = {}
        for user, password in cracked().items():
            groups.setdefault(password, []).append(user)
        expected = "".join(
            f"{pw} {','.join(sorted(us))}\n" for pw, us in sorted(groups.items()) if len(us) > 1
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
    wordlist.write_text("\n".join(words) + "\n")
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
