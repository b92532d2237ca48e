"""Check that Harbor's own models load our trial and job folders.

Run it with a Python that has Harbor installed (``.venv-harbor``, made by setup.sh;
``$TMAX_HARBOR_PYTHON``), never tmax's: it imports Harbor only, not tmax.

    .venv-harbor/bin/python src/tmax/evaluate/harbor_check.py results/eval [more ...]

Every folder under the given paths with a ``result.json`` is a trial (a
``TrialResult``, with ``config.json`` a ``TrialConfig``) or a job (``JobResult`` and
``JobConfig``). Each file is loaded with ``model_validate_json``; failures are printed
with Harbor's reasons, then "N of M trial folders load" and the same for job folders.
Keys Harbor's models would drop on loading are listed too (``--strict``: as failures).
Exit status 0 when everything loads, 1 when something does not, 2 when no trial or
job folder was found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

RESULT = "result.json"
CONFIG = "config.json"


def _models() -> dict[str, Any]:
    from harbor.models.job.config import JobConfig
    from harbor.models.job.result import JobResult
    from harbor.models.trial.config import TrialConfig
    from harbor.models.trial.result import TrialResult

    return {
        "trial": (TrialResult, TrialConfig),
        "job": (JobResult, JobConfig),
    }


def _dropped(given: Any, loaded: Any, where: str = "") -> list[str]:
    """Keys of ``given`` (the file's JSON) that are no field of the model ``loaded``
    from it, nested models included: what Harbor ignores (and drops on rewriting)."""
    from pydantic import BaseModel

    found: list[str] = []
    if isinstance(given, dict) and isinstance(loaded, BaseModel):
        fields = type(loaded).model_fields
        names = {f.alias or n: n for n, f in fields.items()} | {n: n for n in fields}
        for key, value in given.items():
            path = f"{where}.{key}" if where else str(key)
            if key not in names:
                found.append(path)
            else:
                found += _dropped(value, getattr(loaded, names[key]), path)
    elif isinstance(given, dict) and isinstance(loaded, dict):
        for key, value in given.items():
            if key in loaded:
                found += _dropped(value, loaded[key], f"{where}.{key}" if where else str(key))
    elif isinstance(given, list) and isinstance(loaded, list) and len(given) == len(loaded):
        for index, (a, b) in enumerate(zip(given, loaded, strict=True)):
            found += _dropped(a, b, f"{where}[{index}]")
    return found


def check_file(path: Path, model: Any) -> tuple[str | None, list[str]]:
    """(why ``path`` does not load as ``model``, or None; the keys it would drop)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        return f"cannot be read: {error}", []
    try:
        loaded = model.model_validate_json(text)
    except Exception as error:  # pydantic's ValidationError, or a model validator's
        errors = getattr(error, "errors", None)
        if callable(errors):
            lines = [
                f"{'.'.join(str(p) for p in e.get('loc', ())) or '(root)'}: {e.get('msg')}"
                for e in errors()[:10]
            ]
            return "; ".join(lines), []
        return f"{type(error).__name__}: {error}", []
    return None, _dropped(json.loads(text), loaded)


def kind_of(folder: Path) -> str | None:
    """``trial`` or ``job`` by what its ``result.json`` holds (None: neither)."""
    try:
        data = json.loads((folder / RESULT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "trial"  # unreadable: reported as a trial that does not load
    if not isinstance(data, dict):
        return "trial"
    if "trial_name" in data:
        return "trial"
    if "n_total_trials" in data or "stats" in data:
        return "job"
    return "trial"


def folders(paths: list[Path]) -> list[Path]:
    """Every folder at or under ``paths`` holding a ``result.json``."""
    found: set[Path] = set()
    for path in paths:
        if (path / RESULT).is_file():
            found.add(path)
        if path.is_dir():
            found.update(p.parent for p in path.rglob(RESULT) if p.is_file())
    return sorted(found)


def check(paths: list[Path], strict: bool = False, out: Any = sys.stdout) -> int:
    models = _models()
    counts = {"trial": [0, 0], "job": [0, 0]}  # loaded, seen
    dropped_total = 0
    for folder in folders(paths):
        kind = kind_of(folder)
        assert kind is not None
        result_model, config_model = models[kind]
        counts[kind][1] += 1
        problems = []
        for name, model in ((RESULT, result_model), (CONFIG, config_model)):
            if not (folder / name).is_file():
                problems.append(f"{name}: missing")
                continue
            why, dropped = check_file(folder / name, model)
            if why:
                problems.append(f"{name} ({model.__name__}): {why}")
            if dropped:
                dropped_total += len(dropped)
                note = f"{name}: Harbor ignores {', '.join(dropped[:8])}"
                note += f" (+{len(dropped) - 8} more)" if len(dropped) > 8 else ""
                if strict:
                    problems.append(note)
                else:
                    print(f"note  {kind} {folder}: {note}", file=out)
        if problems:
            print(f"FAIL  {kind} {folder}", file=out)
            for problem in problems:
                print(f"      {problem}", file=out)
        else:
            counts[kind][0] += 1
    for kind, (loaded, seen) in counts.items():
        print(f"{loaded} of {seen} {kind} folders load", file=out)
    if dropped_total and not strict:
        print(f"{dropped_total} key(s) ignored by Harbor (listed above as notes)", file=out)
    if counts["trial"][1] + counts["job"][1] == 0:
        print("no trial or job folder (with a result.json) found", file=out)
        return 2
    return 0 if all(loaded == seen for loaded, seen in counts.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="trial, job or results folders")
    parser.add_argument(
        "--strict", action="store_true", help="count keys Harbor would ignore as failures"
    )
    args = parser.parse_args(argv)
    try:
        _models()
    except ImportError as error:
        print(f"harbor is not importable with {sys.executable}: {error}", file=sys.stderr)
        return 3
    return check(args.paths, strict=args.strict)


if __name__ == "__main__":
    sys.exit(main())
