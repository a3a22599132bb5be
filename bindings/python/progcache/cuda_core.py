"""progcache behind cuda.core: a ``ProgramCacheResource`` over any progcache URI, and compiled
results as ``ObjectCode`` with their symbol mapping.

    from cuda.core import Program, ProgramOptions
    from progcache.cuda_core import ProgramCache

    with ProgramCache("sqlite:/var/cache/app/kernels.db") as cache:
        program = Program(source, "c++", options=ProgramOptions(arch="sm_90"))
        obj = program.compile("cubin", cache=cache)     # cuda.core derives the key

cuda.core keys the entries (``make_program_cache_key``), so what it stores is what it reads; the
cache is any progcache URI: SQLite, file-stream, Redis, a tiered stack. cuda.core refuses
``cache=`` with ``name_expressions`` (its caches lose the lowered names); progcache's own compile
keeps them:

    with progcache.Cache("sqlite:...") as cache:
        r = cache.compile(source, options=["-arch=sm_90"], name_expressions=["k<float>"])
        obj = r.to_object_code()                         # obj.get_kernel("k<float>") works

This module imports cuda.core; ``import progcache`` does not, so cuda.core stays optional.
"""

from pathlib import Path

from cuda.core import ObjectCode
from cuda.core.utils import ProgramCacheResource

import progcache

__all__ = ["ProgramCache", "object_code"]


def _key_bytes(key):
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    if isinstance(key, str):
        return key.encode("utf-8")
    raise TypeError("cache keys must be bytes or str, got %s" % type(key).__name__)


def _value_bytes(value):
    """The bytes to store: bytes-like as they are; an ObjectCode's binary, read from its file
    now when it is path-backed (the entry holds the bytes, not a path that may move)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, ObjectCode):
        code = value.code
        if isinstance(code, str):
            try:
                return Path(code).read_bytes()
            except FileNotFoundError:
                raise FileNotFoundError(
                    "cannot store path-backed ObjectCode in cache: %s no longer exists" % code
                ) from None
        return bytes(code)
    raise TypeError("cache values must be bytes-like or ObjectCode, got %s" % type(value).__name__)


class ProgramCache(ProgramCacheResource):
    """A cuda.core program cache stored in progcache: ``uri`` as ``progcache.Cache`` takes it
    (None: the default cache; a path or ``pathlib.Path``: a SQLite database for .db, .sqlite or
    .sqlite3, else a file-stream directory). ``max_size_bytes`` as cuda.core's caches take it:
    None (the default) is no cap, a positive int a cap; an entry larger than the cap is not kept,
    as cuda.core's caches do not keep it. ``progcache.Cache(uri)`` gives the configured cap."""

    def __init__(self, uri=None, *, max_size_bytes=None):
        if max_size_bytes is not None:
            if not isinstance(max_size_bytes, int) or isinstance(max_size_bytes, bool):
                raise TypeError("max_size_bytes must be an int or None")
            if max_size_bytes <= 0:
                raise ValueError(
                    "max_size_bytes must be positive or None (0 would evict every write)")
        self._cache = progcache.Cache(uri, max_size_bytes)

    @property
    def cache(self):
        """The underlying progcache.Cache (stats, shared_stats, compile...)."""
        return self._cache

    def __getitem__(self, key):
        try:
            return self._cache[_key_bytes(key)]
        except KeyError:
            raise KeyError(key) from None  # the key as the caller passed it

    def __setitem__(self, key, value):
        try:
            self._cache[_key_bytes(key)] = _value_bytes(value)
        except progcache.TooLargeError:
            pass  # larger than the cap: not kept, as cuda.core's caches evict it at once

    def __delitem__(self, key):
        try:
            del self._cache[_key_bytes(key)]
        except KeyError:
            raise KeyError(key) from None

    def __len__(self):
        return len(self._cache)

    def clear(self):
        self._cache.clear()

    def close(self):
        self._cache.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<progcache.cuda_core.ProgramCache %r>" % (self._cache,)


_FROM = {"cubin": ObjectCode.from_cubin, "ptx": ObjectCode.from_ptx, "ltoir": ObjectCode.from_ltoir}


def object_code(compiled):
    """A progcache.Compiled as a cuda.core ObjectCode, symbol_mapping included."""
    make = _FROM.get(compiled.target)
    if make is None:
        raise ValueError("no ObjectCode for target %r" % (compiled.target,))
    # cuda.core's Program gives the lowered names as bytes.
    mapping = {name: symbol.encode("utf-8") if isinstance(symbol, str) else symbol
               for name, symbol in compiled.symbol_mapping.items()}
    return make(compiled.data, symbol_mapping=mapping)
