"""Python readers for nvs pools.

Open a pool read-only beside a live writer, list its names and versions, get objects
as bytes or numpy arrays (dtype and shape from the object's metadata, or given by the
caller), and follow a live writer as an iterator::

    import nvs
    with nvs.open("sim.pool") as pool:
        for name in pool.names():
            print(name, pool.versions(name))
        t = pool.get_array("temperature")           # latest version, shaped
    for obj in nvs.follow("sim.pool", timeout=10):  # until end of stream
        print(obj.name, obj.version, obj.len)

Names are ``str`` (UTF-8; bytes that are not UTF-8 come back as surrogates, and such a
``str`` names the same object when passed back) or ``bytes``.
"""

from collections import deque as _deque
from typing import NamedTuple as _NamedTuple, Optional as _Optional, Sequence as _Sequence, Union as _Union

import numpy as _numpy

from . import _nvs
from ._errors import Corrupted, Error, Locked, NotFound, Timeout, WriterGone

__all__ = [
    "open", "open_lane", "create", "follow", "Pool", "Follow", "Committed",
    "Error", "NotFound", "Corrupted", "Locked", "WriterGone", "Timeout",
]

Name = _Union[str, bytes]


def _array(data: bytes, meta: dict, what: str, dtype=None, shape=None) -> _numpy.ndarray:
    """`data` as an array: `dtype`/`shape` as given, else from `meta` (its shape only
    with its own dtype: a caller's other dtype without a shape gives one dimension)."""
    meta_dtype = meta.get("dtype")
    if dtype is None:
        dtype = meta_dtype
        if dtype is None:
            raise Error(f"{what} has no dtype in its metadata: pass dtype=")
    try:
        dt = _numpy.dtype(dtype)
    except TypeError as e:
        raise Error(f"{what}: dtype {dtype!r} is not a numpy dtype ({e})") from None
    # A dtype that contradicts the stored one would reinterpret the bytes (float64 read
    # from >f8 data gives 3.14e-319): refused, naming what is stored.
    if meta_dtype is not None and not _same_dtype(dt, meta_dtype):
        raise Error(f"{what} is stored as dtype {meta_dtype}, not {dt.str}: pass dtype={meta_dtype!r} or none "
                    f"(to reinterpret the bytes on purpose: numpy.frombuffer(pool.get(...), {dt.str!r}))")
    if dt.itemsize == 0 or len(data) % dt.itemsize:
        raise Error(f"{what}: {len(data)} bytes are not a whole number of {dt.str} ({dt.itemsize} bytes)")
    if shape is None and "shape" in meta and meta_dtype is not None and _same_dtype(dt, meta_dtype):
        text = meta["shape"].strip()
        try:
            shape = tuple(int(d) for d in text.split(",")) if text else ()
        except ValueError:
            raise Error(f"{what}: metadata shape={meta['shape']!r} is not a list of dimensions") from None
    arr = _numpy.frombuffer(data, dtype=dt)
    if shape is None:
        return arr
    try:
        return arr.reshape(shape)
    except ValueError:
        raise Error(f"{what}: {arr.size} values of {dt.str} do not fit shape {shape}") from None


def _same_dtype(dt: _numpy.dtype, text: str) -> bool:
    try:
        return dt == _numpy.dtype(text)
    except TypeError:
        return False


def _what(path: str, name: Name, version: int) -> str:
    return f"{path}: {name!r} version {version}"


class Pool(_nvs.Pool):
    """A pool file. ``nvs.open(path)`` opens it read-only (any number of readers, beside
    a live writer); ``nvs.create`` and ``nvs.open(path, write=True)`` give the one writer.

    Methods from the extension: ``names(lane=None)``, ``versions(name, lane=None)``,
    ``latest(name, lane=None)``, ``get(name, version=None, lane=None) -> bytes``,
    ``meta(name, version=None, lane=None) -> dict``, ``stat(name, version=None,
    lane=None) -> dict``, ``refresh()``, ``writer_alive()``, ``close()``; a writer also
    has ``put(name, data, meta=None, lane=None)`` (``data``: bytes or any bytes-like
    object; None: the handle's own lane from ``open_lane``, else 0), ``close_lane(lane)``; ``lane`` is the lane ``open_lane`` took. ``version=None``
    means the latest version. ``lane=r`` reads rank r's object in a pool with lane names
    (where every lane has names of its own, and a name two lanes have needs its lane);
    in other pools, a version only if lane r wrote it.
    """

    def get_array(self, name: Name, version: _Optional[int] = None, dtype=None, shape=None,
                  lane: _Optional[int] = None) -> _numpy.ndarray:
        """Version `version` (the latest if None) of `name` as a numpy array: its dtype
        and shape from the object's metadata (``dtype=<f8``, ``shape=3,4``) unless given
        here (the metadata's shape goes with its dtype: another dtype without a shape
        gives one dimension); no shape at all: one dimension. A dtype other than the stored
        one is refused (it would reinterpret the bytes). The array is read-only (it views
        the bytes a get returned): ``.copy()`` it to write."""
        if version is None:
            version = self.latest(name, lane)
        meta = self.meta(name, version, lane)
        return _array(self.get(name, version, lane), meta, _what(self.path, name, version), dtype, shape)

    def put_array(self, name: Name, array, meta: _Optional[dict] = None, lane: _Optional[int] = None) -> int:
        """Put `array` as the next version of `name`, with its dtype and shape in the
        metadata (what ``get_array`` and nvs-std's ``get_pod`` read back). Returns the version."""
        a = _numpy.asarray(array, order="C")  # keeps 0-d arrays 0-d
        # Only a dtype its text gives back whole: object arrays hold pointers into this
        # process, and a structured dtype's text ("|V12") loses its fields.
        if a.dtype.hasobject or _numpy.dtype(a.dtype.str) != a.dtype:
            raise Error(f"{self.path}: {name!r}: cannot store an array of dtype {a.dtype} (not plain numbers, bytes or strings)")
        m = dict(meta or {})
        m["dtype"] = a.dtype.str
        m["shape"] = ",".join(str(d) for d in a.shape)
        return self.put(name, a.tobytes(), m, lane)

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # A writer leaving on an exception does not end the stream: followers see the
        # writer gone rather than a clean end.
        self.close(end_stream=exc_type is None)


def open(path, write: bool = False) -> Pool:  # noqa: A001 (nvs.open, like io.open)
    """Open the pool at `path`, read-only unless `write`."""
    return Pool(path, write)


def open_lane(path, lane: _Optional[int] = None) -> Pool:
    """Open the pool at `path` to write one lane (None: the lowest lane no other process
    writes) beside writer processes of its other lanes: one per MPI rank, in a pool created
    with ``lane_names=True`` (else ``nvs.Error``). A lane another live process writes is
    ``nvs.Locked``; a dead writer's lane is taken over where it ended. ``put`` writes the
    lane (``pool.lane``); reads see the other writers' objects as of the open or the last
    ``refresh()``; ``close()`` ends the lane's stream."""
    if lane is not None and lane < 0:
        raise ValueError(f"lane must be >= 0, not {lane}")
    return Pool(path, True, None, 64, None, False, -1 if lane is None else lane)


def create(path, size: int, lanes: int = 64, segment: _Optional[int] = None,
           lane_names: bool = False, sparse: bool = False) -> Pool:
    """Create a pool file of `size` bytes (refused if `path` exists), open for writing.
    ``lane_names=True``: every lane has names of its own (rank r's "temperature" is not
    rank s's; read one with ``lane=r``). ``sparse=True``: the file gets its blocks as
    segments are claimed, not all now (a full file system then fails the put needing a
    new segment with ``nvs.Error``, nothing written)."""
    return Pool(path, True, size, lanes, segment, lane_names, None, sparse)


class Committed(_NamedTuple):
    """One committed object, as a follower reports it."""

    name: str
    version: int
    lane: int
    seq: int
    len: int


class Follow:
    """An iterator over the objects a pool's writers commit, in lane order: those already
    committed first, then each as it commits. It ends at end of stream (every lane that
    joined is closed); raises ``WriterGone`` when a lane's writer died (its ``lanes``
    name them; iterating again goes on with the other lanes, as MPI ranks outliving one
    rank need), and ``Timeout`` when nothing came for `timeout` seconds (None: wait for
    ever). ``get``, ``get_array`` and
    ``meta`` read from the follower's own view (an object retention already reclaimed
    raises ``NotFound``)."""

    def __init__(self, path, name: _Optional[Name] = None, timeout: _Optional[float] = None,
                 interval: float = 0.005, lanes: _Optional[_Sequence[int]] = None):
        self._f = _nvs.Follower(path, name, list(lanes) if lanes is not None else None)
        self.path = self._f.path
        self.timeout = timeout
        self.interval = interval
        self._pending = _deque()
        self._ended = False

    def __iter__(self) -> "Follow":
        return self

    def __next__(self) -> Committed:
        while not self._pending:
            if self._ended:
                raise StopIteration
            got = self._f.wait(self.timeout, self.interval)
            if got is None:
                self._ended = True
            else:
                self._pending.extend(Committed(*t) for t in got)
        return self._pending.popleft()

    def get(self, name: Name, version: _Optional[int] = None, lane: _Optional[int] = None) -> bytes:
        return self._f.get(name, version, lane)

    def meta(self, name: Name, version: _Optional[int] = None, lane: _Optional[int] = None) -> dict:
        return self._f.meta(name, version, lane)

    def latest(self, name: Name, lane: _Optional[int] = None) -> int:
        return self._f.latest(name, lane)

    def get_array(self, name: Name, version: _Optional[int] = None, dtype=None, shape=None,
                  lane: _Optional[int] = None) -> _numpy.ndarray:
        """As ``Pool.get_array``, from the follower's view (``lane``: as for ``Pool.get``;
        a followed object's is ``Committed.lane``)."""
        if version is None:
            version = self._f.latest(name, lane)
        meta = self._f.meta(name, version, lane)
        return _array(self._f.get(name, version, lane), meta, _what(self.path, name, version), dtype, shape)


def follow(path, name: _Optional[Name] = None, timeout: _Optional[float] = None,
           interval: float = 0.005, lanes: _Optional[_Sequence[int]] = None) -> Follow:
    """Follow the pool at `path` (every name, or only `name`): see ``Follow``."""
    return Follow(path, name, timeout, interval, lanes)
