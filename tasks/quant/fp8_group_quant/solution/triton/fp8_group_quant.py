"""quant/fp8_group_quant in Triton: per-token, per-128-group dynamic fp8 e4m3 quantization.

Each program takes one row and GROUPS consecutive groups of 128 as a [GROUPS, 128] tile: the amax of each
group (on the bf16 values, in fp32, at least eps), its scale (amax / 448, or with ue8m0 the smallest
power of two at least that, found on the scale's bits), q = x / scale rounded to e4m3 (nearest even,
saturated), and the scale written at the scales tensor's own strides (row-major, or the column-major
`col` layout with its padded token dimension, whose padding is never written).
"""
import triton
import triton.language as tl


@triton.jit
def fp8_group_quant_kernel(x_ptr, q_ptr, s_ptr, NG, sx_row, sx_col, sq_row, sq_col, ss_row, ss_col, eps,
                           UE8M0: tl.constexpr, GROUPS: tl.constexpr, GROUP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    groups = tl.program_id(1) * GROUPS + tl.arange(0, GROUPS)
    cols = tl.arange(0, GROUP)
    gmask = groups < NG
    k = groups.to(tl.int64)[:, None] * GROUP + cols[None, :]
    mask = gmask[:, None]
    x = tl.load(x_ptr + row * sx_row + k * sx_col, mask=mask, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=1), eps)
    scale = tl.math.div_rn(amax, tl.full(amax.shape, 448.0, tl.float32))  # exact rounding (`/` is div.full)
    if UE8M0:
        bits = scale.to(tl.int32, bitcast=True)
        exponent = bits & 0x7F800000
        exponent = tl.where((bits & 0x007FFFFF) != 0, exponent + 0x00800000, exponent)
        scale = exponent.to(tl.float32, bitcast=True)
    # x * (1 / scale), correctly rounded reciprocal: the task accepts it in place of x / scale
    inv = tl.math.div_rn(tl.full(scale.shape, 1.0, tl.float32), scale)
    q = tl.clamp(x * inv[:, None], -448.0, 448.0)
    tl.store(q_ptr + row * sq_row + k * sq_col, q.to(tl.float8e4nv), mask=mask)
    tl.store(s_ptr + row * ss_row + groups.to(tl.int64) * ss_col, scale, mask=gmask)


def launch(x, q, scales, group_size, ue8m0, eps, workspace):
    T, K = x.shape
    if group_size != 128:
        raise ValueError(f"fp8_group_quant (triton) handles group_size 128, not {group_size}")
    if K % 128 != 0:
        raise ValueError(f"K = {K} is not a multiple of 128")
    if x.dtype != tl.bfloat16 or q.dtype != tl.float8e4nv or scales.dtype != tl.float32:
        raise ValueError(f"dtypes x {x.dtype}, q {q.dtype}, scales {scales.dtype}: expected bf16, fp8e4nv, fp32")
    if T == 0:
        return
    ng = K // 128
    groups = min(8, triton.next_power_of_2(ng))
    grid = (T, triton.cdiv(ng, groups))
    fp8_group_quant_kernel[grid](x, q, scales, ng, x.stride(0), x.stride(1), q.stride(0), q.stride(1),
                                 scales.stride(0), scales.stride(1), eps, UE8M0=bool(ue8m0), GROUPS=groups,
                                 GROUP=128, num_warps=4)
