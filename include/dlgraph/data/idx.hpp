// Reading IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or
// not, and cutting a data set into shuffled mini-batches. Needs zlib (the
// dlgraph::dlgraph target links it).
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dlgraph/tensor.hpp"

namespace dlgraph::data {

// The whole (decompressed) content of a file; gzip or plain, zlib decides.
inline std::string read_gz(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (!f) throw io_error("dlgraph.io.open", "cannot open '" + path + "' for reading");
    std::string out;
    char buf[1 << 16];
    for (;;) {
        int n = gzread(f, buf, sizeof buf);
        if (n < 0) {
            int code = 0;
            std::string why = gzerror(f, &code);
            gzclose(f);
            throw io_error("dlgraph.io.gzip", "'" + path + "': " + why);
        }
        if (n == 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    gzclose(f);
    return out;
}

// An IDX array: unsigned bytes (type 0x08) as a UINT8 payload with dims.
struct idx_array {
    std::vector<std::int64_t> dims;
    std::vector<std::uint8_t> bytes;
};

// Parses IDX content (only unsigned-byte data, as MNIST uses).
inline idx_array parse_idx(const std::string& content, const std::string& what) {
    auto fail = [&](const std::string& why) { throw io_error("dlgraph.io.idx", "'" + what + "': " + why); };
    if (content.size() < 4) fail("too short for an IDX header");
    auto u8 = [&](std::size_t i) { return static_cast<std::uint8_t>(content[i]); };
    if (u8(0) != 0 || u8(1) != 0) fail("bad magic (not an IDX file)");
    if (u8(2) != 0x08) fail("element type 0x" + std::to_string(u8(2)) + " is not supported (only unsigned bytes)");
    const int rank = u8(3);
    if (rank < 1 || rank > 4) fail("rank " + std::to_string(rank) + " is not supported");
    const std::size_t header = 4 + 4 * static_cast<std::size_t>(rank);
    if (content.size() < header) fail("truncated header");
    idx_array a;
    std::size_t n = 1;
    bool zero = false;
    for (int d = 0; d < rank; ++d) {
        std::size_t o = 4 + 4 * static_cast<std::size_t>(d);
        std::uint32_t v = (std::uint32_t(u8(o)) << 24) | (std::uint32_t(u8(o + 1)) << 16) | (std::uint32_t(u8(o + 2)) << 8) |
                          std::uint32_t(u8(o + 3));
        a.dims.push_back(v);
        // The bytes the dims promise, checked against the file below. Zero
        // dims count as one in the bound, as in check_shape_size, so no
        // product of the dims can overflow later either.
        if (v == 0) zero = true;
        else if (n > max_shape_bytes / v) fail("dims too large");
        else n *= v;
    }
    if (zero) n = 0;
    if (content.size() - header < n)
        fail("truncated: header promises " + std::to_string(n) + " bytes of data, found " +
             std::to_string(content.size() - header));
    a.bytes.assign(content.begin() + static_cast<std::ptrdiff_t>(header),
                   content.begin() + static_cast<std::ptrdiff_t>(header + n));
    return a;
}

inline idx_array read_idx(const std::string& path) { return parse_idx(read_gz(path), path); }

// A labelled data set in memory: images as floats in [0, 1], labels int64.
struct dataset {
    std::int64_t count = 0;
    std::int64_t features = 0;
    std::vector<float> images;        // count x features
    std::vector<std::int64_t> labels; // count
};

// Loads an images file and a labels file (Fashion-MNIST layout).
inline dataset load_images_and_labels(const std::string& images_path, const std::string& labels_path) {
    idx_array im = read_idx(images_path), lb = read_idx(labels_path);
    if (im.dims.size() < 2 || lb.dims.size() != 1 || im.dims[0] != lb.dims[0])
        throw io_error("dlgraph.io.idx", "'" + images_path + "' and '" + labels_path + "' do not hold the same number of examples");
    dataset d;
    d.count = im.dims[0];
    d.features = 1;
    for (std::size_t i = 1; i < im.dims.size(); ++i) d.features *= im.dims[i];
    d.images.resize(im.bytes.size());
    std::transform(im.bytes.begin(), im.bytes.end(), d.images.begin(), [](std::uint8_t b) { return b / 255.0f; });
    d.labels.assign(lb.bytes.begin(), lb.bytes.end());
    return d;
}

// Mini-batches over a data set in a shuffled order (reshuffled by each
// `shuffle` call). Batches are written into tensors the caller reuses, so
// iterating allocates nothing once they have their size.
class batcher {
public:
    batcher(const dataset& d, std::int64_t batch_size, std::uint64_t seed = 0)
        : d_(d), batch_(batch_size), order_(static_cast<std::size_t>(d.count)), rng_(seed) {
        std::iota(order_.begin(), order_.end(), std::int64_t{0});
    }
    void shuffle() { std::shuffle(order_.begin(), order_.end(), rng_); }
    std::int64_t batches() const { return (d_.count + batch_ - 1) / batch_; }
    // Fills batch `b` (the last one may be smaller): x [n, features] FP32,
    // y [n, 1] INT64.
    void fill(std::int64_t b, Tensor& x, Tensor& y) const {
        const std::int64_t first = b * batch_, n = std::min(batch_, d_.count - first);
        x.resize(DataType::FP32, {n, d_.features});
        y.resize(DataType::INT64, {n, 1});
        float* xp = x.data<float>();
        std::int64_t* yp = y.data<std::int64_t>();
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t src = order_[static_cast<std::size_t>(first + i)];
            std::copy_n(d_.images.data() + src * d_.features, d_.features, xp + i * d_.features);
            yp[i] = d_.labels[static_cast<std::size_t>(src)];
        }
    }

private:
    const dataset& d_;
    std::int64_t batch_;
    std::vector<std::int64_t> order_;
    std::mt19937_64 rng_;
};

}  // namespace dlgraph::data
