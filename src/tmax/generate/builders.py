"""What the task families build with: fixtures, instruction sentences, solution lines,
test files and services, in one place so that no family imports another.

Everything here is pure and deterministic (no clocks, no global randomness), so a
family that uses only these and its ``ctx.rng`` renders byte-identical tasks.

The families grew in three styles, each with its own test file and service; the
builders keep each style's bytes (a task's bytes are its identity,
``tests/generate/test_render_digests.py``), so similar helpers stand side by side
under names that say how they differ:

- :func:`manifest_test_file`: settings ``lang``/``program``; the program runs under a
  clean ``ENV`` and must exit 0; outputs are checked against sha256sum manifests
  (:func:`manifest_line`); a service starts with :func:`start_detached_service`.
- :func:`fixture_test_head`: the program as literals ``LANG``/``SRC``; inputs are
  checked unmodified by their digests; reference functions pasted with
  :func:`function_sources` answer through :data:`ANSWER_SERVER_FRAME`, started with
  :func:`start_python_service`.
- :func:`minimal_test_file`: settings ``language``/``program``, and only
  ``run_program`` and ``read`` (plus clients when the task runs a service);
  :data:`PROGRAM_SERVER_PY` serves the program's answers, awaited by :func:`wait_port`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import io
import json
import struct
import wave
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tmax.generate.family import RenderContext

# --- fixtures ---------------------------------------------------------------------------


def png_bytes(width: int, height: int, pixels: Sequence[tuple[int, int, int]]) -> bytes:
    """An RGB PNG (8-bit, filter 0 on every row), deterministic for the same pixels."""
    if len(pixels) != width * height:
        raise ValueError(f"expected {width * height} pixels, got {len(pixels)}")
    raw = bytearray()
    for y in range(height):
        raw.append(0)
        for r, g, b in pixels[y * width : (y + 1) * width]:
            raw += bytes((r, g, b))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + chunk(b"IEND", b"")
    )


PNG_READER = '''
import struct
import zlib


def read_png(path):
    """Decode an 8-bit RGB PNG (any of the five row filters) to (w, h, pixels)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\\x89PNG\\r\\n\\x1a\\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) == (8, 2), "expected 8-bit RGB"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * 3, [], bytes(width * 3)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b = prev[i]
            c = prev[i - 3] if i >= 3 else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    pixels = [tuple(row[x * 3 : x * 3 + 3]) for row in rows for x in range(width)]
    return width, height, pixels
'''
"""Source of a stdlib-only PNG decoder, for test files (the verifier has no Pillow)."""


def wav_bytes(samples: Sequence[int], rate: int = 8000) -> bytes:
    """A 16-bit mono PCM WAV file, deterministic for the same samples."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", max(-32768, min(32767, s))) for s in samples))
    return buffer.getvalue()


# --- instruction text -------------------------------------------------------------------


def bullets(items: Iterable[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def numbered(items: Iterable[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = [",".join(header)]
    lines += [",".join(str(v) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


LANGUAGE_NAMES = {"python": "Python 3", "bash": "Bash", "c": "C (C11, built with gcc)"}


def program_path(language: str, stem: str = "/app/tool") -> str:
    """Where the agent's program in ``language`` must live (e.g. /app/tool.py)."""
    return stem + {"python": ".py", "bash": ".sh", "c": ".c"}[language]


def program_sentence(language: str, path: str) -> str:
    """The instruction's sentence naming the program's language and path."""
    return f"Write it in {LANGUAGE_NAMES[language]} at `{path}`" + (
        " (it will be built with `gcc -O2 -std=c11 ... -lm`)." if language == "c" else "."
    )


def code_note(ctx: RenderContext, path: str, usage: str) -> str:
    """The instruction's paragraph asking for a reusable program at ``path`` that does
    ``usage``, in the task's language."""
    lang = LANGUAGE_NAMES[ctx.language]
    build = ""
    if ctx.language == "c":
        build = f" I will build it with `gcc -O2 -std=c11 -o prog {path} -lm`."
    return (
        f"Write this as a reusable {lang} program at `{path}`: {usage}{build} "
        "I will run it on other inputs of the same shape, so it must not hard-code "
        "anything about the files you see here."
    )


# --- the program's language -------------------------------------------------------------

PROGRAM_VERIFIERS = frozenset({"fuzz_equivalence", "adversarial_corpus"})
"""Verifier kinds that run a program of the agent's, even in bash-only tasks."""


def language_or_bash(ctx: RenderContext) -> str:
    """The language of the program: the task's when code is asked for, else a shell script."""
    return ctx.language if ctx.needs_code else "bash"


def asked_program_language(ctx: RenderContext) -> str | None:
    """The language of the program the task asks for (None: no program is asked for).

    A bash-only task whose verifier must run a program asks for a shell script."""
    if ctx.needs_code:
        return ctx.language
    if ctx.verifier_kind in PROGRAM_VERIFIERS:
        return "bash"
    return None


# --- solution lines ---------------------------------------------------------------------


def heredoc(path: str, text: str) -> str:
    """A solve.sh line that writes ``text`` (stripped) to ``path``."""
    return f"cat > {path} <<'TMAX_EOF'\n{text.strip()}\nTMAX_EOF"


def program_step(language: str, path: str, source: str) -> str:
    """Solution lines that make ``path``'s folder and write ``source`` there."""
    return f"mkdir -p {path.rsplit('/', 1)[0]}\n" + heredoc(path, source)


def build_step(language: str, path: str, binary: str | None = None) -> str:
    """The solution line that builds a C program to ``binary``, by default its source
    less ``.c`` ('' for the other languages)."""
    if language != "c":
        return ""
    binary = path.removesuffix(".c") if binary is None else binary
    return f"gcc -O2 -std=c11 -o {binary} {path} -lm"


def program_setup(language: str, source: str, body: str, binary: str | None = None) -> list[str]:
    """Solution lines that write ``body`` to ``source`` (unstripped but for trailing
    newlines, unlike :func:`program_step`), then build it (C, :func:`build_step`) or
    make it executable (bash)."""
    lines = [f"cat > {source} <<'PROGRAM_EOF'", body.rstrip("\n"), "PROGRAM_EOF"]
    if language == "c":
        lines.append(build_step(language, source, binary))
    elif language == "bash":
        lines.append(f"chmod +x {source}")
    return lines


def invoke(language: str, source: str, binary: str | None = None) -> str:
    """The command prefix that runs an installed program; a C program runs as ``binary``
    (by default where :func:`build_step` builds it: its source less ``.c``)."""
    if language == "python":
        return f"python3 {source}"
    if language == "bash":
        return f"bash {source}"
    return source.removesuffix(".c") if binary is None else binary


def manifest_line(names: list[str]) -> str:
    """The solution line that lists ``names`` in /app/out/checksums.sha256 (what the
    tests' ``check_manifest`` reads)."""
    return "(cd /app/out && sha256sum " + " ".join(names) + " > checksums.sha256)"


def service_ports(ctx: RenderContext) -> tuple[int, int]:
    """A line-protocol port and an HTTP port for a task's service."""
    first = ctx.rng.randrange(7100, 7900)
    return first, first + ctx.rng.randrange(150, 900)


def start_detached_service(command: str, port: int, log: str) -> str:
    """solve.sh lines that start any command in its own session (``setsid``) and wait
    up to 10 s until it listens on ``port``."""
    return (
        f"setsid nohup {command} > {log} 2>&1 < /dev/null &\n"
        f"for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
        "sleep 0.1; done"
    )


def start_python_service(script: str, ports: Iterable[int]) -> str:
    """Solution lines: start a Python service in the background, logging to
    ``/app/<name>.log``, and wait up to 15 s for each of its ports."""
    name = script.rsplit("/", 1)[-1].removesuffix(".py")
    lines = [f"nohup python3 {script} > /app/{name}.log 2>&1 &"]
    for port in ports:
        lines.append(
            f"for _ in $(seq 150); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break;"
            " sleep 0.1; done"
        )
    return "\n".join(lines)


def wait_port(port: int) -> str:
    """A solution line that waits up to 10 s until something listens on ``port``."""
    return (
        f"for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break;"
        " sleep 0.1; done"
    )


# --- test files -------------------------------------------------------------------------


def settings_lines(settings: Mapping[str, Any]) -> str:
    """The tests' settings: ``CFG_JSON`` (the line the instruction–test audit reads a
    task's settings from, :func:`tmax.generate.audit.task_settings`) and ``CFG``, the
    same as a dict. The tests must have imported ``json`` before these lines."""
    return f"CFG_JSON = {json.dumps(settings, sort_keys=True)!r}\nCFG = json.loads(CFG_JSON)\n"


@functools.cache
def function_sources(*functions: Callable[..., object]) -> str:
    """The source text of functions, to paste into tests and reference programs (cached:
    reading source is slow and renders must be fast), so the generator, the oracle and
    the checks cannot drift apart."""
    return "\n\n".join(inspect.getsource(f) for f in functions)


def sha256_hex(data: str | bytes) -> str:
    """The hex sha256 of ``data`` (text as UTF-8), e.g. a fixture's for ``check_fixtures``."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


_MANIFEST_PRELUDE = r'''
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
"""What :func:`manifest_test_file` puts after the settings (stdlib only)."""


def manifest_test_file(cfg: dict, body: str, extra: str = "") -> str:
    """test_task.py: the task's settings as JSON, the prelude, optional helpers, the body."""
    head = "CFG_JSON = " + repr(json.dumps(cfg, sort_keys=True)) + "\n"
    return head + _MANIFEST_PRELUDE + extra + body


_FIXTURE_TEST_HEAD = '''"""Checks for this task (stdlib + pytest only)."""
import gzip
import hashlib
import http.client
import json
import os
import random
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

LANG = @LANG@
SRC = @SRC@
_BUILT = {}


def program():
    """The argv prefix that runs the agent's program (a C source is built once)."""
    assert SRC and os.path.isfile(SRC), f"the program {SRC} does not exist"
    if LANG == "python":
        return ["python3", SRC]
    if LANG == "bash":
        return ["bash", SRC]
    if "bin" not in _BUILT:
        binary = "/tmp/tmax_agent_program"
        done = subprocess.run(
            ["gcc", "-O2", "-std=c11", "-o", binary, SRC, "-lm"], capture_output=True, text=True
        )
        assert done.returncode == 0, f"gcc could not build {SRC}:\\n{done.stderr[-3000:]}"
        _BUILT["bin"] = binary
    return [_BUILT["bin"]]


def run(args, stdin=None, timeout=60):
    return subprocess.run(
        program() + [str(a) for a in args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/tmp",
        errors="replace",
    )


def read(path):
    p = Path(path)
    assert p.is_file(), f"{path} is missing"
    return p.read_text(errors="replace")


def check_fixtures(hashes):
    for path, digest in hashes.items():
        data = Path(path).read_bytes() if Path(path).is_file() else b""
        assert hashlib.sha256(data).hexdigest() == digest, f"the input {path} was modified"


def wait_port(port, timeout=20.0):
    end = time.time() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            assert time.time() < end, f"nothing listens on 127.0.0.1:{port}"
            time.sleep(0.2)


def ask_lines(port, requests):
    """Send request lines over one TCP connection; one reply line per request."""
    wait_port(port)
    replies = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        reader = conn.makefile("r", encoding="utf-8", newline="\\n")
        for request in requests:
            conn.sendall((request + "\\n").encode())
            line = reader.readline()
            assert line.endswith("\\n"), f"no complete reply to {request!r} on port {port}"
            replies.append(line.rstrip("\\r\\n"))
    return replies


def http_get(port, path):
    wait_port(port)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()
'''


def fixture_test_head(language: str | None, source: str | None) -> str:
    """The head of a test_task.py that runs the program at ``source`` (None: no program)."""
    return _FIXTURE_TEST_HEAD.replace("@LANG@", repr(language)).replace("@SRC@", repr(source))


_MINIMAL_TEST_HEAD = '''import json
import os
import random
import shlex
import socket
import subprocess
import tempfile
import time

CFG_JSON = __CFG__
CFG = json.loads(CFG_JSON)


def run_program(args, stdin=None):
    """Build (for C) and run the agent's program; return the completed process."""
    lang, src = CFG["language"], CFG["program"]
    assert os.path.exists(src), f"program {src} is missing"
    if lang == "c":
        binary = "/tmp/agent_prog_bin"
        if not os.path.exists(binary):
            build = subprocess.run(
                ["gcc", "-O2", "-std=c11", "-o", binary, src, "-lm"],
                capture_output=True, text=True,
            )
            assert build.returncode == 0, "gcc failed: " + build.stderr[-2000:]
        cmd = [binary]
    else:
        cmd = ["python3" if lang == "python" else "bash", src]
    return subprocess.run(
        cmd + [str(a) for a in args], input=stdin, capture_output=True, text=True, timeout=60
    )


def read(path):
    assert os.path.exists(path), f"{path} was not written"
    with open(path) as handle:
        return handle.read()
'''
_SERVICE_CLIENTS = """

def connect(port, tries=50):
    for _ in range(tries):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing is listening on 127.0.0.1:{port}")


def line_queries(port, queries):
    sock = connect(port)
    stream = sock.makefile("rw")
    answers = []
    for query in queries:
        stream.write(query + "\\n")
        stream.flush()
        answers.append(stream.readline().strip())
    sock.close()
    return answers


def http_get(port, path):
    sock = connect(port)
    sock.sendall(f"GET {path} HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n".encode())
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    head, _, body = data.partition(b"\\r\\n\\r\\n")
    status = head.split(b"\\r\\n")[0].decode(errors="replace")
    return status, body.decode(errors="replace")
"""


def minimal_test_file(params: dict, body: str, service: bool = False) -> str:
    """test_task.py: settings, ``run_program`` and ``read``, clients for a line and an
    HTTP port when the task runs a ``service``, then the body."""
    head = _MINIMAL_TEST_HEAD.replace("__CFG__", repr(json.dumps(params, sort_keys=True)))
    return head + (_SERVICE_CLIENTS if service else "") + body


# --- services ---------------------------------------------------------------------------

ANSWER_SERVER_FRAME = """
import http.server
import json
import socketserver
import threading


class _Lines(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            request = raw.decode("utf-8", "replace").strip()
            if request:
                self.wfile.write((answer_line(request) + "\\n").encode())
                self.wfile.flush()


class _Http(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        status, payload = answer_http(self.path)
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(line_port, http_port=None):
    servers = [_Server(("127.0.0.1", line_port), _Lines)]
    if http_port:
        servers.append(http.server.ThreadingHTTPServer(("127.0.0.1", http_port), _Http))
    for server in servers[1:]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    servers[0].serve_forever()
"""
"""A line-protocol TCP server (and optionally HTTP) around answer_line/answer_http."""

PROGRAM_SERVER_PY = """import http.server
import json
import socketserver
import subprocess
import threading
import urllib.parse

PROGRAM = __PROGRAM__
LINE_PORT = __LINE_PORT__
HTTP_PORT = __HTTP_PORT__
PREFIX = __PREFIX__


def answer(query):
    done = subprocess.run(PROGRAM, input=PREFIX + query + "\\n", capture_output=True, text=True)
    return done.stdout.strip()


class LineHandler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            query = raw.decode().strip()
            if query:
                self.wfile.write((answer(query) + "\\n").encode())
                self.wfile.flush()


class HttpHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        parts = [urllib.parse.unquote(p) for p in self.path.strip("/").split("/")]
        if len(parts) != 2 or not parts[1]:
            self.send_error(404)
            return
        query = parts[0].upper() + " " + parts[1]
        body = json.dumps({"query": query, "answer": answer(query)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


servers = [Server(("127.0.0.1", LINE_PORT), LineHandler)]
if HTTP_PORT:
    servers.append(Server(("127.0.0.1", HTTP_PORT), HttpHandler))
for server in servers[1:]:
    threading.Thread(target=server.serve_forever, daemon=True).start()
servers[0].serve_forever()
"""
"""A server that answers each query by running ``PROGRAM`` on ``PREFIX`` + the
query (line protocol on ``LINE_PORT``, JSON over HTTP on ``HTTP_PORT``)."""
