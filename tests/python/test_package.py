"""The kjit package on the CPU: loading the library, templates, compiles and their cache hits in
another process, every bad input that needs no GPU, and the launch path's argument checks and
packing (against a stand-in for the C launch)."""

import ctypes
import os
import struct
import subprocess
import sys
import textwrap

import pytest

import kjit
from kjit import _core, _native

SCALE = """
template <typename T, int N> __global__ void scale(T* x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
}
"""


def scale_template(name="py_scale"):
    return kjit.Template(name, SCALE, params={"T": ["float", "half", "bfloat16"],
                                              "N": kjit.integer(1, 1 << 20)},
                         arguments=["T*", "float"], kernel="scale")


def compile_or_skip(rt, tmpl, params, target):
    try:
        return rt.compile(tmpl, params, target)
    except (kjit.CompilerUnavailable, kjit.UnsupportedTarget) as error:
        pytest.skip(f"no compiler for {target}: {error.message}")


def test_the_library_is_the_abi_version_of_the_package():
    assert _native.lib().abi_version() == kjit.ABI_VERSION


def test_errors_have_one_subclass_per_status():
    assert issubclass(kjit.BadParameter, kjit.Error) and kjit.BadParameter.code == 2
    assert kjit.CompileError.code == 6 and kjit.NoDevice.code == 11
    assert kjit.BadArgument.code == 13 and kjit.ProcessError.code == 17


@pytest.mark.parametrize("target", ["gfx90a", "sm_90"])
def test_compile_returns_the_code_object(cache_dir, target):
    rt = kjit.Runtime()
    code = compile_or_skip(rt, scale_template(), {"T": "half", "N": 4096}, target)
    magic = b"\x7fELF" if target.startswith("gfx") else code.code[:4]
    assert code.code[:4] == magic and len(code.code) > 100
    assert len(code.key) == 64 and int(code.key, 16) >= 0
    assert code.origin == "compiled" and code.compile_ms > 0
    assert "4096" in code.expression and code.lowered_name
    assert code.target == target and str(cache_dir) in code.entry_path
    again = rt.compile(scale_template(), {"T": "half", "N": 4096}, target)
    assert again.key == code.key and again.code == code.code


def test_a_second_process_finds_the_entry_on_disk(cache_dir):
    program = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path[:2]!r}
        import kjit
        tmpl = kjit.Template("py_scale_hit", {SCALE!r}, params={{"T": ["half"],
                             "N": kjit.integer(1, 8192)}}, arguments=["T*", "float"],
                             kernel="scale")
        code = kjit.Runtime().compile(tmpl, {{"T": "half", "N": 128}}, "gfx90a")
        print(code.origin, code.key)
    """)
    first = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    if "CompilerUnavailable" in first.stderr:
        pytest.skip("no hiprtc")
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    origin1, key1 = first.stdout.strip().rsplit(" ", 1)
    origin2, key2 = second.stdout.strip().rsplit(" ", 1)
    assert (origin1, origin2) == ("compiled", "user cache") and key1 == key2


def test_builtin_templates_by_name(cache_dir):
    code = compile_or_skip(kjit.Runtime(), kjit.Template.builtin("scale"),
                           {"T": "float", "N": 256}, "gfx90a")
    assert code.origin == "compiled" and "256" in code.expression
    with pytest.raises(kjit.UnknownTemplate, match="no_such_template"):
        kjit.Template.builtin("no_such_template")


def test_parameter_schemas_in_python_idioms(cache_dir):
    tmpl = kjit.Template("py_schema", SCALE, params={
        "T": kjit.types("float", "half", default="half"),
        "N": range(1, 1025)}, arguments=["T*", "float"], kernel="scale")
    code = compile_or_skip(kjit.Runtime(), tmpl, {"N": 1024}, "gfx90a")  # T from its default
    assert "__half" in code.expression or "half" in code.expression
    vec = kjit.one_of(4, 8, default=8).tunable()
    assert vec.is_tunable and vec.values == (4, 8)


@pytest.mark.parametrize("params, words", [
    ({"T": "half"}, ["N"]),                               # missing
    ({"T": "half", "N": 1 << 21}, ["N", "1048576"]),      # out of range
    ({"T": "double", "N": 4}, ["T", "double"]),           # not allowed
    ({"T": "half", "N": 4, "M": 1}, ["M"]),               # unknown
    ({"T": "half", "N": True}, ["N"]),                    # a bool is no integer
    ({"T": 1.5, "N": 4}, ["T"]),                          # a float is no type
])
def test_bad_parameters_are_bad_parameter(cache_dir, params, words):
    with pytest.raises(kjit.BadParameter) as raised:
        kjit.Runtime().compile(scale_template(), params, "gfx90a")
    for word in words:
        assert word in raised.value.message


def test_a_malformed_schema_is_bad_parameter():
    with pytest.raises(kjit.BadParameter):
        kjit.Template("bad", SCALE, params={"N": kjit.integer(10, 1)})
    with pytest.raises(kjit.BadParameter, match="no schema"):
        kjit.Template("bad", SCALE, params={"N": {"min": 1}})


def test_a_bad_target_is_bad_target(cache_dir):
    with pytest.raises(kjit.BadTarget):
        kjit.Runtime().compile(scale_template(), {"T": "half", "N": 4}, "gfx-nonsense")


def test_a_compile_error_carries_the_numbered_log(cache_dir):
    broken = kjit.Template("py_broken", "template <int N> __global__ void broken(float* x) {\n"
                           "  x[0] = undeclared_name;\n}\n",
                           params={"N": kjit.integer(1, 8)}, kernel="broken")
    try:
        kjit.Runtime().compile(broken, {"N": 1}, "gfx90a")
    except kjit.CompileError as error:
        assert "undeclared_name" in error.detail and "undeclared_name" in str(error)
    except kjit.CompilerUnavailable:
        pytest.skip("no hiprtc")
    else:
        pytest.fail("a source that does not compile compiled")


def run_isolated(env, code="import kjit; kjit.Runtime()"):
    """Runs `code` in a new interpreter (the library loads once per process)."""
    program = f"import sys; sys.path[:0] = {sys.path[:2]!r}\n" + code
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env={**os.environ, **env})


def test_a_kernel_without_a_gpu_is_no_device():
    result = run_isolated({"KJIT_BACKEND": "cuda", "LD_LIBRARY_PATH": "/nonexistent"},
                          textwrap.dedent("""
        import kjit
        try:
            kjit.Runtime().default_device()
        except kjit.NoDevice as error:
            print("no device:", error.message)
    """))
    assert result.returncode == 0, result.stderr
    if not result.stdout:
        pytest.skip("a CUDA GPU is present")
    assert result.stdout.startswith("no device: no GPU")


def test_a_missing_library_is_a_clear_error():
    result = run_isolated({"KJIT_C_LIBRARY": "/nonexistent/libkjit_c.so"}, textwrap.dedent("""
        import kjit
        try:
            kjit.Runtime()
        except kjit.LibraryNotFound as error:
            print(type(error).__name__, isinstance(error, kjit.Error), error)
    """))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LibraryNotFound True")
    assert "/nonexistent/libkjit_c.so (absent)" in result.stdout
    assert "KJIT_C_LIBRARY" in result.stdout


@pytest.mark.parametrize("variable, version", [("KJIT_TEST_FAKE_ABI", "999.0"),
                                               ("KJIT_TEST_FAKE_ABI_OLD_MINOR", "1.0")])
def test_a_library_of_another_abi_version_or_an_older_minor_is_refused(variable, version):
    fake = os.environ.get(variable)
    assert fake, f"ctest names the fake-ABI library in {variable}"
    result = run_isolated({"KJIT_C_LIBRARY": fake}, textwrap.dedent("""
        import kjit
        try:
            kjit.Template("t", "")
        except kjit.AbiMismatch as error:
            print(type(error).__name__, error)
    """))
    assert result.returncode == 0, result.stderr
    assert "AbiMismatch" in result.stdout and f"version {version}," in result.stdout
    assert f"needs {kjit.ABI_VERSION}.{kjit._native.ABI_MINOR}" in result.stdout


# ---- the launch path, against a stand-in for kjit_kernel_launch_packed --------------------


class Launches:
    """What the launcher handed to the C library: the stand-in kjit_kernel_launch_packed records
    each packed launch (tests/python/fake_launch.c), for the ctypes and the C path alike."""

    def __init__(self, layout):
        self.layout = layout
        self.fake = ctypes.CDLL(os.environ["KJIT_TEST_FAKE_LAUNCH"])
        self.fake.kjit_test_launch_recorded.restype = ctypes.c_void_p
        self.fake.kjit_test_launch_reset(ctypes.c_size_t(struct.calcsize(layout)))
        self.function = self.fake.kjit_test_launch
        self.function.restype = ctypes.c_int
        self.function.argtypes = [ctypes.c_void_p, ctypes.c_void_p]

    @property
    def calls(self):
        size = struct.calcsize(self.layout)
        return [struct.unpack(self.layout, ctypes.string_at(
            self.fake.kjit_test_launch_recorded(i), size))
            for i in range(self.fake.kjit_test_launch_count())]


def launcher(types, sizes, device=0, backend="CUDA"):
    """A kernel's launcher as Kernel makes it: the C path where kjit._fastlaunch is found and
    not disabled, else ctypes."""
    offsets, position = [], 40
    for size in sizes:
        offsets.append(position)
        position += (size + 7) // 8 * 8
    layout, kinds, codes = _core.packed_layout(types, sizes, offsets, position)
    launches = Launches(layout)
    slow = _core.make_launcher(1234, "k", device, backend, tuple(types), kinds,
                               struct.Struct(layout).pack, launches.function)
    launch = _core.fast_launcher(slow, 1234, device, backend, codes, offsets, position,
                                 launches.function)
    return launch, launches


class CudaArray:
    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (4,),
                                         "typestr": "<f4", "version": 3}


def test_a_launch_packs_config_and_arguments():
    launch, launches = launcher(["half*", "float", "int", "unsigned long long", "__half"],
                                [8, 4, 4, 8, 2])
    launch(CudaArray(0x1000), 2.5, -3, 2**64 - 1, 1.5, grid=(7, 2), block=256, shared_bytes=64,
           stream=0x77)
    assert launches.calls == [(7, 2, 1, 256, 1, 1, 64, 0, 0x77, 0x1000, 2.5, -3, 2**64 - 1, 1.5)]
    launch(0x2000, 1, 2, 3, 4, grid=1, block=(32, 4, 2))  # ints for floats; default stream 0
    assert launches.calls[-1][:9] == (1, 1, 1, 32, 4, 2, 0, 0, 0)
    assert launches.calls[-1][9:] == (0x2000, 1.0, 2, 3, 4.0)


def test_bfloat16_scalars_are_rounded_to_nearest_even():
    launch, launches = launcher(["bfloat16"], [2])
    launch(1.0, grid=1, block=1)
    launch(1.00390625, grid=1, block=1)  # halfway between two bfloat16: rounds to even (1.0)
    assert [c[-1] for c in launches.calls] == [0x3F80, 0x3F80]


@pytest.mark.parametrize("args, words", [
    ((0x1000,), ["takes 2 arguments, 1 given"]),
    ((0x1000, 2.0, 3), ["takes 2 arguments, 3 given"]),
    ((None, 2.0), ["argument 0", "None"]),
    (("text", 2.0), ["argument 0", "str"]),
    ((0x1000, "2"), ["argument 1", "float", "str"]),
    ((0x1000, True), ["argument 1", "bool"]),
    ((3.5, 2.0), ["argument 0", "float"]),
])
def test_wrong_arguments_are_bad_argument(args, words):
    launch, launches = launcher(["float*", "float"], [8, 4])
    with pytest.raises(kjit.BadArgument) as raised:
        launch(*args, grid=1, block=1)
    for word in words:
        assert word in raised.value.message
    assert launches.calls == []


def test_integers_out_of_range_and_bad_launch_shapes_are_bad_argument():
    launch, launches = launcher(["int"], [4])
    with pytest.raises(kjit.BadArgument, match="does not fit"):
        launch(2**31, grid=1, block=1)
    with pytest.raises(kjit.BadArgument, match="does not fit"):
        launch(1, grid=2**32, block=1)
    with pytest.raises(kjit.BadArgument, match="grid"):
        launch(1, grid=(1, 2, 3, 4), block=1)
    with pytest.raises(kjit.BadArgument, match="block"):
        launch(1, grid=1, block=0)
    with pytest.raises(kjit.BadArgument, match="stream"):
        launch(1, grid=1, block=1, stream="default")
    with pytest.raises(kjit.BadArgument, match="integer"):
        launch(1.5, grid=1, block=1)
    assert launches.calls == []


def test_a_dlpack_tensor_on_another_device_is_refused():
    class OnCpu:
        def __dlpack__(self, stream=None):
            raise AssertionError("never asked for its data")

        def __dlpack_device__(self):
            return (1, 0)  # kDLCPU

    launch, launches = launcher(["float*"], [8])
    with pytest.raises(kjit.BadArgument, match=r"DLPack tensor on device \(1, 0\)"):
        launch(OnCpu(), grid=1, block=1)


class DLPackTensor:
    """A DLPack producer on device (device_type, 0) whose DLTensor's data is `address`: its
    capsule holds a DLTensor laid out as dlpack.h's (the DLManagedTensor starts with it)."""

    def __init__(self, device_type, address, byte_offset=0):
        self.device_type = device_type
        self.tensor = _core._DLTensor(data=address, device_type=device_type, device_id=0,
                                      byte_offset=byte_offset)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.tensor), b"dltensor", None)

    def __dlpack_device__(self):
        return (self.device_type, 0)


def test_dlpack_device_types_follow_the_kernels_backend():
    """kDLROCM (10) memory is taken by a HIP kernel only, kDLCUDA (2) and kDLCUDAManaged (13) by
    a CUDA kernel only. (Untested on AMD hardware: none is available to this project.)"""
    # The stand-in records the launches of both launchers in one list.
    hip, launches = launcher(["float*"], [8], backend="HIP")
    cuda, _ = launcher(["float*"], [8], backend="CUDA")
    hip(DLPackTensor(10, 0x1000, byte_offset=16), grid=1, block=1)
    cuda(DLPackTensor(2, 0x2000), grid=1, block=1)
    cuda(DLPackTensor(13, 0x3000), grid=1, block=1)
    assert [call[-1] for call in launches.calls] == [0x1010, 0x2000, 0x3000]
    with pytest.raises(kjit.BadArgument, match=r"device \(2, 0\); the kernel runs on HIP GPU 0"):
        hip(DLPackTensor(2, 0x2000), grid=1, block=1)
    with pytest.raises(kjit.BadArgument, match=r"device \(10, 0\); the kernel runs on CUDA GPU"):
        cuda(DLPackTensor(10, 0x1000), grid=1, block=1)


def test_torch_tensors_follow_the_kernels_backend(monkeypatch):
    """torch built for ROCm (torch.version.hip set; its tensors' device type is still "cuda")
    passes tensors to a HIP kernel, and torch built for CUDA to a CUDA kernel only."""
    torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
    x = torch.arange(4, dtype=torch.float32)  # get_device() -1: launchers on "device" -1
    hip, launches = launcher(["float*"], [8], device=-1, backend="HIP")
    with pytest.raises(kjit.BadArgument, match="tensor of torch built for CUDA; the kernel runs "
                                               "on HIP GPU -1"):
        hip(x, grid=1, block=1)
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    hip, launches = launcher(["float*"], [8], device=-1, backend="HIP")
    hip(x, grid=1, block=1)
    assert launches.calls[0][-1] == x.data_ptr()
    cuda, launches = launcher(["float*"], [8], device=-1, backend="CUDA")
    with pytest.raises(kjit.BadArgument, match="tensor of torch built for HIP; the kernel runs "
                                               "on CUDA"):
        cuda(x, grid=1, block=1)


def test_structs_pass_as_their_bytes():
    launch, launches = launcher(["float2"], [8])
    launch(struct.pack("=ff", 1.0, 2.0), grid=1, block=1)
    assert launches.calls[0][-1] == struct.pack("=ff", 1.0, 2.0)
    with pytest.raises(kjit.BadArgument, match="bytes"):
        launch(1.0, grid=1, block=1)


def test_the_launch_path_is_the_one_the_build_provides():
    """python_package runs with kjit._fastlaunch and must use it; python_package_ctypes disables
    it (KJIT_PYTHON_FASTLAUNCH=0) and must launch through ctypes."""
    expected = os.environ.get("KJIT_TEST_EXPECT_FASTLAUNCH")
    if expected is None:
        pytest.skip("KJIT_TEST_EXPECT_FASTLAUNCH not set (ctest sets it)")
    launch, _ = launcher(["float*", "float"], [8, 4])
    assert (type(launch).__name__ == "Launcher") == (expected == "1"), type(launch)
    # Half, bfloat16 and struct arguments are packed in Python on either path.
    half, _ = launcher(["__half"], [2])
    assert type(half).__name__ == "function"


FAST_TYPES = ["float*", "float", "double", "int", "unsigned long long", "signed char",
              "unsigned short", "long long"]
FAST_SIZES = [8, 4, 8, 4, 8, 1, 2, 8]


def test_plain_ints_and_floats_pack_at_their_ranges_edges():
    launch, launches = launcher(FAST_TYPES, FAST_SIZES)
    launch(2**64 - 1, 3.5, -1e300, -2**31, 2**64 - 1, -128, 65535, -2**63, grid=(7, 2, 3),
           block=(2**32 - 1,), shared_bytes=2**32 - 1, stream=2**64 - 1)
    launch(0, 3, 2**60, 2**31 - 1, 0, 127, 0, 2**63 - 1, grid=1, block=256)
    assert launches.calls == [
        (7, 2, 3, 2**32 - 1, 1, 1, 2**32 - 1, 0, 2**64 - 1, 2**64 - 1, 3.5, -1e300, -2**31,
         2**64 - 1, -128, 65535, -2**63),
        (1, 1, 1, 256, 1, 1, 0, 0, 0, 0, 3.0, float(2**60), 2**31 - 1, 0, 127, 0, 2**63 - 1)]


@pytest.mark.parametrize("index, value", [
    (0, -1), (1, 1e39), (3, 2**31), (4, -1), (5, 128), (6, -1), (7, 2**63), (2, 10**400),
])
def test_values_out_of_their_types_range_are_bad_argument(index, value):
    launch, launches = launcher(FAST_TYPES, FAST_SIZES)
    args = [0, 1.0, 1.0, 1, 1, 1, 1, 1]
    args[index] = value
    with pytest.raises(kjit.BadArgument, match=f"does not fit|argument {index}"):
        launch(*args, grid=1, block=1)
    assert launches.calls == []


def test_bad_launch_keywords_are_the_python_errors():
    launch, launches = launcher(["int"], [4])
    with pytest.raises(TypeError, match="grid"):
        launch(1, block=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        launch(1, grid=1, block=1, shard_bytes=4)
    with pytest.raises(kjit.BadArgument, match="does not fit"):
        launch(1, grid=1, block=1, shared_bytes=-1)
    with pytest.raises(kjit.BadArgument, match="does not fit"):
        launch(1, grid=1, block=1, stream=-1)
    assert launches.calls == []


def test_a_failed_launch_is_the_status_error():
    launch, launches = launcher(["int"], [4])
    for i in range(64):  # the stand-in records 64 launches, then fails with KJIT_BAD_ARGUMENT
        launch(i, grid=1, block=1)
    with pytest.raises(kjit.BadArgument):
        launch(64, grid=1, block=1)
    assert [call[-1] for call in launches.calls] == list(range(64))


def test_torch_tensors_pass_their_data_pointer_on_the_kernels_device():
    """A torch tensor is read through torch.Tensor's own get_device and data_ptr (in C on the
    fast path): a kernel on device -1 (the CPU's get_device()) takes a CPU tensor's address, one
    on GPU 0 refuses it, on either launch path."""
    torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
    x = torch.arange(4, dtype=torch.float32)
    launch, launches = launcher(["float*", "float"], [8, 4], device=-1)
    launch(x, 2.0, grid=1, block=4)
    launch(x[2:], 2.0, grid=1, block=4)
    assert [call[-2:] for call in launches.calls] == [(x.data_ptr(), 2.0),
                                                       (x.data_ptr() + 8, 2.0)]
    on_gpu, launches = launcher(["float*", "float"], [8, 4], device=0)
    with pytest.raises(kjit.BadArgument, match="tensor on cpu; the kernel runs on GPU 0"):
        on_gpu(x, 2.0, grid=1, block=4)
    assert launches.calls == []


def test_a_c_kernel_is_a_kernel_whose_call_is_the_c_launch():
    """With kjit._fastlaunch, a Kernel is also its Launcher: k(...) packs in C through the
    Launcher's own call (tp_call here, vectorcall where the interpreter hands it to subclasses),
    a call it does not pack goes to the Python launcher, and the Kernel's attributes hold."""
    module = _native.fastlaunch()
    if module is None or os.environ.get("KJIT_PYTHON_FASTLAUNCH") == "0":
        pytest.skip("kjit._fastlaunch is not built (python3-dev) or KJIT_PYTHON_FASTLAUNCH=0")
    types, sizes, offsets = ["float*", "float"], [8, 4], [40, 48]
    layout, kinds, codes = _core.packed_layout(types, sizes, offsets, 56)
    launches = Launches(layout)
    slow = _core.make_launcher(1234, "k", 0, "CUDA", tuple(types), kinds,
                               struct.Struct(layout).pack,
                               launches.function)
    found = _core._fast_launch_arguments(slow, 1234, 0, "CUDA", codes, offsets, 56,
                                         launches.function)
    k = _core._c_kernel_class(module)(*found[1])
    k.name, k.device, k.argument_types = "k", 0, tuple(types)
    assert isinstance(k, kjit.Kernel) and repr(k) == "kjit.Kernel(k(float*, float), GPU 0)"
    k(0x1000, 2.5, grid=(3, 2), block=128, stream=0x9)
    k(0x2000, 1, **{"block": 64, "grid": 1})
    assert launches.calls == [(3, 2, 1, 128, 1, 1, 0, 0, 0x9, 0x1000, 2.5),
                              (1, 1, 1, 64, 1, 1, 0, 0, 0, 0x2000, 1.0)]
    with pytest.raises(kjit.BadArgument, match="takes 2 arguments"):
        k(0x1000, grid=1, block=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        k(0x1000, 1.0, grid=1, block=1, shard_bytes=4)
    assert len(launches.calls) == 2


# ---- the command line and the cache ---------------------------------------------------------


def test_cache_queries_report_what_was_compiled(cache_dir):
    code = compile_or_skip(kjit.Runtime(), scale_template("py_cache"),
                           {"T": "float", "N": 64}, "gfx90a")
    listed = kjit.cache.ls()
    assert code.key in [row["key"] for row in listed]
    assert kjit.cache.stats()["cache_dir"] == str(cache_dir)
    assert kjit.cache.verify() == {"checked": len(listed), "bad": [], "manifests_checked": 0}


def test_the_cache_is_queried_in_this_process(cache_dir, monkeypatch):
    """kjit.cache runs the command's code through the C ABI: no `kjit` command is needed."""
    monkeypatch.setenv("KJIT_CLI", "/nonexistent/kjit")
    code = compile_or_skip(kjit.Runtime(), scale_template("py_cache_here"),
                           {"T": "float", "N": 32}, "gfx90a")
    assert [row["key"] for row in kjit.cache.ls(template="py_cache_here")] == [code.key]
    assert kjit.cache.ls(target="sm_90", template="py_cache_here") == []
    with pytest.raises(kjit.BadUsage, match="prune needs --max-size"):
        kjit.cache.prune()
    with pytest.raises(kjit.BadUsage, match="--older-than soon"):
        kjit.cache.prune(older_than="soon")
    assert kjit.cache.prune(older_than="1d")["removed"] == 0
    assert kjit.cache.clear()["removed"] == 1
    assert kjit.cache.ls(template="py_cache_here") == []


def test_tune_refuses_an_unknown_operator_and_needs_a_gpu(tmp_path):
    with pytest.raises(kjit.BadParameter, match="cannot tune 'no_such_op'"):
        kjit.tune("no_such_op", str(tmp_path / "shapes.json"))
    shapes = tmp_path / "shapes.json"
    shapes.write_text('{"types": ["bfloat16"], "rows": [1], "lengths": [4096]}')
    try:
        kjit.tune("rms_norm", str(shapes), budget=1)
    except kjit.NoDevice as error:
        assert "cannot tune" in error.message
    else:
        pytest.skip("a GPU is present: tuning ran (test_gpu.py's concern)")


def test_prebuild_with_prebuild_kernels_0_is_a_document_too(tmp_path, monkeypatch):
    """PREBUILD_KERNELS=0 builds nothing: `kjit prebuild --json` says so in JSON (it printed a
    line of text, which kjit.prebuild could not read)."""
    monkeypatch.setenv("PREBUILD_KERNELS", "0")
    report = kjit.prebuild(targets="gfx90a", out=str(tmp_path / "tier"))
    assert (report["variants"], report["built"], report["failed"]) == (0, 0, [])
    assert report["skipped"].startswith("PREBUILD_KERNELS=0")


@pytest.mark.parametrize("cli", ["found", "absent"])
def test_prebuild_builds_a_set_into_a_tier(tmp_path, monkeypatch, cli):
    """In this process where the `kjit` command is absent, in its worker processes where found."""
    if cli == "absent":
        monkeypatch.setenv("KJIT_CLI", "/nonexistent/kjit")
    sets = tmp_path / "set.json"
    # Two templates: two programs, one a job.
    sets.write_text('{"name": "py", "level": 3, "variants": ['
                    '{"template": "scale", "params": {"T": "half", "N": 128}}, '
                    '{"template": "axpy", "params": {"T": "half", "ITEMS": 4}}]}')
    try:
        report = kjit.prebuild(targets="gfx90a", sets=[str(sets)], out=str(tmp_path / "tier"),
                               jobs=2)
    except kjit.CompilerUnavailable as error:
        pytest.skip(f"no compiler for gfx90a: {error.message}")
    assert (report["variants"], report["built"], report["failed"]) == (2, 2, [])
    assert report["jobs"] == (1 if cli == "absent" else 2)
    assert len(list((tmp_path / "tier").rglob("*.kjit"))) == 2
    with pytest.raises(kjit.BadTarget):
        kjit.prebuild(targets="not-a-target", sets=[str(sets)], out=str(tmp_path / "tier"))


def test_python_m_kjit_is_the_command_line():
    result = subprocess.run([sys.executable, "-m", "kjit", "templates", "--json"],
                            capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path[:2])})
    assert result.returncode == 0, result.stderr
    assert '"rms_norm"' in result.stdout
    bad = subprocess.run([sys.executable, "-m", "kjit", "no-such-command"],
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path[:2])})
    assert bad.returncode == 2 and bad.stderr.startswith("kjit")


CUSTOM = """template <typename T> __global__ void k(const T* x, T* y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
}"""


def test_a_user_template_registers_as_a_torch_operator(monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from kjit import ops
    if not ops.REGISTERED:
        pytest.skip(f"torch {torch.__version__} is older than 2.4 (no register_fake)")
    tmpl = kjit.Template("cpu_custom", CUSTOM, params={"T": ["float", "half"]},
                         arguments=["const T*", "T*", "float", "int"], kernel="k")
    ops.custom_op("test_cpu_custom", tmpl, {"T": "half"}, grid=1, block=64)
    schema = str(torch.ops.kjit.test_cpu_custom.default._schema)
    assert schema == ("kjit::test_cpu_custom(Tensor a0, Tensor(a!) a1, float a2, int a3) -> ()")

    def no_runtime():
        raise AssertionError("the fake implementation reached the runtime")

    # The fake (meta) implementation loads nothing: no runtime, no cache, no GPU.
    monkeypatch.setattr(_core, "default_runtime", no_runtime)
    meta = torch.empty(8, device="meta", dtype=torch.half)
    assert torch.ops.kjit.test_cpu_custom(meta, meta.clone(), 2.0, 8) is None
    with pytest.raises(kjit.BadUsage, match="already registered"):
        ops.custom_op("test_cpu_custom", tmpl, {"T": "half"}, grid=1, block=64)
    vector = kjit.Template("cpu_custom_vector", CUSTOM, arguments=["float2"], kernel="k")
    with pytest.raises(kjit.BadArgument, match=r"argument 0 .*\(float2\) has no torch schema"):
        ops.custom_op("test_cpu_custom_vector", vector, {}, grid=1, block=1)
    with pytest.raises(kjit.BadArgument, match="not an operator name"):
        ops.custom_op("no spaces", tmpl, {"T": "half"}, grid=1, block=1)


def test_ops_need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            kjit.ops
        return
    pytest.skip("torch is installed: test_gpu.py covers kjit.ops")
