# Shared by the single-process benchmarks against native HIP (sourced: bench/h200.sh,
# bench/launch.sh): the output folder, the build's libraries, its kernel image and its two
# benchmark programs. The caller sets B (the build) first.
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)
native=$B/bench/bench-native
client=$B/bench/bench-client
