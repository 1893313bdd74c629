// IDX reading (gzip and plain) and shuffled mini-batches, on small files the
// test writes itself.
#include <dlgraph/data/idx.hpp>

#include <filesystem>
#include <set>

#include "test_helpers.hpp"

using namespace dlgraph;

namespace {
std::string idx_bytes(std::vector<std::uint32_t> dims, const std::vector<std::uint8_t>& data) {
    std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
    for (auto d : dims)
        for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
    s.append(data.begin(), data.end());
    return s;
}
void write_gz(const std::string& path, const std::string& bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    REQUIRE(f);
    REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
    gzclose(f);
}
}  // namespace

TEST_CASE("IDX images and labels load from gzip, and batches cover every example once per epoch") {
    test_temp_dir d;
    const int n = 7;
    std::vector<std::uint8_t> pixels, labels;
    for (int i = 0; i < n; ++i) {
        for (int p = 0; p < 6; ++p) pixels.push_back(static_cast<std::uint8_t>(i * 10 + p));
        labels.push_back(static_cast<std::uint8_t>(i % 3));
    }
    write_gz(d.file("img.gz"), idx_bytes({n, 2, 3}, pixels));
    write_gz(d.file("lab.gz"), idx_bytes({n}, labels));
    data::dataset ds = data::load_images_and_labels(d.file("img.gz"), d.file("lab.gz"));
    CHECK(ds.count == n);
    CHECK(ds.features == 6);
    CHECK(ds.images[6] == doctest::Approx(10 / 255.0f));
    CHECK(ds.labels[4] == 1);

    data::batcher b(ds, 3, 5);
    CHECK(b.batches() == 3);
    for (int epoch = 0; epoch < 2; ++epoch) {
        b.shuffle();
        std::set<int> seen;
        Tensor x, y;
        for (std::int64_t k = 0; k < b.batches(); ++k) {
            b.fill(k, x, y);
            CHECK(x.shape()[0] == (k < 2 ? 3 : 1));
            CHECK(y.shape() == Shape{x.shape()[0], 1});
            for (std::int64_t r = 0; r < x.shape()[0]; ++r) {
                const int example = static_cast<int>(std::lround(x.data<float>()[r * 6] * 255.0f)) / 10;
                seen.insert(example);
                CHECK(y.data<std::int64_t>()[r] == example % 3);  // images and labels stay paired
            }
        }
        CHECK(seen.size() == static_cast<std::size_t>(n));
    }
}

TEST_CASE("broken IDX files are reported, never over-read") {
    test_temp_dir d;
    auto good = idx_bytes({2, 2}, {1, 2, 3, 4});
    write_gz(d.file("short.gz"), good.substr(0, good.size() - 1));
    CHECK_THROWS_CONTAINING(data::read_idx(d.file("short.gz")), io_error, "[dlgraph.io.idx]", "truncated", "4 bytes");
    std::string bad = good;
    bad[0] = 'x';
    write_gz(d.file("magic.gz"), bad);
    CHECK_THROWS_CONTAINING(data::read_idx(d.file("magic.gz")), io_error, "bad magic");
    std::string floats = good;
    floats[2] = '\x0d';
    write_gz(d.file("float.gz"), floats);
    CHECK_THROWS_CONTAINING(data::read_idx(d.file("float.gz")), io_error, "only unsigned bytes");
    CHECK_THROWS_CONTAINING(data::read_idx(d.file("missing.gz")), io_error, "[dlgraph.io.open]");
    write_gz(d.file("img.gz"), idx_bytes({3, 2}, {1, 2, 3, 4, 5, 6}));
    write_gz(d.file("lab.gz"), idx_bytes({2}, {0, 1}));
    CHECK_THROWS_CONTAINING(data::load_images_and_labels(d.file("img.gz"), d.file("lab.gz")), io_error,
                            "do not hold the same number of examples");
}
