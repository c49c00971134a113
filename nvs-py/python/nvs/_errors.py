"""The exceptions of the nvs package. Each carries nvs's one-line message."""


class Error(Exception):
    """Anything nvs refused: a file it cannot open, a bad argument, bad metadata..."""


class NotFound(Error, LookupError):
    """No object of that name, or no such version of it."""


class Corrupted(Error):
    """The file's bytes are not a good pool: damaged, or not an nvs pool at all."""


class Locked(Error):
    """Another writer holds the pool."""


class WriterGone(Error):
    """A followed pool's writer died (or exited without closing its lanes). ``lanes``
    lists the lanes whose writer is gone; the follower goes on with the other lanes if
    iterated again (and ends when they have closed)."""

    lanes: list = []


class Timeout(Error, TimeoutError):
    """Nothing was committed within the follower's timeout."""
