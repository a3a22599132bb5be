"""progcache for Python: a standard-library ctypes binding of libprogcache.so.1.

    import progcache
    with progcache.Cache() as cache:            # the default cache (SQLite)
        cache[b"k"] = b"bytes"                   # bytes-like in
        data = cache[b"k"]                       # bytes out; KeyError on a miss
        data = cache.get("k")                    # str keys are UTF-8: "k" and b"k" are one entry
        r = cache.compile(source, options=["-arch=sm_90"], name_expressions=["scale<float>"])
        r.data, r.from_cache, r.lowered_name("scale<float>")

The library is found through $PROGCACHE_LIBRARY (a path), then the copy a wheel bundles beside
this module (``pip install .`` builds one), then the loader's search path (libprogcache.so.1,
as the Debian package or ``make install`` put it). Like cuda.core's ProgramCacheResource there is deliberately no
``__contains__``: ``if key in cache: cache[key]`` races with other processes; use ``get``.
"""

import ctypes
import ctypes.util
import os
import re
import shlex
import warnings

__version__ = "0.5.0"  # the release; tests/python checks it equals the library's version

__all__ = [
    "Cache", "Compiled", "ProgcacheError", "ProgcacheWarning", "InvalidArgumentError",
    "NoMemoryError", "CacheIOError", "CorruptError", "UnsupportedError", "BusyError",
    "PermissionDeniedError", "TooLargeError",
    "CompileError", "CudaUnavailableError", "CudaError", "RemoteError", "InternalError",
    "make_key", "compile_uncached", "link_uncached", "version", "KEY_SIZE",
]

KEY_SIZE = 32
_OK, _NOT_FOUND = 0, 1


class ProgcacheError(Exception):
    """A progcache call failed. ``status`` is the pcache_status code, ``args[0]`` the message,
    ``cause`` what is known of why beyond the status ("no_space", "device", "read_only",
    "timeout", "too_many_files", "connection", or None) and ``os_errno`` the errno behind it
    (0 if none; the OSError subclasses also set ``errno``)."""

    status = None
    cause = None
    os_errno = 0

    def __init__(self, message, status=None, cause=None, os_errno=0):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.cause = cause
        self.os_errno = os_errno
        if os_errno and isinstance(self, OSError):
            self.errno = os_errno


class InvalidArgumentError(ProgcacheError, ValueError):
    status = -1


class NoMemoryError(ProgcacheError, MemoryError):
    status = -2


class CacheIOError(ProgcacheError, OSError):
    status = -3


class CorruptError(ProgcacheError):
    status = -4


class UnsupportedError(ProgcacheError):
    status = -5


class BusyError(ProgcacheError):
    status = -6


class PermissionDeniedError(ProgcacheError, PermissionError):
    status = -7


class TooLargeError(ProgcacheError, ValueError):
    status = -8


class CompileError(ProgcacheError):
    """NVRTC rejected the program; ``log`` holds NVRTC's full log."""

    status = -9
    log = ""


class CudaUnavailableError(ProgcacheError):
    status = -10


class CudaError(ProgcacheError):
    status = -11


class RemoteError(ProgcacheError):
    status = -12


class InternalError(ProgcacheError):
    status = -13


_ERRORS = {cls.status: cls for cls in (
    InvalidArgumentError, NoMemoryError, CacheIOError, CorruptError, UnsupportedError, BusyError,
    PermissionDeniedError, TooLargeError, CompileError, CudaUnavailableError, CudaError,
    RemoteError, InternalError)}


class _Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("max_size_bytes", ctypes.c_uint64), ("secret", ctypes.c_void_p),
                ("secret_size", ctypes.c_uint64)]


class _Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32)] + [
        (name, ctypes.c_uint64) for name in (
            "hits", "misses", "puts", "deletes", "evictions", "bytes_read", "bytes_written",
            "corrupt", "healed", "tier_errors", "tier_skips", "uncacheable")]


class _SharedStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32)] + [
        (name, ctypes.c_int64) for name in (
            "hits", "misses", "evictions", "compile_us_saved", "corrupt", "uncacheable",
            "tier_errors", "tier_timeouts", "healed")]


class _View(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("token", ctypes.c_void_p)]


_StrArray = ctypes.POINTER(ctypes.c_char_p)


class _Program(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("code_type", ctypes.c_int32),
        ("target", ctypes.c_int32), ("nvrtc_version", ctypes.c_uint32),
        ("name", ctypes.c_char_p), ("source", ctypes.c_char_p), ("source_size", ctypes.c_size_t),
        ("options", _StrArray), ("num_options", ctypes.c_size_t),
        ("header_names", _StrArray), ("header_sources", _StrArray), ("num_headers", ctypes.c_size_t),
        ("name_expressions", _StrArray), ("num_name_expressions", ctypes.c_size_t),
        ("extra_digest", ctypes.c_void_p), ("extra_digest_size", ctypes.c_size_t),
        ("header_sizes", ctypes.POINTER(ctypes.c_size_t)),  # since 0.5
    ]


class _LinkInput(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32),
                ("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class _LinkJob(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("target", ctypes.c_int32),
                ("options", _StrArray), ("num_options", ctypes.c_size_t),
                ("inputs", ctypes.POINTER(_LinkInput)), ("num_inputs", ctypes.c_size_t)]


def _installed_library():
    """The library a cmake --install or a deb put beside this package (see _installed.py)."""
    try:
        from progcache._installed import LIBRARY
    except ImportError:
        return None
    return LIBRARY if os.path.exists(LIBRARY) else None


def _load_library():
    path = os.environ.get("PROGCACHE_LIBRARY")
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libprogcache.so.1")
    candidates = [path] if path else [
        bundled if os.path.exists(bundled) else None, _installed_library(),
        "libprogcache.so.1", ctypes.util.find_library("progcache")]
    errors = []
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return ctypes.CDLL(candidate)
        except OSError as exc:
            errors.append(str(exc))
    raise ImportError("cannot load libprogcache.so.1 (set PROGCACHE_LIBRARY): " + "; ".join(errors))


_lib = _load_library()
_status = ctypes.c_int32
_handle = ctypes.c_void_p


def _declare(name, restype, *argtypes):
    fn = getattr(_lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


_declare("pcache_options_init", _status, ctypes.POINTER(_Options), ctypes.c_uint32)
_declare("pcache_open", _status, ctypes.c_char_p, ctypes.POINTER(_Options), ctypes.POINTER(_handle))
_declare("pcache_close", _status, _handle)
_declare("pcache_get", _status, _handle, ctypes.c_char_p, ctypes.c_size_t,
         ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t))
_declare("pcache_get_into", _status, _handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
         ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))
_declare("pcache_free", None, ctypes.c_void_p)
_declare("pcache_get_view", _status, _handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_View))
_declare("pcache_view_release", None, ctypes.POINTER(_View))
_declare("pcache_put", _status, _handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
_declare("pcache_delete", _status, _handle, ctypes.c_char_p, ctypes.c_size_t)
_declare("pcache_count", _status, _handle, ctypes.POINTER(ctypes.c_uint64))
_declare("pcache_size", _status, _handle, ctypes.POINTER(ctypes.c_uint64))
_declare("pcache_clear", _status, _handle)
_declare("pcache_get_stats", _status, _handle, ctypes.POINTER(_Stats))
_declare("pcache_get_shared_stats", _status, _handle, ctypes.POINTER(_SharedStats))
_declare("pcache_get_tier_stats", _status, _handle, ctypes.c_uint32, ctypes.POINTER(_Stats))
_declare("pcache_status_string", ctypes.c_char_p, _status)
_declare("pcache_last_error", ctypes.c_char_p)


class _ErrorInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("status", ctypes.c_int32),
                ("cause", ctypes.c_int32), ("os_errno", ctypes.c_int32),
                ("sqlite_code", ctypes.c_int32)]


try:  # since 0.5
    _last_error_info = _declare("pcache_last_error_info", _status, ctypes.POINTER(_ErrorInfo))
except AttributeError:
    _last_error_info = None
_declare("pcache_version", ctypes.c_uint32)
_declare("pcache_version_string", ctypes.c_char_p)
_declare("pcache_make_key", _status, ctypes.POINTER(_Program), ctypes.c_char_p)
_declare("pcache_compile", _status, _handle, ctypes.POINTER(_Program), ctypes.POINTER(_handle))
_declare("pcache_compiled_data", ctypes.c_void_p, _handle, ctypes.POINTER(ctypes.c_size_t))
_declare("pcache_compiled_from_cache", ctypes.c_int32, _handle)
_declare("pcache_compiled_log", ctypes.c_char_p, _handle)
_declare("pcache_compiled_lowered_name", ctypes.c_char_p, _handle, ctypes.c_char_p)
_declare("pcache_compiled_key", ctypes.c_void_p, _handle)
_declare("pcache_compiled_nvrtc_version", ctypes.c_uint32, _handle)
_declare("pcache_compiled_compile_us", ctypes.c_uint64, _handle)
_declare("pcache_compiled_elapsed_us", ctypes.c_uint64, _handle)
_declare("pcache_compiled_free", None, _handle)
try:  # since 0.5
    _declare("pcache_link_job_init", _status, ctypes.POINTER(_LinkJob), ctypes.c_uint32)
    _declare("pcache_link", _status, _handle, ctypes.POINTER(_LinkJob), ctypes.POINTER(_handle))
except AttributeError:
    pass


_CAUSES = {1: "no_space", 2: "device", 3: "read_only", 4: "timeout", 5: "too_many_files",
           6: "connection"}


def _last_cause():
    """(cause, errno) of the last call on this thread; (None, 0) from a library before 0.5."""
    if _last_error_info is None:
        return None, 0
    info = _ErrorInfo()
    info.struct_size = ctypes.sizeof(info)
    if _last_error_info(ctypes.byref(info)) != _OK:
        return None, 0
    return _CAUSES.get(info.cause), info.os_errno


class ProgcacheWarning(RuntimeWarning):
    """A call succeeded and the library has something to say that the caller should see: a
    damaged entry was removed, a shared cache has no secret, a secret is short enough to guess.
    Python's warning filters apply (shown once per place by default; ``-W error`` raises)."""


def _check(status):
    if status in (_OK, _NOT_FOUND):
        warning = _lib.pcache_last_error()  # a successful call's warning, else empty
        if warning:
            # stacklevel 3: the caller of the Cache method that called _check.
            warnings.warn(warning.decode("utf-8", "replace"), ProgcacheWarning, stacklevel=3)
        return status
    cause, os_errno = _last_cause()
    message = _lib.pcache_last_error().decode("utf-8", "replace")
    if not message:
        message = _lib.pcache_status_string(status).decode()
    raise _ERRORS.get(status, ProgcacheError)(message, status, cause, os_errno)


def _buffer_bytes(obj):
    """obj's bytes if it is bytes-like (any object with the buffer protocol: bytes, bytearray,
    memoryview, array.array, a NumPy array, mmap), else None."""
    if isinstance(obj, bytes):
        return obj
    try:
        return bytes(memoryview(obj))  # a copy, in C order, whatever the buffer's strides
    except TypeError:
        return None


def _key(key):
    if isinstance(key, str):
        return key.encode("utf-8")
    data = _buffer_bytes(key)
    if data is None:
        raise TypeError("cache keys are bytes-like or str, not %s" % type(key).__name__)
    return data


def _value(value):
    data = _buffer_bytes(value)
    if data is None:
        data = _buffer_bytes(getattr(value, "code", None))  # cuda.core ObjectCode and the like
    if data is None:
        raise TypeError("cache values are bytes-like, not %s" % type(value).__name__)
    return data


def version():
    """The loaded library's version string."""
    return _lib.pcache_version_string().decode()


_TARGETS = {"cubin": 0, "ptx": 1, "ltoir": 2}
_CODE_TYPES = {"c++": 0, "ptx": 1, "nvvm": 2}


def _as_uri(uri):
    """A URI as given; a path (os.PathLike, or a str without a scheme) as the store it names."""
    if uri is None:
        return None
    if isinstance(uri, os.PathLike) or (isinstance(uri, str) and not re.match(r"^[a-z]+:", uri)):
        path = os.fsdecode(os.fspath(uri))
        if path.endswith((".db", ".sqlite", ".sqlite3")):
            return "sqlite:" + path
        return "filestream:" + path
    if not isinstance(uri, str):
        raise TypeError("uri must be a str or os.PathLike, not %s" % type(uri).__name__)
    return uri


def _option_list(options, what="options"):
    """options as a list: a str is split as a shell splits it ("-arch=sm_90 -G")."""
    if isinstance(options, str):
        return shlex.split(options)
    if isinstance(options, (bytes, bytearray)):
        raise TypeError("%s must be a str or a sequence of str, not bytes" % what)
    return list(options)


def _cstr(s, what):
    """s (str, UTF-8, or bytes) as the C string the library reads: a NUL would end it early and
    the rest be dropped without a word, and bytes(5) would be five NULs, so both are refused."""
    if isinstance(s, str):
        b = s.encode("utf-8")
    elif isinstance(s, (bytes, bytearray)):
        b = bytes(s)
    else:
        raise TypeError("%s must be str, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise ValueError("%s: embedded null character in %r" % (what, s))
    return b


def _strings(items, what, allow_nul=False):
    encoded = [bytes(s) if allow_nul and isinstance(s, (bytes, bytearray)) else _cstr(s, what)
               for s in items]
    return (ctypes.c_char_p * max(len(encoded), 1))(*encoded), len(encoded)


def _default_target(code_type, target):
    return target if target is not None else ("ptx" if code_type == "nvvm" else "cubin")


def _program(source, name, options, target, code_type, name_expressions, headers, extra_digest):
    src = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    keep = []
    prog = _Program()
    # The 0.4 size unless a 0.5 field is used, so that a 0.4 library still takes the rest.
    prog.struct_size = ctypes.sizeof(_Program) if code_type == "nvvm" else _Program.header_sizes.offset
    target = _default_target(code_type, target)
    if code_type not in _CODE_TYPES:
        raise ValueError("code_type must be one of %s, not %r" % (sorted(_CODE_TYPES), code_type))
    if target not in _TARGETS:
        raise ValueError("target must be one of %s, not %r" % (sorted(_TARGETS), target))
    prog.code_type = _CODE_TYPES[code_type]
    prog.target = _TARGETS[target]
    prog.name = _cstr(os.fsencode(os.fspath(name)) if isinstance(name, os.PathLike) else name,
                      "name")
    prog.source = src
    prog.source_size = len(src)
    arr, n = _strings(_option_list(options), "options")
    keep.append(arr)
    prog.options, prog.num_options = ctypes.cast(arr, _StrArray), n
    # A dict, or (name, content) pairs: NVVM modules are linked in the order given.
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or ())
    names, n = _strings((name for name, _ in pairs), "header names")
    # NVVM modules may be bitcode, which holds NULs (their sizes are passed); a C++ header is a C
    # string.
    texts, _ = _strings((text for _, text in pairs), "headers", allow_nul=code_type == "nvvm")
    keep += [names, texts]
    prog.header_names, prog.header_sources, prog.num_headers = (
        ctypes.cast(names, _StrArray), ctypes.cast(texts, _StrArray), n)
    if code_type == "nvvm":  # modules may be bitcode, which holds NULs
        sizes = (ctypes.c_size_t * max(n, 1))(*[
            len(t.encode("utf-8") if isinstance(t, str) else bytes(t)) for _, t in pairs])
        keep.append(sizes)
        prog.header_sizes = ctypes.cast(sizes, ctypes.POINTER(ctypes.c_size_t))
    if isinstance(name_expressions, str):  # one expression, not its characters
        name_expressions = [name_expressions]
    exprs, n = _strings(name_expressions, "name_expressions")
    keep.append(exprs)
    prog.name_expressions, prog.num_name_expressions = ctypes.cast(exprs, _StrArray), n
    if extra_digest is not None:
        digest = ctypes.create_string_buffer(bytes(extra_digest), len(extra_digest))
        keep.append(digest)
        prog.extra_digest, prog.extra_digest_size = ctypes.cast(digest, ctypes.c_void_p), len(extra_digest)
    return prog, (src, keep)


def _compiled_or_raise(status, handle):
    if status == -9:  # keep the log, free the result
        result = Compiled(handle)
        result.close()
        err = CompileError(_lib.pcache_last_error().decode("utf-8", "replace"), status)
        err.log = result.log
        raise err
    _check(status)
    return Compiled(handle)


def _compile(cache_handle, source, name, options, target, name_expressions, headers, extra_digest,
             code_type="c++"):
    target = _default_target(code_type, target)
    if isinstance(name_expressions, str):
        name_expressions = [name_expressions]
    prog, _keep = _program(source, name, options, target, code_type, name_expressions, headers,
                           extra_digest)
    handle = _handle()
    status = _lib.pcache_compile(cache_handle, ctypes.byref(prog), ctypes.byref(handle))
    result = _compiled_or_raise(status, handle)
    result.target = target
    result.symbol_mapping = {}
    for expression in name_expressions:
        lowered = result.lowered_name(expression)
        if lowered is not None:
            result.symbol_mapping[expression] = lowered
    return result


_INPUT_KINDS = {"cubin": 0, "ptx": 1, "ltoir": 2, "fatbin": 3, "object": 4, "library": 5}


def _link(cache_handle, inputs, options, target):
    """inputs: (kind, data) or (kind, name, data) tuples, kind one of _INPUT_KINDS."""
    if target not in ("cubin", "ptx"):
        raise ValueError("a link makes a 'cubin' or 'ptx', not %r" % (target,))
    items = list(inputs)
    array = (_LinkInput * max(len(items), 1))()
    keep = []
    for i, item in enumerate(items):
        if len(item) == 2:
            (kind, data), name = item, None
        elif len(item) == 3:
            kind, name, data = item
        else:
            raise ValueError("a link input is (kind, data) or (kind, name, data), not %r" % (item,))
        if kind not in _INPUT_KINDS:
            raise ValueError("input kind must be one of %s, not %r" % (sorted(_INPUT_KINDS), kind))
        data = data.encode("utf-8") if isinstance(data, str) else _buffer_bytes(data)
        if data is None:
            raise TypeError("a link input's data is bytes-like or str, not %s" %
                            type(item[-1]).__name__)
        buf = ctypes.create_string_buffer(data, len(data))
        keep.append(buf)
        array[i].struct_size = ctypes.sizeof(_LinkInput)
        array[i].kind = _INPUT_KINDS[kind]
        array[i].name = _cstr(os.fsencode(name), "a link input's name") if name is not None else None
        array[i].data = ctypes.cast(buf, ctypes.c_void_p)
        array[i].size = len(data)
    job = _LinkJob()
    _check(_lib.pcache_link_job_init(ctypes.byref(job), ctypes.sizeof(job)))
    job.target = _TARGETS[target]
    opts, n = _strings(_option_list(options), "options")
    job.options, job.num_options = ctypes.cast(opts, _StrArray), n
    job.inputs, job.num_inputs = array, len(items)
    handle = _handle()
    status = _lib.pcache_link(cache_handle, ctypes.byref(job), ctypes.byref(handle))
    result = _compiled_or_raise(status, handle)
    result.target = target
    result.symbol_mapping = {}
    return result


def compile_uncached(source, *, name="default_program", options=(), target=None,
                     name_expressions=(), headers=None, extra_digest=None, code_type="c++"):
    """Compiles without any cache (pcache_compile with a NULL handle, as with
    PCACHE_DISABLE=1) and returns a Compiled. Raises CompileError like Cache.compile."""
    return _compile(None, source, name, options, target, name_expressions, headers, extra_digest,
                    code_type)


def link_uncached(inputs, *, options=(), target="cubin"):
    """Links with nvJitLink without any cache (pcache_link with a NULL handle)."""
    return _link(None, inputs, options, target)


def make_key(source, *, name="default_program", options=(), target="cubin", code_type="c++",
             name_expressions=(), headers=None, extra_digest=None, nvrtc_version=0):
    """The 32-byte key of a program description (pcache_make_key)."""
    prog, _keep = _program(source, name, options, target, code_type, name_expressions, headers, extra_digest)
    prog.nvrtc_version = nvrtc_version
    out = ctypes.create_string_buffer(KEY_SIZE)
    _check(_lib.pcache_make_key(ctypes.byref(prog), out))
    return out.raw


class Compiled:
    """The result of Cache.compile(): ``data`` (bytes), ``from_cache``, ``log``, ``key``,
    ``nvrtc_version``, ``compile_us``, ``elapsed_us``, ``target``, ``lowered_name(expression)``
    and ``symbol_mapping`` (name expression -> lowered name, kept on a cache hit too)."""

    target = "cubin"
    symbol_mapping = {}

    def __init__(self, handle):
        self._handle = handle
        size = ctypes.c_size_t()
        ptr = _lib.pcache_compiled_data(handle, ctypes.byref(size))
        self.data = ctypes.string_at(ptr, size.value) if size.value else b""
        self.from_cache = bool(_lib.pcache_compiled_from_cache(handle))
        self.log = _lib.pcache_compiled_log(handle).decode("utf-8", "replace")
        self.key = ctypes.string_at(_lib.pcache_compiled_key(handle), KEY_SIZE)
        self.nvrtc_version = _lib.pcache_compiled_nvrtc_version(handle)
        self.compile_us = _lib.pcache_compiled_compile_us(handle)
        self.elapsed_us = _lib.pcache_compiled_elapsed_us(handle)

    def lowered_name(self, expression):
        """The mangled symbol of a name expression given at compile time, or None."""
        if self._handle is None:
            raise ValueError("result is closed")
        name = _lib.pcache_compiled_lowered_name(self._handle, expression.encode("utf-8"))
        return name.decode() if name is not None else None

    def to_object_code(self):
        """This binary as a cuda.core ObjectCode with its symbol_mapping filled, so that
        get_kernel(name_expression) works on a cache hit (cuda.core's own caches lose it).
        Needs cuda.core (see progcache.cuda_core)."""
        from progcache.cuda_core import object_code

        return object_code(self)

    def __repr__(self):
        return "<progcache.Compiled %s, %d bytes, %s>" % (
            self.target, len(self.data), "from the cache" if self.from_cache else "compiled")

    def close(self):
        if self._handle is not None:
            _lib.pcache_compiled_free(self._handle)
            self._handle = None

    def __del__(self):
        self.close()


class Cache:
    """A progcache cache: a bytes-in, bytes-out mapping with LRU eviction.

    ``uri``: None for the default cache, or "memory:", "sqlite:PATH", "filestream:DIR"; a path
    (str without a scheme, or os.PathLike) is a SQLite database when it ends in .db, .sqlite or
    .sqlite3, else a file-stream directory.
    ``max_size_bytes``: cap on the sum of stored value sizes; 0 (the default) takes the configured
    cap: $PCACHE_MAX_SIZE, the cap stored in the cache, the config files, 5 GiB for the default
    cache (docs/admin.md); None: no cap.
    """

    def __init__(self, uri=None, max_size_bytes=0):
        if max_size_bytes is not None and (
                not isinstance(max_size_bytes, int) or isinstance(max_size_bytes, bool)):
            raise TypeError("max_size_bytes must be an int or None")
        if max_size_bytes is not None and max_size_bytes < 0:
            raise ValueError("max_size_bytes must be >= 0")
        uri = _as_uri(uri)
        # For repr: the URI without its user and password.
        self._uri = re.sub(r"//[^/@]*@", "//***@", uri) if uri else "the default cache"
        options = _Options()
        _check(_lib.pcache_options_init(ctypes.byref(options), ctypes.sizeof(_Options)))
        if max_size_bytes is None:
            options.max_size_bytes = 0  # explicitly none
        elif max_size_bytes:
            options.max_size_bytes = max_size_bytes
        handle = _handle()
        _check(_lib.pcache_open(uri.encode("utf-8") if uri else None, ctypes.byref(options),
                                ctypes.byref(handle)))
        self._handle = handle

    def _h(self):
        if self._handle is None:
            raise ValueError("cache is closed")
        return self._handle

    def __setitem__(self, key, value):
        k, v = _key(key), _value(value)
        buf = ctypes.create_string_buffer(v, len(v)) if v else None
        _check(_lib.pcache_put(self._h(), k, len(k), ctypes.cast(buf, ctypes.c_void_p) if buf else None, len(v)))

    def __getitem__(self, key):
        k = _key(key)
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        if _check(_lib.pcache_get(self._h(), k, len(k), ctypes.byref(data), ctypes.byref(size))) == _NOT_FOUND:
            raise KeyError(key)
        try:
            return ctypes.string_at(data, size.value) if size.value else b""
        finally:
            _lib.pcache_free(data)

    def __delitem__(self, key):
        k = _key(key)
        if _check(_lib.pcache_delete(self._h(), k, len(k))) == _NOT_FOUND:
            raise KeyError(key)

    def __contains__(self, key):
        raise TypeError("progcache.Cache has no 'in': another process can change the cache between "
                        "the test and the read; use cache.get(key) instead")

    def get(self, key, default=None):
        """self[key], or default on a miss."""
        try:
            return self[key]
        except KeyError:
            return default

    def update(self, items):
        """Stores every (key, value) of a mapping or an iterable of pairs; not transactional."""
        pairs = items.items() if hasattr(items, "items") else items
        for key, value in pairs:
            self[key] = value

    def __len__(self):
        n = ctypes.c_uint64()
        _check(_lib.pcache_count(self._h(), ctypes.byref(n)))
        return n.value

    @property
    def size_bytes(self):
        """Sum of the stored value sizes."""
        n = ctypes.c_uint64()
        _check(_lib.pcache_size(self._h(), ctypes.byref(n)))
        return n.value

    def stats(self):
        """This handle's counters as a dict (hits, misses, puts, deletes, evictions, ...)."""
        s = _Stats()
        s.struct_size = ctypes.sizeof(_Stats)
        _check(_lib.pcache_get_stats(self._h(), ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _Stats._fields_[2:]}

    def shared_stats(self):
        """The counters every process using this cache's storage shares, as a dict (hits,
        misses, evictions, compile_us_saved, corrupt, uncacheable, tier_errors, tier_timeouts,
        healed; 0 from a library before 0.5): what
        `progcache stats` shows. A tiered cache has none of its own (ProgcacheError)."""
        s = _SharedStats()
        s.struct_size = ctypes.sizeof(_SharedStats)
        _check(_lib.pcache_get_shared_stats(self._h(), ctypes.byref(s)))
        return {name: getattr(s, name) for name, _ in _SharedStats._fields_[2:]}

    def tier_stats(self):
        """One counters dict per tier of a "tiered:" cache, fastest tier first (one for others)."""
        out = []
        while True:
            s = _Stats()
            s.struct_size = ctypes.sizeof(_Stats)
            status = _lib.pcache_get_tier_stats(self._h(), len(out), ctypes.byref(s))
            if status == _NOT_FOUND:  # past the last tier
                return out
            _check(status)
            out.append({name: getattr(s, name) for name, _ in _Stats._fields_[2:]})

    def clear(self):
        _check(_lib.pcache_clear(self._h()))

    def compile(self, source, *, name="default_program", options=(), target=None,
                name_expressions=(), headers=None, extra_digest=None, code_type="c++"):
        """Compiles through the cache (pcache_compile) and returns a Compiled: CUDA C++ with NVRTC
        (code_type "c++"), PTX to a cubin with nvJitLink ("ptx"), or NVVM IR (text or bytes of
        bitcode) to PTX or LTO-IR with libNVVM ("nvvm"; headers are then the extra modules, in
        order, and the option "-use-libdevice" links libdevice). target defaults to "cubin", or
        "ptx" for NVVM IR. Raises CompileError (with .log) when the library rejects it."""
        return _compile(self._h(), source, name, options, target, name_expressions, headers,
                        extra_digest, code_type)

    def link(self, inputs, *, options=(), target="cubin"):
        """Links with nvJitLink through the cache (pcache_link) and returns a Compiled. inputs are
        (kind, data) or (kind, name, data), kind one of "cubin", "ptx", "ltoir", "fatbin",
        "object", "library"; options are nvJitLink's ("-arch=sm_90", "-lto"...). Raises
        CompileError (with .log) when nvJitLink refuses the link."""
        return _link(self._h(), inputs, options, target)

    def close(self):
        """Releases the handle; stored entries of persistent caches stay."""
        if getattr(self, "_handle", None) is not None:
            _lib.pcache_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if getattr(self, "_handle", None) is None else "open"
        return "<progcache.Cache %s, %s>" % (self._uri, state)

    def __del__(self):
        self.close()
