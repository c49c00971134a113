"""Writer processes per lane on one pool with lane names (one per MPI rank)."""

import numpy as np
import pytest

import nvs
from conftest import spawn_python

# A rank: takes its lane (lane = rank, as MPI codes do), writes STEPS versions of
# "temperature" holding its lane number and the step, ends its lane's stream.
RANK = """
import sys, numpy as np, nvs
path, steps, rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with nvs.open_lane(path, rank) as w:
    assert w.lane == rank
    for step in range(steps):
        w.put_array("temperature", np.array([w.lane, step], dtype="<i8"))
"""


def test_rank_processes_write_one_pool_and_are_read_back_per_lane(pool_path):
    nvs.create(pool_path, 32 << 20, lanes=4, lane_names=True).close()
    f = nvs.follow(pool_path, timeout=30, lanes=[0, 1, 2])
    ranks = [spawn_python(RANK, pool_path, "20", str(rank)) for rank in range(3)]
    followed = [(o.lane, o.version, f.get_array(o.name, o.version, lane=o.lane).tolist()) for o in f]
    assert all(r.wait(30) == 0 for r in ranks)
    assert sorted(followed) == [(lane, s + 1, [lane, s]) for lane in range(3) for s in range(20)]
    with nvs.open(pool_path) as p:
        for lane in range(3):
            assert p.versions("temperature", lane=lane) == list(range(1, 21))
            assert p.get_array("temperature", lane=lane).tolist() == [lane, 19]


def test_a_lane_is_one_process_s_and_puts_stay_on_it(pool_path):
    nvs.create(pool_path, 16 << 20, lanes=4, lane_names=True).close()
    a = nvs.open_lane(pool_path, 1)
    assert a.lane == 1
    with pytest.raises(nvs.Locked):
        nvs.open_lane(pool_path, 1)
    b = nvs.open_lane(pool_path)
    assert b.lane == 0  # the lowest free lane
    assert a.put("t", b"one") == 1 and b.put("t", b"zero") == 1  # each lane's own name
    with pytest.raises(nvs.Error):
        a.put("t", b"not mine", lane=2)
    with pytest.raises(nvs.Locked):
        nvs.open(pool_path, write=True)  # the pool's one writer would hold every lane
    a.close()
    b.close()
    with nvs.open(pool_path) as p:
        assert (p.get("t", lane=0), p.get("t", lane=1)) == (b"zero", b"one")
        assert p.lane is None
    with pytest.raises(nvs.Error, match="lane 9 does not exist|no such lane|lane 9"):
        nvs.open_lane(pool_path, 9)
    with pytest.raises(ValueError):
        nvs.open_lane(pool_path, -1)


def test_open_lane_needs_a_pool_with_lane_names(pool_path):
    nvs.create(pool_path, 16 << 20).close()
    with pytest.raises(nvs.Error, match="lane names"):
        nvs.open_lane(pool_path, 0)


# Writer 0 of FORK_PUTS small puts, whose fork child refreshes and reads lane 1 in a loop
# until killed; its puts are refused (nothing written).
FORKING_WRITER = """
import os, signal, sys, nvs
path, puts = sys.argv[1], int(sys.argv[2])
w = nvs.open_lane(path, 0)
child = os.fork()
if child == 0:
    try:
        while True:
            w.refresh()
            try:
                v = w.latest("x", lane=1)
            except nvs.NotFound:
                continue
            assert w.get("x", v, lane=1) == b"1:%d" % v
            try:
                w.put("x", b"child")
                os._exit(3)
            except nvs.Error:
                pass
    except BaseException as e:
        print("fork child:", repr(e), file=sys.stderr)
        os._exit(1)
for v in range(1, puts + 1):
    assert w.put("x", b"0:%d" % v) == v
w.close()
pid, status = os.waitpid(child, os.WNOHANG)
assert pid == 0, "the fork child ended early (%d)" % status
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
"""
ONE_WRITER = """
import sys, nvs
path, puts = sys.argv[1], int(sys.argv[2])
with nvs.open_lane(path, 1) as w:
    for v in range(1, puts + 1):
        assert w.put("x", b"1:%d" % v) == v
"""


def test_a_fork_child_refreshing_beside_writer_processes_changes_nothing(pool_path):
    """A fork child's refresh used to release its parent's claim lock mid-claim (the
    other writer then claimed the same segment and the pool no longer opened)."""
    nvs.create(pool_path, 64 << 20, lanes=2, segment=4096, lane_names=True).close()
    puts = 6000
    writers = [spawn_python(FORKING_WRITER, pool_path, str(puts)), spawn_python(ONE_WRITER, pool_path, str(puts))]
    assert [w.wait(120) for w in writers] == [0, 0]
    with nvs.open(pool_path, write=True) as p:
        for lane in range(2):
            assert p.versions("x", lane=lane) == list(range(1, puts + 1))
            assert all(p.get("x", v, lane=lane) == b"%d:%d" % (lane, v) for v in range(1, puts + 1))


def test_names_with_a_nul_byte_are_refused(pool_path):
    """`key` and `key\\0secret` were two names, and C read the second as the first."""
    nvs.create(pool_path, 16 << 20).close()
    with nvs.open(pool_path, write=True) as w:
        w.put("key", b"public")
        for bad in ("key\0secret", b"key\0secret", "\0"):
            with pytest.raises(ValueError, match="NUL"):
                w.put(bad, b"secret")
        assert w.names() == ["key"]


# A rank that dies: its lane put a few steps, then the process is killed (SIGKILL).
DYING = """
import os, signal, sys, numpy as np, nvs
path, rank = sys.argv[1], int(sys.argv[2])
w = nvs.open_lane(path, rank)
for step in range(5):
    w.put_array("temperature", np.array([rank, step], dtype="<i8"))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_follower_outlives_one_dead_rank_naming_its_lane(pool_path):
    """One rank of three dies: the follower raises WriterGone naming that lane alone,
    and iterated again follows the other ranks to the end of their streams."""
    nvs.create(pool_path, 32 << 20, lanes=4, lane_names=True).close()
    dead = spawn_python(DYING, pool_path, "1")
    assert dead.wait(30) == -9
    f = nvs.follow(pool_path, timeout=30, lanes=[0, 2])
    ranks = [spawn_python(RANK, pool_path, "20", str(rank)) for rank in (0, 2)]
    followed, gone = [], []
    for _ in range(5):
        try:
            followed.extend((o.lane, o.version) for o in f)
            break
        except nvs.WriterGone as e:
            gone.append(e.lanes)
            assert "lane 1" in str(e) and "lane 0" not in str(e)
    else:
        pytest.fail(f"the follower did not go on past the dead rank: {gone}")
    assert all(r.wait(30) == 0 for r in ranks)
    assert gone == [[1]], "reported once, naming lane 1"
    assert sorted(followed) == sorted([(1, v) for v in range(1, 6)] + [(l, v) for l in (0, 2) for v in range(1, 21)])
