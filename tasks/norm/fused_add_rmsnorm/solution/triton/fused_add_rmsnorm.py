"""norm/fused_add_rmsnorm in Triton: one program per row, the whole row in registers.

residual <- bf16(x + residual); x <- bf16(bf16(r * rsqrt(mean(r^2) + eps)) * weight), with the task's three
roundings (task.toml). Any row and column strides. The launcher follows docs/abi.md's Triton interface:
the task's tensors and scalars by name, in place where the task says so, on d2k's stream.
"""
import triton
import triton.language as tl


@triton.jit
def fused_add_rmsnorm_kernel(x_ptr, res_ptr, w_ptr, H, sx_row, sx_col, sr_row, sr_col, sw, eps,
                             BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    x_row = x_ptr + row * sx_row + cols * sx_col
    r_row = res_ptr + row * sr_row + cols * sr_col
    x = tl.load(x_row, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_row, mask=mask, other=0.0).to(tl.float32)
    # 1. the sum, rounded once to bf16, is the new residual
    s = (x + r).to(tl.bfloat16)
    tl.store(r_row, s, mask=mask)
    # 2-3. the variance of the rounded sum, in fp32
    sf = s.to(tl.float32)
    var = tl.sum(sf * sf, axis=0) / H
    inv = 1.0 / tl.sqrt_rn(var + eps)
    # 4. normalized, rounded to bf16, times the weight, rounded again
    n = (sf * inv).to(tl.bfloat16).to(tl.float32)
    w = tl.load(w_ptr + cols * sw, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_row, (n * w).to(tl.bfloat16), mask=mask)


def launch(x, residual, weight, eps, workspace):
    T, H = x.shape
    if x.dtype != tl.bfloat16 or residual.dtype != tl.bfloat16 or weight.dtype != tl.bfloat16:
        raise ValueError("fused_add_rmsnorm (triton) expects bf16 x, residual and weight")
    if residual.shape != (T, H) or weight.shape != (H,):
        raise ValueError(f"shapes x {x.shape}, residual {residual.shape}, weight {weight.shape} do not agree")
    if T == 0 or H == 0:
        return
    block = triton.next_power_of_2(H)
    if block > 32768:
        raise ValueError(f"H = {H}: one row per program holds at most 32768 columns")
    num_warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    fused_add_rmsnorm_kernel[(T,)](x, residual, weight, H, x.stride(0), x.stride(1), residual.stride(0),
                                   residual.stride(1), weight.stride(0), eps, BLOCK=block, num_warps=num_warps)
