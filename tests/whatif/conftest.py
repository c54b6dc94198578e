"""Sample runs for the what-if tests, each fitted once per session."""
from __future__ import annotations

import functools
import warnings

import pytest

from tests.dashboard.conftest import browser, page  # noqa: F401  (the Chromium fixtures, for test_dashboard)
from tests.viewer.conftest import SAMPLES

REPLAYABLE = ("healthy", "straggler", "tiny-tensors", "large-tensors")


@functools.cache
def _model(scenario):
    from viewer import Run
    from viewer.whatif import fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(Run.load(SAMPLES / scenario, cache=False))


def sample_model(scenario):
    d = SAMPLES / scenario
    if not d.is_dir() or not any(f.name.endswith((".json", ".json.gz")) for f in d.iterdir()):
        pytest.skip(f"sample_traces/{scenario} is empty: run `bash sample_traces/regenerate.sh {scenario}`")
    return _model(scenario)
