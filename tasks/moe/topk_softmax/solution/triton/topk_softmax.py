"""moe/topk_softmax in Triton: softmax over the experts, the k best experts per row and their weights.

The experts are ranked by their logits (softmax keeps their order, so this is the order of the exact
probabilities): a larger logit first and, among equal logits (-0.0 == +0.0, a float comparison), the lower
expert index. Every winner is found by reductions that apply that order, so the tie rule holds whatever
order a reduction visits the row in, and logits of -inf are ranked like any other value.

- rows kernel (E up to 8192, k up to 32): a program holds BLOCK_T rows of the logits in registers, padded
  to BLOCK_E columns with -inf at indices >= E (they rank after every expert, and k <= E, so they never
  win). Each of the k rounds (unrolled) reduces every row to its best logit, then to the lowest index
  holding it, and retires the winner (its value -inf, its index past every real one). The winners stay
  in a [BLOCK_T, BLOCK_K] tile of the row tile's layout; the first one is the row's maximum. With
  renormalization the softmax denominator cancels: weight_j = exp(l_j - max) / sum over the chosen of
  exp(l_i - max); without it the denominator is the full row's sum of exp(l - max). Weights and ids are
  stored once, at the outputs' strides.
- any kernel (anything larger): a program per row; round r scans the row in chunks for the best expert
  that ranks after round r-1's winner (nothing is marked: the row is re-read, from L2), writes exp(l - max)
  and the id as it goes, and a last pass divides the weights by the denominator, summed in float64.

The launcher follows docs/abi.md's Triton interface: the task's tensors and scalars by name, any row and
element strides of the logits and of both outputs, on d2k's stream.
"""
import triton
import triton.language as tl

# Rows of up to this many experts stay in registers; longer ones take the chunked kernel.
MAX_ROW_EXPERTS = 8192
# The rows kernel unrolls its k rounds; a larger k takes the chunked kernel.
MAX_ROW_K = 32
# Programs the rows kernel aims for before it makes its tiles larger: two per SM of an H200.
MIN_PROGRAMS = 264


@triton.jit
def _ranks_first(v1, i1, v2, i2):
    # The task's order: the larger logit; between equal logits (-0.0 == +0.0) the lower index.
    first = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(first, v1, v2), tl.where(first, i1, i2)


@triton.jit
def topk_softmax_rows(logits, weights, ids, T, E, sl_row, sl_col, sw_row, sw_col, si_row, si_col,
                      K: tl.constexpr, RENORMALIZE: tl.constexpr, BLOCK_T: tl.constexpr,
                      BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    live = rows < T
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK_E)
    x = tl.load(logits + rows64[:, None] * sl_row + cols.to(tl.int64)[None, :] * sl_col,
                mask=live[:, None] & (cols < E)[None, :], other=float("-inf"))
    # The candidates: every expert, then every expert not yet chosen. A retired one has -inf and an
    # index past every column, so it ranks after all the others, -inf logits and padding included.
    cv = x
    ci = tl.broadcast_to(cols[None, :], (BLOCK_T, BLOCK_E))
    slots = tl.arange(0, BLOCK_K)
    wv = tl.full((BLOCK_T, BLOCK_K), float("-inf"), tl.float32)
    wi = tl.zeros((BLOCK_T, BLOCK_K), tl.int32)
    for r in tl.static_range(K):
        # The best logit, then the lowest index holding it (-0.0 == +0.0): two plain reductions cost fewer
        # instructions than one over (logit, index) pairs. A retired expert is -inf at index BLOCK_E, so
        # when the best remaining logit is -inf a real expert still has the lower index.
        bv = tl.max(cv, axis=1)
        bi = tl.min(tl.where(cv == bv[:, None], ci, BLOCK_E), axis=1)
        here = (slots == r)[None, :]
        wv = tl.where(here, bv[:, None], wv)
        wi = tl.where(here, bi[:, None], wi)
        taken = ci == bi[:, None]
        cv = tl.where(taken, float("-inf"), cv)
        ci = tl.where(taken, BLOCK_E, ci)
    # The first winner is the row's maximum; the slots past k hold -inf and add exp(-inf) = 0.
    row_max = tl.max(wv, axis=1)
    e = tl.exp(wv - row_max[:, None])
    if RENORMALIZE:
        denom = tl.sum(e, axis=1)
    else:
        denom = tl.sum(tl.exp(x - row_max[:, None]), axis=1)
    w = e / denom[:, None]
    out = live[:, None] & (slots < K)[None, :]
    slots64 = slots.to(tl.int64)[None, :]
    tl.store(weights + rows64[:, None] * sw_row + slots64 * sw_col, w, mask=out)
    tl.store(ids + rows64[:, None] * si_row + slots64 * si_col, wi, mask=out)


@triton.jit
def topk_softmax_any(logits, weights, ids, E, K, sl_row, sl_col, sw_row, sw_col, si_row, si_col,
                     RENORMALIZE: tl.constexpr, BLOCK_E: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    src = logits + row * sl_row
    w_row = weights + row * sw_row
    i_row = ids + row * si_row
    cols = tl.arange(0, BLOCK_E)
    # Round r takes the best expert that ranks after round r-1's winner (prev_v, prev_i): below it, or
    # equal to it at a higher index. Round 0 starts after (+inf, -1), which every expert ranks after.
    prev_v = float("inf")
    prev_i = -1
    row_max = 0.0
    chosen = tl.zeros((), tl.float64)
    for r in range(K):
        bv = float("-inf")
        bi = E
        for c0 in range(0, E, BLOCK_E):
            c = c0 + cols
            x = tl.load(src + c.to(tl.int64) * sl_col, mask=c < E, other=float("-inf"))
            after = (c < E) & ((x < prev_v) | ((x == prev_v) & (c > prev_i)))
            cv, ci = tl.reduce((tl.where(after, x, float("-inf")), tl.where(after, c, E)), 0, _ranks_first)
            bv, bi = _ranks_first(bv, bi, cv, ci)
        if r == 0:
            row_max = bv
        ex = tl.exp(bv - row_max)
        chosen += ex.to(tl.float64)
        tl.store(w_row + r * sw_col, ex)
        tl.store(i_row + r * si_col, bi)
        prev_v = bv
        prev_i = bi
    if RENORMALIZE:
        denom = chosen
    else:
        total = tl.zeros((BLOCK_E,), tl.float64)
        for c0 in range(0, E, BLOCK_E):
            c = c0 + cols
            x = tl.load(src + c.to(tl.int64) * sl_col, mask=c < E, other=float("-inf"))
            total += tl.exp(x - row_max).to(tl.float64)
        denom = tl.sum(total, axis=0)
    # The unnormalized weights this program wrote become visible to all of its threads.
    tl.debug_barrier()
    for s0 in range(0, K, BLOCK_E):
        s = s0 + cols
        p = w_row + s.to(tl.int64) * sw_col
        ex = tl.load(p, mask=s < K, other=0.0)
        tl.store(p, (ex.to(tl.float64) / denom).to(tl.float32), mask=s < K)


def launch(logits, weights, ids, renormalize, workspace):
    if logits.dtype != tl.float32 or weights.dtype != tl.float32 or ids.dtype != tl.int32:
        raise ValueError(f"topk_softmax (triton) expects f32 logits, f32 weights and i32 ids, got "
                         f"{logits.dtype}, {weights.dtype}, {ids.dtype}")
    if logits.dim() != 2 or weights.dim() != 2 or ids.dim() != 2:
        raise ValueError(f"expected rank-2 logits, weights, ids: shapes {logits.shape}, {weights.shape}, {ids.shape}")
    T, E = logits.shape
    k = weights.shape[1]
    if weights.shape != (T, k) or ids.shape != (T, k):
        raise ValueError(f"weights {weights.shape} and ids {ids.shape} must both be [T={T}, k]")
    if not 1 <= k <= E:
        raise ValueError(f"need 1 <= k <= E (E={E}, k={k})")
    if E >= 2**31 - 1 or T >= 2**31:
        raise ValueError(f"T={T}, E={E}: the ids are int32 and a grid holds fewer than 2^31 programs")
    if T == 0:
        return
    renorm = bool(renormalize)
    strides = (logits.stride(0), logits.stride(1), weights.stride(0), weights.stride(1), ids.stride(0),
               ids.stride(1))
    block_e = triton.next_power_of_2(E)
    if block_e <= MAX_ROW_EXPERTS and k <= MAX_ROW_K:
        # Tiles of about 2048 logits, made smaller (down to a warp's 128) while that leaves fewer than
        # MIN_PROGRAMS programs.
        block_t = max(1, 2048 // block_e)
        while block_t > 1 and block_t * block_e > 128 and triton.cdiv(T, block_t) < MIN_PROGRAMS:
            block_t //= 2
        tile = block_t * block_e
        num_warps = 16 if tile >= 8192 else 8 if tile >= 2048 else 4 if tile >= 512 else 2 if tile >= 256 else 1
        topk_softmax_rows[(triton.cdiv(T, block_t),)](
            logits, weights, ids, T, E, *strides, K=k, RENORMALIZE=renorm, BLOCK_T=block_t, BLOCK_E=block_e,
            BLOCK_K=triton.next_power_of_2(k), num_warps=num_warps)
    else:
        topk_softmax_any[(T,)](logits, weights, ids, E, k, *strides, RENORMALIZE=renorm,
                               BLOCK_E=min(block_e, 4096), num_warps=8)
