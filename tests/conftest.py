"""Shared test configuration: import path, hypothesis profiles.

The repository root goes on ``sys.path`` so the suite runs from a plain checkout
(``python -m pytest``) without installing pycel; ``tests/`` itself is on the path too, so
test modules can ``from strategies import ...``.

Hypothesis profiles: ``default`` (used locally) and ``ci`` (``HYPOTHESIS_PROFILE=ci``,
derandomized so CI failures reproduce). No deadline: the reference evaluator's running
time varies a lot between generated cases, and it is the oracle, not the thing timed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config: object) -> None:
    """Register the markers the suite uses (``-m "not spark"`` skips the Spark tests)."""
    config.addinivalue_line("markers", "spark: needs a local Spark session (pyspark and Java 17+); slow")  # type: ignore[attr-defined]
    config.addinivalue_line("markers", "slow: takes a minute or more (CI runs it)")  # type: ignore[attr-defined]
