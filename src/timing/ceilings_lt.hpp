// The cuBLASLt products behind the dense fp8 and int8 ceilings, and the configurations they are asked
// in. cuBLASLt's heuristic can offer algorithms that cublasLtMatmul then refuses (the H200 refused all
// eight it offered for e4m3 -> bf16), so a rate is taken from the first of several configurations that
// runs, and each attempt says what was offered and what each candidate returned. tools/lt_probe.cpp
// runs the same attempts by hand. Only with D2K_WITH_CUDA.
#pragma once

#ifdef D2K_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "timing/cuda_util.hpp"

namespace d2k {

// One way of asking for D = alpha * op(A) op(B) + beta * C with n x n x n one-byte operands, alpha 1
// and beta 0. Column-major, as cuBLASLt counts: TN (A transposed, B not) keeps both operands K-major.
struct LtConfig {
  cudaDataType ab_type = CUDA_R_8F_E4M3;  // A and B
  cudaDataType c_type = CUDA_R_16BF;
  cudaDataType d_type = CUDA_R_16BF;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale_type = CUDA_R_32F;   // of alpha and beta
  bool a_transposed = true;
  bool b_transposed = false;
  bool in_place = true;                   // C and D one buffer (needs c_type == d_type)
  bool ab_scales = true;                  // A and B scale pointers, each to a device 1.0f
  bool d_scale = false;                   // D scale pointer (1.0f) and amax(D): an fp8 D only
  bool scalar_scale_modes = false;        // the scale modes set to SCALAR_32F, not left to the default
  std::optional<int8_t> fast_accum;       // CUBLASLT_MATMUL_DESC_FAST_ACCUM, where set
  bool alignment_hints = false;           // the heuristic told the operands' alignment (256 bytes)
  bool workspace = true;                  // 32 MiB of workspace, else none
  bool algo_by_matmul = false;            // no heuristic query: cublasLtMatmul picks (algo NULL)

  // "e4m3 TN -> bf16 (C bf16, in place), A/B scales, compute 32F"
  std::string describe() const;
};

// What the fp8 and int8 ceilings try, in order: first the documented configuration (docs/metrics.md),
// then alternatives that the documentation and working users (PyTorch's _scaled_mm, TransformerEngine,
// NVIDIA's LtFp8Matmul sample) also use.
std::vector<LtConfig> fp8_configs();
std::vector<LtConfig> int8_configs();

// Device operands for products of size n: random A and B (fp8 e4m3 or int8: never zeros, which draw
// less power and run faster than real data), C and D large enough for 4-byte outputs, unit scales, an
// amax cell and the workspace. Each scale in an allocation of its own, so every pointer is 256-byte
// aligned.
struct LtOperands {
  LtOperands(int n, bool fp8);

  int n;
  bool fp8;  // e4m3 operands, else int8
  DeviceBuffer a, b, c, d, a_scale, b_scale, d_scale, amax, workspace;
};

// One heuristic candidate: cublasLtMatmulAlgoCheck's and cublasLtMatmul's statuses, and its time.
struct LtCandidate {
  cublasStatus_t check = CUBLAS_STATUS_SUCCESS;
  std::optional<cublasStatus_t> run;  // none: not run
  std::size_t workspace_bytes = 0;
  std::optional<double> ms;  // median per product, where timed
};

struct LtAttempt {
  int n = 0;
  bool by_matmul = false;   // LtConfig::algo_by_matmul
  std::string failed_call;  // the setup call that failed ("cublasLtMatmulAlgoGetHeuristic"), if one did
  cublasStatus_t failed_status = CUBLAS_STATUS_SUCCESS;
  std::vector<LtCandidate> candidates;  // what the heuristic offered, best estimate first (with
                                        // algo_by_matmul: one, cublasLtMatmul's own choice)
  std::string stream_error;             // a product was accepted but the stream then failed
  int chosen = -1;                      // the fastest timed candidate

  bool ran() const { return chosen >= 0; }
  double rate() const;  // 2 n^3 per second of the chosen candidate, in 1e12
  // "heuristic offered 8; check/run: SUCCESS/NOT_SUPPORTED x8"
  std::string summary() const;
};

enum class LtTiming {
  first_that_runs,  // time only the first candidate that runs (a ceiling)
  each_that_runs,   // time every candidate that runs and choose the fastest (the probe)
};

// Tries `config` on `operands`: heuristic, then each candidate in order. cuBLASLt's refusals are data
// in the attempt; a failing CUDA runtime call (events, synchronization) throws d2k::Error.
LtAttempt attempt_lt(const LtConfig& config, const LtOperands& operands, cudaStream_t stream, LtTiming timing,
                     int warmup, int samples);

// "CUBLAS_STATUS_NOT_SUPPORTED" -> "NOT_SUPPORTED"
std::string short_status(cublasStatus_t status);

// "cuBLASLt 13.1.0 (headers 13.1.0, cudart 13000, /usr/local/cuda/lib64/libcublasLt.so.13)"
std::string lt_version();

}  // namespace d2k
#endif
