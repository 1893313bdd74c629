// .npy bytes: parse, and for what parses, write and parse again (the same
// dtype, shape and bytes).
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    dlgraph::Tensor t;
    try {
        t = dlgraph::parse_npy(bytes, "fuzz.npy");
    } catch (const dlgraph::error&) {
        return 0;
    }
    const std::string again = dlgraph::to_npy_bytes(t);
    const dlgraph::Tensor u = dlgraph::parse_npy(again, "rewritten.npy");
    if (u.dtype() != t.dtype() || !(u.shape() == t.shape()) || dlgraph::to_npy_bytes(u) != again)
        fuzz::finding("a .npy that parses does not survive a write and a read");
    return 0;
}
