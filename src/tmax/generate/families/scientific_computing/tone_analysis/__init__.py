"""Summarise recorded test tones (the task's files are the templates beside this module;
the reference analyser in Python, Bash or C is ``solution/tone.*``, the oracle the tests and
the Python analyser share is ``tests/oracle.py``)."""

from __future__ import annotations

import math

from tmax.generate.audit import Rule
from tmax.generate.builders import (
    LANGUAGE_NAMES,
    language_or_bash,
    manifest_test_file,
    program_path,
    wav_bytes,
)
from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.templates import templates

_EXTENSIONS = {"python": "py", "bash": "sh", "c": "c"}
"""The reference analyser of each language: ``solution/tone.<extension>``."""


@register
class ToneAnalysis(Family):
    """Summarise recorded test tones (WAV or text samples): integer statistics, or estimate
    each tone's frequency under an error bound. Level adds recordings, fields and reports;
    code turns it into a reusable analyser run on fresh recordings."""

    name = "scientific_computing.tone_analysis"
    domain = "scientific_computing"
    verifier_kinds = frozenset({"exact_text", "metric_threshold", "fuzz_equivalence"})
    fixture_kinds = frozenset({"audio", "text_only"})
    languages = frozenset({"python", "bash", "c"})
    rules = (
        Rule("report", (r"`/app/out/report\.txt`: one line per recording",
                        r"Lines sorted by path\."),
             (r"def test_report\(", r"assert got_name == name")),
        Rule("samples_peak", (r"`samples=` number of samples", r"`peak=` largest absolute sample"),
             (r'fields = \[\("samples", n\), \("peak"',), when={"mode": "stats"}),
        Rule("rms_field", (r"`rms=` floor of the root-mean-square",),
             (r'fields\.append\(\("rms"',), levels=frozenset({2, 3, 4}), when={"mode": "stats"}),
        Rule("crossings_over", (r"`crossings=` how many adjacent sample pairs differ in sign",
                                r"`over=` how many samples have absolute value above \d+"),
             (r'fields\.append\(\("crossings"', r'fields\.append\(\("over"'),
             levels=frozenset({3, 4}), when={"mode": "stats"}),
        Rule("mean_field", (r"`mean=` the mean sample value truncated toward zero",),
             (r'fields\.append\(\("mean"',), levels=frozenset({4}), when={"mode": "stats"}),
        Rule("frequency", (r"estimated frequency of its tone in Hz with two decimals",
                           r"every estimate must be within [\d.]+% of the true frequency"),
             (r'assert rest == "%\.2f" % float\(rest\)', r'assert worst <= CFG\["tolerance"\]'),
             when={"mode": "freq"}),
        Rule("loudest", (r"`/app/out/loudest\.txt`: the path of the recording with the largest "
                         r"RMS \(ties: first by path\)",),
             (r'read\("/app/out/loudest\.txt"\)', r"key=lambda n: \(-rms\[n\], n\)"),
             levels=frozenset({2, 3, 4}), when={"mode": "stats"}),
        Rule("highest", (r"`/app/out/highest\.txt`: the path of the recording with the highest "
                         r"frequency",),
             (r'read\("/app/out/highest\.txt"\)',), levels=frozenset({2, 3, 4}),
             when={"mode": "freq"}),
        Rule("flagged", (r"`/app/out/flagged\.txt`: paths, one per line in path order",),
             (r'read\("/app/out/flagged\.txt"\)',), levels=frozenset({3, 4})),
        Rule("summary", (r'`/app/out/summary\.json`: `\{"recordings": N, "total_samples": M\}`',),
             (r'read\("/app/out/summary\.json"\)',), levels=frozenset({4})),
        Rule("checksums", (r"`/app/out/checksums\.sha256`: sha256sum-format lines",),
             (r'check_manifest\("/app/out/checksums\.sha256"',), levels=frozenset({4})),
        Rule("program", (r"reusable .+? program at `/app/tone",),
             (r"def test_program_on_fresh_recordings\(",), when={"code": True}),
    )  # fmt: skip

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        mode = "freq" if ctx.verifier_kind == "metric_threshold" else "stats"
        ext = "wav" if ctx.fixture_kind == "audio" else "txt"
        threshold = rng.choice([8000, 10000, 12000, 15000])
        tolerance = {1: 0.03, 2: 0.015, 3: 0.008, 4: 0.004}[level]
        app_files: dict[str, str | bytes] = {}
        truth: dict[str, float] = {}
        names = []
        for i in range(level):
            name = f"recordings/{rng.choice(['probe', 'mic', 'sensor', 'hydro'])}{i + 1}.{ext}"
            rate = 8000
            freq = rng.choice([rng.uniform(160, 420), rng.uniform(580, 900)])
            amp = rng.choice([rng.randint(3000, 20000), 36000])
            step = 2 * math.pi * freq / rate
            noise = [rng.uniform(-0.1, 0.1) * amp for _ in range(64)]
            samples = [
                max(-32768, min(32767, int(amp * math.sin(step * j) + noise[(j * 7) % 61])))
                for j in range(1600)
            ]
            if ext == "wav":
                app_files[name] = wav_bytes(samples, rate)
            else:
                app_files[name] = f"rate {rate}\n" + "\n".join(map(str, samples)) + "\n"
            truth[name] = round(freq, 4)
            names.append(name)
        lang = language_or_bash(ctx)
        prog = program_path(lang, "/app/tone")
        fresh = {"exact_text": 3, "metric_threshold": 4}.get(ctx.verifier_kind, 6 + 6 * level)
        names.sort()
        code = ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence"
        cfg = {
            "level": level,
            "mode": mode,
            "names": names,
            "truth": truth,
            "ext": ext,
            "threshold": threshold,
            "tolerance": tolerance,
            "lang": lang,
            "program": prog,
            "code": code,
            "fresh": fresh,
        }
        files = templates(__name__)
        oracle = files.render("tests/oracle.py")
        tool = prog if code else "/tmp/tone.sh"
        values = {
            "level": level,
            "mode": mode,
            "ext": ext,
            "threshold": threshold,
            "tolerance": f"{tolerance:.1%}",
            "code": code,
            "language_name": LANGUAGE_NAMES[lang],
            "program": prog,
            "lang": lang,
            "names": names,
            "tool": tool,
            "run": {"python": f"python3 {tool}", "bash": f"bash {tool}", "c": "/tmp/tone"}[lang],
            "source": files.render(
                f"solution/tone.{_EXTENSIONS[lang]}",
                oracle=oracle,
                mode=mode,
                level=level,
                threshold=threshold,
                freq=int(mode == "freq"),
            ).strip(),
        }
        return Draft(
            instruction=files.render("instruction.md", **values),
            solution=files.render("solution/solve.sh", **values),
            tests={
                "test_task.py": files.render(
                    "tests/test_task.py", prelude=manifest_test_file(cfg, ""), oracle=oracle
                )
            },
            files=app_files,
        )
