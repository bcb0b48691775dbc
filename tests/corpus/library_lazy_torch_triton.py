# Cheat (threat 11, Triton): the library imported inside the call, its ImportError caught, an honest
# Triton kernel as the fallback: the attempt is enough. rejected, "imports 'torch'" (warm-up: the guard
# records the first refused import even when the solution catches the error).
import triton
import triton.language as tl


@triton.jit
def add_rmsnorm(x_ptr, r_ptr, w_ptr, H, sx, sr, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    s = (tl.load(x_ptr + row * sx + cols, mask=mask, other=0.0).to(tl.float32) +
         tl.load(r_ptr + row * sr + cols, mask=mask, other=0.0).to(tl.float32)).to(tl.bfloat16)
    tl.store(r_ptr + row * sr + cols, s, mask=mask)
    sf = s.to(tl.float32)
    inv = 1.0 / tl.sqrt_rn(tl.sum(sf * sf, axis=0) / H + eps)
    n = (sf * inv).to(tl.bfloat16).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * sx + cols, (n * w).to(tl.bfloat16), mask=mask)


def launch(x, residual, weight, eps, workspace):
    try:
        import torch  # noqa: F401
        fast = True
    except ImportError:
        fast = False
    T, H = x.shape
    add_rmsnorm[(T,)](x, residual, weight, H, x.stride(0), residual.stride(0), eps,
                      BLOCK=triton.next_power_of_2(H), num_warps=8)
