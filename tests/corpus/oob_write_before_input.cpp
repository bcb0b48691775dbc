// Threat 12, writing outside the outputs: computes correctly, then keeps a flag in the byte just
// before its input x (memory it does not own, which happens to be writable).
// Caught: every tensor sits between guard regions of an unpredictable pattern, checked after each
// call: rejected, "wrote outside its tensors".
#include "honest_quant.h"  // an honest quant/fp8_group_quant; the cheat is below

extern "C" int d2k_run(const d2k_call* call) {
  quantize(call);
  static_cast<unsigned char*>(call->inputs[0].data)[-1] ^= 0x5A;
  return 0;
}
