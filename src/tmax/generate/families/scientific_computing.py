"""Task families of the scientific_computing domain.

The small helpers at the top (test prelude, heredocs, service start-up) are shared
with the data_processing and system_administration modules.
"""

from __future__ import annotations

import json
import math

from tmax.generate.family import Draft, Family, RenderContext, register
from tmax.generate.families._common import (
    LANGUAGE_NAMES,
    PNG_READER,
    png_bytes,
    program_path,
    wav_bytes,
)

# --- shared helpers ---------------------------------------------------------------------

TEST_PRELUDE = r'''
import hashlib
import json
import os
import random
import socket
import subprocess
import tempfile
import time
import urllib.request

CFG = json.loads(CFG_JSON)
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "LANG": "C.UTF-8", "HOME": "/root"}
_BUILT = {}


def program():
    """The command that runs the agent's program (compiled first when it is C)."""
    if "cmd" in _BUILT:
        return _BUILT["cmd"]
    lang, src = CFG["lang"], CFG["program"]
    assert os.path.isfile(src), f"the program {src} does not exist"
    if lang == "c":
        binary = os.path.join(tempfile.mkdtemp(), "prog")
        built = subprocess.run(["/usr/bin/gcc", "-O2", "-std=c11", "-o", binary, src, "-lm"],
                               capture_output=True, text=True, env=ENV)
        assert built.returncode == 0, f"gcc could not build {src}:\n{built.stderr[-2000:]}"
        cmd = [binary]
    elif lang == "python":
        cmd = ["/usr/bin/python3", src]
    else:
        cmd = ["/bin/bash", src]
    _BUILT["cmd"] = cmd
    return cmd


def run_program(args, stdin=None, check=True, timeout=30):
    done = subprocess.run(program() + [str(a) for a in args], input=stdin, capture_output=True,
                          text=True, env=ENV, timeout=timeout)
    if check:
        assert done.returncode == 0, (
            f"{CFG['program']} {' '.join(map(str, args))} exited {done.returncode}: "
            f"{done.stderr[-1500:]}")
    return done


def read(path):
    assert os.path.isfile(path), f"{path} was not written"
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def workdir():
    return tempfile.mkdtemp(prefix="fresh-")


def check_manifest(path, names):
    """A sha256sum-style manifest must list exactly ``names`` with their real digests."""
    lines = [line.split() for line in read(path).splitlines() if line.strip()]
    listed = {}
    for fields in lines:
        assert len(fields) == 2, f"bad manifest line in {path}: {fields}"
        listed[os.path.basename(fields[1].lstrip("*"))] = fields[0]
    assert sorted(listed) == sorted(os.path.basename(n) for n in names), (
        f"{path} should list {sorted(names)}, lists {sorted(listed)}")
    for name in names:
        with open(name, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        assert listed[os.path.basename(name)] == digest, f"wrong digest for {name} in {path}"


def http_get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
        return reply.status, reply.read().decode("utf-8")


def tcp_line(port, line):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall((line + "\n").encode("utf-8"))
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.decode("utf-8").strip()
'''
"""Helpers pasted into every test_task.py of these modules (stdlib only)."""


def test_file(cfg: dict, body: str, extra: str = "") -> str:
    """test_task.py: the task's settings as JSON, the prelude, optional helpers, the body."""
    head = "CFG_JSON = " + repr(json.dumps(cfg, sort_keys=True)) + "\n"
    return head + TEST_PRELUDE + extra + body


def code_language(ctx: RenderContext) -> str:
    """The language of the program: the task's when code is asked for, else a shell script."""
    return ctx.language if ctx.needs_code else "bash"


def heredoc(path: str, text: str) -> str:
    """A solve.sh line that writes ``text`` to ``path`` verbatim."""
    return f"cat > {path} <<'TMAX_EOF'\n{text.strip()}\nTMAX_EOF"


def start_service(command: str, port: int, log: str) -> str:
    """solve.sh lines that start a service in the background and wait until it listens."""
    return (
        f"setsid nohup {command} > {log} 2>&1 < /dev/null &\n"
        f"for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
        "sleep 0.1; done"
    )


def manifest_line(names: list[str]) -> str:
    return "(cd /app/out && sha256sum " + " ".join(names) + " > checksums.sha256)"


# --- tone_analysis -----------------------------------------------------------------------

_TONE_ORACLE = r'''
import math
import struct
import wave


def load_samples(path):
    """(rate, samples) from a 16-bit mono WAV or a text file 'rate N' + one sample a line."""
    if path.endswith(".wav"):
        with wave.open(path, "rb") as handle:
            rate, frames = handle.getframerate(), handle.readframes(handle.getnframes())
        return rate, list(struct.unpack("<%dh" % (len(frames) // 2), frames))
    with open(path) as handle:
        lines = handle.read().split("\n")
    rate = int(lines[0].split()[1])
    return rate, [int(x) for x in lines[1:] if x.strip()]


def tone_stats(samples, level, threshold):
    n = len(samples)
    total = sum(samples)
    fields = [("samples", n), ("peak", max(abs(s) for s in samples))]
    if level >= 2:
        fields.append(("rms", math.isqrt(sum(s * s for s in samples) // n)))
    if level >= 3:
        crossings = sum(1 for a, b in zip(samples, samples[1:]) if (a < 0) != (b < 0))
        fields.append(("crossings", crossings))
        fields.append(("over", sum(1 for s in samples if abs(s) > threshold)))
    if level >= 4:
        mean = total // n if total >= 0 else -((-total) // n)
        fields.append(("mean", mean))
    return " ".join(f"{k}={v}" for k, v in fields)


def tone_freq(rate, samples):
    peak = max(abs(s) for s in samples)
    h = 0.3 * peak
    armed, first, last, count = False, None, None, 0
    for i in range(1, len(samples)):
        a, b = samples[i - 1], samples[i]
        if a < -h:
            armed = True
        if armed and a < 0 <= b:
            t = (i - 1) + a / (a - b)
            first = t if first is None else first
            last, count, armed = t, count + 1, False
    return "%.2f" % ((count - 1) * rate / (last - first))
'''

_TONE_PY = r"""
import sys

MODE, LEVEL, THRESHOLD = "@MODE@", @LEVEL@, @THRESHOLD@


def main():
    rate, samples = load_samples(sys.argv[1])
    if MODE == "freq":
        print(tone_freq(rate, samples))
    else:
        print(tone_stats(samples, LEVEL, THRESHOLD))


if __name__ == "__main__":
    main()
"""

_TONE_BASH = r"""
#!/bin/bash
# Usage: tone.sh RECORDING  (16-bit mono WAV, or text: "rate N" then one sample a line)
set -euo pipefail
f="$1"
if [ "${f##*.}" = wav ]; then
  rate=$(od -An -t u4 -j 24 -N 4 "$f" | tr -d ' ')
  od -An -v -t d2 -j 44 "$f" | tr -s ' ' '\n' | grep -v '^$'
else
  rate=$(head -n 1 "$f" | awk '{print $2}')
  tail -n +2 "$f" | grep -v '^$'
fi | awk -v mode=@MODE@ -v L=@LEVEL@ -v T=@THRESHOLD@ -v rate="$rate" '
{ s = $1 + 0; x[n] = s; a = (s < 0) ? -s : s; if (a > peak) peak = a
  sum += s; ss += s * s; if (n > 0 && ((p < 0) != (s < 0))) cr++
  if (a > T) over++; p = s; n++ }
END {
  if (mode == "freq") {
    h = 0.3 * peak; armed = 0; cnt = 0
    for (i = 1; i < n; i++) {
      if (x[i-1] < -h) armed = 1
      if (armed && x[i-1] < 0 && x[i] >= 0) {
        t = (i - 1) + x[i-1] / (x[i-1] - x[i]); if (cnt == 0) first = t
        last = t; cnt++; armed = 0 }
    }
    printf "%.2f\n", (cnt - 1) * rate / (last - first); exit }
  line = "samples=" n " peak=" peak
  if (L >= 2) line = line " rms=" int(sqrt(ss / n))
  if (L >= 3) line = line " crossings=" cr + 0 " over=" over + 0
  if (L >= 4) line = line " mean=" int(sum / n)
  print line }'
"""

_TONE_C = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODE_FREQ @FREQ@
#define LEVEL @LEVEL@
#define THRESHOLD @THRESHOLD@

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: tone FILE\n"); return 2; }
    FILE *fp = fopen(argv[1], "rb");
    if (!fp) { perror(argv[1]); return 1; }
    long cap = 1 << 16, n = 0, rate = 0;
    long *x = malloc(cap * sizeof *x);
    size_t len = strlen(argv[1]);
    if (len > 4 && strcmp(argv[1] + len - 4, ".wav") == 0) {
        unsigned char head[44], b[2];
        if (fread(head, 1, 44, fp) != 44) return 1;
        rate = head[24] | head[25] << 8 | head[26] << 16 | (long)head[27] << 24;
        while (fread(b, 1, 2, fp) == 2) {
            if (n == cap) x = realloc(x, (cap *= 2) * sizeof *x);
            x[n++] = (short)(b[0] | b[1] << 8);
        }
    } else {
        char word[32];
        long v;
        if (fscanf(fp, "%31s %ld", word, &rate) != 2) return 1;
        while (fscanf(fp, "%ld", &v) == 1) {
            if (n == cap) x = realloc(x, (cap *= 2) * sizeof *x);
            x[n++] = v;
        }
    }
    fclose(fp);
    long peak = 0, cr = 0, over = 0;
    long long sum = 0, ss = 0;
    for (long i = 0; i < n; i++) {
        long a = labs(x[i]);
        if (a > peak) peak = a;
        sum += x[i];
        ss += (long long)x[i] * x[i];
        if (i > 0 && ((x[i - 1] < 0) != (x[i] < 0))) cr++;
        if (a > THRESHOLD) over++;
    }
    if (MODE_FREQ) {
        double h = 0.3 * peak, first = 0, last = 0;
        int armed = 0;
        long cnt = 0;
        for (long i = 1; i < n; i++) {
            if (x[i - 1] < -h) armed = 1;
            if (armed && x[i - 1] < 0 && x[i] >= 0) {
                double t = (i - 1) + (double)x[i - 1] / (double)(x[i - 1] - x[i]);
                if (cnt == 0) first = t;
                last = t;
                cnt++;
                armed = 0;
            }
        }
        printf("%.2f\n", (cnt - 1) * (double)rate / (last - first));
        return 0;
    }
    printf("samples=%ld peak=%ld", n, peak);
    if (LEVEL >= 2) {
        long long m = ss / n, r = (long long)sqrt((double)m);
        while (r * r > m) r--;
        while ((r + 1) * (r + 1) <= m) r++;
        printf(" rms=%lld", r);
    }
    if (LEVEL >= 3) printf(" crossings=%ld over=%ld", cr, over);
    if (LEVEL >= 4) printf(" mean=%lld", sum / n);
    printf("\n");
    free(x);
    return 0;
}
"""

_TONE_TESTS = r"""

def make_recording(path, rng, freq=None):
    rate = rng.choice([8000, 11025, 16000])
    n = rng.randint(1600, 3200) if CFG["mode"] == "freq" else rng.randint(400, 1600)
    freq = freq or rng.uniform(150, 900)
    amp = rng.randint(2000, 30000)
    offset = rng.randint(-300, 300)
    samples = [max(-32768, min(32767, int(amp * math.sin(2 * math.pi * freq * i / rate)
               + rng.uniform(-0.1, 0.1) * amp + offset))) for i in range(n)]
    if path.endswith(".wav"):
        with wave.open(path, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(rate)
            out.writeframes(struct.pack("<%dh" % n, *samples))
    else:
        with open(path, "w") as out:
            out.write(f"rate {rate}\n" + "".join(f"{s}\n" for s in samples))
    return freq


def expected_line(path):
    rate, samples = load_samples(path)
    if CFG["mode"] == "freq":
        return None
    return tone_stats(samples, CFG["level"], CFG["threshold"])


def test_report():
    lines = read("/app/out/report.txt").splitlines()
    names = CFG["names"]
    assert len(lines) == len(names), f"report.txt needs {len(names)} lines, has {len(lines)}"
    errors = {}
    for line, name in zip(lines, names):
        got_name, _, rest = line.partition(" ")
        assert got_name == name, f"expected a line for {name}, got {line!r} (sorted by name?)"
        if CFG["mode"] == "freq":
            errors[name] = abs(float(rest) - CFG["truth"][name]) / CFG["truth"][name]
        else:
            want = expected_line("/app/" + name)
            assert rest.strip() == want, f"{name}: expected {want!r}, got {rest!r}"
    if errors:
        worst = max(errors.values())
        assert worst <= CFG["tolerance"], (
            f"worst relative frequency error {worst:.4%} exceeds {CFG['tolerance']:.2%}")


def test_derived_files():
    level = CFG["level"]
    if level < 2:
        return
    if CFG["mode"] == "freq":
        want = max(CFG["names"], key=lambda n: CFG["truth"][n])
        assert read("/app/out/highest.txt").strip() == want, "highest.txt names the wrong file"
    else:
        rms = {n: tone_stats(load_samples("/app/" + n)[1], 2, 0) for n in CFG["names"]}
        rms = {n: int(v.split("rms=")[1]) for n, v in rms.items()}
        want = sorted(CFG["names"], key=lambda n: (-rms[n], n))[0]
        assert read("/app/out/loudest.txt").strip() == want, "loudest.txt names the wrong file"
    if level >= 3:
        if CFG["mode"] == "freq":
            want = [n for n in CFG["names"] if CFG["truth"][n] >= 500]
        else:
            want = [n for n in CFG["names"]
                    if max(abs(s) for s in load_samples("/app/" + n)[1]) >= 32000]
        got = read("/app/out/flagged.txt").split()
        assert got == want, f"flagged.txt should list {want}, lists {got}"
    if level >= 4:
        summary = json.loads(read("/app/out/summary.json"))
        total = sum(len(load_samples("/app/" + n)[1]) for n in CFG["names"])
        assert summary == {"recordings": len(CFG["names"]), "total_samples": total}, (
            f"summary.json is {summary}")
        check_manifest("/app/out/checksums.sha256",
                       [f"/app/out/{n}" for n in ("report.txt", "flagged.txt", "summary.json")])


def test_program_on_fresh_recordings():
    if not CFG["code"]:
        return
    rng = random.Random(4242)
    folder = workdir()
    errors = []
    for i in range(CFG["fresh"]):
        path = os.path.join(folder, f"fresh{i}.{CFG['ext']}")
        freq = make_recording(path, rng)
        got = run_program([path]).stdout.strip()
        if CFG["mode"] == "freq":
            errors.append(abs(float(got) - freq) / freq)
        else:
            want = expected_line(path)
            assert got == want, f"on a fresh recording expected {want!r}, got {got!r}"
    if errors:
        worst = max(errors)
        assert worst <= CFG["tolerance"], (
            f"program: worst relative frequency error {worst:.4%} > {CFG['tolerance']:.2%}")
"""


def _tone_source(lang: str, mode: str, level: int, threshold: int) -> str:
    subst = {"@MODE@": mode, "@LEVEL@": str(level), "@THRESHOLD@": str(threshold)}
    subst["@FREQ@"] = "1" if mode == "freq" else "0"
    text = {"python": _TONE_ORACLE + _TONE_PY, "bash": _TONE_BASH, "c": _TONE_C}[lang]
    for key, value in subst.items():
        text = text.replace(key, value)
    return text


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

    def render(self, ctx: RenderContext) -> Draft:
        rng, level = ctx.rng, ctx.level
        mode = "freq" if ctx.verifier_kind == "metric_threshold" else "stats"
        ext = "wav" if ctx.fixture_kind == "audio" else "txt"
        threshold = rng.choice([8000, 10000, 12000, 15000])
        tolerance = {1: 0.03, 2: 0.015, 3: 0.008, 4: 0.004}[level]
        files: dict[str, str | bytes] = {}
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
                files[name] = wav_bytes(samples, rate)
            else:
                files[name] = f"rate {rate}\n" + "\n".join(map(str, samples)) + "\n"
            truth[name] = round(freq, 4)
            names.append(name)
        lang = code_language(ctx)
        prog = program_path(lang, "/app/tone")
        fresh = {"exact_text": 3, "metric_threshold": 4}.get(ctx.verifier_kind, 6 + 6 * level)
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
            "code": ctx.needs_code or ctx.verifier_kind == "fuzz_equivalence",
            "fresh": fresh,
        }
        kind = (
            "16-bit mono PCM WAV files"
            if ext == "wav"
            else ("text files (first line `rate <Hz>`, then one integer sample per line)")
        )
        if mode == "stats":
            fields = ["`samples=` number of samples", "`peak=` largest absolute sample"]
            if level >= 2:
                fields.append("`rms=` floor of the root-mean-square sample value")
            if level >= 3:
                fields.append(
                    "`crossings=` how many adjacent sample pairs differ in sign "
                    "(a sample counts as negative when < 0)"
                )
                fields.append(f"`over=` how many samples have absolute value above {threshold}")
            if level >= 4:
                fields.append("`mean=` the mean sample value truncated toward zero")
            what = (
                "one line per recording: the file's path relative to /app, a space, then "
                "these space-separated fields in this order:\n"
                + "\n".join(f"  - {f}" for f in fields)
            )
        else:
            what = (
                "one line per recording: the path relative to /app, a space, then the "
                "estimated frequency of its tone in Hz with two decimals. Recordings are "
                "noisy single tones; every estimate must be within "
                f"{tolerance:.1%} of the true frequency"
            )
        asks = [f"`/app/out/report.txt`: {what}. Lines sorted by path."]
        if level >= 2:
            asks.append(
                "`/app/out/highest.txt`: the path of the recording with the highest frequency"
                if mode == "freq"
                else "`/app/out/loudest.txt`: the path of the recording with the largest "
                "RMS (ties: first by path)"
            )
        if level >= 3:
            asks.append(
                "`/app/out/flagged.txt`: paths, one per line in path order, of the "
                + (
                    "recordings whose tone is at or above 500 Hz"
                    if mode == "freq"
                    else "clipped recordings (peak of 32000 or more)"
                )
            )
        if level >= 4:
            asks.append(
                '`/app/out/summary.json`: `{"recordings": N, "total_samples": M}` '
                "over all recordings"
            )
            asks.append(
                "`/app/out/checksums.sha256`: sha256sum-format lines for report.txt, "
                "flagged.txt and summary.json (made after they are final)"
            )
        body = (
            f"Our bench rig dumped {level} test-tone recording(s) under /app/recordings "
            f"as {kind}. Please produce:\n\n" + "\n".join(f"- {a}" for a in asks)
        )
        if cfg["code"]:
            body += (
                f"\n\nWrite it as a reusable {LANGUAGE_NAMES[lang]} program at `{prog}`: "
                "given one recording path as its only argument it prints that recording's "
                + (
                    "line content after the path (the fields only)"
                    if mode == "stats"
                    else "frequency estimate (Hz, two decimals)"
                )
                + ". I will run it on other recordings of the same format, with other "
                "sample rates and lengths."
            )
        source = _tone_source(lang, mode, level, threshold)
        tool = prog if cfg["code"] else "/tmp/tone.sh"
        run = {"python": f"python3 {tool}", "bash": f"bash {tool}"}.get(lang)
        lines = ["mkdir -p /app/out", heredoc(tool, source)]
        if lang == "c" and cfg["code"]:
            lines.append("gcc -O2 -std=c11 -o /tmp/tone /app/tone.c -lm")
            run = "/tmp/tone"
        lines.append(": > /app/out/report.txt")
        for name in sorted(names):
            lines.append(f'echo "{name} $({run} /app/{name})" >> /app/out/report.txt')
        if level >= 2:
            if mode == "freq":
                lines.append(
                    "sort -k2,2 -g -r /app/out/report.txt | head -n 1 | cut -d' ' -f1 "
                    "> /app/out/highest.txt"
                )
            else:
                lines.append("sed 's/.*rms=\\([0-9]*\\).*/\\1/' /app/out/report.txt > /tmp/rms")
                lines.append(
                    "paste -d' ' /tmp/rms /app/out/report.txt | sort -s -k1,1nr | "
                    "head -n 1 | cut -d' ' -f2 > /app/out/loudest.txt"
                )
        if level >= 3:
            if mode == "freq":
                lines.append(
                    "awk '$2 >= 500 {print $1}' /app/out/report.txt > /app/out/flagged.txt"
                )
            else:
                lines.append(
                    "awk '{split($3, p, \"=\"); if (p[2] >= 32000) print $1}' "
                    "/app/out/report.txt > /app/out/flagged.txt"
                )
        if level >= 4:
            lines.append("total=0")
            for name in sorted(names):
                if ext == "wav":
                    lines.append(f"total=$((total + ($(stat -c %s /app/{name}) - 44) / 2))")
                else:
                    lines.append(f"total=$((total + $(tail -n +2 /app/{name} | grep -c .)))")
            lines.append(
                f'printf \'{{"recordings": {level}, "total_samples": %d}}\\n\' '
                '"$total" > /app/out/summary.json'
            )
            lines.append(manifest_line(["report.txt", "flagged.txt", "summary.json"]))
            lines.append("cat /app/out/report.txt")
        extra = _TONE_ORACLE + "\n" + _TONE_TESTS
        return Draft(
            instruction=body,
            solution="\n".join(lines),
            tests={"test_task.py": test_file(cfg, "", extra)},
            files=files,
        )
