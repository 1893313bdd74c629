// The command line: the input, split at NUL bytes, is the argument list
// after "dlgraph"; the arguments are parsed as the CLI parses them
// (options, counts, sizes, feeds), never run.
#include <cstring>
#include <vector>

#define main dlgraph_cli_main
#include "dlgraph.cpp"
#undef main

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> args{"dlgraph"};
    std::string cur;
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == 0) {
            args.push_back(cur);
            cur.clear();
        } else {
            cur += static_cast<char>(data[i]);
        }
    }
    args.push_back(cur);
    if (args.size() > 64) return 0;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    try {
        Args a = parse_args(static_cast<int>(args.size()), argv.data());
        (void)fetch_targets(a.fetch);
    } catch (const dlgraph::error&) {
    }
    return 0;
}
