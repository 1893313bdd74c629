// Shared by the fuzz targets (libFuzzer, built by tests/fuzz/CMakeLists.txt
// with clang, AddressSanitizer and UndefinedBehaviorSanitizer). A dlgraph
// error is the expected answer to a hostile input; anything else (a crash,
// a sanitizer report, another exception, a broken round trip) is a finding.
#pragma once

#include <dlgraph/dlgraph.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace fuzz {

// Aborts with a message: libFuzzer saves the input that got here.
[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
    std::abort();
}

// A file of this process's own, for readers that take a path.
inline std::string scratch_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("dlgraph-fuzz-" + std::to_string(getpid()) + "-" + name)).string();
}

inline void write_file(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) finding("cannot write scratch file " + path);
}

// Memory a fuzzed plan may take: small, so that a hostile shape is refused
// by the limit rather than exhaust the machine.
inline constexpr std::uint64_t max_plan_bytes = 64u << 20;

}  // namespace fuzz
