// Shared helpers for dlgraph's tests.
#pragma once

#include <doctest/doctest.h>

#include <dlgraph/dlgraph.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

// A tensor of `shape` holding `values` (as many as it has elements).
template <class T> dlgraph::Tensor tensor_of(const dlgraph::Shape& shape, const std::vector<T>& values) {
    dlgraph::Tensor t(dlgraph::dtype_of<T>, shape);
    REQUIRE(static_cast<std::size_t>(t.numel()) == values.size());
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
}

// A tensor's elements as a vector (its dtype must be T).
template <class T> std::vector<T> values_of(const dlgraph::Tensor& t) {
    REQUIRE(t.dtype() == dlgraph::dtype_of<T>);
    const T* p = t.data<T>();
    return std::vector<T>(p, p + t.numel());
}

// A tensor of `shape` holding `values` converted to T.
template <class T, class U> dlgraph::Tensor filled(const dlgraph::Shape& shape, const std::vector<U>& values) {
    dlgraph::Tensor t(dlgraph::dtype_of<T>, shape);
    REQUIRE(static_cast<std::size_t>(shape.numel()) == values.size());
    T* p = t.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
    return t;
}

// A tensor's elements (its dtype must be T) as doubles.
template <class T> std::vector<double> widened(const dlgraph::Tensor& t) {
    const auto v = values_of<T>(t);
    return std::vector<double>(v.begin(), v.end());
}

// Row-major multi-index of element i of shape s (a dim of 0 gives index 0),
// and back.
// Whether two tensors have the same dtype, shape and bytes.
inline bool same_bits(const dlgraph::Tensor& a, const dlgraph::Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

inline std::vector<std::int64_t> unravel(std::int64_t i, const dlgraph::Shape& s) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(s.rank()));
    for (int d = s.rank() - 1; d >= 0; --d) {
        idx[static_cast<std::size_t>(d)] = s[d] == 0 ? 0 : i % s[d];
        i = s[d] == 0 ? 0 : i / s[d];
    }
    return idx;
}
inline std::int64_t ravel(const std::vector<std::int64_t>& idx, const dlgraph::Shape& s) {
    std::int64_t i = 0;
    for (int d = 0; d < s.rank(); ++d) i = i * s[d] + idx[static_cast<std::size_t>(d)];
    return i;
}

// Runs f and checks that it throws E whose message holds every part (the
// function form of CHECK_THROWS_CONTAINING, for code in lambdas).
template <class E, class F> void check_throws(F f, std::initializer_list<std::string> parts) {
    bool thrown = false;
    try {
        f();
    } catch (const E& e) {
        thrown = true;
        const std::string what = e.what();
        for (auto& p : parts) {
            INFO("message: " << what);
            INFO("missing: " << p);
            CHECK(what.find(p) != std::string::npos);
        }
    }
    CHECK_MESSAGE(thrown, "expected an exception");
}

// A fresh directory under the system's temp directory, removed with
// everything in it when the object goes.
struct test_temp_dir {
    std::filesystem::path path;
    test_temp_dir() {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() /
               ("dlgraph_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~test_temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    test_temp_dir(const test_temp_dir&) = delete;
    test_temp_dir& operator=(const test_temp_dir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
    // Names directly under the directory (or under `sub`), sorted.
    std::vector<std::string> listing(const std::string& sub = "") const {
        std::vector<std::string> out;
        for (auto& e : std::filesystem::directory_iterator(sub.empty() ? path : path / sub))
            out.push_back(e.path().filename().string());
        std::sort(out.begin(), out.end());
        return out;
    }
};

inline std::string read_file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
inline void write_file_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Checks that `expr` throws an exception of type `type` whose message
// contains every one of the given substrings.
#define CHECK_THROWS_CONTAINING(expr, type, ...)                                                    \
    do {                                                                                            \
        bool thrown_ = false;                                                                       \
        try {                                                                                       \
            (void)(expr);                                                                           \
        } catch (const type& e_) {                                                                  \
            thrown_ = true;                                                                         \
            std::string msg_ = e_.what();                                                           \
            for (std::string part_ : {__VA_ARGS__}) {                                               \
                INFO("message: " << msg_);                                                          \
                CHECK_MESSAGE(msg_.find(part_) != std::string::npos, "missing '" << part_ << "'"); \
            }                                                                                       \
        }                                                                                           \
        CHECK_MESSAGE(thrown_, "expected " #type " from " #expr);                                   \
    } while (0)

// A random but valid program (used by property tests): inputs "in0".."in2"
// of dims [-1, n], parameters w and b, and a chain of element-wise ops.
inline dlgraph::Program random_program(std::mt19937& rng) {
    using namespace dlgraph;
    Program p;
    std::uniform_int_distribution<int> dim(1, 5), pick(0, 100);
    std::vector<Var<double>> pool;
    int n_in = 1 + pick(rng) % 3;
    Shape s{dim(rng), dim(rng)};
    for (int i = 0; i < n_in; ++i) pool.push_back(p.input<double>("in" + std::to_string(i), {-1, s[1]}));
    pool.push_back(p.parameter<double>("w", {s[1]}, init::uniform(-1, 1, pick(rng) + 1)));
    pool.push_back(p.parameter<double>("b", {1}, init::normal(0, 2, 3), pick(rng) % 2 == 0));
    int n_ops = 1 + pick(rng) % 12;
    for (int i = 0; i < n_ops; ++i) {
        auto& a = pool[static_cast<std::size_t>(pick(rng)) % pool.size()];
        auto& b = pool[static_cast<std::size_t>(pick(rng)) % pool.size()];
        switch (pick(rng) % 8) {
            case 0: pool.push_back(a + b); break;
            case 1: pool.push_back(a * b); break;
            case 2: pool.push_back(relu(a)); break;
            case 3: pool.push_back(scale(a, pick(rng) / 7.0, -pick(rng) / 3.0, pick(rng) % 2 == 0)); break;
            case 4: pool.push_back(tanh(a)); break;
            case 5: pool.push_back(elementwise_max(a, b)); break;
            case 6: pool.push_back(a - 0.25); break;
            default: pool.push_back(sigmoid(a)); break;
        }
    }
    return p;
}

