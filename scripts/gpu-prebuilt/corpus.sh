#!/usr/bin/env bash
set -u
source .gpu/env.sh
KEEP_GOING=1 D2K=$PWD/.gpu/d2k WORK=/tmp/corpus-gpu timeout 300 bash tests/e2e/corpus_gpu.sh > $OUT/corpus_gpu.txt 2>&1; echo "corpus_gpu rc=$?"; grep -E "^(ok|FAIL)" $OUT/corpus_gpu.txt | cut -c1-220 | tail -40
