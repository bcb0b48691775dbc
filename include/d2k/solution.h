/* d2k solution ABI, version 1.
 *
 * A solution is a shared object that exports d2k_run (required) and, optionally, d2k_workspace_size,
 * d2k_prepare and d2k_release. The harness owns every buffer: it allocates the inputs, the outputs
 * (destination-passing style) and a scratch workspace of the size the solution asks for. Tensors live
 * on the evaluation device: GPU memory for the cuda device, host memory for the cpu device.
 *
 * This header is plain C, has no dependencies and is all a solution needs; docs/abi.md explains it
 * with a minimal example. It deliberately knows nothing about torch.
 */
#ifndef D2K_SOLUTION_H
#define D2K_SOLUTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define D2K_ABI_VERSION 1
#define D2K_MAX_RANK 8
#define D2K_ERROR_CAPACITY 1024

typedef enum d2k_dtype {
  D2K_FLOAT32 = 0,
  D2K_FLOAT16 = 1,
  D2K_BFLOAT16 = 2,
  D2K_FLOAT8_E4M3 = 3, /* OCP e4m3fn: finite-only, max 448 */
  D2K_INT32 = 4,
  D2K_INT64 = 5,
  D2K_INT8 = 6,
  D2K_UINT8 = 7,
  D2K_FLOAT64 = 8
} d2k_dtype;

/* A strided view of device (or host) memory. Shape and strides count elements, not bytes. */
typedef struct d2k_tensor {
  const char* name; /* the task's name for this tensor, e.g. "x" */
  void* data;
  d2k_dtype dtype;
  int32_t rank;
  int64_t shape[D2K_MAX_RANK];
  int64_t strides[D2K_MAX_RANK];
} d2k_tensor;

typedef enum d2k_scalar_kind { D2K_SCALAR_INT = 0, D2K_SCALAR_FLOAT = 1 } d2k_scalar_kind;

typedef struct d2k_scalar {
  const char* name; /* e.g. "eps" */
  d2k_scalar_kind kind;
  int64_t i; /* set when kind == D2K_SCALAR_INT */
  double f;  /* set when kind == D2K_SCALAR_FLOAT */
} d2k_scalar;

/* Everything one call sees. Inputs and outputs come in the order the task declares them. An in-place
 * output (the task marks it `inplace`) is the same memory as the input of the same name: it appears in
 * both lists with the same data pointer, and holds the input's values when the call starts. */
typedef struct d2k_call {
  int32_t abi_version; /* D2K_ABI_VERSION */
  const d2k_tensor* inputs;
  int32_t num_inputs;
  const d2k_tensor* outputs;
  int32_t num_outputs;
  const d2k_scalar* scalars;
  int32_t num_scalars;
  void* workspace; /* at least the bytes d2k_workspace_size asked for; NULL when it asked for none */
  size_t workspace_bytes;
  void* stream;    /* cudaStream_t on the cuda device, NULL on the cpu device */
  void* prepared;  /* what d2k_prepare stored, or NULL */
  char* error;     /* D2K_ERROR_CAPACITY bytes for a NUL-terminated message when a call fails */
} d2k_call;

/* Every entry point returns 0 on success and non-zero on failure, after writing a message to
 * call->error. The harness turns a failure into a runtime_error trace that carries the message. */

/* Required. Computes the outputs from the inputs on call->stream. The harness synchronizes the device
 * after it returns; the solution must not start host threads or other streams that outlive the call. */
int d2k_run(const d2k_call* call);

/* Optional. Bytes of scratch memory the call needs, for the shapes in `call` (its data pointers are
 * valid but the outputs hold no result yet). Not timed. */
int d2k_workspace_size(const d2k_call* call, size_t* bytes);

/* Optional, one-time and not timed: e.g. re-lay weights out. Store anything in *prepared; it comes back
 * in call->prepared on every later call and is handed to d2k_release at the end. */
int d2k_prepare(const d2k_call* call, void** prepared);
void d2k_release(void* prepared);

#ifdef __cplusplus
}
#endif

#endif /* D2K_SOLUTION_H */
