import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def pool_path(tmp_path):
    """A path for a new pool file."""
    return str(tmp_path / "t.pool")


@pytest.fixture(scope="session")
def nvs_bin():
    """The `nvs` tool (a Rust writer): $NVS_BIN (must exist when set, as ci.sh sets it),
    else target/{release,debug}/nvs or `nvs` on PATH; the test is skipped without one."""
    env = os.environ.get("NVS_BIN")
    if env:
        assert os.access(env, os.X_OK), f"NVS_BIN={env} is not an executable"
        return env
    for d in ("release", "debug"):
        cand = REPO / "target" / d / "nvs"
        if cand.exists():
            return str(cand)
    found = shutil.which("nvs")
    if found is None:
        pytest.skip("no nvs tool: set NVS_BIN or cargo build -p nvs-cli")
    return found


def spawn_python(code, *args):
    """Run `code` in another Python process (a writer)."""
    return subprocess.Popen([sys.executable, "-c", code, *args])
