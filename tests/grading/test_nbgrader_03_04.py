"""The nbgrader round trip of lessons 03 and 04 (roundtrip.py), in a test lane of its own."""

import pytest

from roundtrip import *  # noqa: F401,F403  (the round trip's fixtures and tests, on ROUND_TRIP)

pytestmark = pytest.mark.slow
ROUND_TRIP = ["03_model_parallel", "04_batch_scaling"]
