"""Reading pools: listing, byte-exact gets, arrays, errors."""

import os
import subprocess

import numpy as np
import pytest

import nvs


def test_names_versions_and_bytes(pool_path):
    with nvs.create(pool_path, 16 << 20) as w:
        assert w.put("a", b"one") == 1
        assert w.put("a", b"two!") == 2
        assert w.put(b"b", bytes(range(256)) * 100) == 1
        assert w.put("a", b"") == 3
        assert w.put("c", b"x" * 70000, lane=3) == 1
    with nvs.open(pool_path) as p:
        assert not p.writable
        assert sorted(p.names()) == ["a", "b", "c"]
        assert p.versions("a") == [1, 2, 3]
        assert p.latest("a") == 3
        assert p.get("a", 1) == b"one"
        assert p.get("a", 2) == b"two!"
        assert p.get("a") == b""
        assert p.get("b") == bytes(range(256)) * 100
        assert p.get(b"c", 1) == b"x" * 70000
        s = p.stat("c")
        assert (s["version"], s["len"], s["lane"], s["depth"]) == (1, 70000, 3, 0)
        assert p.meta("a") == {}


def test_put_takes_any_bytes_like_object_and_refuses_the_rest(pool_path):
    import array

    grid = np.arange(12, dtype="<i4").reshape(3, 4)
    with nvs.create(pool_path, 16 << 20) as w:
        assert w.put("ba", bytearray(b"mutable")) == 1
        assert w.put("mv", memoryview(b"0123456789")[2:5]) == 1
        assert w.put("arr", array.array("H", [1, 2, 3])) == 1
        assert w.put("np", grid) == 1
        assert w.put("np", grid[:, 1]) == 2  # not contiguous: copied in C order
        assert w.put("empty", bytearray()) == 1
        for bad, kind in [("text", "str"), (5, "int"), (None, "NoneType"), ([1, 2], "list")]:
            with pytest.raises(TypeError, match=f"data is a bytes-like object, not {kind}"):
                w.put("bad", bad)
        import ctypes

        pointers = (ctypes.py_object * 2)("a", "b")
        for objects in [np.array(["secret", 1, None], dtype=object), np.zeros(2, dtype=[("O", "O")]), pointers]:
            with pytest.raises(TypeError, match="data holds Python objects"):
                w.put("bad", objects)
        # A field named O is not an object.
        named = np.zeros(2, dtype=[("O", "<u4"), ("Obj", "u1")])
        assert w.put("fields", named) == 1
        released = memoryview(b"gone")
        released.release()
        with pytest.raises(ValueError, match="released"):
            w.put("bad", released)
    with nvs.open(pool_path) as p:
        assert p.get("ba") == b"mutable"
        assert p.get("mv") == b"234"
        assert p.get("arr") == array.array("H", [1, 2, 3]).tobytes()
        assert p.get("np", 1) == grid.tobytes()
        assert p.get("np", 2) == np.ascontiguousarray(grid[:, 1]).tobytes()
        assert p.get("empty") == b""
        assert p.get("fields") == named.tobytes()
        assert "bad" not in p.names()


def test_put_array_refuses_what_its_dtype_text_cannot_give_back(pool_path):
    """Object arrays (pointers into this process) and structured dtypes (their text,
    "|V12", loses the fields) are refused, nothing stored; plain ones still go in."""
    with nvs.create(pool_path, 16 << 20) as w:
        for a in (np.array([object(), None], dtype=object), np.zeros(2, dtype=[("x", "<i4"), ("y", "<f8")])):
            with pytest.raises(nvs.Error, match="cannot store an array of dtype"):
                w.put_array("bad", a)
        assert w.put_array("ok", np.array([b"ab", b"c"])) == 1
        assert w.names() == ["ok"]


def test_put_array_round_trips_dtype_and_shape(pool_path):
    arrays = {
        "f8": np.linspace(0, 1, 24).reshape(2, 3, 4),
        "i4": np.arange(-5, 5, dtype=np.int32),
        "u1": np.frombuffer(b"\x00\x01\xfe\xff", dtype=np.uint8).reshape(2, 2),
        "f4t": np.arange(6, dtype=np.float32).reshape(2, 3).T,  # not C-contiguous
        "scalar": np.array(2.5),
        "be": np.arange(3, dtype=">i2"),
    }
    with nvs.create(pool_path, 16 << 20) as w:
        for name, a in arrays.items():
            w.put_array(name, a, meta={"units": "K"})
    with nvs.open(pool_path) as p:
        for name, a in arrays.items():
            got = p.get_array(name)
            assert got.dtype == a.dtype, name
            assert got.shape == a.shape, name
            assert np.array_equal(got, a), name
            assert got.tobytes() == np.ascontiguousarray(a).tobytes(), name
            assert p.meta(name)["units"] == "K"
        assert p.meta("f8") == {"units": "K", "dtype": "<f8", "shape": "2,3,4"}
        assert p.meta("scalar")["shape"] == ""
        assert not p.get_array("f8").flags.writeable
        # The caller's shape wins over the metadata; a dtype contradicting the stored one is
        # refused, naming it (it reinterpreted the bytes: "float64" on >f8 gave 3.14e-319).
        assert p.get_array("i4", shape=(2, 5))[1, 4] == 4
        assert p.get_array("f8", dtype="<f8").shape == (2, 3, 4)
        for other in ("<f4", "float64" if np.dtype("float64").str != "<f8" else ">f8", "i8"):
            with pytest.raises(nvs.Error, match="stored as dtype <f8"):
                p.get_array("f8", dtype=other)
        with pytest.raises(nvs.Error, match="stored as dtype >i2"):
            p.get_array("be", dtype="float64")


def test_caller_dtype_and_shape_without_metadata(pool_path):
    raw = np.arange(12, dtype="<u2").tobytes()
    with nvs.create(pool_path, 16 << 20) as w:
        w.put("raw", raw)
        w.put("ten", b"\0" * 10)
    with nvs.open(pool_path) as p:
        with pytest.raises(nvs.Error, match="no dtype in its metadata: pass dtype="):
            p.get_array("raw")
        a = p.get_array("raw", dtype=np.uint16, shape=(3, 4))
        assert a.shape == (3, 4) and a[2, 3] == 11
        assert p.get_array("raw", dtype="<u2").shape == (12,)
        with pytest.raises(nvs.Error, match="do not fit shape"):
            p.get_array("raw", dtype="<u2", shape=(5, 5))
        with pytest.raises(nvs.Error, match="not a whole number of <f8"):
            p.get_array("ten", dtype="<f8")
        with pytest.raises(nvs.Error, match="not a numpy dtype"):
            p.get_array("raw", dtype="nonsense")


def test_bad_shape_metadata(pool_path):
    with nvs.create(pool_path, 16 << 20) as w:
        w.put("bad", b"\0" * 16, {"dtype": "<f8", "shape": "2,x"})
        w.put("wrong", b"\0" * 16, {"dtype": "<f8", "shape": "3"})
    with nvs.open(pool_path) as p:
        with pytest.raises(nvs.Error, match="not a list of dimensions"):
            p.get_array("bad")
        with pytest.raises(nvs.Error, match="2 values of <f8 do not fit shape"):
            p.get_array("wrong")


def test_written_by_the_rust_tool(tmp_path, nvs_bin):
    pool = str(tmp_path / "cli.pool")
    subprocess.run([nvs_bin, "create", pool, "--size", "8M"], check=True)
    data = np.arange(20, dtype="<i8").reshape(4, 5)
    src = tmp_path / "a.bin"
    src.write_bytes(data.tobytes())
    run = lambda *a: subprocess.run([nvs_bin, *a], check=True, capture_output=True).stdout  # noqa: E731
    assert run("put", pool, "grid", str(src), "--meta", "dtype=<i8", "--meta", "shape=4,5").strip() == b"1"
    (tmp_path / "b.bin").write_bytes(b"plain bytes")
    assert run("put", pool, "grid", str(tmp_path / "b.bin"), "--lane", "1").strip() == b"2"
    with nvs.open(pool) as p:
        assert p.names() == ["grid"]
        assert p.versions("grid") == [1, 2]
        a = p.get_array("grid", 1)
        assert a.dtype == np.dtype("<i8") and a.shape == (4, 5) and np.array_equal(a, data)
        assert p.get("grid") == b"plain bytes"
        assert p.stat("grid", 2)["lane"] == 1


def test_missing_names_and_versions_raise(pool_path):
    with nvs.create(pool_path, 16 << 20) as w:
        w.put("a", b"1")
    with nvs.open(pool_path) as p:
        with pytest.raises(nvs.NotFound, match="no object named nope$") as e:
            p.get("nope")
        assert isinstance(e.value, LookupError) and isinstance(e.value, nvs.Error)
        assert str(e.value) == f"{pool_path}: no object named nope"
        with pytest.raises(nvs.NotFound, match="no version 7 of a"):
            p.get("a", 7)
        with pytest.raises(nvs.NotFound):
            p.versions("nope")
        with pytest.raises(nvs.NotFound):
            p.latest("nope")
        with pytest.raises(nvs.NotFound):
            p.meta("a", 2)
        with pytest.raises(nvs.NotFound):
            p.get_array("nope", dtype="u1")
        with pytest.raises(LookupError):
            p.stat("a", 0)
        with pytest.raises(TypeError, match="a name is str or bytes, not int"):
            p.get(5)
        with pytest.raises(ValueError, match="version must be a whole number >= 0"):
            p.get("a", -1)


def test_names_that_are_not_utf8_round_trip(pool_path):
    odd = b"\xffraw\x01"
    with nvs.create(pool_path, 16 << 20) as w:
        w.put(odd, b"odd")
        w.put("température", b"utf8")
    with nvs.open(pool_path) as p:
        names = p.names()
        assert "température" in names
        (s,) = [n for n in names if n != "température"]
        assert s.encode("utf-8", "surrogateescape") == odd
        assert p.get(s) == b"odd" and p.get(odd) == b"odd"
        assert p.get("température".encode()) == b"utf8"


def test_not_a_pool_or_damaged(tmp_path, pool_path):
    junk = tmp_path / "junk"
    junk.write_bytes(os.urandom(1 << 16))
    with pytest.raises(nvs.Corrupted, match="not an nvs pool"):
        nvs.open(str(junk))
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(nvs.Corrupted):
        nvs.open(str(empty))
    with pytest.raises(nvs.Error, match="No such file"):
        nvs.open(str(tmp_path / "missing"))
    with pytest.raises(nvs.Error):
        nvs.open(str(tmp_path))  # a directory
    with nvs.create(pool_path, 1 << 20) as w:
        w.put("a", b"1")
    with open(pool_path, "r+b") as f:  # smash the superblock
        f.write(b"\xa5" * 256)
    with pytest.raises(nvs.Corrupted):
        nvs.open(pool_path)
    with pytest.raises(nvs.Corrupted):
        nvs.follow(pool_path)


def test_readers_do_not_write_and_writers_are_one(pool_path):
    w = nvs.create(pool_path, 16 << 20)
    w.put("a", b"1")
    with pytest.raises(nvs.Locked, match="locked by another writer"):
        nvs.open(pool_path, write=True)
    with nvs.open(pool_path) as r:
        with pytest.raises(nvs.Error, match="read-only|read only"):
            r.put("a", b"2")
    with pytest.raises(nvs.Error, match="exists"):
        nvs.create(pool_path, 16 << 20)
    w.close()
    with pytest.raises(nvs.Error, match="is closed"):
        w.get("a")
    w.close()  # twice is fine
    with nvs.open(pool_path, write=True) as w2:
        assert w2.put("a", b"2") == 2


def test_refresh_catches_up_with_a_live_writer(pool_path):
    w = nvs.create(pool_path, 16 << 20)
    w.put("a", b"1")
    r = nvs.open(pool_path)
    assert r.writer_alive()
    w.put("a", b"2")
    w.put("b", b"3")
    assert r.versions("a") == [1]
    r.refresh()
    assert r.versions("a") == [1, 2] and r.get("b") == b"3"
    w.close()
    r.refresh()
    assert not r.writer_alive()
    r.close()


def test_lane_names_each_rank_reads_back_its_own(tmp_path, nvs_bin):
    """A pool with lane names (every lane has names of its own, as MPI ranks write them):
    ranks' objects of one name are read by lane; without a lane such a name is an error
    that says so; names(lane=) lists one lane's names. Written here and by the tool."""
    path = str(tmp_path / "ranks.pool")
    with nvs.create(path, 16 << 20, lanes=4, lane_names=True) as w:
        for rank in range(3):
            for step in range(rank + 1):
                w.put_array("temperature", np.full(4, 10.0 * rank + step), lane=rank)
        w.put("only0", b"x", lane=0)
    subprocess.run([nvs_bin, "put", path, "temperature", "--lane", "3", "/dev/null"], check=True,
                   capture_output=True)
    subprocess.run([nvs_bin, "close", path, "--lane", "3"], check=True, capture_output=True)  # end its stream
    with nvs.open(path) as p:
        assert sorted(p.names()) == ["only0"] + ["temperature"] * 4
        assert sorted(p.names(lane=0)) == ["only0", "temperature"]
        assert p.names(lane=2) == ["temperature"]
        with pytest.raises(nvs.Error, match="name the lane"):
            p.get("temperature")
        for rank in range(3):
            assert p.versions("temperature", lane=rank) == list(range(1, rank + 2))
            assert p.latest("temperature", lane=rank) == rank + 1
            assert p.get_array("temperature", lane=rank).tolist() == [10.0 * rank + rank] * 4
            assert p.get_array("temperature", 1, lane=rank).tolist() == [10.0 * rank] * 4
            assert p.stat("temperature", lane=rank)["lane"] == rank
            assert p.meta("temperature", lane=rank)["shape"] == "4"
        assert p.get("temperature", lane=3) == b""
        assert p.get("only0") == b"x"
        with pytest.raises(nvs.NotFound):
            p.get("only0", lane=1)
    f = nvs.follow(path, timeout=5)
    seen = [(o.lane, o.version, f.get_array(o.name, o.version, lane=o.lane)[0])
            for o in f if o.name == "temperature" and o.lane < 3]
    assert seen == [(r, s + 1, 10.0 * r + s) for r in range(3) for s in range(r + 1)]


def test_lane_reads_in_a_pool_of_one_name_space(pool_path):
    """Without lane names a lane= read finds a version only if that lane wrote it."""
    with nvs.create(pool_path, 16 << 20) as w:
        w.put("a", b"one", lane=0)
        w.put("a", b"two", lane=1)
    with nvs.open(pool_path) as p:
        assert p.get("a", 2, lane=1) == b"two"
        with pytest.raises(nvs.NotFound):
            p.get("a", 2, lane=0)
        assert p.names(lane=1) == ["a"]
        assert p.names(lane=2) == []


def test_a_writer_reclaims_and_streams_for_ever(pool_path):
    """Retention from Python (it had none: a writer had to close, run `nvs reclaim`, reopen,
    and its followers saw it gone each time): a full pool, reclaim(keep=1), go on."""
    nvs.create(pool_path, 1 << 20, segment=4096).close()
    reclaims = 0
    with nvs.open(pool_path, write=True) as w:
        for step in range(1, 3001):
            try:
                assert w.put("x", step.to_bytes(8, "little") * 100) == step
            except nvs.Error as e:
                assert "full" in str(e), e
                assert w.reclaim(1) > 0
                reclaims += 1
                assert w.put("x", step.to_bytes(8, "little") * 100) == step
        kept = w.versions("x")
        assert kept[-1] == 3000 and len(kept) < 3000 and reclaims > 0
        assert w.get("x", 3000) == (3000).to_bytes(8, "little") * 100
        with pytest.raises(ValueError, match="keep >= 1"):
            w.reclaim(0)
    with nvs.open(pool_path) as r:
        with pytest.raises(nvs.Error):
            r.reclaim(1)  # a reader never writes


def test_the_module_exports_what_it_documents():
    """No imports leak into the package's namespace (numpy, deque, typing's names)."""
    public = sorted(n for n in dir(nvs) if not n.startswith("_"))
    assert public == sorted(nvs.__all__ + ["Name"])


def test_negative_or_huge_numbers_are_value_errors_naming_the_argument(pool_path):
    """Lanes, versions and counts out of range are ValueErrors that say which argument
    (PyO3's own conversion raised OverflowError: can't convert negative int to unsigned)."""
    p = nvs.create(pool_path, 4 << 20)
    p.put("a", b"x")
    for call, what in [
        (lambda: p.get("a", -1), "version"),
        (lambda: p.get("a", 2**70), "version"),
        (lambda: p.get("a", lane=-1), "lane"),
        (lambda: p.versions("a", lane=-2), "lane"),
        (lambda: p.meta("a", -3), "version"),
        (lambda: p.reclaim(-1), "keep"),
        (lambda: p.close_lane(-1), "lane"),
    ]:
        with pytest.raises(ValueError, match=f"^{what} must be a whole number >= 0"):
            call()
    assert p.get("a", 1) == b"x"
    p.close()


def test_a_sparse_pool_takes_blocks_as_it_fills(tmp_path):
    path = str(tmp_path / "sparse.pool")
    p = nvs.create(path, 64 << 20, segment=1 << 20, sparse=True)
    at_create = os.stat(path).st_blocks * 512
    p.put("x", b"a" * 300_000)
    p.close()
    used = os.stat(path).st_blocks * 512
    assert at_create < 1 << 20, at_create
    assert used < 8 << 20, used
    assert nvs.open(path).get("x", 1) == b"a" * 300_000
