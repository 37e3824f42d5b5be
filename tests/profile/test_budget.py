"""Profiles of candidate sources over MCP are budgeted: `max_profiles` per run (default
2 × rounds); a statically refused source (nothing ran) costs nothing."""

from __future__ import annotations

import shutil

import pytest
from tests.conftest import FLAGSHIP, FUSED

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.screen.static import Finding
from kernelloop.profile.budget import ProfileBudget
from kernelloop.profile.run import ScreenRefused
from kernelloop.task.spec import Rules


def test_the_default_is_two_profiles_per_round_and_the_rule_overrides_it():
    assert ProfileBudget.for_run(Rules(), rounds=4).limit == 8
    assert ProfileBudget.for_run(Rules(max_profiles=1), rounds=4).limit == 1
    assert ProfileBudget.for_run(Rules(max_profiles=0), rounds=4).left == 0


def test_profiles_that_ran_count_and_refused_sources_do_not(tmp_path):
    b = ProfileBudget(limit=2)
    with pytest.raises(ScreenRefused):
        with b.spend():
            raise ScreenRefused(
                "candidate", tmp_path / "c.py", [Finding(1, "import", "imports `os`")]
            )
    assert b.used == 0
    with b.spend():
        pass
    with pytest.raises(KernelloopError, match="failed to import"):
        with b.spend():
            raise KernelloopError("c.py failed to import in the sandbox")  # it ran: it counts
    assert b.used == 2 and b.left == 0
    with pytest.raises(KernelloopError, match=r"profile budget is spent \(2 of 2"):
        with b.spend():
            pytest.fail("a profile ran past the budget")


@pytest.mark.slow
def test_the_mcp_session_spends_its_profile_budget(tmp_path):
    from kernelloop.loop import Options
    from kernelloop.loop.session import ExternalSession
    from kernelloop.task import load_task

    folder = tmp_path / "task"
    shutil.copytree(FLAGSHIP, folder, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("[rules]", "[rules]\nmax_profiles = 1", 1))
    assert "max_profiles = 1" in toml.read_text()
    session = ExternalSession(
        load_task(folder), Options(device="cpu", shapes="7x129", dtypes=["float32"], rounds=2)
    )
    try:
        assert session._run_dict()["profiles_left"] == 1
        with pytest.raises(ScreenRefused):
            session.profile("import os\n" + FUSED.read_text())
        assert session._run_dict()["profiles_left"] == 1  # refused before anything ran
        out = session.profile(FUSED.read_text())
        assert out["of"] == "candidate" and "register" in out["summary"].lower()
        assert session._run_dict()["profiles_left"] == 0
        with pytest.raises(KernelloopError, match="profile budget is spent"):
            session.profile(FUSED.read_text())
        assert session.profile(None)["of"].startswith("best #")  # the best's summary is free
    finally:
        session.close()
