// Host emulation of moe/grouped_topk's route_row (v3), lane by lane, against v2's route_row run the same way
// and against a serial float statement of the operations: ids equal and weight bits equal, on every row.
//
// Built and run by ctest (tests/CMakeLists.txt: host_emulation.GroupedTopkRouteRowEqualsV2AndSerialBitForBit,
// 20 rows per shape and kind); by hand:
//   g++ -std=c++20 -O1 -ffp-contract=off -Itasks/moe/grouped_topk/solution/cuda -Iinclude -Itests/host_emulation
//       tests/host_emulation/grouped_topk_route_row.cpp -o /tmp/gtopk_emu        (from the repository root)
//   /tmp/gtopk_emu [rows per shape and kind, 40] [seed, 1]     exit 0 when every element agrees
//   /tmp/gtopk_emu stats [rows]                                 rescans a row, by cache depth
//
// Each lane of the warp is a ucontext fiber running route_row's source; a collective (shfl, shfl_xor, ballot,
// redux max, __syncwarp) waits until all 32 lanes reach it (all must reach the same one) and is resolved
// then. Odd rows run the lanes in reverse order between collectives, so that a read of another lane's
// shared-memory write without a __syncwarp between shows. The exponential is exp2f on both sides (the same
// function of the same argument, which is what the bit comparison needs); the emulated fast reciprocal
// returns NaN outside its range, so that a missing range check shows. Shapes: DeepSeek-V3, the hidden
// shapes' kinds, padded strides, groups not a power of two, k from 1 to 32; rows: normal, the ties
// workload's grids, few distinct values, saturated sigmoids (x = +-100, -95: the slow path), and a mix.
// v3's instantiations: the one d2k_run picks, the generic one (groups, k and keep at run time), and where
// the shape allows, the other compile-time one (DeepSeek-V3 without the spread; the spread variant for 4
// groups keep 2 and 16 groups keep 8, which d2k_run does not use). Not seen by the emulation: a missing
// __syncwarp between a shared-memory write and another lane's read when some other collective lies between
// them (the emulation resolves every collective only when all lanes have reached it).
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "plan.cuh"
#include "route_row_v2.cuh"

namespace {

enum class Op { kNone, kShfl, kShflXor, kBallot, kRedMax, kSync, kDone };

struct Emu {
  ucontext_t sched;
  ucontext_t ctx[32];
  std::vector<char> stack[32];
  Op op[32];
  uint32_t arg[32];
  int src[32];
  uint32_t res[32];
  bool reverse = false;
  long long collectives = 0;
};

Emu* g_emu = nullptr;

uint32_t fbits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float bitsf(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

struct EmuWarp {
  Emu* e;
  int lane;
  uint32_t wait(Op op, uint32_t a, int s) {
    e->op[lane] = op, e->arg[lane] = a, e->src[lane] = s;
    swapcontext(&e->ctx[lane], &e->sched);
    return e->res[lane];
  }
  float shfl(float v, int src) { return bitsf(wait(Op::kShfl, fbits(v), src)); }
  int shfl(int v, int src) { return static_cast<int>(wait(Op::kShfl, static_cast<uint32_t>(v), src)); }
  float shfl_xor(float v, int d) { return bitsf(wait(Op::kShflXor, fbits(v), d)); }
  unsigned ballot(bool pred) { return wait(Op::kBallot, pred ? 1u : 0u, 0); }
  int reduce_max(int v) { return static_cast<int>(wait(Op::kRedMax, static_cast<uint32_t>(v), 0)); }
  void sync() { wait(Op::kSync, 0, 0); }
  unsigned lt_mask() const { return (1u << lane) - 1u; }
  void store_if(int* p, int v, bool pred) const {
    if (pred) *p = v;
  }
  int lowest(unsigned mask) const { return mask == 0 ? -1 : __builtin_ctz(mask); }
};

std::function<void(int, EmuWarp&)>* g_body = nullptr;

void lane_entry(int lane) {
  EmuWarp w{g_emu, lane};
  (*g_body)(lane, w);
  g_emu->op[lane] = Op::kDone;
  // returns to uc_link (the scheduler)
}

// Runs body(lane, warp) on 32 fibers, resolving each collective when all 32 lanes have reached it.
void run_warp(Emu& e, std::function<void(int, EmuWarp&)> body) {
  g_emu = &e;
  g_body = &body;
  for (int l = 0; l < 32; ++l) {
    e.stack[l].resize(1 << 18);
    getcontext(&e.ctx[l]);
    e.ctx[l].uc_stack.ss_sp = e.stack[l].data();
    e.ctx[l].uc_stack.ss_size = e.stack[l].size();
    e.ctx[l].uc_link = &e.sched;
    makecontext(&e.ctx[l], reinterpret_cast<void (*)()>(lane_entry), 1, l);
    e.op[l] = Op::kNone;
  }
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      const int l = e.reverse ? 31 - i : i;
      if (e.op[l] != Op::kDone) swapcontext(&e.sched, &e.ctx[l]);
    }
    int done = 0;
    for (int l = 0; l < 32; ++l) done += e.op[l] == Op::kDone;
    if (done == 32) return;
    if (done != 0) throw std::runtime_error("some lanes finished while others wait at a collective");
    const Op op = e.op[0];
    for (int l = 1; l < 32; ++l)
      if (e.op[l] != op) throw std::runtime_error("lanes at different collectives");
    ++e.collectives;
    switch (op) {
      case Op::kShfl:
        for (int l = 0; l < 32; ++l) {
          if (e.src[l] < 0 || e.src[l] > 31) throw std::runtime_error("shfl source out of range");
          e.res[l] = e.arg[e.src[l]];
        }
        break;
      case Op::kShflXor:
        for (int l = 0; l < 32; ++l) e.res[l] = e.arg[(l ^ e.src[l]) & 31];
        break;
      case Op::kBallot: {
        uint32_t m = 0;
        for (int l = 0; l < 32; ++l) m |= (e.arg[l] & 1u) << l;
        for (int l = 0; l < 32; ++l) e.res[l] = m;
        break;
      }
      case Op::kRedMax: {
        int m = static_cast<int>(e.arg[0]);
        for (int l = 1; l < 32; ++l) m = std::max(m, static_cast<int>(e.arg[l]));
        for (int l = 0; l < 32; ++l) e.res[l] = static_cast<uint32_t>(m);
        break;
      }
      case Op::kSync:
        break;
      default:
        throw std::runtime_error("unknown collective");
    }
    for (int l = 0; l < 32; ++l) e.op[l] = Op::kNone;
  }
}

struct Shape {
  const char* name;
  int E, G, keep, k, renorm;
  float scale;
  int pad;  // extra columns in the logits' row stride (scalar loads)
};

struct Case {
  std::vector<float> logits, bias;  // logits [T, E + pad]
  int T;
};

// Serial float statement of v1/v2's operations, with the same exponential stand-in as the emulation.
void serial(const Shape& sh, const Case& cs, std::vector<float>& w, std::vector<int>& ids) {
  const int E = sh.E, ld = sh.E + sh.pad, per = E / sh.G;
  w.assign(static_cast<size_t>(cs.T) * sh.k, 0.0f), ids.assign(static_cast<size_t>(cs.T) * sh.k, 0);
  std::vector<float> s(E), c(E), gsc(sh.G);
  for (int t = 0; t < cs.T; ++t) {
    for (int e = 0; e < E; ++e) {
      const float x = cs.logits[static_cast<size_t>(t) * ld + e];
      s[e] = 1.0f / (1.0f + std::exp2f(-x * 1.4426950408889634f));
      c[e] = s[e] + cs.bias[e];
    }
    for (int g = 0; g < sh.G; ++g) {
      std::vector<float> v(c.begin() + g * per, c.begin() + (g + 1) * per);
      std::sort(v.begin(), v.end(), std::greater<float>());
      gsc[g] = v[0] + v[1];
    }
    std::vector<int> order(sh.G);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return gsc[a] > gsc[b]; });
    std::vector<int> cand;
    for (int i = 0; i < sh.keep; ++i)
      for (int e = order[i] * per; e < (order[i] + 1) * per; ++e) cand.push_back(e);
    std::sort(cand.begin(), cand.end());
    std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) { return c[a] > c[b]; });
    float sum = 0.0f;
    for (int j = 0; j < sh.k; ++j) sum += s[cand[j]];
    for (int j = 0; j < sh.k; ++j) {
      ids[static_cast<size_t>(t) * sh.k + j] = cand[j];
      w[static_cast<size_t>(t) * sh.k + j] = sh.renorm ? s[cand[j]] / sum * sh.scale : s[cand[j]] * sh.scale;
    }
  }
}

struct Call {
  d2k_tensor in[2], out[2];
  d2k_scalar sc[4];
  d2k_call call;
  char err[D2K_ERROR_CAPACITY];
};

void make_call(Call& c, const Shape& sh, Case& cs, std::vector<float>& w, std::vector<int>& ids) {
  std::memset(&c, 0, sizeof c);
  w.assign(static_cast<size_t>(cs.T) * sh.k, std::nanf("")), ids.assign(static_cast<size_t>(cs.T) * sh.k, -1);
  c.in[0] = {"logits", cs.logits.data(), D2K_FLOAT32, 2, {cs.T, sh.E}, {sh.E + sh.pad, 1}};
  c.in[1] = {"bias", cs.bias.data(), D2K_FLOAT32, 1, {sh.E}, {1}};
  c.out[0] = {"weights", w.data(), D2K_FLOAT32, 2, {cs.T, sh.k}, {sh.k, 1}};
  c.out[1] = {"ids", ids.data(), D2K_INT32, 2, {cs.T, sh.k}, {sh.k, 1}};
  c.sc[0] = {"num_expert_group", D2K_SCALAR_INT, sh.G, 0};
  c.sc[1] = {"topk_group", D2K_SCALAR_INT, sh.keep, 0};
  c.sc[2] = {"renormalize", D2K_SCALAR_INT, sh.renorm, 0};
  c.sc[3] = {"routed_scaling_factor", D2K_SCALAR_FLOAT, 0, sh.scale};
  c.call.abi_version = D2K_ABI_VERSION;
  c.call.inputs = c.in, c.call.num_inputs = 2, c.call.outputs = c.out, c.call.num_outputs = 2;
  c.call.scalars = c.sc, c.call.num_scalars = 4, c.call.error = c.err;
}

// Variants: 0 = the kernel d2k_run picks (the same conditions), 1 = the generic instantiation (groups, k and
// keep at run time), 2 = where the shape allows it, the other compile-time instantiation: for a shape that
// d2k_run routes through the spread variant, the non-spread one with the same constants; for a full shape
// of k 8 whose kept groups hold 128 experts, the spread variant (d2k_run uses it for DeepSeek-V3 only).
template <int NT, bool FULL>
bool run_v3_nt(const gtopk::Problem& p, long long t, Emu& e, int variant) {
  std::vector<float> buf(64 * NT, std::nanf(""));
  std::vector<int> rec(gtopk::kMaxK, -7);
  auto body = [&](auto gsc, auto kc, auto keep) {
    run_warp(e, [&](int lane, EmuWarp& w) {
      gtopk::route_row<NT, FULL, decltype(gsc)::value, decltype(kc)::value, decltype(keep)::value>(p, t, lane, w, buf.data(),
                                                                                                 rec.data());
    });
    return true;
  };
  using Z = std::integral_constant<int, 0>;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  using I8 = std::integral_constant<int, 8>;
  using I16 = std::integral_constant<int, 16>;
  const bool g8 = p.group_slots == 8;
  const bool ds = FULL && g8 && p.k == 8 && p.keep == 4;
  if (variant == 1) return body(Z{}, Z{}, Z{});
  if constexpr (NT == 8) {
    if (variant == 0) {
      if constexpr (FULL) {
        if (ds) return body(I8{}, I8{}, I4{});
        return body(Z{}, Z{}, Z{});
      }
      if (g8) return body(I8{}, Z{}, Z{});
      return body(Z{}, Z{}, Z{});
    }
    if constexpr (FULL) {
      if (ds) return body(I8{}, I8{}, Z{});
      if (p.k == 8 && p.group_slots == 4 && p.groups == 4 && p.keep == 2) return body(I4{}, I8{}, I2{});
      if (p.k == 8 && p.group_slots == 16 && p.groups == 16 && p.keep == 8) return body(I16{}, I8{}, I8{});
    }
    return false;
  } else {
    if (variant == 0) return body(Z{}, Z{}, Z{});
    return false;
  }
}

template <int NT, bool FULL>
void run_v2_nt(const gtopk::Problem& p, long long t, Emu& e) {
  run_warp(e, [&](int lane, EmuWarp& w) { gtopk_v2::route_row<NT, FULL>(p, t, lane, w); });
}

// Returns false when the variant does not apply to the shape (nothing ran).
bool run_row(int version, int nt, bool full, const gtopk::Problem& p, long long t, Emu& e, int variant) {
#define D2K_NT(N)                                                           \
  if (nt == N) {                                                            \
    if constexpr (N % 4 == 0) {                                             \
      if (full) {                                                           \
        if (version == 3) return run_v3_nt<N, true>(p, t, e, variant);      \
        run_v2_nt<N, true>(p, t, e);                                        \
        return true;                                                        \
      }                                                                     \
    }                                                                       \
    if (version == 3) return run_v3_nt<N, false>(p, t, e, variant);         \
    run_v2_nt<N, false>(p, t, e);                                           \
    return true;                                                            \
  }
  D2K_NT(1) D2K_NT(2) D2K_NT(4) D2K_NT(8) D2K_NT(16) D2K_NT(32)
#undef D2K_NT
  throw std::runtime_error("no nt");
}

enum Kind { kNormal, kTies, kFew, kSaturated, kMixedSat, kKinds };
const char* kind_name[] = {"normal", "ties", "few-values", "saturated", "mixed-saturated"};

Case make_case(const Shape& sh, int T, Kind kind, std::mt19937& rng) {
  Case cs;
  cs.T = T;
  const int ld = sh.E + sh.pad;
  cs.logits.assign(static_cast<size_t>(T) * ld, 12345.0f);
  cs.bias.assign(sh.E, 0.0f);
  std::normal_distribution<float> n1(0.0f, 1.0f), nb(0.0f, 0.1f);
  std::uniform_int_distribution<int> pick(0, 2);
  float few[3] = {n1(rng), n1(rng), n1(rng)};
  float fewb[2] = {nb(rng), nb(rng)};
  for (int e = 0; e < sh.E; ++e) {
    switch (kind) {
      case kNormal: cs.bias[e] = nb(rng); break;
      case kTies: cs.bias[e] = std::round(nb(rng) / 0.2f) * 0.2f; break;
      case kFew: cs.bias[e] = fewb[pick(rng) & 1]; break;
      case kSaturated: cs.bias[e] = (pick(rng) == 0) ? 0.0f : -0.0f; break;
      case kMixedSat: cs.bias[e] = std::round(nb(rng) / 0.2f) * 0.2f; break;
      default: break;
    }
  }
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < sh.E; ++e) {
      float& x = cs.logits[static_cast<size_t>(t) * ld + e];
      switch (kind) {
        case kNormal: x = n1(rng); break;
        case kTies: x = std::round(n1(rng)); break;
        case kFew: x = (t % 4 == 0) ? few[0] : few[pick(rng)]; break;
        case kSaturated: {
          const int r = pick(rng);
          x = r == 0 ? 100.0f : r == 1 ? -100.0f : (pick(rng) ? 30.0f : -95.0f);
          break;
        }
        case kMixedSat: x = (pick(rng) == 0) ? -90.0f - 10.0f * static_cast<float>(pick(rng)) : std::round(n1(rng) * 2.0f); break;
        default: break;
      }
    }
  return cs;
}


int stats_main(int rows) {
  std::mt19937 rng(7);
  const Shape sh = {"deepseek-v3", 256, 8, 4, 8, 1, 2.5f, 0};
  for (int kind = 0; kind < 2; ++kind) {
    Case cs = make_case(sh, rows, static_cast<Kind>(kind), rng);
    std::vector<float> w; std::vector<int> ids;
    serial(sh, cs, w, ids);
    for (int D = 2; D <= 4; ++D) {
      long long refills = 0, rows_with = 0;
      for (int t = 0; t < rows; ++t) {
        int wins[32] = {0}; int r = 0;
        for (int j = 0; j < sh.k; ++j) {
          const int lane = ids[t * sh.k + j] / 8;
          ++wins[lane];
          if (j < sh.k - 1 && wins[lane] >= D) ++r;
        }
        refills += r; rows_with += r > 0;
      }
      std::printf("%s depth %d: %.3f rescans a row, %.1f%% of rows rescan\n", kind_name[kind], D, double(refills) / rows, 100.0 * rows_with / rows);
    }
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "stats") return stats_main(argc > 2 ? std::atoi(argv[2]) : 20000);
  const int rows_per = argc > 1 ? std::atoi(argv[1]) : 40;
  const unsigned seed = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1u;
  const Shape shapes[] = {
      {"deepseek-v3", 256, 8, 4, 8, 1, 2.5f, 0},
      {"v2-grouping", 160, 8, 3, 6, 0, 16.0f, 0},
      {"moonlight", 64, 1, 1, 6, 1, 2.446f, 0},
      {"E32-G2", 32, 2, 1, 3, 1, 1.0f, 0},
      {"E64-G32", 64, 32, 5, 8, 1, 1.0f, 0},
      {"E1024-G1-k32", 1024, 1, 1, 32, 1, 1.0f, 0},
      {"E512-G4-k16", 512, 4, 2, 16, 1, 1.0f, 0},
      {"E96-G3", 96, 3, 2, 8, 1, 1.0f, 0},
      {"E120-G5", 120, 5, 2, 7, 1, 1.0f, 0},
      {"keep8of8-k32", 256, 8, 8, 32, 1, 2.5f, 0},
      {"keep1", 256, 8, 1, 8, 1, 2.5f, 0},
      {"E128-G16", 128, 16, 6, 8, 1, 1.0f, 0},
      {"padded", 256, 8, 4, 8, 1, 2.5f, 3},
      {"k1", 256, 8, 4, 1, 1, 2.5f, 0},
      {"k32", 256, 8, 4, 32, 1, 2.5f, 0},
      {"E48-G24-k32", 48, 24, 24, 32, 1, 1.0f, 0},
      {"E256-G4-k8", 256, 4, 2, 8, 1, 2.5f, 0},
      {"E256-G16-keep8", 256, 16, 8, 8, 1, 2.5f, 0},
  };
  std::mt19937 rng(seed);
  Emu emu;
  long long rows = 0, bad_v2 = 0, bad_serial = 0, v2_bad_serial = 0;
  for (const Shape& sh : shapes) {
    for (int kind = 0; kind < kKinds; ++kind) {
      Case cs = make_case(sh, rows_per, static_cast<Kind>(kind), rng);
      std::vector<float> w_ref;
      std::vector<int> id_ref;
      serial(sh, cs, w_ref, id_ref);
      for (int variant = 0; variant < 3; ++variant) {
        Call c2, c3;
        std::vector<float> w2, w3;
        std::vector<int> i2, i3;
        make_call(c2, sh, cs, w2, i2);
        make_call(c3, sh, cs, w3, i3);
        gtopk::Problem p2, p3;
        int nt = 0, nt3 = 0;
        bool full = false, full3 = false;
        if (gtopk::plan(&c2.call, p2, nt, full) != 0 || gtopk::plan(&c3.call, p3, nt3, full3) != 0) {
          std::printf("%s: plan failed: %s\n", sh.name, c2.err);
          return 1;
        }
        bool ran = true;
        for (long long t = 0; t < cs.T && ran; ++t) {
          emu.reverse = (t & 1) != 0;
          if (variant == 0) run_row(2, nt, full, p2, t, emu, 0);
          ran = run_row(3, nt, full, p3, t, emu, variant);
        }
        if (!ran) continue;
        if (kind == 0) std::printf("%s: variant %d runs\n", sh.name, variant);
        if (variant == 0) {
          for (size_t i = 0; i < w_ref.size(); ++i)
            if (i2[i] != id_ref[i] || fbits(w2[i]) != fbits(w_ref[i])) ++v2_bad_serial;
        }
        long long local_bad = 0;
        for (size_t i = 0; i < w_ref.size(); ++i) {
          const bool d_serial = i3[i] != id_ref[i] || fbits(w3[i]) != fbits(w_ref[i]);
          bad_serial += d_serial;
          if (variant == 0) {
            const bool d2 = i3[i] != i2[i] || fbits(w3[i]) != fbits(w2[i]);
            bad_v2 += d2;
            local_bad += d2 || d_serial;
          } else {
            local_bad += d_serial;
          }
        }
        if (local_bad)
          std::printf("MISMATCH %s %s variant %d: %lld elements (nt %d full %d)\n", sh.name, kind_name[kind], variant,
                      local_bad, nt, full);
        rows += cs.T;
      }
    }
  }
  std::printf("rows %lld (each of v3's instantiations counted), collectives %lld\n", rows, emu.collectives);
  std::printf("v3 vs v2 (emulated): %lld differing elements; v3 vs serial: %lld; v2 vs serial: %lld\n", bad_v2,
              bad_serial, v2_bad_serial);
  return (bad_v2 || bad_serial || v2_bad_serial) ? 1 : 0;
}
