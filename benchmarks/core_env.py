"""The Python 3.13 venv that runs the CORE engine (``pycer`` ships only a CPython 3.13 wheel).

``ensure_core_venv()`` finds a Python 3.13 interpreter (``$PYCEL_PY313``, then
``python3.13`` on PATH, then pyenv's installs), creates ``benchmarks/.venv-core`` with it
the first time, installs ``pycer`` and numpy there, and returns the venv's python.

Example::

    python = ensure_core_venv()          # Path to benchmarks/.venv-core/bin/python
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-core"
#: pycer version the notes and baseline were measured with; override with $PYCEL_PYCER_SPEC.
PYCER_SPEC = os.environ.get("PYCEL_PYCER_SPEC", "pycer==0.1.6")
_PYENV_FALLBACK = "/root/.pyenv/versions/3.13.0/bin/python"


class CoreUnavailable(RuntimeError):
    """No Python 3.13 or no pycer: CORE cannot be benchmarked on this machine."""


def _is_py313(python: str) -> bool:
    """True when ``python`` runs and is CPython 3.13 (a pyenv shim may exist yet fail)."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(sys.implementation.name, *sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.split() == ["cpython", "3", "13"]


def find_python313() -> str:
    """A working CPython 3.13 interpreter, or raise :class:`CoreUnavailable`."""
    candidates: list[str] = []
    env = os.environ.get("PYCEL_PY313")
    if env:
        candidates.append(env)
    on_path = shutil.which("python3.13")
    if on_path:
        candidates.append(on_path)
    candidates.append(_PYENV_FALLBACK)
    home = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates.extend(sorted(glob.glob(f"{home}/versions/3.13*/bin/python"), reverse=True))
    candidates.extend(["/usr/local/bin/python3.13", "/usr/bin/python3.13"])
    for cand in candidates:
        if _is_py313(cand):
            return cand
    raise CoreUnavailable(
        "no working Python 3.13 found (tried $PYCEL_PY313, python3.13 on PATH, pyenv); "
        "set PYCEL_PY313=/path/to/python3.13"
    )


def _venv_python() -> Path:
    return VENV / "bin" / "python"


def _venv_ready(python: Path) -> bool:
    if not python.exists():
        return False
    out = subprocess.run(
        [str(python), "-c", "import pycer, numpy"], capture_output=True, text=True, timeout=120
    )
    return out.returncode == 0


def ensure_core_venv(*, quiet: bool = False) -> Path:
    """The venv python with pycer installed, creating the venv when needed."""
    python = _venv_python()
    if _venv_ready(python):
        return python
    base = find_python313()

    def log(msg: str) -> None:
        if not quiet:
            print(msg, file=sys.stderr, flush=True)

    if not python.exists():
        log(f"creating {VENV} with {base}")
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
    log(f"installing {PYCER_SPEC} and numpy into {VENV}")
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", PYCER_SPEC, "numpy"],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0 or not _venv_ready(python):
        raise CoreUnavailable(f"could not install {PYCER_SPEC} into {VENV}:\n{pip.stderr[-2000:]}")
    return python


def pycer_version(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "from importlib.metadata import version; print(version('pycer'))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout.strip() or "unknown"


if __name__ == "__main__":
    print(ensure_core_venv())
