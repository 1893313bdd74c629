// OpenBLAS reads OPENBLAS_CORETYPE when it loads; these machines may set it
// to Haswell, which halves its speed on AVX-512 cores. A benchmark that
// compares with OpenBLAS (directly, or through LibTorch) calls this first
// in main(): it drops the variable and re-executes the program, so OpenBLAS
// runs its auto-detected kernels.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace bench_env {
inline void without_openblas_coretype(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE")) {
        unsetenv("OPENBLAS_CORETYPE");
        execv("/proc/self/exe", argv);
    }
}

// Sizes OpenBLAS's own thread pool, when OpenBLAS is loaded (LibTorch's
// products run in it, and at::set_num_threads does not size that pool).
inline void set_openblas_threads(int n) {
    using set_fn = void (*)(int);
    if (auto f = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}
}  // namespace bench_env

// BENCHMARK_MAIN() after without_openblas_coretype.
#define DLGRAPH_BENCH_MAIN_WITHOUT_CORETYPE()                  \
    int main(int argc, char** argv) {                          \
        bench_env::without_openblas_coretype(argv);            \
        benchmark::Initialize(&argc, argv);                    \
        if (benchmark::ReportUnrecognizedArguments(argc, argv)) \
            return 1;                                          \
        benchmark::RunSpecifiedBenchmarks();                   \
        benchmark::Shutdown();                                 \
        return 0;                                              \
    }
