#!/usr/bin/env bash
# The fp8 probe, the ceilings, the GPU unit tests that need no torch.
set -u
source .gpu/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
timeout -k 5 90 .gpu/d2k-lt-probe > $OUT/lt-probe.txt 2>&1; echo "probe rc=$?"; grep -vE "^\s*$" $OUT/lt-probe.txt | cut -c1-220 | head -70
timeout 60 python3 -c "import torch; s=torch.ones((),device='cuda'); a=torch.randn(8192,8192,device='cuda').to(torch.float8_e4m3fn); b=torch.randn(8192,8192,device='cuda').to(torch.float8_e4m3fn).t(); print('torch _scaled_mm ok', torch._scaled_mm(a,b,scale_a=s,scale_b=s,out_dtype=torch.bfloat16).float().abs().mean().item())" 2>&1 | tail -2
.gpu/d2k ceilings --device cuda --refresh > $OUT/ceilings.txt 2>&1; echo "ceilings rc=$?"; tail -4 $OUT/ceilings.txt
for t in test_timing_gpu test_worker_gpu test_reference_gpu; do timeout 200 .gpu/$t > $OUT/$t.txt 2>&1; echo "$t rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/$t.txt | head; done
