// Emits every case of cases.hpp as one header (namespace case_N each, each
// with an arena budget of 1 MiB that it meets) and a table of their
// type-erased entries: the fixed models that test_fixed.cpp compiles and
// compares with Session<cpu>. Also writes over_budget.hpp beside it: the
// demo's MLP with a budget of 1000 bytes, which its arena exceeds (the
// compile-fail test tests/fixed/over_budget.cpp), and mlp.hpp, the same
// model without a budget (bench/bench_fixed.cpp), and mlp_int8.hpp, the
// same with INT8 products (test_fixed.cpp, bench_fixed.cpp).
//   gen_models OUT.hpp [--small]   (--small: the MLPs with 16 hidden units)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cases.hpp"

int main(int argc, char** argv) {
    const bool small = argc == 3 && std::string(argv[2]) == "--small";
    if (argc != 2 && !small) {
        std::cerr << "usage: gen_models OUT.hpp [--small]\n";
        return 2;
    }
    try {
        std::string all = "// Written by tests/fixed/gen_models.cpp.\n#pragma once\n#include <cstddef>\n#include <cstdint>\n\n";
        for (int i = 0; i < fixed_cases::count; ++i) {
            const auto c = fixed_cases::make_case(i, small);
            all += fixed_cases::emit_case(c, fixed_cases::case_name(i), 1 << 20).header + "\n";
        }
        all += std::string("inline constexpr bool fixed_models_small = ") + (small ? "true" : "false") + ";\n";
        all += "struct fixed_entry {\n    void (*run)(const void* const*, void* const*, std::byte*) noexcept;\n"
               "    std::size_t arena_bytes, planned_bytes, session_arena_bytes;\n};\n"
               "inline constexpr fixed_entry fixed_entries[] = {\n";
        for (int i = 0; i < fixed_cases::count; ++i) {
            const std::string n = fixed_cases::case_name(i);
            all += "    {" + n + "::run_erased, " + n + "::arena_bytes, " + n + "::planned_bytes, " + n +
                   "::session_arena_bytes},\n";
        }
        all += "};\n";
        std::ofstream(argv[1]) << all;
        const std::string dir = std::filesystem::path(argv[1]).parent_path().string();
        std::ofstream(dir + "/mlp.hpp")
            << fixed_cases::emit_case(fixed_cases::make_case(fixed_cases::random_count), "mlp").header;
        std::ofstream(dir + "/mlp_int8.hpp") << fixed_cases::emit_int8_case(small).header;
        std::ofstream(dir + "/over_budget.hpp")
            << fixed_cases::emit_case(fixed_cases::make_case(fixed_cases::random_count), "mlp", 1000).header;
    } catch (const std::exception& e) {
        std::cerr << "gen_models: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
