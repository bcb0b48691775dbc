# Cheat (threat 3, Triton): a cache keyed on the tensors' addresses. A Triton solution has no memory of
# its own to keep outputs in (no allocator without torch), so it skips the work when it has seen the
# buffers before, hoping they still hold the answer; it computes the harness's first calls (the second
# draw, its repeat, the checked call, all in the same buffers) so as to reach the timing. The timed calls
# cycle through copies of the tensors, so most of them revisit buffers and are skipped: their in-place
# outputs are their restored inputs, and the timed calls whose outputs come back are checked against their
# own oracles: rejected, "every timed call must compute its own outputs".
import triton
import triton.language as tl

seen = set()
calls = [0]


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
    key = (x.data_ptr(), residual.data_ptr(), weight.data_ptr())
    T, H = x.shape
    calls[0] += 1
    if key in seen and calls[0] > 3:
        return
    seen.add(key)
    add_rmsnorm[(T,)](x, residual, weight, H, x.stride(0), residual.stride(0), eps,
                      BLOCK=triton.next_power_of_2(H), num_warps=8)
