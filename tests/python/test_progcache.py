"""Tests of the progcache package (bindings/python/progcache) against the built library
(PROGCACHE_LIBRARY)."""

import array
import errno
import os
import tempfile
import unittest
import warnings

import progcache

KERNEL = """
template <typename T> __global__ void scale(T *x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
"""


class PackageTest(unittest.TestCase):
    def test_the_type_stub_declares_what_the_module_exports(self):
        import ast
        stub = os.path.join(os.path.dirname(progcache.__file__), "__init__.pyi")
        tree = ast.parse(open(stub).read())
        declared = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        declared |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
        missing = [name for name in progcache.__all__ if name not in declared]
        self.assertEqual(missing, [], "in __all__ but not in __init__.pyi")

    def test_version_is_the_librarys(self):
        self.assertEqual(progcache.__version__, progcache.version())

    def test_every_error_status_has_its_class(self):
        # pcache_status_string names every status from -1 to -13; each maps to a subclass.
        for status in range(-13, 0):
            cls = progcache._ERRORS.get(status)
            self.assertIsNotNone(cls, "no exception class for status %d" % status)
            self.assertTrue(issubclass(cls, progcache.ProgcacheError))
            self.assertEqual(cls.status, status)
        self.assertTrue(issubclass(progcache.NoMemoryError, MemoryError))

    def test_bad_arguments_are_value_errors_and_repr_hides_passwords(self):
        with self.assertRaises(ValueError):
            progcache.Cache("memory:", max_size_bytes=-1)
        with self.assertRaises(TypeError):
            progcache.Cache("memory:", max_size_bytes="4G")
        with progcache.Cache("memory:") as c:
            with self.assertRaises(ValueError):
                c.compile(KERNEL, target="sass")
            self.assertEqual(repr(c), "<progcache.Cache memory:, open>")
        self.assertEqual(repr(c), "<progcache.Cache memory:, closed>")
        # A tier is not contacted at open, so this opens without a server.
        with progcache.Cache("tiered:memory:|redis://:hunter2@127.0.0.1:1/0?timeout_ms=50") as t:
            self.assertNotIn("hunter2", repr(t))
            self.assertIn("redis://***@127.0.0.1:1/0", repr(t))


class MappingTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.cache = progcache.Cache("sqlite:" + os.path.join(self.dir.name, "c.db"))

    def tearDown(self):
        self.cache.close()
        self.dir.cleanup()

    def test_bytes_in_bytes_out(self):
        self.cache[b"k"] = b"value"
        self.assertEqual(self.cache[b"k"], b"value")
        self.cache[b"k2"] = bytearray(b"ba")
        self.cache[b"k3"] = memoryview(b"mv")
        self.assertEqual(self.cache[b"k2"], b"ba")
        self.assertIsInstance(self.cache[b"k3"], bytes)
        self.cache[b"empty"] = b""
        self.assertEqual(self.cache[b"empty"], b"")
        # Any object with the buffer protocol is bytes-like (array.array was refused, its error
        # saying values must be bytes-like); a str value is not.
        self.cache[b"arr"] = array.array("i", [1, 2, 3])
        self.assertEqual(self.cache[b"arr"], array.array("i", [1, 2, 3]).tobytes())
        self.cache[array.array("B", b"buffer-key")] = b"x"
        self.assertEqual(self.cache[b"buffer-key"], b"x")
        with self.assertRaises(TypeError):
            self.cache[b"k"] = "a str is not bytes"

    def test_str_keys_are_utf8(self):
        self.cache["k\u00e9"] = b"x"
        self.assertEqual(self.cache["k\u00e9".encode("utf-8")], b"x")
        self.cache["k"] = b"1"
        self.assertEqual(self.cache[b"k"], b"1")

    def test_miss_raises_key_error_and_get_defaults(self):
        with self.assertRaises(KeyError):
            self.cache[b"absent"]
        self.assertIsNone(self.cache.get(b"absent"))
        self.assertEqual(self.cache.get(b"absent", b"d"), b"d")

    def test_delete_len_clear_update(self):
        self.cache.update({b"a": b"1", "b": b"22"})
        self.cache.update([(b"c", b"333")])
        self.assertEqual(len(self.cache), 3)
        self.assertEqual(self.cache.size_bytes, 6)
        del self.cache[b"a"]
        with self.assertRaises(KeyError):
            del self.cache[b"a"]
        self.assertEqual(len(self.cache), 2)
        self.cache.clear()
        self.assertEqual(len(self.cache), 0)

    def test_no_contains(self):
        self.cache[b"k"] = b"v"
        with self.assertRaises(TypeError):
            b"k" in self.cache

    def test_errors_are_typed(self):
        with self.assertRaises(progcache.InvalidArgumentError):
            self.cache[b""] = b"v"
        with self.assertRaises(TypeError):
            self.cache[12] = b"v"
        with self.assertRaises(TypeError):
            self.cache[b"k"] = "not bytes"
        with self.assertRaises(progcache.InvalidArgumentError) as ctx:
            progcache.Cache("nosuch:")
        self.assertIn("memory:", str(ctx.exception))
        self.assertEqual(ctx.exception.status, -1)
        self.assertIsNone(ctx.exception.cause)

    def test_an_os_error_carries_its_errno_and_cause(self):
        with tempfile.TemporaryDirectory() as d:
            blocker = os.path.join(d, "file")
            with open(blocker, "w") as f:
                f.write("a file where the cache's parent directory belongs")
            with self.assertRaises(progcache.CacheIOError) as ctx:
                progcache.Cache("filestream:" + os.path.join(blocker, "sub"))
            self.assertEqual(ctx.exception.os_errno, errno.ENOTDIR, str(ctx.exception))
            self.assertEqual(ctx.exception.errno, errno.ENOTDIR)
            self.assertIsNone(ctx.exception.cause)  # nothing a caller acts on beyond the errno

    def test_cap_and_too_large(self):
        with progcache.Cache("memory:", max_size_bytes=10) as small:
            small[b"a"] = b"12345"
            small[b"b"] = b"12345"
            small[b"c"] = b"12345"
            self.assertIsNone(small.get(b"a"))
            with self.assertRaises(progcache.TooLargeError):
                small[b"big"] = b"x" * 11
            self.assertEqual(small.stats()["evictions"], 1)

    def test_context_manager_closes(self):
        with progcache.Cache("memory:") as c:
            c[b"k"] = b"v"
        with self.assertRaises(ValueError):
            c[b"k"]

    def test_persists_across_handles(self):
        self.cache[b"p"] = b"persisted"
        self.cache.close()
        with progcache.Cache("sqlite:" + os.path.join(self.dir.name, "c.db")) as again:
            self.assertEqual(again[b"p"], b"persisted")
        self.cache = progcache.Cache("memory:")


class WarningTest(unittest.TestCase):
    """What the library says about a call that succeeded reaches Python as a ProgcacheWarning
    (before, it was never shown: a damaged entry removed, a guessable secret)."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def test_plain_calls_warn_of_nothing(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with progcache.Cache(os.path.join(self.dir.name, "c.db")) as c:
                c[b"k"] = b"v"
                self.assertEqual(c[b"k"], b"v")
                self.assertIsNone(c.get(b"absent"))
                self.assertEqual(len(c), 1)

    def test_a_removed_damaged_entry_is_a_warning_and_a_miss(self):
        root = os.path.join(self.dir.name, "fs")
        with progcache.Cache("filestream:" + root) as c:
            c[b"k"] = b"a value long enough to damage"
            entries = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files
                       if len(f) >= 32 and all(ch in "0123456789abcdef" for ch in f)]
            self.assertEqual(len(entries), 1, entries)
            with open(entries[0], "r+b") as f:
                f.seek(-3, os.SEEK_END)
                byte = f.read(1)
                f.seek(-3, os.SEEK_END)
                f.write(bytes([byte[0] ^ 0x20]))
            with self.assertWarnsRegex(progcache.ProgcacheWarning, "removed a damaged cache entry"):
                self.assertIsNone(c.get(b"k"))

    def test_a_guessable_secret_is_a_warning(self):
        secret = os.path.join(self.dir.name, "secret")
        with open(secret, "wb") as f:
            f.write(b"short\n")
        os.chmod(secret, 0o600)
        os.environ["PCACHE_SECRET_FILE"] = secret
        try:
            with self.assertWarnsRegex(progcache.ProgcacheWarning, "is 5 bytes: a secret shorter"):
                c = progcache.Cache(os.path.join(self.dir.name, "c.db"))
        finally:
            del os.environ["PCACHE_SECRET_FILE"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            c[b"k"] = b"signed"  # the warning is the open's, not every call's
            self.assertEqual(c[b"k"], b"signed")
        c.close()


class TieredTest(unittest.TestCase):
    def test_tier_stats_count_each_tier(self):
        with tempfile.TemporaryDirectory() as d:
            db = "sqlite:" + os.path.join(d, "c.db")
            with progcache.Cache(db) as lower:
                lower[b"k"] = b"from the lower tier"
            with progcache.Cache("tiered:memory:|" + db) as c:
                self.assertEqual(c[b"k"], b"from the lower tier")
                self.assertEqual(c[b"k"], b"from the lower tier")
                tiers = c.tier_stats()
                self.assertEqual(len(tiers), 2)
                self.assertEqual((tiers[0]["misses"], tiers[0]["hits"], tiers[0]["puts"]), (1, 1, 1))
                self.assertEqual((tiers[1]["misses"], tiers[1]["hits"]), (0, 1))
                self.assertEqual(c.stats()["hits"], 2)
            with progcache.Cache("memory:") as plain:
                self.assertEqual(len(plain.tier_stats()), 1)

    def test_shared_stats_add_up_across_handles(self):
        with tempfile.TemporaryDirectory() as d:
            db = "sqlite:" + os.path.join(d, "s.db")
            for _ in range(2):
                with progcache.Cache(db) as c:
                    c[b"k"] = b"v"
                    self.assertEqual(c[b"k"], b"v")
                    self.assertIsNone(c.get(b"absent"))
            with progcache.Cache(db) as c:
                shared = c.shared_stats()
                self.assertEqual((shared["hits"], shared["misses"]), (2, 2))
                self.assertEqual(c.stats()["hits"], 0, "this handle's own counters start at 0")
            with progcache.Cache("tiered:memory:|" + db) as t:
                with self.assertRaises(progcache.ProgcacheError):
                    t.shared_stats()


class CompileTest(unittest.TestCase):
    def test_compile_miss_then_hit_with_lowered_names(self):
        with tempfile.TemporaryDirectory() as d, progcache.Cache("filestream:" + d) as cache:
            first = cache.compile(KERNEL, name="scale.cu", options=["-arch=sm_90"],
                                  name_expressions=["scale<float>"])
            self.assertFalse(first.from_cache)
            self.assertEqual(first.data[:4], b"\x7fELF")
            second = cache.compile(KERNEL, name="scale.cu", options=["-arch", "sm_90"],
                                   name_expressions=["scale<float>"])
            self.assertTrue(second.from_cache)
            self.assertEqual(second.data, first.data)
            self.assertEqual(second.lowered_name("scale<float>"), "_Z5scaleIfEvPT_S0_i")
            self.assertIsNone(second.lowered_name("other"))
            self.assertEqual(cache[first.key], first.data)
            # pcache_make_key knows no NVRTC build: its keys are not compile keys.
            key = progcache.make_key(KERNEL, name="scale.cu", options=["-arch=sm_90"],
                                     name_expressions=["scale<float>"],
                                     nvrtc_version=first.nvrtc_version)
            self.assertEqual(len(key), 32)
            self.assertNotEqual(key, first.key)

    def test_compile_error_carries_the_log(self):
        with progcache.Cache("memory:") as cache:
            with self.assertRaises(progcache.CompileError) as ctx:
                cache.compile("__global__ void k() { nope(); }")
            self.assertIn("nope", ctx.exception.log)
            # NVRTC refuses it the same way every time: the refusal is stored, and the warm
            # compile raises the same error with the same log.
            self.assertEqual(len(cache), 1)
            with self.assertRaises(progcache.CompileError) as warm:
                cache.compile("__global__ void k() { nope(); }")
            self.assertEqual(warm.exception.log, ctx.exception.log)
            self.assertEqual(len(cache), 1)


NVVM_IR = "\n".join([
    'target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-'
    'f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"',
    'target triple = "nvptx64-nvidia-cuda"',
    "define void @k(float* %a) {", "  store float 1.0, float* %a", "  ret void", "}",
    "!nvvm.annotations = !{!0}", '!0 = !{void (float*)* @k, !"kernel", i32 1}',
    "!nvvmir.version = !{!1}", "!1 = !{i32 2, i32 0}", ""])


class ArgumentsTest(unittest.TestCase):
    def test_options_as_one_string_are_split_as_a_shell_splits_them(self):
        with progcache.Cache("memory:") as cache:
            a = cache.compile(KERNEL, options="-arch=sm_90 --std=c++17", name_expressions="scale<float>")
            b = cache.compile(KERNEL, options=["-arch=sm_90", "--std=c++17"],
                              name_expressions=["scale<float>"])
            self.assertTrue(b.from_cache, "one program however its options are given")
            self.assertEqual(a.symbol_mapping, {"scale<float>": "_Z5scaleIfEvPT_S0_i"})
            with self.assertRaises(TypeError):
                cache.compile(KERNEL, options=b"-arch=sm_90")

    def test_strings_the_library_cannot_take_whole_are_refused(self):
        # A C string ends at its first NUL, so the rest would be dropped without a word (an
        # option lost); a non-string option was five NULs (bytes(5)): the empty option.
        with progcache.Cache("memory:") as cache:
            for bad in (dict(options=["-arch=sm_90", 5]),):
                with self.assertRaises(TypeError):
                    cache.compile(KERNEL, **bad)
            for bad in (dict(options=["-arch=sm_90\0-G"]), dict(name="k\0.cu"),
                        dict(name_expressions=["scale<float>\0"]),
                        dict(headers={"h.h": "int x;\0int y;"})):
                with self.assertRaises(ValueError, msg=repr(bad)):
                    cache.compile(KERNEL, **dict(dict(options=["-arch=sm_90"]), **bad))
            # The source too (the library refuses it: NVRTC would compile the bytes before it).
            with self.assertRaisesRegex(progcache.InvalidArgumentError, "holds a NUL"):
                cache.compile(KERNEL + "\0int junk;", options=["-arch=sm_90"])
            self.assertEqual(len(cache), 0, "nothing was compiled or stored")
            with self.assertRaises(TypeError):
                progcache.link_uncached([("ptx", 5)])

    def test_paths_may_be_path_like(self):
        import pathlib
        with tempfile.TemporaryDirectory() as d:
            with progcache.Cache(pathlib.Path(d) / "c.db") as cache:
                cache[b"k"] = b"v"
                r = cache.compile(KERNEL, name=pathlib.Path(d) / "k.cu", options=["-arch=sm_90"])
                self.assertEqual(r.data[:4], b"\x7fELF")
            self.assertTrue(os.path.exists(os.path.join(d, "c.db")))
            with progcache.Cache(pathlib.Path(d) / "fs") as cache:
                cache[b"k"] = b"v"
            self.assertTrue(os.path.isdir(os.path.join(d, "fs")))


class JitTest(unittest.TestCase):
    """PTX (nvJitLink), NVVM IR (libNVVM) and links, as cuda.core's Program and Linker take them."""

    def test_ptx_nvvm_and_a_link_miss_then_hit_and_equal_uncached(self):
        with progcache.Cache("memory:") as cache:
            ptx = cache.compile(KERNEL, options=["-arch=sm_90", "-rdc=true"],
                                name_expressions=["scale<float>"], target="ptx").data
            for _ in range(2):
                cubin = cache.compile(ptx, name="k.ptx", code_type="ptx", options=["-arch=sm_90"])
            self.assertTrue(cubin.from_cache)
            self.assertEqual(cubin.data[:4], b"\x7fELF")
            self.assertEqual(cubin.data, progcache.compile_uncached(
                ptx, name="k.ptx", code_type="ptx", options=["-arch=sm_90"]).data)
            for _ in range(2):
                out = cache.compile(NVVM_IR, name="k.ll", code_type="nvvm",
                                    options=["-arch=compute_90"])
            self.assertTrue(out.from_cache)
            self.assertEqual(out.target, "ptx")
            self.assertIn(b".entry k", out.data)
            ltoir = cache.compile(KERNEL, options=["-arch=sm_90", "-rdc=true"], target="ltoir").data
            for _ in range(2):
                linked = cache.link([("ltoir", "k.ltoir", ltoir)], options=["-arch=sm_90", "-lto"])
            self.assertTrue(linked.from_cache)
            self.assertEqual(linked.data, progcache.link_uncached(
                [("ltoir", "k.ltoir", ltoir)], options=["-arch=sm_90", "-lto"]).data)

    def test_a_refused_link_raises_with_nvjitlinks_log(self):
        with progcache.Cache("memory:") as cache:
            ltoir = cache.compile(KERNEL, options=["-arch=sm_90", "-rdc=true"], target="ltoir").data
            with self.assertRaises(progcache.CompileError) as ctx:
                cache.link([("ltoir", ltoir)], options=["-arch=sm_90"])  # LTO-IR needs -lto
            self.assertIn("nvJitLink", ctx.exception.log)
            with self.assertRaises(ValueError):
                cache.link([("nonsense", b"x")], options=["-arch=sm_90"])


class KeySpecTest(unittest.TestCase):
    """pcache_make_key's keys re-derived with hashlib from the encoding docs/keys.md gives
    ("Keys without a compile"): the documentation and the library cannot drift apart."""

    SCHEMA = b"progcache-program/5/blake2b-512/256"
    READS = b"progcache-key/5/reads/blake2b-512/256"

    @staticmethod
    def field(tag, value):
        import struct
        return bytes([tag]) + struct.pack("<Q", len(value)) + value

    @staticmethod
    def number(value):
        import struct
        return struct.pack("<Q", value)

    @staticmethod
    def digest(data):
        import hashlib
        return hashlib.blake2b(data, digest_size=64).digest()[:32]

    def program_digest(self, name, source, options, expressions, nvrtc_version, target=0):
        f, n = self.field, self.number
        fields = (f(1, name) + f(2, n(0)) + f(3, n(target)) + f(4, n(nvrtc_version)) + f(20, b"") +
                  f(6, n(len(options))) + b"".join(f(7, o) for o in options) + f(8, n(0)) +
                  f(11, n(len(expressions))) + b"".join(f(12, e) for e in expressions) +
                  f(14, n(0)))
        of_fields = self.digest(f(0, self.SCHEMA) + fields)
        return self.digest(f(0, self.SCHEMA) + f(21, of_fields) + source)

    def test_a_program_that_reads_no_file_is_keyed_by_its_program_digest(self):
        source = b'extern "C" __global__ void k(float *x) { x[0] = N; }\n'
        key = progcache.make_key(source.decode(), name="k.cu",
                                 options=["-DN=4", "-arch=sm_90", "--std=c++17"],
                                 name_expressions=["k"], nvrtc_version=13000)
        # The options as NVRTC reads them: one spelling, independent groups sorted.
        expected = self.program_digest(
            b"k.cu", source, [b"--gpu-architecture=sm_90", b"--std=c++17", b"--define-macro=N=4"],
            [b"k"], 13000)
        self.assertEqual(key.hex(), expected.hex())
        # Every size around the digest's 128-byte blocks, and two names in turn (the fields'
        # digests kept per thread must answer for the right fields).
        for size in (0, 1, 42, 43, 127, 128, 129, 1024, 70000):
            body = bytes((i * 131 + 7) % 251 + 1 for i in range(size)).replace(b"#", b"$")
            for name in (b"a.cu", b"b.cu"):
                key = progcache.make_key(body.decode("latin-1").encode("latin-1"),
                                         name=name.decode(), nvrtc_version=12000)
                self.assertEqual(key, self.program_digest(name, body, [], [], 12000),
                                 "%d bytes, %s" % (size, name))

    def test_a_program_that_reads_a_header_is_keyed_over_its_program_digest(self):
        with tempfile.TemporaryDirectory() as d:
            header = os.path.join(d, "inc.h")
            with open(header, "wb") as out:
                out.write(b"#define N 4\n")
            source = b'#include "inc.h"\n__global__ void k(int *x) { *x = N; }\n'
            options = ["-I" + d]
            key = progcache.make_key(source.decode(), name="k.cu", options=options)
            program = self.program_digest(b"k.cu", source,
                                          [b"--include-path=" + d.encode()], [], 0)
            # What the scan finds, in the order NVRTC looks (`progcache deps`): nothing beside
            # the program's name (a relative name: the working directory), then the header.
            f = self.field
            reads = (f(0x40, b"file inc.h\0") +
                     f(0x40, b"file " + header.encode() + b"\0" + self.digest(b"#define N 4\n")))
            expected = self.digest(f(0, self.READS) + f(22, program) + f(17, self.number(2)) +
                                   reads)
            self.assertEqual(key.hex(), expected.hex())


class VersionTest(unittest.TestCase):
    def test_version(self):
        self.assertRegex(progcache.version(), r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main()
