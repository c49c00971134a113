"""Following live writers in other processes: end of stream, writer gone, timeout."""

import os
import signal
import subprocess
import sys
import time

import pytest

import nvs
from conftest import REPO, spawn_python

# A writer process: N steps of a 3x4 float64 array ("field") and a counter, a little
# apart, then close (or, with "forever", put until killed).
WRITER = """
import sys, time, numpy as np, nvs
path, steps = sys.argv[1], sys.argv[2]
w = nvs.open(path, write=True)
i = 0
while steps == "forever" or i < int(steps):
    w.put_array("field", np.full((3, 4), float(i)))
    w.put("step", str(i).encode(), lane=1)
    i += 1
    time.sleep(0.01)
w.close()
"""


def make_pool(path):
    nvs.create(path, 32 << 20).close(end_stream=False)


def test_follow_a_live_writer_to_end_of_stream(pool_path):
    make_pool(pool_path)
    f = nvs.follow(pool_path, timeout=30)
    writer = spawn_python(WRITER, pool_path, "40")
    seen = []
    for obj in f:
        assert isinstance(obj, nvs.Committed)
        if obj.name == "field":
            a = f.get_array("field", obj.version)
            assert a.shape == (3, 4) and (a == obj.version - 1).all()
            assert obj.len == 96 and obj.lane == 0
        else:
            assert f.get("step", obj.version) == str(obj.version - 1).encode()
        seen.append((obj.name, obj.version))
    assert writer.wait(10) == 0
    assert sorted(v for n, v in seen if n == "field") == list(range(1, 41))
    assert sorted(v for n, v in seen if n == "step") == list(range(1, 41))
    assert len(seen) == len(set(seen)) == 80  # each once
    with pytest.raises(StopIteration):
        next(f)


def test_follow_only_one_name(pool_path):
    make_pool(pool_path)
    writer = spawn_python(WRITER, pool_path, "10")
    got = [(o.name, o.version) for o in nvs.follow(pool_path, name=b"step", timeout=30)]
    assert writer.wait(10) == 0
    assert got == [("step", v) for v in range(1, 11)]


def test_writer_killed_mid_stream_raises_writer_gone(pool_path):
    make_pool(pool_path)
    writer = spawn_python(WRITER, pool_path, "forever")
    f = nvs.follow(pool_path, timeout=30)
    seen = 0
    with pytest.raises(nvs.WriterGone, match="the writer is gone"):
        for obj in f:
            seen += 1
            if seen == 10:
                os.kill(writer.pid, signal.SIGKILL)
                writer.wait()
    assert writer.returncode == -signal.SIGKILL
    assert seen >= 10
    # What it committed before it died is all there, intact.
    with nvs.open(pool_path) as p:
        last = p.latest("field")
        assert (p.get_array("field", last) == last - 1).all()


def test_follow_times_out(pool_path):
    w = nvs.create(pool_path, 16 << 20)
    w.put("a", b"1")  # lane 0 joins; the writer stays, silent
    f = nvs.follow(pool_path, timeout=0.3)
    assert next(f).name == "a"
    t = time.monotonic()
    with pytest.raises(nvs.Timeout, match="nothing committed for 0.3 s") as e:
        next(f)
    assert isinstance(e.value, TimeoutError)
    assert 0.25 < time.monotonic() - t < 5
    w.put("a", b"2")
    assert next(f).version == 2  # a timeout does not end the iterator
    w.close()
    assert list(f) == []


def test_follow_timeouts_past_the_clock_and_long_intervals(pool_path):
    """A timeout too large for the clock waits for ever (no Rust panic); a long
    interval never carries a wait past its timeout; bad values are ValueError."""
    w = nvs.create(pool_path, 16 << 20)
    w.put("a", b"1")
    f = nvs.follow(pool_path, timeout=1e19)
    assert next(f).name == "a"
    t = time.monotonic()
    with pytest.raises(nvs.Timeout):
        next(nvs.follow(pool_path, "nothing", timeout=0.3, interval=20))
    assert time.monotonic() - t < 3
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="must be >= 0"):
            next(nvs.follow(pool_path, timeout=bad))
    w.close()


def test_follow_a_lane_the_pool_cannot_have_is_refused(pool_path):
    nvs.create(pool_path, 16 << 20, lanes=4).close()
    with pytest.raises(nvs.Error, match="lane 4 does not exist"):
        nvs.follow(pool_path, lanes=[4])


def test_paths_are_str_bytes_or_pathlike_and_names_must_be_possible(pool_path):
    """A path is whatever open() takes; a follow of a name no object can have (empty,
    over 255 bytes) is refused instead of waiting for ever."""
    import pathlib
    with nvs.create(os.fsencode(pool_path), 16 << 20) as w:
        w.put("a", b"1")
    assert nvs.open(pathlib.Path(pool_path)).get("a") == b"1"
    assert next(nvs.follow(os.fsencode(pool_path), timeout=5)).name == "a"
    with pytest.raises(TypeError):
        nvs.open(3.5)
    for bad in ("", "n" * 256):
        with pytest.raises((nvs.Error, ValueError)):
            nvs.follow(pool_path, bad)


def test_follow_the_rust_tool(pool_path, nvs_bin):
    """A series of `nvs put` runs (each detaches as it exits), then `nvs close`."""
    subprocess.run([nvs_bin, "create", pool_path, "--size", "8M"], check=True)
    script = f'for i in 1 2 3 4 5; do printf "v$i" | "{nvs_bin}" put "{pool_path}" log >/dev/null; sleep 0.05; done; "{nvs_bin}" close "{pool_path}"'
    writer = subprocess.Popen(["sh", "-c", script])
    f = nvs.follow(pool_path, timeout=30)
    got = [(o.name, o.version, f.get(o.name, o.version)) for o in f]
    assert writer.wait(10) == 0
    assert got == [("log", i, f"v{i}".encode()) for i in range(1, 6)]


def test_example_prints_a_summary(pool_path):
    make_pool(pool_path)
    writer = spawn_python(WRITER, pool_path, "5")
    out = subprocess.run(
        [sys.executable, str(REPO / "nvs-py" / "examples" / "analytics.py"), pool_path, "--timeout", "30"],
        check=True, capture_output=True, text=True,
    ).stdout
    assert writer.wait(10) == 0
    assert "end of stream" in out
    assert "field" in out and "5 versions" in out


def test_bad_arguments_are_python_errors(pool_path):
    make_pool(pool_path)
    with pytest.raises(ValueError, match="timeout must be >= 0 seconds"):
        next(nvs.follow(pool_path, timeout=-1))
    with pytest.raises(nvs.Error, match="No such file"):
        nvs.follow(pool_path + ".missing")
