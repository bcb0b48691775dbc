#!/usr/bin/env python3
"""Runs the shipped Triton solutions (norm/fused_add_rmsnorm, quant/fp8_group_quant, moe/topk_softmax) under
Triton's CPU interpreter (TRITON_INTERPRET=1) on numpy-backed tensors, against numpy references of the tasks' formulas:
a check of a Triton solution's logic (strides, masks, layouts, roundings) on a machine without a GPU.

    PYTHONPATH=.deps/triton:<a folder with numpy> python3 tools/triton_interpret_check.py

Needs numpy besides Triton (not d2k's dependencies: the interpreter is the only user); numpy 2.2 works,
while numpy 2.4 breaks Triton 3.6's interpreter on a loop over a runtime int (`range(K)`, topk_softmax's
chunked kernel: "only 0-dimensional arrays can be converted to Python scalars"). The interpreter's
fp32 -> bf16 / e4m3 conversions round without carrying into the exponent; this script replaces them with
exact round-to-nearest-even ones (saturating for e4m3, as the GPU's cvt.rn.satfinite does), so that the
outputs can be compared bit for bit. Exits 1 when a check fails.
"""
import os, sys, importlib.util
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np
import triton, triton.language as tl

class Storage:
    def __init__(self, arr): self.arr = arr
    def data_ptr(self): return self.arr.ctypes.data
    def cpu(self): return self
    def copy_(self, other): pass

class Fake:
    """What d2k's Tensor offers plus the few torch methods the interpreter uses."""
    def __init__(self, arr, dtype, shape=None, strides=None, offset=0):
        self.arr, self.dtype = arr, dtype
        self.shape = tuple(shape if shape is not None else arr.shape)
        self._strides = tuple(strides if strides is not None else [s // arr.itemsize for s in arr.strides])
        self.offset = offset
    def data_ptr(self): return self.arr.ctypes.data + self.offset * self.arr.itemsize
    def stride(self, d=None): return self._strides if d is None else self._strides[d]
    def size(self, d=None): return self.shape if d is None else self.shape[d]
    def dim(self): return len(self.shape)
    def untyped_storage(self): return Storage(self.arr)
    def storage_offset(self): return self.offset
    def new_empty(self, *a, **k): return Fake(self.arr, self.dtype, self.shape, self._strides, self.offset)
    def set_(self, storage, offset, size, stride):
        self.arr, self.offset, self.shape, self._strides = storage.arr, offset, tuple(size), tuple(stride); return self

def f2bf(f):  # float32 -> bf16 bits, round to nearest even
    b = np.asarray(f, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
def bf2f(u): return (np.asarray(u, np.uint16).astype(np.uint32) << 16).view(np.float32)
def e4m3_table():
    t = np.zeros(256, np.float64)
    for v in range(256):
        s, e, m = v >> 7, (v >> 3) & 15, v & 7
        x = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        t[v] = -x if s else x
    t[0x7F] = t[0xFF] = np.nan
    return t
E4M3 = e4m3_table()

# Triton's interpreter rounds fp32 -> bf16 / fp8 without carrying into the exponent: replace those two
# conversions with exact round-to-nearest-even ones (saturating for e4m3, as cvt.rn.satfinite does).
from triton.runtime import interpreter as _interp
_orig = _interp._convert_float
POS = E4M3[:0x7F].copy()  # codes 0..0x7E: non-negative finite e4m3, increasing
def _to_e4m3(f):
    a = np.minimum(np.abs(f.astype(np.float64)), 448.0)
    hi = np.clip(np.searchsorted(POS, a), 1, len(POS) - 1); lo = hi - 1
    dlo, dhi = a - POS[lo], POS[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a == POS[hi], hi, code)
    return (code | np.where(np.signbit(f), 0x80, 0)).astype(np.uint8)
def _convert(input, src, dst, rounding):
    if src == tl.float32 and dst == tl.bfloat16:
        f = np.frombuffer(input.tobytes(), np.float32).reshape(input.shape)
        if rounding == _interp._ir.ROUNDING_MODE.RTZ:  # None (a plain .to()) is the GPU's default, rtne
            return (f.view(np.uint32) >> 16).astype(np.uint16)
        return f2bf(f)
    if src == tl.float32 and dst == tl.float8e4nv:
        return _to_e4m3(np.frombuffer(input.tobytes(), np.float32).reshape(input.shape))
    return _orig(input, src, dst, rounding)
_interp._convert_float = _convert

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

rng = np.random.default_rng(0)
failures = 0
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks")
norm = load(f"{root}/norm/fused_add_rmsnorm/solution/triton/fused_add_rmsnorm.py", "norm")
for T, H, pad in [(3, 3584, 0), (2, 256, 64), (1, 512, 0)]:
    xs = f2bf(rng.standard_normal((T, H + pad)).astype(np.float32))
    rs = f2bf(3 * rng.standard_normal((T, H + pad)).astype(np.float32))
    w = f2bf((1 + 0.1 * rng.standard_normal(H)).astype(np.float32))
    x0, r0 = bf2f(xs[:, :H]).copy(), bf2f(rs[:, :H]).copy()
    x = Fake(xs, tl.bfloat16, (T, H), (H + pad, 1)); r = Fake(rs, tl.bfloat16, (T, H), (H + pad, 1))
    norm.launch(x, r, Fake(w, tl.bfloat16), 1e-5, None)
    s = bf2f(f2bf(x0 + r0))
    inv = 1 / np.sqrt((s.astype(np.float32) ** 2).mean(-1, keepdims=True, dtype=np.float32) + np.float32(1e-5))
    want = bf2f(f2bf(bf2f(f2bf((s * inv).astype(np.float32))) * bf2f(w)))
    got_r, got_x = bf2f(rs[:, :H]), bf2f(xs[:, :H])
    rel = np.abs(got_x - want) / np.maximum(np.abs(want), 1e-3)
    ok = np.array_equal(got_r, s) and np.array_equal(got_x, want)
    failures += not ok
    print(f"{'ok' if ok else 'FAIL'}: norm T={T} H={H} row stride {H + pad}: residual exact {np.array_equal(got_r, s)}, "
          f"x exact {np.array_equal(got_x, want)} (max rel {rel.max():.3g})")

fp8 = load(f"{root}/quant/fp8_group_quant/solution/triton/fp8_group_quant.py", "fp8")
for T, K, col, ue in [(3, 1024, False, 0), (5, 2048, True, 1), (2, 7168, False, 1), (4, 384, True, 0)]:
    xf = rng.standard_normal((T, K)).astype(np.float32); xf[0, :128] = 0
    xs = f2bf(xf); xv = bf2f(xs).astype(np.float64)
    q = np.zeros((T, K), np.uint8)
    G, Tp = K // 128, (T + 3) // 4 * 4
    if col:
        store = np.full(G * Tp, np.nan, np.float32); scales = Fake(store, tl.float32, (T, G), (1, Tp))
    else:
        store = np.full((T, G), np.nan, np.float32); scales = Fake(store, tl.float32)
    fp8.launch(Fake(xs, tl.bfloat16), Fake(q, tl.float8e4nv), scales, 128, ue, 1e-10, None)
    amax = np.maximum(np.abs(xv.reshape(T, G, 128)).max(-1), 1e-10).astype(np.float32)
    sc = (amax / np.float32(448)).astype(np.float32)
    if ue: sc = (2.0 ** np.ceil(np.log2(sc.astype(np.float64)))).astype(np.float32)
    got_s = np.array([[store[g * Tp + t] if col else store[t, g] for g in range(G)] for t in range(T)])
    deq = E4M3[q].reshape(T, G, 128) * got_s[..., None]
    err = np.abs(deq - xv.reshape(T, G, 128)).max()
    pad_ok = (not col) or all(np.isnan(store[g * Tp + t]) for g in range(G) for t in range(T, Tp))
    # Half an e4m3 step at the value's binade: 2^(e-4) for |q| in [2^e, 2^(e+1)), 2^-10 below 2^-6.
    qa = np.abs(E4M3[q].reshape(T, G, 128))
    half = np.where(qa >= 2.0 ** -6, 2.0 ** (np.floor(np.log2(np.maximum(qa, 2.0 ** -6))) - 4), 2.0 ** -10)
    within = np.all(np.abs(deq - xv.reshape(T, G, 128)) <= half * got_s[..., None] * (1 + 1e-6))
    ok = np.array_equal(got_s, sc) and within and pad_ok
    failures += not ok
    print(f"{'ok' if ok else 'FAIL'}: fp8 T={T} K={K} col={col} ue8m0={ue}: scales exact {np.array_equal(got_s, sc)}, "
          f"every q within half a step {within}, padding untouched {pad_ok}")

# moe/topk_softmax: ids exactly (rank by logit, ties to the lower index, -0.0 == +0.0), weights against the
# float64 formula within the task's tolerance (rtol 1e-5, atol 1e-6), outputs at their own strides with
# untouched guard columns, inputs unchanged.
topk = load(f"{root}/moe/topk_softmax/solution/triton/topk_softmax.py", "topk")
def ties(shape, std, quantum, nudge=0.0):
    x = (np.round(rng.standard_normal(shape) * std / quantum) * quantum).astype(np.float32)
    x[rng.random(shape) < 0.2] = -0.0  # equal to +0.0: the index decides
    moved = rng.random(shape) < nudge
    up = rng.random(shape) < 0.5
    x[moved] = np.where(up[moved], np.nextafter(x[moved], np.float32(np.inf)), np.nextafter(x[moved], np.float32(-np.inf)))
    return x
def topk_case(name, x, k, renorm, col_major=False, row_pad=0, out_col_major=False, guard=2):
    T, E = x.shape
    if col_major:  # logits[t, e] at e * (T + row_pad) + t
        store = np.full((E, T + row_pad), np.nan, np.float32); store[:, :T] = x.T
        logits = Fake(store, tl.float32, (T, E), (1, T + row_pad))
    else:
        store = np.full((T, E + row_pad), np.nan, np.float32); store[:, :E] = x
        logits = Fake(store, tl.float32, (T, E), (E + row_pad, 1))
    before = store.copy()
    if out_col_major:
        wst = np.full((k + guard, T), np.nan, np.float32); ist = np.full((k + guard, T), -7, np.int32)
        weights = Fake(wst, tl.float32, (T, k), (1, T)); ids = Fake(ist, tl.int32, (T, k), (1, T))
        got_w, got_i = lambda: wst[:k].T, lambda: ist[:k].T
        guards = lambda: np.isnan(wst[k:]).all() and (ist[k:] == -7).all()
    else:
        wst = np.full((T, k + guard), np.nan, np.float32); ist = np.full((T, k + guard), -7, np.int32)
        weights = Fake(wst, tl.float32, (T, k), (k + guard, 1)); ids = Fake(ist, tl.int32, (T, k), (k + guard, 1))
        got_w, got_i = lambda: wst[:, :k], lambda: ist[:, :k]
        guards = lambda: np.isnan(wst[:, k:]).all() and (ist[:, k:] == -7).all()
    topk.launch(logits, weights, ids, renorm, None)
    xd = x.astype(np.float64)
    order = np.stack([np.lexsort((np.arange(E), -row)) for row in xd])[:, :k]  # -0.0 == +0.0 in the sort
    m = xd.max(-1, keepdims=True)
    p = np.exp(xd - m); p /= p.sum(-1, keepdims=True)
    want = np.take_along_axis(p, order, -1)
    if renorm: want = want / want.sum(-1, keepdims=True)
    ids_ok = np.array_equal(got_i(), order)
    err = np.abs(got_w().astype(np.float64) - want)
    w_ok = bool(np.all(err <= 1e-6 + 1e-5 * np.abs(want)))
    ok = ids_ok and w_ok and guards() and np.array_equal(store, before, equal_nan=True)
    global failures
    failures += not ok
    print(f"{'ok' if ok else 'FAIL'}: topk {name} T={T} E={E} k={k} renormalize={renorm}: ids exact {ids_ok} "
          f"({int((got_i() != order).sum())} differ), weights {w_ok} (max abs err {err.max():.2g}), "
          f"guards untouched {guards()}, logits unchanged {np.array_equal(store, before, equal_nan=True)}")
normal = lambda T, E: rng.standard_normal((T, E)).astype(np.float32)
topk_case("qwen1.5 smoke", normal(37, 60), 4, 0)
topk_case("near ties (smoke grid)", ties((33, 128), 0.05, 0.0125, 0.25), 8, 1)
topk_case("mixtral ties", ties((64, 8), 1.0, 0.5), 2, 1)
topk_case("qwen3 ties", ties((40, 128), 1.0, 0.25), 8, 1)
topk_case("deepseek", normal(9, 256), 8, 1)
topk_case("olmoe", normal(51, 64), 8, 0)
topk_case("one row", normal(1, 128), 8, 1)
topk_case("E 1", normal(5, 1), 1, 1)
topk_case("k = E", ties((7, 12), 1.0, 0.5), 12, 0)
topk_case("padded rows, strided outputs", normal(19, 60), 4, 1, row_pad=5)
topk_case("column-major logits and outputs", ties((23, 40), 1.0, 0.25), 6, 0, col_major=True, row_pad=3, out_col_major=True)
half_inf = normal(11, 16); half_inf[:, ::2] = -np.inf
topk_case("half the row -inf, k = E", half_inf, 16, 1)
topk_case("chunked kernel: k 40 > 32", ties((6, 100), 1.0, 0.25), 40, 1)
topk_case("chunked kernel: E 9000", ties((3, 9000), 1.0, 0.25), 5, 0, out_col_major=True)
topk_case("chunked kernel: -inf, k = E", np.where(np.arange(48) % 3 == 0, -np.inf, normal(4, 48)).astype(np.float32), 48, 0)
sys.exit(1 if failures else 0)
