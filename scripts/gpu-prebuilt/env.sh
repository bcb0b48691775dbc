# Sourced by the .gpu scripts: prebuilt binaries in .gpu, the machine's torch and CUDA libraries.
export D2K_ROOT=$PWD D2K_CACHE_DIR=/tmp/d2kc
TL=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")/lib
export LD_LIBRARY_PATH=$PWD/.gpu:$TL:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p build/src; cp .gpu/d2k-worker .gpu/d2k-sandbox build/src/
# The CUTLASS headers cuda solutions include, from the wheel gpu-pack carried (no registry here).
bash .gpu/install-cutlass --from .gpu >&2
# The experts gpu-pack built on the CPU machine, into the cache (what is there already stays).
mkdir -p "$D2K_CACHE_DIR/builds"
for entry in .gpu/builds/*/; do
  [ -e "$D2K_CACHE_DIR/builds/$(basename "$entry")" ] || cp -r "$entry" "$D2K_CACHE_DIR/builds/"
done
if ! nvcc --version 2>/dev/null | cmp -s - .gpu/nvcc-version.txt; then
  echo "env.sh: this nvcc is not the one gpu-pack built the experts with: they are compiled again here" >&2
fi
