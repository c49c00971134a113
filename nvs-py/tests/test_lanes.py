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
