"""Shared fixtures: where the real logs are, and skipping cleanly when they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis draws new examples on every run: on a developer's machine that keeps finding
# new failures (a Gemini locator was found so). CI (`.ci/run`) sets CTXLAB_HYPOTHESIS=ci,
# which draws the same examples on every run, so that whether a submission lands does not
# depend on the draw; `make test` alone explores.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("CTXLAB_HYPOTHESIS", "default"))

REPO = Path(__file__).resolve().parent.parent
REALDATA = Path(os.environ.get("CTXLAB_REALDATA", REPO.parent / "shared" / "realdata"))
DATASETS = REPO / "datasets"


def realdata_path(rel: str) -> Path:
    """A file under ../shared/realdata, or skip the test with the reason."""
    p = REALDATA / rel
    if not p.exists():
        pytest.skip(f"real transcripts not available: {p} is absent "
                    f"(set CTXLAB_REALDATA or place shared/ beside the repository)")
    return p


@pytest.fixture
def realdata() -> Path:
    if not REALDATA.is_dir():
        pytest.skip(f"real transcripts not available: {REALDATA} is absent")
    return REALDATA


@pytest.fixture
def forget_registered_summarizers():
    """Summarizers a test registers (configured backends, recorded ones) are dropped after it."""
    from ctxlab import summarizers
    before = set(summarizers.names())
    yield
    for name in set(summarizers.names()) - before:
        summarizers.unregister(name)


@pytest.fixture(autouse=True)
def _no_facts_offered_after_a_test():
    """Session facts a test's corpus dataset offered and no cache took (`ctxlab.facts`) are
    dropped after it: a later test's fresh estimator would take them (rightly, but its
    cache would then hold texts the test never counted)."""
    yield
    import sys
    for name in ("ctxlab.artifacts", "ctxlab.tokens.base"):
        module = sys.modules.get(name)
        if module is not None:
            module._OFFERS.clear()
