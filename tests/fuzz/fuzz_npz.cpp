// .npz archives (zip, stored or deflated members): read every member.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = fuzz::scratch_path("input.npz");
    fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
    try {
        for (auto& [name, t] : dlgraph::read_npz(path))
            if (t.bytes() != static_cast<std::size_t>(t.numel()) * dlgraph::dtype_size(t.dtype()))
                fuzz::finding("member '" + name + "' has a size that does not match its shape");
    } catch (const dlgraph::error&) {
    }
    return 0;
}
