"""progcache.cuda_core against cuda.core from PyPI (what runs without a GPU driver: the cache
protocol, Program.compile(cache=...) with NVRTC, ObjectCode conversion). Skipped when cuda.core
cannot be imported; scripts/test installs it into build-deps/cuda-core and names that directory
in $PCACHE_TEST_CUDA_CORE."""

import os
import sys
import tempfile
import unittest

if os.environ.get("PCACHE_TEST_CUDA_CORE"):
    sys.path.insert(0, os.environ["PCACHE_TEST_CUDA_CORE"])

REASON = ""
try:
    from cuda.core import ObjectCode, Program, ProgramOptions
    from cuda.core.utils import ProgramCacheResource
    import progcache.cuda_core as pcc
except ImportError as exc:  # cuda.core is optional
    pcc = None
    REASON = "cuda.core is not importable: %s" % exc

import progcache

KERNEL = "template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }\n"
PLAIN = 'extern "C" __global__ void fill(int *x) { x[threadIdx.x] = 7; }\n'


@unittest.skipIf(pcc is None, REASON)
class CudaCoreTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.uri = "sqlite:" + os.path.join(self.dir.name, "c.db")

    def tearDown(self):
        self.dir.cleanup()

    def test_is_a_program_cache_resource_that_program_compile_takes(self):
        with pcc.ProgramCache(self.uri) as cache:
            self.assertIsInstance(cache, ProgramCacheResource)
            first = Program(PLAIN, "c++", options=ProgramOptions(arch="sm_90")).compile(
                "cubin", cache=cache)
            self.assertEqual(len(cache), 1, "the miss stored one entry under cuda.core's key")
            second = Program(PLAIN, "c++", options=ProgramOptions(arch="sm_90")).compile(
                "cubin", cache=cache)
            self.assertEqual(bytes(first.code), bytes(second.code))
            self.assertEqual(cache.cache.stats()["hits"], 1)
        with pcc.ProgramCache(self.uri) as again:  # persistent: another handle hits
            self.assertEqual(len(again), 1)

    def test_values_are_bytes_or_object_code_and_keys_bytes_or_str(self):
        with pcc.ProgramCache("memory:") as cache:
            cache[b"a"] = b"1"
            cache["b"] = bytearray(b"2")
            cache[b"c"] = memoryview(b"3")
            cache[b"d"] = ObjectCode.from_cubin(b"\x7fELF-bytes")
            path = os.path.join(self.dir.name, "k.cubin")
            with open(path, "wb") as f:
                f.write(b"from a file")
            cache[b"e"] = ObjectCode.from_cubin(path)
            os.remove(path)  # the entry holds the bytes, not the path
            self.assertEqual([cache[k] for k in (b"a", "b", b"c", b"d", b"e")],
                             [b"1", b"2", b"3", b"\x7fELF-bytes", b"from a file"])
            self.assertEqual(cache["a"], cache[b"a"], "str keys are UTF-8")
            with self.assertRaises(FileNotFoundError):
                cache[b"f"] = ObjectCode.from_cubin(path)
            with self.assertRaises(TypeError):
                cache[b"g"] = 42
            with self.assertRaises(TypeError):
                cache[3] = b"x"
            with self.assertRaises(KeyError):
                cache[b"absent"]
            self.assertIsNone(cache.get(b"absent"))
            cache.update({b"u": b"v"})
            del cache[b"u"]
            self.assertEqual(len(cache), 5)
            cache.clear()
            self.assertEqual(len(cache), 0)
        with self.assertRaises(ValueError):
            pcc.ProgramCache("memory:", max_size_bytes=-1)

    def test_a_hit_keeps_the_symbol_mapping_cuda_core_caches_lose(self):
        with progcache.Cache(self.uri) as cache:
            for expect_hit in (False, True):
                r = cache.compile(KERNEL, name="scale.cu", options=["-arch=sm_90"],
                                  name_expressions=["scale<float>"])
                self.assertEqual(r.from_cache, expect_hit)
                obj = r.to_object_code()
                self.assertIsInstance(obj, ObjectCode)
                # bytes, as cuda.core's own Program gives them
                self.assertEqual(obj.symbol_mapping,
                                 {"scale<float>": r.lowered_name("scale<float>").encode()})
                self.assertEqual(bytes(obj.code), r.data)
            ptx = cache.compile(KERNEL, name="scale.cu", options=["-arch=compute_90"],
                                target="ptx", name_expressions=["scale<float>"])
            self.assertEqual(ptx.to_object_code().code_type, "ptx")

    def test_behaves_like_cuda_cores_own_caches_where_a_caller_can_tell(self):
        from cuda.core.utils import InMemoryProgramCache
        import pathlib
        # The same operations on cuda.core's in-memory cache and on ours: the same outcomes. (An
        # entry over the cap also empties cuda.core's cache of every other entry on its way out;
        # ours keeps them: no caller can rely on losing them.)
        def run(cache):
            seen = []
            cache[b"big"] = b"y" * 100          # over the cap of 50: not kept, no error
            seen.append(cache.get(b"big"))
            cache[b"small"] = b"x" * 10
            seen.append(cache.get(b"small"))
            try:
                cache["absent key"]
            except KeyError as e:
                seen.append(e.args[0])          # the key as the caller passed it: a str
            return seen
        ours = run(pcc.ProgramCache("memory:", max_size_bytes=50))
        theirs = run(InMemoryProgramCache(max_size_bytes=50))
        self.assertEqual(ours, theirs)
        self.assertEqual(ours, [None, b"x" * 10, "absent key"])
        for bad in (0, -1):
            with self.assertRaises(ValueError):
                pcc.ProgramCache("memory:", max_size_bytes=bad)
            with self.assertRaises(ValueError):
                InMemoryProgramCache(max_size_bytes=bad)
        with pcc.ProgramCache("memory:") as unbounded:  # None: no cap at all
            unbounded[b"k"] = b"z" * (1 << 20)
            self.assertEqual(len(unbounded[b"k"]), 1 << 20)
        for path, scheme in ((pathlib.Path(self.dir.name) / "p.db", "sqlite"),
                             (pathlib.Path(self.dir.name) / "fs", "filestream")):
            with pcc.ProgramCache(path) as cache:
                cache[b"k"] = b"v"
                self.assertIn(scheme, repr(cache))
            self.assertTrue(path.exists())
        with progcache.Cache("memory:") as plain:
            with self.assertRaises(KeyError) as ctx:
                plain["a str key"]
            self.assertEqual(ctx.exception.args[0], "a str key")


if __name__ == "__main__":
    unittest.main()
