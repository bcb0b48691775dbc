# Every file of the cheating corpus (tests/corpus) compiles, so that a broken cheat is seen in CI and
# not first on the GPU machine. Each is built as d2k's builder builds the folder solution it is evaluated
# as: the cheat with the corpus headers it includes beside it, the ABI header the only include folder,
# the builder's flags, and nothing linked; --no-undefined stands in for the worker's dlopen (a symbol no
# library of the solution's provides would not resolve there either). Compile only: corpus.sh and
# corpus_gpu.sh evaluate them. The cuda files need nvcc, not a GPU; without nvcc they are skipped, said so.
source "$(dirname "$0")/lib.bash"
corpus="$D2K_ROOT/tests/corpus"
include="$D2K_ROOT/include"
cxx=${CXX:-c++}

# The cheats that must not build: their test is the compile error (corpus.sh, sandbox_cpu.sh) or the
# symbol that does not resolve when the worker loads them (corpus_gpu.sh).
must_fail=" library_torch.cpp sandbox_include_host_file.cpp library_cublas_cuda.cu "

# build FILE: compiles and links FILE into a shared object in $WORK/<name>/; writes its exit status
# to status there and the compiler's output to build.log.
build() {
  local file=$1 name; name=$(basename "$file")
  local dir="$WORK/${name%.*}" code=0
  mkdir -p "$dir"
  cp "$file" "$dir/"
  for header in $(corpus_headers "$file"); do cp "$corpus/$header" "$dir/"; done
  if [[ $name == *.cu ]]; then
    (cd "$dir" && nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -I"$include" \
      "$name" -Xlinker --no-undefined -o solution.so) >"$dir/build.log" 2>&1 || code=$?
  else
    (cd "$dir" && "$cxx" -O2 -std=c++17 -shared -fPIC -I"$include" "$name" -Wl,--no-undefined -o solution.so) \
      >"$dir/build.log" 2>&1 || code=$?
  fi
  echo "$code" >"$dir/status"
}

have_nvcc=1
command -v nvcc >/dev/null || { have_nvcc=0; echo "note: no nvcc on PATH: the cuda files are not compiled"; }
files=()
for file in "$corpus"/*.cpp "$corpus"/*.cu; do
  [[ $file == *.cu && $have_nvcc == 0 ]] || files+=("$file")
done
# Builds run side by side, D2K_JOBS at a time (every core when unset): nvcc takes seconds a file.
jobs=${D2K_JOBS:-$(nproc)}
for file in "${files[@]}"; do
  build "$file" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
done
wait

built=0 failed=0
for file in "${files[@]}"; do
  name=$(basename "$file")
  if [ "$(cat "$WORK/${name%.*}/status")" = 0 ]; then
    case "$must_fail" in
      *" $name "*) echo "FAIL: $name built, but its test is that it does not" >&2; failed=$((failed + 1));;
      *) built=$((built + 1));;
    esac
  else
    case "$must_fail" in
      *" $name "*) echo "ok: $name does not build, as it must";;
      *) echo "FAIL: $name does not build:" >&2; head -20 "$WORK/${name%.*}/build.log" >&2; failed=$((failed + 1));;
    esac
  fi
done
[ "$failed" = 0 ] || { echo "FAIL: $failed corpus file(s)" >&2; exit 1; }
echo "ok: $built corpus files build"
