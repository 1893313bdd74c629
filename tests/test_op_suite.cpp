// The op suite: every op of the op table runs on the small standalone cases
// of tests/op_cases.hpp, and
//  * the bits of every output match tests/data/op_golden.txt, so that a
//    rewrite of a kernel can show it changed no bit;
//  * 2 threads, no fusion, no in-place execution and no prepacking give the
//    same bits as the defaults (which the library promises), and so does
//    feeding persistable inputs instead of putting them in the scope;
//  * a few FP64 ops agree with plain double loops written here, so the suite
//    checks values too, not only "the bits as before".
//
// The golden file has one line per case:
//     <case name> <arch> <hash> [<hash> ...]
// with arch the xsimd::default_arch::name() of the machine that wrote it
// and one hash per fetched output (tensor_hash: FNV-1a 64 over dtype, rank,
// dims and bytes, as 16 hex digits); lines starting with '#' are comments.
// Bits may legitimately differ between SIMD widths, so on a machine of
// another arch the test runs every case but only says that it did not
// compare. The same holds for a build that contracts a * b + c into FMAs
// differently from the one that wrote the file (the line
// "# fma-contraction: yes|no"): GCC contracts from -O2 on, not in the -O1
// sanitizer build. A case missing from the file, or a line naming no case,
// fails.
//
// To write the file instead of comparing with it (after an intended change
// of results, or for new cases), set DLGRAPH_WRITE_GOLDEN to its path:
//     DLGRAPH_WRITE_GOLDEN=$PWD/tests/data/op_golden.txt ./build/tests/dlgraph_tests -tc='*stored bits*'
// and commit the file together with the change that explains the new bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <xsimd/xsimd.hpp>

#include "op_cases.hpp"
#include "counting_device.hpp"

using namespace dlgraph;

namespace {

const std::string golden_path = DLGRAPH_TEST_DATA "/op_golden.txt";

std::string arch_name() { return xsimd::default_arch::name(); }

// A portable build (DLGRAPH_NO_SIMD, kernels/vec.hpp) computes every lane's
// arithmetic as the vector instructions do, but exp, log, tanh and pow (and
// so sigmoid, softmax and the chains holding them) follow the C library,
// whose last bit may differ from xsimd's polynomials: only cases of those
// ops may differ from the SIMD bits, and only in such a build. The matrix
// products and convolutions give the same bits in both (they did not while
// the AVX-512 build's fma multiplied and added in two roundings: xsimd 8.1
// has no AVX-512 fma, kernels/vec.hpp now uses the instruction).
// The same goes for the activations built on those functions or on erf,
// sin and cos (named exactly: "elu" is part of "relu").
bool portable_may_differ(const std::string& case_name) {
    if (DLGRAPH_SIMD) return false;
    for (const char* op : {"exp", "log", "tanh", "sigmoid", "elementwise_pow", "softmax"})
        if (case_name.find(op) != std::string::npos) return true;
    const std::string op = case_name.substr(0, case_name.find('/'));
    for (const char* f : {"gelu", "sin", "cos", "elu", "softplus", "swish", "pow"})
        if (op == f || op == std::string(f) + "_grad") return true;
    // A chain names its ops in its variant ("elu" left out: no chain has it).
    if (op == "chain")
        for (const char* f : {"gelu", "sin", "cos", "softplus", "swish"})
            if (case_name.find(f) != std::string::npos) return true;
    return false;
}

// Whether this build lets the compiler fuse a * b + c into one FMA. GCC
// does in GNU mode (its default -ffp-contract=fast) from -O2 on, and not at
// -O1 or -O0, so the same kernels round differently in a Release build and
// in the sanitizer build (-O1): 92 of the 579 cases differ there. The test
// files are compiled with the library's flags, so this probe tells how the
// kernels were built. a * b is 1 - 2^-60, 1.0 once rounded.
bool fma_contraction() {
    volatile double va = 1.0 + 0x1p-30, vb = 1.0 - 0x1p-30, vc = -1.0;
    const double a = va, b = vb, c = vc;
    return a * b + c != 0.0;
}
std::string fma_contraction_name() { return fma_contraction() ? "yes" : "no"; }
const std::string contraction_key = "# fma-contraction: ";

std::string op_of(const std::string& case_name) { return case_name.substr(0, case_name.find('/')); }

std::vector<std::string> hashes_of(const std::vector<Tensor>& outs) {
    std::vector<std::string> h;
    for (auto& t : outs) h.push_back(hash_hex(tensor_hash(t)));
    return h;
}

std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
}

// Runs a case; an exception fails the test with the case's name.
bool run_hashed(const op_case& c, const SessionOptions& o, std::vector<std::string>& hashes,
                op_case_run_info* info = nullptr, persistables where = persistables::in_scope) {
    try {
        const std::vector<Tensor> outs = run_op_case(c, o, info, where);
        hashes = hashes_of(outs);
        return true;
    } catch (const std::exception& e) {
        FAIL_CHECK(c.name << " threw: " << e.what());
        return false;
    }
}

const op_case& find_case(const std::vector<op_case>& cases, const std::string& name) {
    for (auto& c : cases)
        if (c.name == name) return c;
    FAIL("no case named " << name);
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("op suite: every op in the op table has a case (or is listed as not in the suite)") {
    const std::vector<op_case> cases = all_op_cases();
    std::set<std::string> names;
    std::map<std::string, std::set<std::string>> dtypes_of_op;  // op -> dtypes named by its one-op cases
    for (auto& c : cases) {
        INFO("case " << c.name);
        CHECK_MESSAGE(names.insert(c.name).second, "duplicate case name");
        const BlockDesc& blk = c.program.blocks.at(0);
        CHECK(c.program.blocks.size() == 1);
        REQUIRE(!blk.ops.empty());
        CHECK(!c.fetch.empty());
        const std::string op = op_of(c.name);
        const std::size_t slashes = static_cast<std::size_t>(std::count(c.name.begin(), c.name.end(), '/'));
        CHECK_MESSAGE(slashes == 2, "names are <op>/<dtype>/<variant>");
        if (op == "chain") {
            CHECK(blk.ops.size() >= 2);
            continue;
        }
        // A one-op case: its name starts with the op it runs.
        CHECK(blk.ops.size() == 1);
        CHECK(blk.ops[0].type == op);
        const std::string dtype = c.name.substr(op.size() + 1, c.name.find('/', op.size() + 1) - op.size() - 1);
        dtypes_of_op[op].insert(dtype);
        // Every input is fed: the case needs nothing but itself.
        for (auto& slot : blk.ops[0].inputs)
            for (auto& a : slot.arguments) {
                bool fed = false;
                for (auto& f : c.feeds) fed = fed || f.first == a;
                CHECK_MESSAGE(fed, "input " << a << " is not fed");
            }
    }

    std::set<std::string> table;
    for (const OpDef& def : op_table()) {
        const std::string type(def.type);
        table.insert(type);
        bool listed = false;
        for (auto& e : not_in_suite) listed = listed || e.op == def.type;
        const bool covered = dtypes_of_op.count(type) > 0;
        CHECK_MESSAGE((covered || listed), "op " << type << " has no case in tests/op_cases.cpp and is not in not_in_suite");
        CHECK_MESSAGE(!(covered && listed), "op " << type << " has cases but is listed in not_in_suite");
        if (!covered) continue;
        // ... for every dtype it has a CPU kernel for.
        for (int t = 0; t < num_dtypes; ++t) {
            if (!def.supports(static_cast<DataType>(t))) continue;
            CHECK_MESSAGE(dtypes_of_op[type].count(std::string(dtype_names[t])) > 0,
                          "op " << type << " has a CPU kernel for " << dtype_names[t] << " but no case for it");
        }
    }
    for (auto& e : not_in_suite) CHECK_MESSAGE(table.count(std::string(e.op)) > 0, e.op << " is not in the op table");
    for (auto& [op, dts] : dtypes_of_op) CHECK_MESSAGE(table.count(op) > 0, op << " names no op of the table");
}

TEST_CASE("op suite outputs match the stored bits") {
    const std::vector<op_case> cases = all_op_cases();
    const std::string arch = arch_name();
    std::vector<std::vector<std::string>> got(cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) run_hashed(cases[i], SessionOptions{}, got[i]);

    if (const char* out = std::getenv("DLGRAPH_WRITE_GOLDEN"); out && *out) {
        std::ofstream f(out, std::ios::binary | std::ios::trunc);
        REQUIRE_MESSAGE(f.good(), "cannot write " << std::string(out));
        f << "# The op suite's output bits (tests/test_op_suite.cpp): <case> <arch> <hash of each output>.\n"
          << "# Written with DLGRAPH_WRITE_GOLDEN=<this file> ./build/tests/dlgraph_tests -tc='*stored bits*'\n"
          << contraction_key << fma_contraction_name() << '\n';
        for (std::size_t i = 0; i < cases.size(); ++i) f << cases[i].name << ' ' << arch << ' ' << joined(got[i]) << '\n';
        f.close();
        REQUIRE_MESSAGE(f.good(), "cannot write " << std::string(out));
        MESSAGE("wrote the bits of " << cases.size() << " cases for " << arch << " to " << std::string(out) << " (not compared)");
        return;
    }

    std::ifstream f(golden_path);
    REQUIRE_MESSAGE(f.good(), "cannot read " << golden_path
                                             << ": write it with DLGRAPH_WRITE_GOLDEN=<path> (see test_op_suite.cpp)");
    // arch -> case -> hashes
    std::map<std::string, std::map<std::string, std::vector<std::string>>> stored;
    std::string line, written_contraction;
    int lineno = 0;
    while (std::getline(f, line)) {
        ++lineno;
        if (line.rfind(contraction_key, 0) == 0) written_contraction = line.substr(contraction_key.size());
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        std::string name, a, h;
        std::vector<std::string> hs;
        in >> name >> a;
        while (in >> h) hs.push_back(h);
        INFO(golden_path << ":" << lineno << ": " << line);
        CHECK_MESSAGE(!hs.empty(), "a line needs a case name, an arch and at least one hash");
        CHECK_MESSAGE(stored[a].emplace(name, hs).second, "case " << name << " is listed twice for " << a);
    }
    std::set<std::string> names;
    for (auto& c : cases) names.insert(c.name);
    for (auto& [a, lines] : stored) {
        for (auto& c : cases)
            CHECK_MESSAGE(lines.count(c.name) > 0, "case " << c.name << " is missing from " << golden_path << " (arch " << a
                                                           << "): regenerate it with DLGRAPH_WRITE_GOLDEN");
        for (auto& [name, hs] : lines)
            CHECK_MESSAGE(names.count(name) > 0, golden_path << " has a line for " << name << " (arch " << a
                                                             << "), which is no case of the suite");
    }

    const auto it = stored.find(arch);
    if (!written_contraction.empty() && written_contraction != fma_contraction_name()) {
        MESSAGE("op suite: " << golden_path << " was written by a build with fma-contraction " << written_contraction
                             << ", this build has " << fma_contraction_name() << " (e.g. -O1 instead of -O3): ran all "
                             << cases.size() << " cases without comparing their bits");
    } else if (it == stored.end()) {
        std::string archs;
        for (auto& [a, lines] : stored) archs += (archs.empty() ? "" : ", ") + a;
        MESSAGE("op suite: " << golden_path << " holds the bits of " << (archs.empty() ? "no arch" : archs)
                             << ", this machine is " << arch << ": ran all " << cases.size()
                             << " cases without comparing their bits");
    } else {
        int mismatches = 0, portable_differences = 0;
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const auto s = it->second.find(cases[i].name);
            if (s == it->second.end() || got[i].empty()) continue;
            if (s->second != got[i] && portable_may_differ(cases[i].name)) {
                ++portable_differences;
                continue;
            }
            if (s->second != got[i]) {
                ++mismatches;
                FAIL_CHECK(cases[i].name << ": output bits changed (arch " << arch << ")\n  stored: "
                                         << joined(s->second) << "\n  now:    " << joined(got[i]));
            }
        }
        CHECK(mismatches == 0);
        if (!DLGRAPH_SIMD)
            MESSAGE("op suite, portable kernel core: " << cases.size() - static_cast<std::size_t>(portable_differences)
                                                       << " of " << cases.size() << " cases keep the " << arch
                                                       << " bits; " << portable_differences
                                                       << " of exp, log, tanh, pow, erf, sin or cos (C library) differ");
    }
}

// The options that must not change a bit. A case/option pair that does is
// reported and listed in `known_differences` below with the reason; none is
// listed today.
TEST_CASE("op suite: same bits with 2 threads, without fusion, without in-place, without prepacking") {
    struct variation {
        const char* name;
        SessionOptions options;
        persistables where = persistables::in_scope;
    };
    std::vector<variation> variations(5);
    variations[0].name = "threads=2";
    variations[0].options.threads = 2;
    variations[1].name = "fuse=false";
    variations[1].options.fuse = false;
    variations[2].name = "in_place=false";
    variations[2].options.in_place = false;
    variations[3].name = "prepack=false";
    variations[3].options.prepack = false;
    // And the case run as written: persistable values fed with the call.
    variations[4].name = "persistables_fed";
    variations[4].where = persistables::fed;
    // "<case name> <variation>" pairs excluded from the comparison (each with
    // the reason); empty: every op keeps its bits under every option.
    const std::set<std::string> known_differences = {};

    const std::vector<op_case> cases = all_op_cases();
    int fused = 0, packed = 0, smaller_in_place = 0;
    for (const op_case& c : cases) {
        std::vector<std::string> base;
        op_case_run_info base_info;
        if (!run_hashed(c, SessionOptions{}, base, &base_info)) continue;
        fused += base_info.fused_chains > 0;
        packed += base_info.packed_steps > 0;
        for (const variation& v : variations) {
            std::vector<std::string> got;
            op_case_run_info info;
            if (!run_hashed(c, v.options, got, &info, v.where)) continue;
            if (std::string(v.name) == "in_place=false") smaller_in_place += base_info.arena_bytes < info.arena_bytes;
            if (known_differences.count(c.name + " " + v.name)) continue;
            if (got != base)
                FAIL_CHECK(c.name << ": " << v.name << " changes the bits\n  default: " << joined(base)
                                  << "\n  " << v.name << ": " << joined(got));
        }
    }
    // The options took effect somewhere (else their checks prove nothing).
    CHECK_MESSAGE(fused > 0, "no case fused a chain");
    CHECK_MESSAGE(packed > 0, "no case kept a weight packed");
    CHECK_MESSAGE(smaller_in_place > 0, "no case ran in place");
}

// ---- values, not only bits: FP64 against plain double loops -------------------------------------------

namespace {

std::vector<double> doubles(const Tensor& t) {
    std::vector<double> v;
    for (double x : t.values<double>()) v.push_back(x);
    return v;
}

const Tensor& feed_of(const op_case& c, const std::string& name) {
    for (auto& f : c.feeds)
        if (f.first == name) return f.second;
    throw std::logic_error(c.name + ": no feed " + name);
}

const Attribute* attr_of(const op_case& c, const char* name) { return c.program.blocks[0].ops[0].attr(name); }

std::vector<std::int64_t> dims(const Shape& s) { return {s.begin(), s.end()}; }

std::int64_t count(const std::vector<std::int64_t>& d) {
    std::int64_t n = 1;
    for (auto v : d) n *= v;
    return n;
}

// Row-major flat index <-> multi-index.
std::vector<std::int64_t> unravel(std::int64_t f, const std::vector<std::int64_t>& d) {
    std::vector<std::int64_t> idx(d.size());
    for (std::size_t i = d.size(); i-- > 0;) {
        idx[i] = f % d[i];
        f /= d[i];
    }
    return idx;
}
std::int64_t ravel(const std::vector<std::int64_t>& idx, const std::vector<std::int64_t>& d) {
    std::int64_t f = 0;
    for (std::size_t i = 0; i < d.size(); ++i) f = f * d[i] + idx[i];
    return f;
}

// Got == want, element by element, within `tol` relative to mag[i] (the
// sum of the magnitudes that formed want[i]); tol 0: equal values (NaN
// equals NaN).
void check_values(const std::string& name, const Tensor& got, const std::vector<std::int64_t>& want_dims,
                  const std::vector<double>& want, const std::vector<double>& mag = {}, double tol = 0) {
    INFO("case " << name);
    REQUIRE(got.dtype() == DataType::FP64);
    CHECK(dims(got.shape()) == want_dims);
    const std::vector<double> g = doubles(got);
    REQUIRE(g.size() == want.size());
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const bool same = std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i];
        const bool ok = same || (tol > 0 && std::abs(g[i] - want[i]) <= tol * (mag.empty() ? std::abs(want[i]) : mag[i]));
        if (!ok && bad++ == 0) first = i;
    }
    INFO("first of " << bad << " differences at " << first << ": got " << (g.empty() ? 0 : g[first]) << ", want "
                     << (want.empty() ? 0 : want[first]));
    CHECK(bad == 0);
}

// out = x + y with Paddle's axis (or NumPy's alignment for axis -1).
void check_add(const op_case& c) {
    const Tensor& x = feed_of(c, "x");
    const Tensor& y = feed_of(c, "y");
    const Attribute* a = attr_of(c, "axis");
    const std::int64_t axis = a ? a->i : -1;
    auto xd = dims(x.shape()), yd = dims(y.shape());
    const std::size_t r = std::max(xd.size(), yd.size());
    std::vector<std::int64_t> xa(r, 1), ya(r, 1);
    if (axis == -1 || xd.size() < yd.size()) {
        std::copy(xd.begin(), xd.end(), xa.begin() + static_cast<std::ptrdiff_t>(r - xd.size()));
        std::copy(yd.begin(), yd.end(), ya.begin() + static_cast<std::ptrdiff_t>(r - yd.size()));
    } else {
        xa = xd;
        std::copy(yd.begin(), yd.end(), ya.begin() + axis);
    }
    std::vector<std::int64_t> od(r);
    for (std::size_t i = 0; i < r; ++i) od[i] = xa[i] == 1 ? ya[i] : xa[i];
    const std::vector<double> xv = doubles(x), yv = doubles(y);
    std::vector<double> want;
    for (std::int64_t f = 0; f < count(od); ++f) {
        auto idx = unravel(f, od), ix = idx, iy = idx;
        for (std::size_t i = 0; i < r; ++i) {
            if (xa[i] == 1) ix[i] = 0;
            if (ya[i] == 1) iy[i] = 0;
        }
        want.push_back(xv[static_cast<std::size_t>(ravel(ix, xa))] + yv[static_cast<std::size_t>(ravel(iy, ya))]);
    }
    check_values(c.name, run_op_case(c).at(0), od, want);
}

void check_relu(const op_case& c) {
    std::vector<double> want;
    for (double v : doubles(feed_of(c, "x"))) want.push_back(v > 0 ? v : 0.0);
    check_values(c.name, run_op_case(c).at(0), dims(feed_of(c, "x").shape()), want);
}

// out = alpha * op(x) @ op(y), batch dims broadcast, rank-1 operands as in matmul.
void check_matmul(const op_case& c) {
    const Tensor& xt = feed_of(c, "x");
    const Tensor& yt = feed_of(c, "y");
    auto xd = dims(xt.shape()), yd = dims(yt.shape());
    bool tx = attr_of(c, "transpose_X") && attr_of(c, "transpose_X")->b;
    bool ty = attr_of(c, "transpose_Y") && attr_of(c, "transpose_Y")->b;
    const double alpha = attr_of(c, "alpha") ? attr_of(c, "alpha")->f : 1.0;
    const bool xvec = xd.size() == 1, yvec = yd.size() == 1;
    if (xvec) {  // a row, transposed a column
        xd = tx ? std::vector<std::int64_t>{xd[0], 1} : std::vector<std::int64_t>{1, xd[0]};
        tx = false;
    }
    if (yvec) {  // a column, transposed a row
        yd = ty ? std::vector<std::int64_t>{1, yd[0]} : std::vector<std::int64_t>{yd[0], 1};
        ty = false;
    }
    const std::int64_t M = tx ? xd.back() : xd[xd.size() - 2], K = tx ? xd[xd.size() - 2] : xd.back();
    const std::int64_t N = ty ? yd[yd.size() - 2] : yd.back();
    const std::vector<std::int64_t> xb(xd.begin(), xd.end() - 2), yb(yd.begin(), yd.end() - 2);
    const std::size_t rb = std::max(xb.size(), yb.size());
    std::vector<std::int64_t> xp(rb, 1), yp(rb, 1), ob(rb);
    std::copy(xb.begin(), xb.end(), xp.begin() + static_cast<std::ptrdiff_t>(rb - xb.size()));
    std::copy(yb.begin(), yb.end(), yp.begin() + static_cast<std::ptrdiff_t>(rb - yb.size()));
    for (std::size_t i = 0; i < rb; ++i) ob[i] = xp[i] == 1 ? yp[i] : xp[i];  // 1 broadcasts, 0 stays 0
    const std::vector<double> x = doubles(xt), y = doubles(yt);
    std::vector<double> want, mag;
    for (std::int64_t b = 0; b < count(ob); ++b) {
        auto idx = unravel(b, ob), ix = idx, iy = idx;
        for (std::size_t i = 0; i < rb; ++i) {
            if (xp[i] == 1) ix[i] = 0;
            if (yp[i] == 1) iy[i] = 0;
        }
        const std::int64_t xo = ravel(ix, xp) * M * K, yo = ravel(iy, yp) * K * N;
        for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < N; ++j) {
                double s = 0, m = 0;
                for (std::int64_t k = 0; k < K; ++k) {
                    const double a = x[static_cast<std::size_t>(xo + (tx ? k * M + i : i * K + k))];
                    const double bb = y[static_cast<std::size_t>(yo + (ty ? j * K + k : k * N + j))];
                    s += a * bb;
                    m += std::abs(a * bb);
                }
                want.push_back(alpha * s);
                mag.push_back(std::abs(alpha) * m);
            }
    }
    std::vector<std::int64_t> od = ob;
    if (!xvec || M != 1) od.push_back(M);
    if (!yvec || N != 1) od.push_back(N);
    if (od.empty()) od.push_back(1);
    check_values(c.name, run_op_case(c).at(0), od, want, mag, 1e-13);
}

void check_softmax(const op_case& c) {
    const Tensor& xt = feed_of(c, "x");
    const auto d = dims(xt.shape());
    const Attribute* a = attr_of(c, "axis");
    const std::int64_t axis = !a ? static_cast<std::int64_t>(d.size()) - 1 : a->i < 0 ? a->i + static_cast<std::int64_t>(d.size()) : a->i;
    const std::vector<double> x = doubles(xt);
    std::vector<double> want(x.size());
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t i = 0; i < axis; ++i) outer *= d[static_cast<std::size_t>(i)];
    for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < d.size(); ++i) inner *= d[i];
    const std::int64_t n = d[static_cast<std::size_t>(axis)];
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < inner; ++j) {
            auto at = [&](std::int64_t k) { return static_cast<std::size_t>((o * n + k) * inner + j); };
            double m = -INFINITY, s = 0;
            for (std::int64_t k = 0; k < n; ++k) m = std::max(m, x[at(k)]);
            for (std::int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
            for (std::int64_t k = 0; k < n; ++k) want[at(k)] = std::exp(x[at(k)] - m) / s;
        }
    check_values(c.name, run_op_case(c).at(0), d, want, std::vector<double>(want.size(), 1.0), 1e-14);
}

void check_reduce_sum(const op_case& c) {
    const Tensor& xt = feed_of(c, "x");
    const auto d = dims(xt.shape());
    const std::size_t r = d.size();
    std::vector<bool> red(r, attr_of(c, "reduce_all") && attr_of(c, "reduce_all")->b);
    for (auto v : attr_of(c, "dim")->ints) red[static_cast<std::size_t>(v < 0 ? v + static_cast<std::int64_t>(r) : v)] = true;
    const bool keep = attr_of(c, "keep_dim") && attr_of(c, "keep_dim")->b;
    std::vector<std::int64_t> od, kept;
    for (std::size_t i = 0; i < r; ++i) {
        if (!red[i]) kept.push_back(d[i]);
        if (!red[i] || keep) od.push_back(red[i] ? 1 : d[i]);
    }
    if (od.empty()) od.push_back(1);
    const std::vector<double> x = doubles(xt);
    std::vector<double> want(static_cast<std::size_t>(count(kept)), 0.0), mag(want.size(), 0.0);
    for (std::int64_t f = 0; f < count(d); ++f) {
        const auto idx = unravel(f, d);
        std::vector<std::int64_t> ki;
        for (std::size_t i = 0; i < r; ++i)
            if (!red[i]) ki.push_back(idx[i]);
        const std::size_t o = static_cast<std::size_t>(ravel(ki, kept));
        want[o] += x[static_cast<std::size_t>(f)];
        mag[o] += std::abs(x[static_cast<std::size_t>(f)]);
    }
    check_values(c.name, run_op_case(c).at(0), od, want, mag, 1e-14);
}

}  // namespace

TEST_CASE("op suite: every case on the counting device gives the CPU's bits, whole or split across places") {
    // Every op of a case on the device, then only every other op type there
    // (the rest fall back to the host, with copies between).
    std::set<std::string> every_other;
    for (std::size_t k = 0; k < dlgraph::op_table().size(); k += 2) every_other.insert(std::string(dlgraph::op_table()[k].type));
    const std::vector<op_case> cases = all_op_cases();
    const std::set<std::string>* none = nullptr;
    for (const std::set<std::string>* ops : {none, static_cast<const std::set<std::string>*>(&every_other)}) {
        test_support::counting_device::ops = ops ? *ops : std::set<std::string>{};
        int copies = 0;
        for (const op_case& c : cases) {
            std::vector<std::string> base;
            if (!run_hashed(c, SessionOptions{}, base)) continue;
            try {
                dlgraph::Session<test_support::counting_device> s(c.program);
                const std::vector<std::string> got = hashes_of(run_op_case_in(s, c));
                auto& dev = test_support::context_of(s.device());
                copies += dev.to_device_copies > 0 && dev.to_host_copies > 0;
                CHECK_MESSAGE(dev.memory->misplaced == 0, c.name << ": a copy went the wrong way");
                if (got != base)
                    FAIL_CHECK(c.name << (ops ? " (every other op on the device)" : " (all on the device)")
                                      << " changes the bits\n  cpu: " << joined(base) << "\n  device: " << joined(got));
            } catch (const std::exception& e) {
                FAIL_CHECK(c.name << " threw on the counting device: " << e.what());
            }
        }
        CHECK(copies > 0);
    }
    test_support::counting_device::ops.clear();
}

TEST_CASE("op suite: FP64 add, relu, matmul, softmax and reduce_sum agree with double loops") {
    const std::vector<op_case> cases = all_op_cases();
    auto run = [&](const std::string& name, void (*check)(const op_case&)) {
        const op_case& c = find_case(cases, name);
        check(c);
    };
    for (const char* v : {"same_shape_7", "scalar_x", "numpy_broadcast_y_longer", "broadcast_axis1"})
        run(std::string("elementwise_add/FP64/") + v, check_add);
    for (const char* v : {"odd_7", "rank3_3x5x7", "edge_values_45"}) run(std::string("relu/FP64/") + v, check_relu);
    for (const char* v : {"transpose_x", "transpose_both", "batch_broadcast", "batch_shared_y", "batch_transpose_x",
                          "y_rank1", "x_rank1_transposed", "y_rank1_transposed", "alpha", "empty_batch", "weight_37x65x29"})
        run(std::string("matmul/FP64/") + v, check_matmul);
    for (const char* v : {"rows_7x7", "axis0_strided_5x3x20"}) run(std::string("softmax/FP64/") + v, check_softmax);
    for (const char* v : {"columns_dim0_1023x7", "reduce_all", "middle_dim_3x9x17", "unit_dims_1x7x1x3"})
        run(std::string("reduce_sum/FP64/") + v, check_reduce_sum);
}
