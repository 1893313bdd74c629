// OpenBLAS reads OPENBLAS_CORETYPE when it loads. Left to itself, Debian
// 12's OpenBLAS (0.3.21) does not know newer Xeons (family 6 model 207 was
// detected as "Prescott", its SSE3 fallback: LibTorch's MLP ran 6-10x
// slower), and some of these machines set the variable to Haswell (half
// speed on AVX-512 cores). So a benchmark that compares with OpenBLAS
// (directly, or through LibTorch) calls this first in main(): it sets the
// variable to the best core this CPU runs (SkylakeX with AVX-512 F, BW, DQ
// and VL; Haswell with AVX2 and FMA; else none, auto-detection) and
// re-executes the program once (with_best_reference_env), so OpenBLAS is
// the strongest reference.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace bench_env {
inline const char* best_openblas_core() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return nullptr;
}
// LibTorch's CPU ops run on OpenMP (libgomp), whose idle workers spin: on
// two cores they took the cores from OpenBLAS's own threads, and LibTorch
// on two threads ran 2-4x slower than on one. With OMP_WAIT_POLICY=PASSIVE
// (unless set) two threads are faster than one, as they should be.
inline void with_best_reference_env(char** argv) {
    bool changed = false;
    const char* want = best_openblas_core();
    const char* have = std::getenv("OPENBLAS_CORETYPE");
    if (want && (!have || std::strcmp(have, want) != 0)) {
        setenv("OPENBLAS_CORETYPE", want, 1);
        changed = true;
    }
    if (!want && have) {
        unsetenv("OPENBLAS_CORETYPE");
        changed = true;
    }
    if (!std::getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        changed = true;
    }
    if (changed) execv("/proc/self/exe", argv);
}

// Sizes OpenBLAS's own thread pool, when OpenBLAS is loaded (LibTorch's
// products run in it, and at::set_num_threads does not size that pool).
inline void set_openblas_threads(int n) {
    using set_fn = void (*)(int);
    if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}
}  // namespace bench_env

// BENCHMARK_MAIN() after with_best_reference_env.
#define DLGRAPH_BENCH_MAIN_BEST_REFERENCE()                    \
    int main(int argc, char** argv) {                          \
        bench_env::with_best_reference_env(argv);              \
        benchmark::Initialize(&argc, argv);                    \
        if (benchmark::ReportUnrecognizedArguments(argc, argv)) \
            return 1;                                          \
        benchmark::RunSpecifiedBenchmarks();                   \
        benchmark::Shutdown();                                 \
        return 0;                                              \
    }
