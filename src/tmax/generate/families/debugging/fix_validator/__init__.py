"""Replace a leaky legacy account-record validator (the task's files are the templates
beside this module: the legacy checker is ``environment/app/legacy_validate.py``, the
reference validator in Python or Bash ``solution/validate.*``)."""

from __future__ import annotations

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    PROGRAM_SERVER_PY,
    invoke,
    minimal_test_file,
    program_path,
    wait_port,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates


@register
class FixValidator(Family):
    """Replace a leaky legacy account-record validator with one that rejects a hidden
    adversarial corpus and accepts clean records; level adds rules (email, shell, reserved
    names, length); services ask for a validation service on a TCP port."""

    name = "debugging.fix_validator"
    domain = "debugging"
    verifier_kinds = frozenset({"adversarial_corpus"})
    fixture_kinds = frozenset({"text_only"})
    languages = frozenset({"python", "bash"})
    services = True
    rules = (
        Rule("four_fields", (r"exactly four `:`-separated fields `username:uid:email:shell`",),
             (r'"alice:1000:alice@example\.com:/bin/bash:x"',)),
        Rule("username", (r"username: 3 to 16 characters, a lowercase letter first",),
             (r'"Alice:1000:a@example\.com:/bin/bash", "al:1000:a@example\.com:/bin/bash"',)),
        Rule("uid", (r"uid: a decimal integer from 1000 to 60000 written without sign",),
             (r'"alice:0999:a@example\.com:/bin/bash"', r'"alice:60001:a@example\.com:/bin/bash"')),
        Rule("email", (r"email: `local@domain` with exactly one `@`",),
             (r'"alice:1000:a@@example\.com:/bin/bash"', r'"alice:1000:a@b:/bin/bash"'),
             levels=frozenset({2, 3, 4})),
        Rule("shell", (r"shell: exactly one of `/bin/bash`, `/bin/sh`, `/usr/sbin/nologin`",),
             (r'"alice:1000:a@example\.com:/bin/zsh"',), levels=frozenset({3, 4})),
        Rule("reserved_names", (r"username is not one of the reserved names root, admin",),
             (r'"root:1000:a@example\.com:/bin/bash", "admin:1001:',), levels=frozenset({4})),
        Rule("max_length", (r"the whole record is at most 80 characters long",),
             (r'"a" \* 60 \+ "@example\.com:/bin/bash"',), levels=frozenset({4})),
        Rule("replacement", (r"Write a correct replacement in .+? at `/app/validate",),
             (r"def test_validator_corpus\(",)),
        Rule("exit_status", (r"exits 0 if every record was valid and 1 otherwise",),
             (r'assert done\.returncode == 1, "a batch with a bad record must exit 1"',)),
        Rule("service", (r"leave a validation service running on 127\.0\.0\.1 port (?P<port>\d+)",),
             (r"def test_service\(", r'"port": {port}[,}}]'), when={"service": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        port = rng.randint(7100, 7899)
        service = ctx.needs_service
        program = program_path(ctx.language, "/app/validate")
        samples = [
            f"{rng.choice(['ana', 'ben', 'cleo', 'dmitri'])}:{rng.randint(1000, 60000)}:"
            f"user{rng.randint(1, 99)}@example.com:/bin/bash",
            f"x:{rng.randint(1, 999)}:bad@:/bin/sh",
        ]
        rejected = [
            "zed:0777:zed@example.com:/bin/bash",
            "Yan:1200:yan@example.com:/bin/sh",
            "kim:1300:kim@example.com:/bin/bash:extra",
        ][: 1 + level // 2]
        if level >= 2:
            rejected.append("lou:1400:lou@localhost:/bin/bash")
        if level >= 3:
            rejected.append("max:1500:max@example.com:/bin/fish")
        run = invoke(ctx.language, program)
        server = (
            PROGRAM_SERVER_PY.replace("__PROGRAM__", repr(run.split()))
            .replace("__LINE_PORT__", str(port))
            .replace("__HTTP_PORT__", "0")
            .replace("__PREFIX__", '""')
        )
        files = templates(__name__)
        source = "solution/validate.py" if ctx.language == "python" else "solution/validate.sh"
        values = {
            "level": level,
            "lang": ctx.language,
            "language_name": LANGUAGE_NAMES[ctx.language],
            "program": program,
            "service": service,
            "port": port,
            "samples": samples,
            "body": files.render(source, level=level).rstrip("\n"),
            "run": run,
            "server": server.rstrip("\n"),
            "wait_port": wait_port(port),
        }
        params = {
            "level": level,
            "language": ctx.language,
            "program": program,
            "service": service,
            "port": port,
        }
        prelude = minimal_test_file(params, "", service=True)
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={"test_task.py": files.render("tests/test_task.py", prelude=prelude)},
            files={
                "legacy_validate.py": files.render("environment/app/legacy_validate.py"),
                "data/rejected_by_import.txt": "\n".join(rejected) + "\n",
            },
            keep_agent_processes=service,
        )
