import pytest
from roundtrip import *  # noqa
pytestmark = pytest.mark.slow
ROUND_TRIP = ["00_foundations", "02_ddp", "03_model_parallel"]
