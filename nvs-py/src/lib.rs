//! `nvs._nvs`: the Rust half of the Python package (PyO3). It wraps nvs-std's
//! [`FilePool`] (read-only, or a minimal writer) and [`Follower`]; the pure-Python
//! package `nvs` (python/nvs/) adds numpy arrays, iterators and the exception classes.
//!
//! Names cross as `str` (UTF-8, `surrogateescape` for bytes that are not UTF-8, so every
//! name round-trips) or `bytes`. Every nvs error becomes one of the package's exceptions
//! (`nvs.NotFound`, `nvs.Corrupted`, `nvs.Locked`, `nvs.Error`) with nvs's one-line
//! message; a Rust panic becomes PyO3's `PanicException`, never an abort.

use nvs_core::Key;
use nvs_core::Object;
use nvs_std::{Access, CreateOptions, Error, FilePool, Followed, Follower as StdFollower, Meta};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use std::time::{Duration, Instant};

/// The exception class `nvs.<class>` (python/nvs/_errors.py), raised with `msg`.
fn raise(py: Python<'_>, class: &str, msg: String) -> PyErr {
    let class = py.import("nvs._errors").and_then(|m| Ok(m.getattr(class)?.downcast_into::<PyType>()?));
    match class {
        Ok(ty) => PyErr::from_type(ty, msg),
        Err(e) => e,
    }
}

/// The Python exception for an nvs error.
fn err(py: Python<'_>, e: Error) -> PyErr {
    // A batch's error about one object is classed as that error (its message names the
    // object's index).
    if matches!(e.unbatched().0, Error::NameNul { .. }) {
        return PyValueError::new_err(e.to_string());
    }
    let class = match e.unbatched().0 {
        Error::NotFound { .. } => "NotFound",
        Error::Locked { .. } => "Locked",
        e if e.is_corruption() => "Corrupted",
        _ => "Error",
    };
    raise(py, class, e.to_string())
}

/// A name from Python: `bytes` as they are, `str` as UTF-8 (`surrogateescape`).
fn name_arg(name: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = name.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if name.is_instance_of::<PyString>() {
        let b = name.call_method1("encode", ("utf-8", "surrogateescape"))?;
        return Ok(b.downcast::<PyBytes>()?.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!("a name is str or bytes, not {}", name.get_type().name()?)))
}

/// An object's bytes from Python: `bytes` as they are, any other object with the buffer
/// protocol (`bytearray`, `memoryview`, `array.array`, a numpy array) copied once, in C
/// order, while the GIL is held (a `bytearray` could change size under a put that let
/// the GIL go). Anything else (`str`, `int`: `bytes(5)` would be five zero bytes), and a
/// buffer of Python objects, is a `TypeError`.
fn data_arg<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(b) = data.downcast::<PyBytes>() {
        return Ok(b.clone());
    }
    let kind = data.get_type().name()?;
    let not_bytes = || PyTypeError::new_err(format!("data is a bytes-like object, not {kind}"));
    if data.is_instance_of::<PyString>() {
        return Err(not_bytes());
    }
    // Only "no buffer protocol" is ours to word; any other error (a released
    // memoryview, a buffer export that fails) is the object's own, passed on.
    let py = data.py();
    let view = py.import("builtins")?.getattr("memoryview")?.call1((data,)).map_err(|e| {
        if e.is_instance_of::<PyTypeError>(py) {
            not_bytes()
        } else {
            e
        }
    })?;
    // Python objects in a buffer (a numpy object array, ctypes `py_object`s) are this
    // process's pointers: meaningless to any reader, and they would give its addresses
    // away. The type codes are what lies outside a struct format's `:field names:`.
    let format: String = view.getattr("format")?.extract()?;
    if format.split(':').step_by(2).any(|codes| codes.contains('O')) {
        return Err(PyTypeError::new_err(format!(
            "data holds Python objects (buffer format {format:?}): their pointers mean nothing outside this process"
        )));
    }
    Ok(view.call_method0("tobytes")?.downcast_into::<PyBytes>()?)
}

/// A path from Python: `str`, `bytes` or any `os.PathLike` (as `open()` takes them; bytes
/// are the file name's own bytes).
fn path_arg(path: &Bound<'_, PyAny>) -> PyResult<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let fs = path.py().import("os")?.call_method1("fspath", (path,))?;
    if let Ok(b) = fs.downcast::<PyBytes>() {
        return Ok(std::ffi::OsStr::from_bytes(b.as_bytes()).into());
    }
    fs.extract()
}

/// A name for Python: `str` (bytes that are not UTF-8 as surrogates, as `name_arg` takes them).
fn name_out<'py>(py: Python<'py>, name: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    PyBytes::new(py, name).call_method1("decode", ("utf-8", "surrogateescape"))
}

/// A whole number a Python caller passes as a lane, version or count: negative or too
/// large is a `ValueError` naming the argument (PyO3's own conversion raised
/// `OverflowError: can't convert negative int to unsigned`).
fn whole<T: TryFrom<i128>>(ob: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let n: i128 = ob.extract()?;
    T::try_from(n)
        .map_err(|_| PyValueError::new_err(format!("{what} must be a whole number >= 0 (and in range), not {n}")))
}

/// A lane argument ([`whole`]).
#[derive(Clone, Copy)]
struct Lane(u32);
/// A version argument ([`whole`]).
#[derive(Clone, Copy)]
struct Version(u64);
/// A count argument, such as `reclaim`'s `keep` ([`whole`]).
#[derive(Clone, Copy)]
struct Count(u32);

impl<'py> FromPyObject<'py> for Lane {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        whole(ob, "lane").map(Lane)
    }
}
impl<'py> FromPyObject<'py> for Version {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        whole(ob, "version").map(Version)
    }
}
impl<'py> FromPyObject<'py> for Count {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        whole(ob, "keep").map(Count)
    }
}

/// Reads shared by [`Pool`] and [`Follower`] (whose pool is the follower's own).
mod read {
    use super::*;

    /// Where a read looks: `lane`'s `name` (`Some`: in a pool with lane names, the name in
    /// that lane's name space; otherwise a version only if that lane wrote it), or `name`
    /// in the whole pool.
    #[derive(Clone, Copy)]
    pub struct At<'a> {
        pub pool: &'a FilePool,
        pub lane: Option<u32>,
        pub name: &'a [u8],
    }

    impl At<'_> {
        fn key(&self) -> Key<'_> {
            Key::new(self.lane, self.name)
        }
        pub fn latest(&self) -> Result<u64, Error> {
            self.pool.latest(self.key())
        }
        fn stat(&self, v: u64) -> Result<nvs_core::ObjectInfo, Error> {
            self.pool.stat(self.key(), v)
        }
        fn get(&self, v: u64, buf: &mut [u8]) -> Result<usize, Error> {
            self.pool.get(self.key(), v, buf)
        }
        fn meta(&self, v: u64) -> Result<Vec<u8>, Error> {
            self.pool.meta(self.key(), v)
        }
        pub fn versions(&self) -> Result<Vec<u64>, Error> {
            Ok(self.pool.versions(self.key())?.map(|i| i.version).collect())
        }
    }

    pub fn resolve(py: Python<'_>, at: At<'_>, version: Option<u64>) -> PyResult<u64> {
        match version {
            Some(v) => Ok(v),
            None => at.latest().map_err(|e| err(py, e)),
        }
    }

    pub fn get<'py>(py: Python<'py>, at: At<'_>, version: Option<u64>) -> PyResult<Bound<'py, PyBytes>> {
        let v = resolve(py, at, version)?;
        let len = at.stat(v).map_err(|e| err(py, e))?.len_bytes;
        let len =
            usize::try_from(len).map_err(|_| raise(py, "Error", "object larger than this address space".into()))?;
        // One copy: from the pool straight into the bytes object.
        let mut failed = None;
        let bytes = PyBytes::new_with(py, len, |buf| {
            match at.get(v, buf) {
                Ok(n) if n == len => {}
                Ok(n) => failed = Some(raise(py, "Error", format!("get returned {n} bytes of {len}"))),
                Err(e) => failed = Some(err(py, e)),
            }
            Ok(())
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(bytes),
        }
    }

    pub fn meta<'py>(py: Python<'py>, at: At<'_>, version: Option<u64>) -> PyResult<Bound<'py, PyDict>> {
        let v = resolve(py, at, version)?;
        let raw = at.meta(v).map_err(|e| err(py, e))?;
        let meta = Meta::parse(&raw).map_err(|e| err(py, e))?;
        let d = PyDict::new(py);
        for (k, val) in meta.pairs() {
            d.set_item(k, val)?;
        }
        Ok(d)
    }

    pub fn stat<'py>(py: Python<'py>, at: At<'_>, version: Option<u64>) -> PyResult<Bound<'py, PyDict>> {
        let v = resolve(py, at, version)?;
        let i = at.stat(v).map_err(|e| err(py, e))?;
        let d = PyDict::new(py);
        d.set_item("version", i.version)?;
        d.set_item("len", i.len_bytes)?;
        d.set_item("stored", i.stored_bytes)?;
        d.set_item("depth", i.depth)?;
        d.set_item("lane", i.lane)?;
        d.set_item("seq", i.seq)?;
        d.set_item("meta_len", i.meta_len)?;
        Ok(d)
    }
}

/// A pool, open read-only (or for writing, from `nvs.create` / `nvs.open(write=True)`).
#[pyclass(module = "nvs._nvs", subclass)]
struct Pool {
    pool: Option<FilePool>,
    path: String,
}

impl Pool {
    fn open_pool(&self, py: Python<'_>) -> PyResult<&FilePool> {
        self.pool.as_ref().ok_or_else(|| raise(py, "Error", format!("pool {} is closed", self.path)))
    }
    fn open_pool_mut(&mut self, py: Python<'_>) -> PyResult<&mut FilePool> {
        let path = &self.path;
        self.pool.as_mut().ok_or_else(|| raise(py, "Error", format!("pool {path} is closed")))
    }
}

#[pymethods]
impl Pool {
    /// Open `path`: read-only (any number of readers, beside a live writer), or for
    /// writing (`write=True`: the one writer; a second is refused with `nvs.Locked`).
    /// With `create=SIZE`: create a pool file of SIZE bytes (refused if `path` exists),
    /// with `lanes` writer lanes and segments of `segment` bytes (None: nvs's default),
    /// open for writing; `sparse=True`: the file gets its blocks as segments are claimed.
    /// With `own_lane` (a lane, or -1: the lowest free one): open it to write that one
    /// lane beside writer processes of the other lanes (a pool with lane names).
    #[new]
    #[pyo3(signature = (path, write = false, create = None, lanes = 64, segment = None, lane_names = false, own_lane = None, sparse = false))]
    #[allow(clippy::too_many_arguments)] // the Python constructor's keywords
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        write: bool,
        create: Option<u64>,
        lanes: u32,
        segment: Option<u64>,
        lane_names: bool,
        own_lane: Option<i64>,
        sparse: bool,
    ) -> PyResult<Self> {
        let path = path_arg(path)?;
        let own = match own_lane {
            None => None,
            Some(-1) => Some(None),
            Some(l) => Some(Some(
                u32::try_from(l).map_err(|_| PyValueError::new_err(format!("lane {l} is not a lane number")))?,
            )),
        };
        let pool = py.detach(|| match (create, own) {
            (None, Some(lane)) => FilePool::open_lanes(&path, lane.as_ref().map(core::slice::from_ref)),
            (Some(size), _) => {
                let mut opts = CreateOptions::new().lanes_max(lanes);
                opts.segment_len = segment;
                opts.lane_names = lane_names;
                opts.sparse = sparse;
                FilePool::create(&path, size, &opts)
            }
            (None, None) => FilePool::open(&path, if write { Access::ReadWrite } else { Access::ReadOnly }),
        });
        let pool = pool.map_err(|e| err(py, e))?;
        Ok(Pool { pool: Some(pool), path: path.display().to_string() })
    }

    /// The pool's path.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Whether this handle writes.
    #[getter]
    fn writable(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.open_pool(py)?.is_writable())
    }

    /// Whether a writer holds the pool (this handle or another process).
    fn writer_alive(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.open_pool(py)?.writer_alive())
    }

    /// Every name, as `str`, in the pool's order. In a pool with lane names a name is
    /// listed once per lane that has it: `lane=` lists one lane's names (in a pool
    /// without lane names: the names that lane wrote a version of).
    #[pyo3(signature = (lane = None))]
    fn names<'py>(&self, py: Python<'py>, lane: Option<Lane>) -> PyResult<Bound<'py, PyList>> {
        let lane = lane.map(|l| l.0);
        let pool = self.open_pool(py)?;
        let out = PyList::empty(py);
        let mut buf = [0u8; nvs_core::NAME_MAX];
        for n in pool.names() {
            let name = pool.name_bytes(n.id, &mut buf);
            // Empty: a reader's view whose name bytes a live writer reused since its refresh.
            let on_lane = match (lane, n.lane) {
                (None, _) => true,
                (Some(l), Some(own)) => l == own,
                (Some(l), None) => pool.versions(name).is_ok_and(|mut v| v.any(|i| i.lane == l)),
            };
            if !name.is_empty() && on_lane {
                out.append(name_out(py, name)?)?;
            }
        }
        Ok(out)
    }

    /// Every version of `name` (of `lane`'s `name`, see `get`), oldest first.
    #[pyo3(signature = (name, lane = None))]
    fn versions(&self, py: Python<'_>, name: &Bound<'_, PyAny>, lane: Option<Lane>) -> PyResult<Vec<u64>> {
        let lane = lane.map(|l| l.0);
        let name = name_arg(name)?;
        let at = read::At { pool: self.open_pool(py)?, lane, name: &name };
        at.versions().map_err(|e| err(py, e))
    }

    /// The latest version of `name` (of `lane`'s `name`, see `get`).
    #[pyo3(signature = (name, lane = None))]
    fn latest(&self, py: Python<'_>, name: &Bound<'_, PyAny>, lane: Option<Lane>) -> PyResult<u64> {
        let lane = lane.map(|l| l.0);
        let name = name_arg(name)?;
        read::At { pool: self.open_pool(py)?, lane, name: &name }.latest().map_err(|e| err(py, e))
    }

    /// The bytes of `version` of `name` (the latest if `None`). With `lane`: in a pool
    /// with lane names, that lane's `name` (rank r's "temperature"; without it a name two
    /// lanes have is an error); otherwise the version only if that lane wrote it.
    #[pyo3(signature = (name, version = None, lane = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        version: Option<Version>,
        lane: Option<Lane>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let lane = lane.map(|l| l.0);
        let version = version.map(|v| v.0);
        let name = name_arg(name)?;
        read::get(py, read::At { pool: self.open_pool(py)?, lane, name: &name }, version)
    }

    /// The metadata of `version` of `name` (the latest if `None`; `lane` as for `get`),
    /// as a dict of str.
    #[pyo3(signature = (name, version = None, lane = None))]
    fn meta<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        version: Option<Version>,
        lane: Option<Lane>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let lane = lane.map(|l| l.0);
        let version = version.map(|v| v.0);
        let name = name_arg(name)?;
        read::meta(py, read::At { pool: self.open_pool(py)?, lane, name: &name }, version)
    }

    /// Facts about `version` of `name` (the latest if `None`; `lane` as for `get`):
    /// version, len, stored, depth, lane, seq, meta_len.
    #[pyo3(signature = (name, version = None, lane = None))]
    fn stat<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        version: Option<Version>,
        lane: Option<Lane>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let lane = lane.map(|l| l.0);
        let version = version.map(|v| v.0);
        let name = name_arg(name)?;
        read::stat(py, read::At { pool: self.open_pool(py)?, lane, name: &name }, version)
    }

    /// Catch up with a live writer (only what was committed since, or a recovery).
    fn refresh(&mut self, py: Python<'_>) -> PyResult<()> {
        let pool = self.open_pool_mut(py)?;
        py.detach(|| pool.refresh()).map_err(|e| err(py, e))
    }

    /// The lane this handle writes, if it was opened for one (`nvs.open_lane`), else None.
    #[getter]
    fn lane(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        Ok(self.open_pool(py)?.owned_lanes().and_then(|o| o.first().copied()))
    }

    /// Put `data` (bytes, or any bytes-like object: copied once) as the next version of
    /// `name` on `lane` (None: the lane of a handle from `nvs.open_lane`, else 0), with
    /// `meta` (a dict of str, stored as `key=value` lines). Durable when it returns;
    /// returns the version. A name holding a NUL byte is a ValueError (C readers could
    /// not get it back). A KeyboardInterrupt (Ctrl-C) raised while a put runs may come
    /// after the put committed, and its version is then lost to the caller: ask
    /// `latest(name)` (a handle from `nvs.open_lane`: after `refresh`) which version the
    /// name has.
    #[pyo3(signature = (name, data, meta = None, lane = None))]
    fn put(
        &mut self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        meta: Option<&Bound<'_, PyDict>>,
        lane: Option<Lane>,
    ) -> PyResult<u64> {
        let lane = lane.map(|l| l.0);
        let name = name_arg(name)?;
        let data = data_arg(data)?;
        let data = data.as_bytes();
        let mut m = Meta::new();
        for (k, v) in meta.map(|d| d.iter()).into_iter().flatten() {
            m = m.set(&k.str()?.to_cow()?, &v.str()?.to_cow()?);
        }
        let meta = m.to_bytes().map_err(|e| err(py, e))?;
        let pool = self.open_pool_mut(py)?;
        let lane = lane.or_else(|| pool.owned_lanes().and_then(|o| o.first().copied())).unwrap_or(0);
        let put = py.detach(|| pool.put(lane, Object::new(&name, data).meta(&meta))).map_err(|e| err(py, e))?;
        Ok(put.version)
    }

    /// Retention: release the oldest segments whose objects all have at least `keep`
    /// newer versions (`keep` >= 1: the newest version of every name stays); returns how
    /// many segments were freed. A writer that streams for ever calls it now and then (a
    /// full pool raises `nvs.Error`: "pool full"); followers skip the versions it released
    /// before they read them.
    fn reclaim(&mut self, py: Python<'_>, keep: Count) -> PyResult<u32> {
        let keep = keep.0;
        if keep == 0 {
            return Err(PyValueError::new_err(
                "reclaim(keep=0) would release the newest version of every name: keep >= 1",
            ));
        }
        let pool = self.open_pool_mut(py)?;
        py.detach(|| pool.reclaim(keep)).map_err(|e| err(py, e))
    }

    /// End the stream of `lane` (a follower sees end of stream once every lane is closed).
    fn close_lane(&mut self, py: Python<'_>, lane: Lane) -> PyResult<()> {
        let lane = lane.0;
        self.open_pool_mut(py)?.close_lane(lane).map_err(|e| err(py, e))
    }

    /// Close the pool. A writer ends the stream of every lane it wrote (`end_stream`), or,
    /// with `end_stream=False`, just lets go: followers then see the writer gone.
    #[pyo3(signature = (end_stream = true))]
    fn close(&mut self, py: Python<'_>, end_stream: bool) -> PyResult<()> {
        match self.pool.take() {
            Some(pool) if pool.is_writable() && end_stream => py.detach(|| pool.close()).map_err(|e| err(py, e)),
            _ => Ok(()),
        }
    }

    fn __repr__(&self) -> String {
        let state = match &self.pool {
            None => "closed",
            Some(p) if p.is_writable() => "writable",
            Some(_) => "read-only",
        };
        format!("<nvs.Pool {:?} {state}>", self.path)
    }
}

/// A follower of a pool's writers (nvs-std's `Follower`); python/nvs makes it an iterator.
#[pyclass(module = "nvs._nvs")]
struct Follower {
    follower: StdFollower,
    path: String,
}

#[pymethods]
impl Follower {
    /// Follow `path` (read-only), every name or only `name`; the stream ends once every
    /// lane that joined, and every lane of `lanes`, is closed.
    #[new]
    #[pyo3(signature = (path, name = None, lanes = None))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
        lanes: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let path = path_arg(path)?;
        let only = name.map(name_arg).transpose()?;
        let mut follower = py.detach(|| StdFollower::open(&path, only)).map_err(|e| err(py, e))?;
        // A lane the pool cannot have would never end its stream: refused.
        follower.expect_lanes(lanes.unwrap_or_default()).map_err(|e| err(py, e))?;
        Ok(Follower { follower, path: path.display().to_string() })
    }

    /// Wait for newly committed objects: a list of (name, version, lane, seq, len)
    /// tuples, `None` at end of stream; raises `nvs.WriterGone` when the writer died and
    /// `nvs.Timeout` when nothing came for `timeout` seconds (`None`: wait for ever).
    /// Polls every `interval` seconds, and lets Ctrl-C through.
    #[pyo3(signature = (timeout = None, interval = 0.005))]
    fn wait<'py>(
        &mut self,
        py: Python<'py>,
        timeout: Option<f64>,
        interval: f64,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        // A number of seconds >= 0; one too large for a Duration (inf included) is for ever.
        let secs = |s: f64, what: &str| match s {
            s if s.is_nan() || s < 0.0 => Err(PyValueError::new_err(format!("{what} must be >= 0 seconds, not {s}"))),
            s => Ok(Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX)),
        };
        let interval = secs(interval, "interval")?;
        // A deadline past what the clock can count: none (wait for ever).
        let deadline = timeout.map(|t| secs(t, "timeout")).transpose()?.and_then(|t| Instant::now().checked_add(t));
        let slice = Duration::from_millis(100);
        loop {
            let step = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(slice),
                None => slice,
            };
            let follower = &mut self.follower;
            match py.detach(|| follower.wait(Some(step), interval)).map_err(|e| err(py, e))? {
                Followed::Objects(objects) => {
                    let out = PyList::empty(py);
                    for o in objects {
                        let t = (name_out(py, &o.name)?, o.version, o.lane, o.seq, o.len_bytes);
                        out.append(PyTuple::new(py, t.into_pyobject(py)?)?)?;
                    }
                    return Ok(Some(out));
                }
                Followed::EndOfStream => return Ok(None),
                Followed::WriterGone => {
                    // Named, and given up: a next wait goes on with the other lanes.
                    let lanes = self.follower.gone_lanes();
                    self.follower.give_up(&lanes);
                    let shown: Vec<String> = lanes.iter().map(|l| l.to_string()).collect();
                    let e = raise(
                        py,
                        "WriterGone",
                        format!(
                            "{}: the writer is gone (it died or exited without closing its lanes): lane {}",
                            self.path,
                            shown.join(", ")
                        ),
                    );
                    e.value(py).setattr("lanes", lanes)?;
                    return Err(e);
                }
                Followed::Timeout if deadline.is_some_and(|d| Instant::now() >= d) => {
                    let t = timeout.unwrap_or_default();
                    return Err(raise(py, "Timeout", format!("{}: nothing committed for {t} s", self.path)));
                }
                Followed::Timeout => py.check_signals()?,
            }
        }
    }

    /// The latest version of `name` (of `lane`'s, as for `Pool.get`) in the follower's view.
    #[pyo3(signature = (name, lane = None))]
    fn latest(&self, py: Python<'_>, name: &Bound<'_, PyAny>, lane: Option<Lane>) -> PyResult<u64> {
        let lane = lane.map(|l| l.0);
        let name = name_arg(name)?;
        read::At { pool: self.follower.pool(), lane, name: &name }.latest().map_err(|e| err(py, e))
    }

    /// The bytes of `version` of `name` (the latest if `None`; `lane` as for `Pool.get`)
    /// from the follower's view.
    #[pyo3(signature = (name, version = None, lane = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        version: Option<Version>,
        lane: Option<Lane>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let lane = lane.map(|l| l.0);
        let version = version.map(|v| v.0);
        let name = name_arg(name)?;
        read::get(py, read::At { pool: self.follower.pool(), lane, name: &name }, version)
    }

    /// The metadata of `version` of `name` (the latest if `None`; `lane` as for
    /// `Pool.get`) from the follower's view.
    #[pyo3(signature = (name, version = None, lane = None))]
    fn meta<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        version: Option<Version>,
        lane: Option<Lane>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let lane = lane.map(|l| l.0);
        let version = version.map(|v| v.0);
        let name = name_arg(name)?;
        read::meta(py, read::At { pool: self.follower.pool(), lane, name: &name }, version)
    }

    /// The followed pool's path.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }
}

/// The Rust half of the `nvs` package.
#[pymodule]
fn _nvs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Pool>()?;
    m.add_class::<Follower>()?;
    m.add("NAME_MAX", nvs_core::NAME_MAX)?;
    m.add("META_MAX", nvs_core::META_MAX)?;
    Ok(())
}
