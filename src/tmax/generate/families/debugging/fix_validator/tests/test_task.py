{{ prelude }}
def corpus(level):
    clean = ["alice:1000:alice@example.com:/bin/bash", "bob_2:60000:b.o+b@mail.example.org:/bin/sh",
             "carol:4242:c@x.io:/usr/sbin/nologin", "d_d:1234:dd@a-b.example:/bin/bash",
             "eve99:59999:EVE@Example.COM:/bin/sh", "frank_the_third:2000:f@f.fr:/bin/bash"]
    evil = ["alice:1000:alice@example.com", "alice:1000:alice@example.com:/bin/bash:x",
            "Alice:1000:a@example.com:/bin/bash", "al:1000:a@example.com:/bin/bash",
            "a" * 17 + ":1000:a@example.com:/bin/bash", "9lives:1000:a@example.com:/bin/bash",
            "al-ice:1000:a@example.com:/bin/bash", "alice:0999:a@example.com:/bin/bash",
            "alice:999:a@example.com:/bin/bash", "alice:60001:a@example.com:/bin/bash",
            "alice:1000x:a@example.com:/bin/bash", "alice::a@example.com:/bin/bash",
            "alice:+1000:a@example.com:/bin/bash", "alice: 1000:a@example.com:/bin/bash", ""]
    if level >= 2:
        evil += ["alice:1000:a@b:/bin/bash", "alice:1000:@example.com:/bin/bash",
                 "alice:1000:a@@example.com:/bin/bash", "alice:1000:a@example..com:/bin/bash",
                 "alice:1000:a@.example.com:/bin/bash", "alice:1000:a@example.com.:/bin/bash",
                 "alice:1000:a b@example.com:/bin/bash", "alice:1000:aexample.com:/bin/bash"]
    if level >= 3:
        evil += ["alice:1000:a@example.com:/bin/bash2", "alice:1000:a@example.com:",
                 "alice:1000:a@example.com:/bin/zsh", "alice:1000:a@example.com:bash"]
    if level >= 4:
        evil += ["root:1000:a@example.com:/bin/bash", "admin:1001:a@example.com:/bin/sh",
                 "alice:1000:" + "a" * 60 + "@example.com:/bin/bash"]
    return clean, evil


def test_validator_corpus():
    clean, evil = corpus(CFG["level"])
    for record in clean:
        done = run_program([], stdin=record + "\n")
        assert done.stdout.split() == ["VALID"] and done.returncode == 0, (
            f"clean record rejected: {record!r} -> {done.stdout!r} exit {done.returncode}")
    for record in evil:
        done = run_program([], stdin=record + "\n")
        assert done.stdout.split() == ["INVALID"] and done.returncode == 1, (
            f"bad record accepted: {record!r} -> {done.stdout!r} exit {done.returncode}")
    mixed = clean[:3] + evil[:3]
    done = run_program([], stdin="\n".join(mixed) + "\n")
    assert done.stdout.split() == ["VALID"] * 3 + ["INVALID"] * 3, f"batch: {done.stdout!r}"
    assert done.returncode == 1, "a batch with a bad record must exit 1"


def test_service():
    if not CFG["service"]:
        return
    clean, evil = corpus(CFG["level"])
    records = [r for r in clean + evil if r]
    got = line_queries(CFG["port"], records)
    want = ["VALID"] * len([r for r in clean if r]) + ["INVALID"] * len([r for r in evil if r])
    assert got == want, f"service answers {list(zip(records, got))}"
