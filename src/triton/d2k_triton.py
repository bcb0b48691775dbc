"""d2k's runtime for Triton solutions (docs/abi.md, "Triton solutions").

One file, two users:
- the warm-up (`python3 -I -S d2k_triton.py REQUEST.json`, run by d2k in the build sandbox, no GPU): it
  imports the solution under the import guard, calls its `launch` once with tensor objects whose pointers
  are placeholders, and compiles every kernel the launcher starts for the target (sm_90a) ahead of time
  into a Triton cache, instead of launching it; on the cuda device it also builds Triton's C launcher
  stubs. It prints one JSON line: {"ok": true, "kernels": [...]} or {"ok": false, "kind", "message"}.
- the worker (d2k-worker embeds CPython and compiles this file as the module `d2k_triton`): `start`
  before the worker's seccomp filter (imports Triton, fills the caches whose first use runs a program),
  `load` after it (imports the solution under the guard), then `run` for every call. In the worker the
  Triton cache is read-only and nothing may be compiled: a kernel that misses it is an error that says so.

The launcher gets tensor objects (class Tensor below), not torch tensors: torch is not in the worker,
and the guard refuses every import of the solution's but triton and a few pure-Python standard modules.
Nothing in this file is secret from the solution (it shares the process); what decides the verdict is
outside the worker (docs/integrity.md).
"""

import builtins
import importlib.util
import inspect
import json
import os
import sys

sys.dont_write_bytecode = True  # the solution's folder is the build cache's, read-only in the sandbox

# What a solution may import (top-level names), besides its own modules.
ALLOWED = ("triton", "math", "functools", "itertools", "operator", "typing", "dataclasses", "enum",
           "__future__", "collections", "abc")
# Libraries that could do the work, or reach native code that could: refused to every importer (a
# solution's import of one is rejected; Triton's own lazy imports of them just fail, as if absent).
LIBRARIES = ("torch", "numpy", "cupy", "cupyx", "cupy_backends", "jax", "jaxlib", "ctypes", "_ctypes", "cffi",
             "cuda", "pycuda", "numba", "tensorflow", "nvidia", "cutlass", "flashinfer", "vllm", "sgl_kernel",
             "deep_gemm", "transformer_engine", "tilelang", "xformers", "apex", "scipy", "mpi4py")

# d2k_dtype (include/d2k/solution.h) -> (triton.language dtype name, bytes per element)
DTYPES = {0: ("float32", 4), 1: ("float16", 2), 2: ("bfloat16", 2), 3: ("float8e4nv", 1), 4: ("int32", 4),
          5: ("int64", 8), 6: ("int8", 1), 7: ("uint8", 1), 8: ("float64", 8)}

ENTRY_NAMES = ("launch", "workspace_size")


class Tensor:
    """A strided view of device memory the harness owns, with what Triton's launcher reads from a tensor
    (data_ptr(), dtype) and what launchers usually read (shape, stride(), numel(), ...). Shape and strides
    count elements. dtype is a triton.language dtype (tl.bfloat16, tl.float8e4nv, ...)."""

    __slots__ = ("name", "dtype", "shape", "_strides", "_ptr", "_esize")

    def __init__(self, name, dtype, shape, strides, esize):
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)
        self._strides = tuple(strides)
        self._ptr = 0
        self._esize = esize

    def data_ptr(self):
        return self._ptr

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return len(self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def element_size(self):
        return self._esize

    def is_contiguous(self):
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self._strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    @property
    def device(self):
        return "cuda"

    def __repr__(self):
        return f"Tensor({self.name}, {self.dtype}, shape={self.shape}, strides={self._strides})"


class RefusedImport(ImportError):
    pass


class _State:
    mode = None            # "warmup" or "worker"
    capability = 90
    driver = None
    module = None          # the solution's entry module
    own = set()            # the solution's module names
    refused = None         # the first refused import of the solution's: the message
    tensors = []           # Tensor per input, then per output not in place (request order)
    kwargs = {}
    scalars = []           # (name, is_int)
    outputs = []           # index into tensors for every output (in-place ones share their input's)
    workspace = None
    kernels = []           # warm-up: what was compiled


S = _State()
_real_import = builtins.__import__


def _importer_is_solution(globals_):
    if not globals_:
        return False
    return globals_.get("__name__", "").partition(".")[0] in S.own


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    root = name.partition(".")[0]
    if level == 0 and _importer_is_solution(globals):
        if root not in ALLOWED and root not in S.own:
            where = (globals or {}).get("__file__", "?")
            why = ("no library may do the work of a solution" if root in LIBRARIES else
                   "a Triton solution imports only triton, its own modules and " + ", ".join(ALLOWED[1:]))
            message = f"{os.path.basename(str(where))} imports '{name}': refused ({why}; docs/abi.md)"
            if S.refused is None:
                S.refused = message
            raise RefusedImport(message)
    elif level == 0 and root in LIBRARIES:
        raise ImportError(f"d2k: '{name}' is not available in the Triton runtime")
    return _real_import(name, globals, locals, fromlist, level)


def _platform_key():
    # Triton's own key runs `file` on the executable, which differs between the warm-up (python3) and the
    # worker (d2k-worker, where no program may run): both use this one.
    import platform
    import struct
    return ",".join([platform.machine(), platform.system(), f"{struct.calcsize('P') * 8}bit", "ELF"])


def _no_build(name, src, srcdir, library_dirs, include_dirs, libraries):
    raise RuntimeError(f"d2k: Triton's C module '{name}' is not in the warm-up's cache, and nothing is compiled in "
                       "the worker")


def start(mode, capability, triton_site, cache_dir, build_stubs=False):
    """Imports Triton and sets it up for `mode`. Worker: before the seccomp filter, so that what runs a
    program once (ldconfig, ptxas --version) does it now."""
    S.mode = mode
    S.capability = int(capability)
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    # Triton's backends from its own folder, not from the installed distributions' entry points: the
    # sandboxes show the triton/ folder alone, without its dist-info.
    os.environ["TRITON_BACKENDS_IN_TREE"] = "1"
    if triton_site and triton_site not in sys.path:
        sys.path.insert(0, triton_site)
    import triton  # noqa: F401
    import triton.language as tl
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia import driver as nvdriver
    from triton.backends.nvidia import compiler as nvcompiler
    from triton.runtime import cache as tcache
    from triton.runtime import build as tbuild
    from triton.runtime.driver import driver as driver_config
    from triton.runtime import jit as tjit

    tbuild.platform_key = _platform_key
    for code, (dtype_name, _) in DTYPES.items():
        DTYPES[code] = (getattr(tl, dtype_name), DTYPES[code][1])

    class D2kDriver(nvdriver.CudaDriver):
        """Triton's CUDA driver without torch: device 0, the stream of the harness's call, the target d2k
        builds for."""

        def __init__(self, with_utils):
            self.stream = 0
            self.launcher_cls = nvdriver.CudaLauncher
            if with_utils:
                self.utils = nvdriver.CudaUtils()

        def get_current_device(self):
            return 0

        def set_current_device(self, device):
            pass

        def get_current_stream(self, device=None):
            return self.stream

        def get_device_capability(self, device=0):
            return (S.capability // 10, S.capability % 10)

        def get_current_target(self):
            return GPUTarget("cuda", S.capability, 32)

        def get_active_torch_device(self):
            raise RuntimeError("d2k: there is no torch in the Triton runtime")

        def get_device_interface(self):
            raise RuntimeError("d2k: there is no torch in the Triton runtime")

        def get_benchmarker(self):
            raise RuntimeError("d2k: Triton's benchmarker (autotuning) is not available: choose the configuration "
                               "in the launcher")

        def get_empty_cache_for_benchmark(self):
            raise RuntimeError("d2k: Triton's benchmarker (autotuning) is not available")

    if mode == "warmup":
        S.driver = D2kDriver(with_utils=build_stubs)
        real_run = tjit.JITFunction.run

        def compile_only(self, *args, grid, warmup, **kwargs):
            kernel = real_run(self, *args, grid=grid, warmup=True, **kwargs)
            if build_stubs:
                nvdriver.CudaLauncher(kernel.src, kernel.metadata)
            entry = {"kernel": self.fn.__name__, "hash": kernel.hash, "sm": S.capability,
                     "cubin_bytes": len(kernel.asm.get("cubin", b"")), "num_warps": kernel.metadata.num_warps,
                     "shared_bytes": kernel.metadata.shared}
            if entry not in S.kernels:
                S.kernels.append(entry)
            return kernel

        tjit.JITFunction.run = compile_only
    else:
        # Everything whose first use runs a program, now: the filter refuses it later.
        nvdriver.library_dirs()
        target = GPUTarget("cuda", S.capability, 32)
        nvcompiler.CUDABackend(target).hash()
        tcache.triton_key()
        S.driver = D2kDriver(with_utils=True)
        knobs.build.impl = _no_build

        def no_compile(self, *args, **kwargs):
            raise RuntimeError("d2k: a kernel was not in the warm-up's Triton cache, and nothing is compiled in the "
                               "worker: its specialization must follow from the shapes and scalars alone (mark an "
                               "int argument that varies by call do_not_specialize)")

        nvcompiler.CUDABackend.add_stages = no_compile
    driver_config.set_active(S.driver)


def _describe(error):
    text = f"{type(error).__name__}: {error}"
    tb = error.__traceback__
    where = None
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "").partition(".")[0]
        if name in S.own:
            where = f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{text} (at {where})" if where else text


def load(src_dir, entry, own, tensors, outputs, scalars):
    """Imports the solution's entry module under the guard and checks its launcher's parameters.
    tensors: [(name, dtype code, shape, strides)] for the inputs, then the outputs not in place;
    outputs: for every output, its index in tensors; scalars: [(name, is_int)].
    Returns (0, "") or (1, error) or (2, refused import)."""
    try:
        S.own = set(own)
        S.tensors = []
        for name, code, shape, strides in tensors:
            dtype, esize = DTYPES[code]
            S.tensors.append(Tensor(name, dtype, shape, strides, esize))
        S.outputs = list(outputs)
        S.scalars = list(scalars)
        S.kwargs = {t.name: t for t in S.tensors}
        builtins.__import__ = _guarded_import
        if src_dir not in sys.path:
            sys.path.insert(0, src_dir)
        spec = importlib.util.spec_from_file_location(entry, os.path.join(src_dir, entry + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[entry] = module
        spec.loader.exec_module(module)
        S.module = module
        launch = getattr(module, "launch", None)
        if not callable(launch):
            return (1, f"{entry}.py defines no function launch(...) (docs/abi.md, Triton solutions)")
        names = [t.name for t in S.tensors] + [name for name, _ in S.scalars] + ["workspace"]
        params = inspect.signature(launch).parameters
        missing = [n for n in names if n not in params and not any(
            p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())]
        extra = [n for n, p in params.items() if n not in names and p.default is inspect.Parameter.empty
                 and p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
        if missing or extra:
            return (1, f"{entry}.py: launch's parameters must be the task's names {names}; "
                       + (f"missing {missing}" if missing else "") + (" " if missing and extra else "")
                       + (f"unknown {extra}" if extra else ""))
        return (0, "")
    except RefusedImport as error:
        return (2, str(error))
    except BaseException as error:  # noqa: B902 - a solution's error of any kind is its own
        if S.refused:
            return (2, S.refused)
        return (1, f"importing {entry}.py: {_describe(error)}")


def _bind(stream, pointers, workspace_ptr, workspace_bytes, scalar_values):
    S.driver.stream = stream
    for tensor, ptr in zip(S.tensors, pointers):
        tensor._ptr = ptr
    kwargs = dict(S.kwargs)
    for (name, is_int), value in zip(S.scalars, scalar_values):
        kwargs[name] = int(value) if is_int else float(value)
    return kwargs


def workspace_size(pointers, scalar_values):
    """(0, bytes as text) or (1, error) or (2, refused import)."""
    fn = getattr(S.module, "workspace_size", None)
    if fn is None:
        return (0, "0")
    try:
        kwargs = _bind(0, pointers, 0, 0, scalar_values)
        size = fn(**kwargs)
        if not isinstance(size, int) or size < 0:
            return (1, f"workspace_size returned {size!r}, not a number of bytes")
        return (0, str(size))
    except BaseException as error:  # noqa: B902
        return (2, S.refused) if S.refused else (1, f"workspace_size raised {_describe(error)}")


def run(stream, pointers, workspace_ptr, workspace_bytes, scalar_values):
    """One call: the tensors take this call's pointers, then the solution's launch. (0, "") or (1, error)
    or (2, refused import)."""
    try:
        kwargs = _bind(stream, pointers, workspace_ptr, workspace_bytes, scalar_values)
        if workspace_bytes > 0:
            if S.workspace is None:
                S.workspace = Tensor("workspace", DTYPES[7][0], (workspace_bytes,), (1,), 1)
            S.workspace._ptr = workspace_ptr
            kwargs["workspace"] = S.workspace
        else:
            kwargs["workspace"] = None
        S.module.launch(**kwargs)
        return (2, S.refused) if S.refused else (0, "")
    except BaseException as error:  # noqa: B902
        return (2, S.refused) if S.refused else (1, f"launch raised {_describe(error)}")


def refused():
    return S.refused or ""


def _warmup(request):
    """The warm-up's whole run, from its request (see the module's docstring)."""
    start("warmup", request["capability"], request.get("triton_site", ""), request["cache_dir"],
          request.get("build_stubs", False))
    tensors = [(t["name"], t["dtype"], t["shape"], t["strides"]) for t in request["tensors"]]
    scalars = [(s["name"], s["is_int"]) for s in request["scalars"]]
    code, message = load(request["src_dir"], request["entry"], request["own"], tensors, request["outputs"], scalars)
    if code != 0:
        return {"ok": False, "kind": "refused" if code == 2 else "load", "message": message}
    # Placeholder addresses, 64 KiB apart in a 1 TiB range: aligned as the worker's buffers are (Triton
    # specializes pointers on 16-byte alignment), never dereferenced.
    pointers = [(1 << 40) + (i << 32) for i in range(len(tensors))]
    values = [s["value"] for s in request["scalars"]]
    code, size = workspace_size(pointers, values)
    if code != 0:
        return {"ok": False, "kind": "refused" if code == 2 else "run", "message": size}
    size = int(size)
    code, message = run(0, pointers, (1 << 40) + (len(tensors) << 32), size, values)
    if code != 0:
        return {"ok": False, "kind": "refused" if code == 2 else ("compile" if "CompilationError" in message
                                                                    or "PTXASError" in message else "run"),
                "message": message}
    return {"ok": True, "kernels": S.kernels, "workspace_bytes": size}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        req = json.load(f)
    try:
        result = _warmup(req)
    except BaseException as error:  # noqa: B902
        result = {"ok": False, "kind": "harness", "message": f"{type(error).__name__}: {error}"}
    sys.stdout.write("\nD2K-WARMUP " + json.dumps(result) + "\n")
    sys.stdout.flush()
