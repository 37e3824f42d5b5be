import pytest

from tests.redteam.harness import Canary


@pytest.fixture
def canary(tmp_path_factory):
    """A canary file outside every scratch dir; the test asserts `canary.intact()` at the end."""
    c = Canary.plant(tmp_path_factory.mktemp("canary"))
    yield c
    assert c.intact(), f"the canary {c.path} was changed or removed"
