// IDX files (MNIST's format), plain or gzipped as the dataset packages ship.
#include <dlgraph/data/idx.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string content(reinterpret_cast<const char*>(data), size);
    try {
        const auto a = dlgraph::data::parse_idx(content, "fuzz.idx");
        std::size_t n = a.dims.empty() ? 0 : 1;
        for (auto d : a.dims) n *= static_cast<std::size_t>(d);
        if (n != a.bytes.size()) fuzz::finding("IDX dims do not match the bytes read");
    } catch (const dlgraph::error&) {
    }
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {  // gzip: through the file reader
        static const std::string path = fuzz::scratch_path("input.idx.gz");
        fuzz::write_file(path, content);
        try {
            (void)dlgraph::data::read_idx(path);
        } catch (const dlgraph::error&) {
        }
    }
    return 0;
}
