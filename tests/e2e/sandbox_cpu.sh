# Threat 14 on the cpu device: the sandbox corpus (tests/corpus/sandbox_*) under the default strict
# sandbox, each escape beside a control run with --sandbox off that shows the escape is real.
source "$(dirname "$0")/lib.bash"
task=norm/fused_add_rmsnorm
corpus="$D2K_ROOT/tests/corpus"
expert="$D2K_ROOT/tasks/$task/solution/cpu/fused_add_rmsnorm.cpp"
ext=cpp device=cpu
source "$(dirname "$0")/sandbox_lib.bash"

# Build time: a host file in an #include is not there; its content never reaches the log.
expect_eval include_host_file "$corpus/sandbox_include_host_file.cpp" strict compile_error
expect_log_lacks include_host_file strict "root:"
expect_eval include_host_file "$corpus/sandbox_include_host_file.cpp" off compile_error
expect_log_has include_host_file off "root:"  # control: the compiler shows the file without a sandbox
# ... nor is the d2k tree: including the expert solution would copy it.
printf '#include "%s"\n' "$expert" > "$WORK/include_tree.cpp"
expect_eval include_tree "$WORK/include_tree.cpp" strict compile_error
expect_eval include_tree "$WORK/include_tree.cpp" off passed

run_corpus
