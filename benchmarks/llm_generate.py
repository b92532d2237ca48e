"""LLM generator throughput against a server that answers after a fixed delay.

Run: .venv/bin/python benchmarks/llm_generate.py [--delay 0.2] [--concurrency 1 4 16]

A scripted OpenAI-compatible server on loopback answers every request after
``--delay`` seconds with well-formed sections, and the sandbox check is replaced by
a pass, so what is measured is the generator's request pipeline: threads, the
endpoint client, the call cache and the task writer. With ``c`` workers the ideal is
``c / delay`` requests per second. Each concurrency runs ``--specs-per-worker × c``
specs (4 requests each) under a fresh cache; the last set is then generated again
into a new folder, which must be answered entirely from the cache (hit rate 100%).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tmax.generate.llm.check import CheckResult
from tmax.generate.llm.prompts import base_dockerfile
from tmax.generate.llm.settings import LLMSettings
from tmax.generate.llm.shard import generate_llm_specs
from tmax.models.scripted_server import Reply, scripted_server
from tmax.taxonomy import TaskSpec

SPEC = TaskSpec(
    spec_id="spec-bench",
    index=0,
    domain="file_operations",
    skill_type="Navigation",
    primitive_skills=("count lines", "redirect output", "find files"),
    persona="A benchmark.",
    language="bash",
    task_complexity="short",
    command_complexity="bash_only",
    fixture_kind="text_only",
    verifier_kind="exact_text",
)

ANSWERS = {
    "Step 1 of 4": "<instruction>\nWrite the line count of /app/in.txt to /app/out.txt.\n"
    "</instruction>\n<truth>\n3\n</truth>\n<solution>\nwc -l < /app/in.txt > /app/out.txt\n"
    "</solution>\n",
    "Step 2 of 4": "<initial_tests>\ndef test_in():\n    assert open('/app/in.txt').read()\n"
    "</initial_tests>\n",
    "Step 3 of 4": "<final_tests>\ndef test_out():\n    assert open('/app/out.txt').read()"
    ".strip() == '3'\n</final_tests>\n",
    "Step 4 of 4": f"<dockerfile>\n{base_dockerfile('file_operations')}\n"
    "RUN printf 'a\\nb\\nc\\n' > /app/in.txt\n</dockerfile>\n",
}


def responder(delay: float) -> Any:
    def respond(request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]["content"]
        content = next(text for marker, text in ANSWERS.items() if marker in last)
        return Reply(content=content, delay_sec=delay, prompt_tokens=900, completion_tokens=150)

    return respond


def specs(count: int, offset: int) -> list[TaskSpec]:
    return [
        replace(SPEC, spec_id=f"spec-bench{offset + i:06d}", index=offset + i, persona=f"P{i}.")
        for i in range(count)
    ]


def run(base_url: str, work: Path, concurrency: int, batch: list[TaskSpec], name: str) -> dict:
    settings = LLMSettings(
        model="bench",
        base_url=base_url,
        concurrency=concurrency,
        timeout_sec=30,
        temperature=0.0,
        max_tokens=1024,
        cache_dir=str(work / f"cache-{concurrency}"),
    )
    started = time.perf_counter()
    summary = generate_llm_specs(
        batch, work / name, settings, check=lambda _task_dir: CheckResult(True)
    )
    summary["wall"] = time.perf_counter() - started
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--specs-per-worker", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import openai  # noqa: F401  (a one-time ~1 s import, kept out of the first timing)

    print(f"server delay {args.delay:.3f} s; 4 requests per spec; sandbox check stubbed")
    print(
        f"{'concurrency':>11} {'specs':>6} {'requests':>8} {'wall s':>7} {'req/s':>7} "
        f"{'ideal':>7} {'of ideal':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp, scripted_server(responder(args.delay)) as server:
        work = Path(tmp)
        batch: list[TaskSpec] = []
        for concurrency in args.concurrency:
            batch = specs(args.specs_per_worker * concurrency, offset=1000 * concurrency)
            summary = run(server.base_url, work, concurrency, batch, f"run-{concurrency}")
            requests = summary["usage"]["requests"]
            rate = requests / summary["wall"]
            ideal = concurrency / args.delay
            print(
                f"{concurrency:>11} {len(batch):>6} {requests:>8} {summary['wall']:>7.2f} "
                f"{rate:>7.1f} {ideal:>7.1f} {rate / ideal:>8.0%}"
            )
        before = server.request_count
        again = run(server.base_url, work, args.concurrency[-1], batch, "rerun")
        print(
            f"rerun of the last {len(batch)} specs: {server.request_count - before} new "
            f"request(s), cache hits {again['cache']['hits']}/"
            f"{again['cache']['hits'] + again['cache']['misses']} = "
            f"{again['cache']['hit_rate']:.0%}, wall {again['wall']:.2f} s"
        )


if __name__ == "__main__":
    main()
