# The smallest Triton solution: y = 2 * x for a float32 tensor x (any shape, contiguous) into y, on the
# cuda device (docs/abi.md, "Triton solutions"). It shows the whole interface: launch gets the task's
# tensors and scalars by keyword (and workspace), computes the grid from the shapes and launches.
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, 2.0 * x, mask=mask)


def launch(x, y, workspace):
    if x.dtype != tl.float32 or not x.is_contiguous() or not y.is_contiguous():
        raise ValueError("this example handles contiguous float32 only")
    n = x.numel()
    BLOCK = 1024
    scale_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
