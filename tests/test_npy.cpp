// .npy reading and writing: round trips of every dtype (0-d and empty
// arrays included), byte strings laid out as NumPy writes them (format 1.0
// and 2.0), and every way a file can be wrong: truncated, trailing bytes, bad
// magic, big-endian, Fortran order, unsupported dtypes and versions. Also the
// atomic write and the file-name escaping.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <dlgraph/npy.hpp>

#include "test_helpers.hpp"

using namespace dlgraph;
namespace fs = std::filesystem;

namespace {

using NpyTempDir = test_temp_dir;


// A .npy file as NumPy lays it out: magic, version, little-endian header
// length, the dict padded with spaces and a newline so that the data starts
// at a multiple of 64, then the data.
std::string npy_file(int major, const std::string& dict, const std::string& data, std::size_t align = 64) {
    const std::size_t pre = major == 1 ? 10 : 12;
    std::size_t total = (pre + dict.size() + 1 + align - 1) / align * align;
    const std::size_t hlen = total - pre;
    std::string out = "\x93NUMPY";
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t k = 0; k < pre - 8; ++k) out += static_cast<char>((hlen >> (8 * k)) & 0xff);
    out += dict;
    out.append(hlen - dict.size() - 1, ' ');
    out += '\n';
    return out + data;
}

template <class T> std::string le_bytes(std::initializer_list<T> values) {
    std::string out;
    for (T v : values) {
        char b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));  // the test host is little-endian
        out.append(b, sizeof(T));
    }
    return out;
}

// Runs `f`, expecting an io_error with `id` whose message names `what`.
template <class F> std::string expect_io_error(F&& f, const std::string& id, const std::string& what) {
    try {
        f();
    } catch (const io_error& e) {
        CHECK(e.id() == id);
        std::string msg = e.what();
        CHECK_MESSAGE(msg.rfind("[" + id + "] ", 0) == 0, msg);
        CHECK_MESSAGE(msg.find(what) != std::string::npos, msg);
        return msg;
    }
    FAIL("expected io_error " << id);
    return {};
}

// A tensor of `dtype` and `shape` filled with a byte pattern valid for it.
Tensor patterned(DataType dtype, const Shape& shape) {
    Tensor t(dtype, shape);
    auto* p = static_cast<unsigned char*>(t.raw());
    for (std::size_t i = 0; i < t.bytes(); ++i)
        p[i] = dtype == DataType::BOOL ? static_cast<unsigned char>(i % 3 == 0) : static_cast<unsigned char>(i * 7 + 1);
    return t;
}

bool same(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() &&
           (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

}  // namespace

TEST_CASE("npy: every dtype round-trips, in memory and through a file, 0-d and empty included") {
    NpyTempDir dir;
    const std::vector<Shape> shapes{{2, 3}, {}, {0}, {2, 0, 3}, {5}, {1, 1, 1, 1, 1, 1, 1, 2}};
    for (int d = 0; d < num_dtypes; ++d) {
        const auto dtype = static_cast<DataType>(d);
        for (auto& shape : shapes) {
            CAPTURE(to_string(dtype));
            CAPTURE(to_string(shape));
            Tensor t = patterned(dtype, shape);
            std::string bytes = to_npy_bytes(t);
            CHECK(bytes.size() == 128 + t.bytes());  // header padded to 64; short dicts fit in 128
            Tensor u = parse_npy(bytes, "mem");
            CHECK(same(t, u));
            CHECK(u.rank() == shape.rank());
            const std::string path = dir.file("t.npy");
            write_npy(path, t);
            CHECK(read_file_bytes(path) == bytes);
            CHECK(same(read_npy(path), t));
        }
    }
}

TEST_CASE("npy: writing matches NumPy's byte layout for format 1.0") {
    // numpy.save(f, numpy.arange(6, dtype='<i4').reshape(2, 3))
    const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
    std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(118 - dict.size() - 1, ' ') +
                           "\n" + le_bytes<std::int32_t>({0, 1, 2, 3, 4, 5});
    REQUIRE(expected.size() == 128 + 24);
    Tensor t(DataType::INT32, {2, 3});
    for (int i = 0; i < 6; ++i) t.data<std::int32_t>()[i] = i;
    CHECK(to_npy_bytes(t) == expected);

    // numpy.save(f, numpy.float32(2.5)) and numpy.save(f, numpy.zeros(3, '?'))
    Tensor s = Tensor::scalar(2.5f);
    CHECK(to_npy_bytes(s) == npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", le_bytes<float>({2.5f})));
    Tensor b(DataType::BOOL, {3});
    for (int i = 0; i < 3; ++i) b.data<bool>()[i] = false;
    CHECK(to_npy_bytes(b) == npy_file(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string(3, '\0')));
}

TEST_CASE("npy: hand-made format 1.0 and 2.0 files are read") {
    SUBCASE("1.0, float32 2x2") {
        auto bytes = npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                              le_bytes<float>({1.5f, -2.f, 0.25f, 8.f}));
        Tensor t = parse_npy(bytes, "a.npy");
        CHECK(t.dtype() == DataType::FP32);
        CHECK(t.shape() == Shape{2, 2});
        CHECK(t.data<float>()[0] == 1.5f);
        CHECK(t.data<float>()[3] == 8.f);
    }
    SUBCASE("2.0, double quotes, other key order, no trailing comma, 16-byte alignment") {
        auto bytes = npy_file(2, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<f8\"}",
                              le_bytes<double>({1.0, 2.0, 3.0}), 16);
        CHECK(bytes[6] == 2);
        Tensor t = parse_npy(bytes, "b.npy");
        CHECK(t.dtype() == DataType::FP64);
        CHECK(t.shape() == Shape{3});
        CHECK(t.data<double>()[2] == 3.0);
    }
    SUBCASE("Python 2 long dims, '=' byte order, int64") {
        auto bytes = npy_file(1, "{'descr': '=i8', 'fortran_order': False, 'shape': (1L, 2L), }",
                              le_bytes<std::int64_t>({-7, 1LL << 40}));
        Tensor t = parse_npy(bytes, "c.npy");
        CHECK(t.dtype() == DataType::INT64);
        CHECK(t.shape() == Shape{1, 2});
        CHECK(t.data<std::int64_t>()[1] == (1LL << 40));
    }
    SUBCASE("0-d int16, and float16 bits") {
        Tensor t = parse_npy(npy_file(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (), }",
                                      le_bytes<std::int16_t>({-300})),
                             "d.npy");
        CHECK(t.rank() == 0);
        CHECK(t.item<std::int16_t>() == -300);
        Tensor h = parse_npy(npy_file(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }",
                                      le_bytes<std::uint16_t>({0x3c00})),
                             "e.npy");
        CHECK(h.dtype() == DataType::FP16);
        CHECK(h.data<float16>()[0].bits == 0x3c00);
    }
    SUBCASE("bool bytes other than 0 and 1 read as true") {
        Tensor t = parse_npy(npy_file(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                      std::string("\x00\x02\x01", 3)),
                             "f.npy");
        CHECK(t.data<bool>()[0] == false);
        CHECK(t.data<bool>()[1] == true);
        CHECK(t.data<bool>()[2] == true);
    }
    SUBCASE("an empty array with a zero dim") {
        Tensor t = parse_npy(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", ""), "g.npy");
        CHECK(t.shape() == Shape{0, 5});
        CHECK(t.numel() == 0);
    }
}

TEST_CASE("npy: truncated data, header or magic is an error, in memory and from a file") {
    NpyTempDir dir;
    const std::string good = npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                      le_bytes<float>({1, 2, 3, 4, 5, 6}));
    const std::string path = dir.file("cut.npy");
    for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{7}, std::size_t{9}, std::size_t{40},
                            std::size_t{127}, std::size_t{128}, good.size() - 1}) {
        CAPTURE(cut);
        const std::string bytes = good.substr(0, cut);
        expect_io_error([&] { parse_npy(bytes, "cut.npy"); }, "dlgraph.io.npy_truncated", "cut.npy");
        write_file_bytes(path, bytes);
        auto msg = expect_io_error([&] { read_npy(path); }, "dlgraph.io.npy_truncated", path);
        if (cut >= 128) CHECK(msg.find("needs 24 data bytes") != std::string::npos);
    }
    // A shape far larger than the file must not allocate or read past the end.
    auto huge = npy_file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000,), }", "xx");
    expect_io_error([&] { parse_npy(huge, "huge.npy"); }, "dlgraph.io.npy_truncated", "huge.npy");
    write_file_bytes(path, huge);
    expect_io_error([&] { read_npy(path); }, "dlgraph.io.npy_truncated", path);
    // Dims whose product overflows.
    auto overflow = npy_file(
        1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", "");
    expect_io_error([&] { parse_npy(overflow, "big.npy"); }, "dlgraph.io.npy_header", "big.npy");
}

TEST_CASE("npy: trailing bytes after the data are an error") {
    auto bytes = npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", le_bytes<float>({1, 2}));
    expect_io_error([&] { parse_npy(bytes, "long.npy"); }, "dlgraph.io.npy_trailing", "long.npy");
}

TEST_CASE("npy: bad magic, unknown version, malformed headers") {
    expect_io_error([] { parse_npy("PK\x03\x04 this is a zip", "x.npz"); }, "dlgraph.io.npy_magic", "x.npz");
    expect_io_error([] { parse_npy("{\"version\": 1}", "prog.json"); }, "dlgraph.io.npy_magic", "prog.json");
    auto v4 = npy_file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", le_bytes<float>({1}));
    v4[6] = 4;
    expect_io_error([&] { parse_npy(v4, "v4.npy"); }, "dlgraph.io.npy_version", "v4.npy");

    const std::vector<std::string> bad_dicts{
        "{'descr': '<f4', 'fortran_order': False}",                                  // no shape
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",     // unknown key
        "{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }",                 // not a bool
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",              // negative dim
        "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }",               // not a tuple
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } junk",          // text after
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",  // rank 9
        "'descr': '<f4'",                                                           // no braces
    };
    for (auto& d : bad_dicts) {
        CAPTURE(d);
        expect_io_error([&] { parse_npy(npy_file(1, d, ""), "h.npy"); }, "dlgraph.io.npy_header", "h.npy");
    }
    // A header that does not end with a newline.
    std::string no_nl = npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", le_bytes<float>({1}));
    no_nl[127] = ' ';
    expect_io_error([&] { parse_npy(no_nl, "nl.npy"); }, "dlgraph.io.npy_header", "nl.npy");
}

TEST_CASE("npy: big-endian, Fortran order and unsupported dtypes are refused clearly") {
    auto msg = expect_io_error(
        [] {
            parse_npy(npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "\x3f\x80\x00\x00"),
                      "be.npy");
        },
        "dlgraph.io.npy_dtype", "be.npy");
    CHECK(msg.find("big-endian") != std::string::npos);

    msg = expect_io_error(
        [] {
            parse_npy(npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0')),
                      "f.npy");
        },
        "dlgraph.io.npy_fortran", "f.npy");
    CHECK(msg.find("Fortran order") != std::string::npos);

    for (std::string d : {"<u4", "|i1", "<c8", "|u1", "<U10", "|O", "<f16", "<b1x"}) {
        CAPTURE(d);
        msg = expect_io_error(
            [&] {
                parse_npy(npy_file(1, "{'descr': '" + d + "', 'fortran_order': False, 'shape': (1,), }", "xxxx"),
                          "u.npy");
            },
            "dlgraph.io.npy_dtype", "u.npy");
        CHECK(msg.find("'" + d + "' is not supported") != std::string::npos);
        CHECK(msg.find("'<f4'") != std::string::npos);  // lists what is supported
    }
    // Structured dtypes.
    expect_io_error(
        [] {
            parse_npy(npy_file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "xxxx"),
                      "s.npy");
        },
        "dlgraph.io.npy_dtype", "s.npy");
}

TEST_CASE("npy: writing is atomic and reports failures") {
    NpyTempDir dir;
    const std::string path = dir.file("w.npy");
    Tensor a = patterned(DataType::FP32, {4});
    write_npy(path, a);
    Tensor b = patterned(DataType::INT64, {2, 2});
    write_npy(path, b);  // replaces
    CHECK(same(read_npy(path), b));
    CHECK_FALSE(fs::exists(path + ".tmp"));
    int files = 0;
    for (auto& e : fs::directory_iterator(dir.path)) {
        (void)e;
        ++files;
    }
    CHECK(files == 1);

    const std::string nowhere = dir.file("no/such/dir/w.npy");
    expect_io_error([&] { write_npy(nowhere, a); }, "dlgraph.io.open", nowhere);
    CHECK_FALSE(fs::exists(nowhere));

    expect_io_error([&] { read_npy(dir.file("missing.npy")); }, "dlgraph.io.open", "missing.npy");
    expect_io_error([&] { read_npy(dir.path.string()); }, "dlgraph.io.open", "directory");
    CHECK_THROWS_AS(write_npy(dir.file("unset.npy"), Tensor()), value_error);
    CHECK_FALSE(fs::exists(dir.file("unset.npy")));
}

TEST_CASE("npy: file-name escaping") {
    CHECK(escape_file_name("fc_0.w@GRAD") == "fc_0.w%40GRAD");
    CHECK(escape_file_name("plain-Name_09.x") == "plain-Name_09.x");
    CHECK(escape_file_name("a/b c%") == "a%2Fb%20c%25");
    CHECK(escape_file_name("\xc3\xa9") == "%C3%A9");  // é in UTF-8
    CHECK(escape_file_name("..") == "..");
    for (std::string s : {"fc_0.w@GRAD", "a/b c%", "\xc3\xa9t\xc3\xa9", "", "%41", "x\ny\"z'\\"})
        CHECK(unescape_file_name(escape_file_name(s)) == s);
    CHECK(unescape_file_name("fc_0.w%40grad") == "fc_0.w@grad");
    CHECK(unescape_file_name("%2f") == "/");
    for (std::string bad : {"%", "%4", "a%G0", "%%"}) {
        CAPTURE(bad);
        expect_io_error([&] { unescape_file_name(bad); }, "dlgraph.io.file_name", bad);
    }
}
