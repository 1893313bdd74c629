// Hostile inputs: each program, file or value below once crashed dlgraph, read
// out of bounds, overflowed or took quadratic time (found by fuzzing the CLI
// and by reading the code). Each must now be a clean dlgraph error with a
// stable id, or work correctly; a failed call leaves the session usable.
#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>

#include "counting_device.hpp"
#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

constexpr std::int64_t p31 = std::int64_t(1) << 31, p32 = std::int64_t(1) << 32, p61 = std::int64_t(1) << 61,
                       p62 = std::int64_t(1) << 62;

json var(const std::string& name, std::vector<std::int64_t> dims, const std::string& dtype = "FP32",
         const std::string& type = "LOD_TENSOR") {
    json v = {{"name", name}, {"type", type}, {"persistable", false}};
    if (type == "LOD_TENSOR") v["lod_tensor"] = {{"lod_level", 0}, {"tensor", {{"data_type", dtype}, {"dims", dims}}}};
    return v;
}

using slots = std::vector<std::pair<std::string, std::vector<std::string>>>;

json op(const std::string& type, const slots& ins, const slots& outs, const std::vector<json>& attrs = {}) {
    json j = {{"type", type}, {"inputs", json::array()}, {"outputs", json::array()}, {"attrs", attrs}};
    for (auto& [k, v] : ins) j["inputs"].push_back({{"parameter", k}, {"arguments", v}});
    for (auto& [k, v] : outs) j["outputs"].push_back({{"parameter", k}, {"arguments", v}});
    return j;
}

json attr_ints(const std::string& n, std::vector<std::int64_t> v) { return {{"name", n}, {"type", "INTS"}, {"ints", v}}; }
json attr_int(const std::string& n, std::int64_t v) { return {{"name", n}, {"type", "INT"}, {"i", v}}; }
json attr_long(const std::string& n, std::int64_t v) { return {{"name", n}, {"type", "LONG"}, {"l", v}}; }
json attr_float(const std::string& n, double v) { return {{"name", n}, {"type", "FLOAT"}, {"f", v}}; }
json attr_bool(const std::string& n, bool v) { return {{"name", n}, {"type", "BOOLEAN"}, {"b", v}}; }

// fill_constant of `shape` (FP32 unless `dtype` says otherwise: 2 INT32, 3 INT64, 6 FP64).
json fill(const std::string& out, std::vector<std::int64_t> shape, double value = 1, int dtype = 5) {
    return op("fill_constant", {}, {{"Out", {out}}},
              {attr_ints("shape", shape), attr_int("dtype", dtype), attr_float("value", value)});
}

std::string program(const std::vector<json>& vars, const std::vector<json>& ops) {
    return json{{"version", 1}, {"blocks", {{{"idx", 0}, {"parent_idx", -1}, {"vars", vars}, {"ops", ops}}}}}.dump();
}

}  // namespace

TEST_CASE("hostile: shapes whose bytes wrap around are refused before anything is allocated") {
    // [2^31, 2^31] FP32 is 2^64 bytes: it used to wrap to a 0-byte buffer.
    auto declared = program({var("a", {p31, p31}), var("b", {p31, p31})},
                            {fill("a", {p31, p31}), op("relu", {{"X", {"a"}}}, {{"Out", {"b"}}})});
    CHECK_THROWS_CONTAINING(load_program(declared), resource_error, "[dlgraph.resource.size]", "variable 'a'",
                            "[2147483648,2147483648]");
    // Declared with unknown dims, the fill's attribute says it.
    auto inferred = program({var("a", {-1}, "FP64"), var("b", {-1}, "FP64")},
                            {fill("a", {p61 + 1}, 1, 6), op("relu", {{"X", {"a"}}}, {{"Out", {"b"}}})});
    CHECK_THROWS_CONTAINING(load_program(inferred), resource_error, "[dlgraph.resource.size]", "fill_constant",
                            "[2305843009213693953]");
    CHECK_THROWS_CONTAINING(load_program(program({var("a", {-1, -1})}, {fill("a", {p62, 4})})), resource_error,
                            "[dlgraph.resource.size]");
    // A zero dim does not hide the others: their products would overflow in ops.
    CHECK_THROWS_CONTAINING(load_program(program({var("a", {p32, p32, 0})}, {fill("a", {p32, p32, 0})})),
                            resource_error, "[dlgraph.resource.size]");
    CHECK_THROWS_CONTAINING(load_program(program({var("a", {2, -7})}, {})), format_error, "dim -7 is invalid");
    ProgramDesc built;  // built in C++, past the JSON reader's check
    built.blocks[0].vars.push_back(VarDesc{"a", VarType::LOD_TENSOR, DataType::FP32, {2, -7}});
    CHECK_THROWS_CONTAINING(validate(built), shape_error, "[dlgraph.shape.dim]", "dim -7 in [2,-7]");
    // Tensors refuse them too (the last line of defence for any caller).
    Tensor t;
    CHECK_THROWS_CONTAINING(t.resize(DataType::FP32, Shape{p31, p31}), resource_error, "[dlgraph.resource.size]");
}

TEST_CASE("hostile: shape arithmetic in ops is checked, not overflowed") {
    auto reshape = program({var("a", {2, 2}), var("b", {-1, -1, -1})},
                           {fill("a", {2, 2}), op("reshape", {{"X", {"a"}}}, {{"Out", {"b"}}},
                                                  {attr_ints("shape", {p62, p62, -1})})});
    CHECK_THROWS_CONTAINING(load_program(reshape), shape_error, "[dlgraph.resource.size]", "reshape",
                            "the dims of shape [4611686018427387904,4611686018427387904,-1]");
    auto split = program({var("a", {4}), var("b", {-1}), var("c", {-1})},
                         {fill("a", {4}), op("split", {{"X", {"a"}}}, {{"Out", {"b", "c"}}},
                                             {attr_ints("sections", {p62, p62}), attr_int("axis", 0), attr_int("num", 0)})});
    CHECK_THROWS_CONTAINING(load_program(split), shape_error, "[dlgraph.resource.size]", "the sections add up");
    // An axis given as LONG is range-checked like an INT one.
    auto long_axis = program({var("a", {4}), var("b", {-1}), var("c", {-1})},
                             {fill("a", {4}), op("split", {{"X", {"a"}}}, {{"Out", {"b", "c"}}},
                                                 {attr_long("axis", std::int64_t(1) << 40), attr_int("num", 2)})});
    CHECK_THROWS_CONTAINING(load_program(long_axis), format_error, "[dlgraph.format.attr]", "1099511627776 is out of range");
    // More than 8 sections is fine (the message printer used to need a Shape).
    std::vector<std::string> outs;
    std::vector<json> vars = {var("a", {10})};
    for (int i = 0; i < 10; ++i) {
        outs.push_back("o" + std::to_string(i));
        vars.push_back(var(outs.back(), {-1}));
    }
    Session<cpu> s(load_program(program(vars, {fill("a", {10}), op("split", {{"X", {"a"}}}, {{"Out", outs}},
                                                                   {attr_ints("sections", std::vector<std::int64_t>(10, 1)),
                                                                    attr_int("axis", 0), attr_int("num", 0)})})));
    CHECK(s.eval(TargetRef("o9")).shape() == Shape{1});
}

TEST_CASE("hostile: a .npy header whose dims overflow, even beside a zero dim, is refused") {
    auto npy_with_shape = [](const std::string& shape) {
        std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
        dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
        dict += '\n';
        std::string out = "\x93NUMPY\x01";
        out += '\0';
        out += static_cast<char>(dict.size() & 0xff);
        out += static_cast<char>(dict.size() >> 8);
        return out + dict;
    };
    CHECK_THROWS_CONTAINING(parse_npy(npy_with_shape("(4294967296, 4294967296, 0)"), "x.npy"), io_error,
                            "[dlgraph.io.npy_header]", "too large");
    CHECK(parse_npy(npy_with_shape("(3, 0)"), "x.npy").shape() == Shape{3, 0});
}

TEST_CASE("hostile: integer arithmetic wraps around as NumPy's does, float to integer saturates") {
    constexpr std::int32_t lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
    Program p;
    auto a = p.input<std::int32_t>("a", {-1});
    auto b = p.input<std::int32_t>("b", {-1});
    auto sum = a + b, diff = a - b, prod = a * b, quot = a / b;
    auto sq = square(a), ab = abs(a);
    auto total = reduce_sum(a, {0});
    Session<cpu> s(p);
    const xt::xarray<std::int32_t> av = {hi, lo, lo, 65536, -7}, bv = {1, -1, -1, 65536, 3};
    auto run = [&](auto v) { return s.eval(v, {{a, av}, {b, bv}}); };
    CHECK(run(sum) == xt::xarray<std::int32_t>{lo, hi, hi, 131072, -4});
    CHECK(run(diff) == xt::xarray<std::int32_t>{hi - 1, lo + 1, lo + 1, 0, -10});
    CHECK(run(prod) == xt::xarray<std::int32_t>{hi, lo, lo, 0, -21});
    CHECK(run(quot) == xt::xarray<std::int32_t>{hi, lo, lo, 1, -2});  // INT_MIN / -1 wraps to INT_MIN
    CHECK(run(sq) == xt::xarray<std::int32_t>{1, 0, 0, 0, 49});
    CHECK(run(ab) == xt::xarray<std::int32_t>{hi, lo, lo, 65536, 7});
    // hi + lo + lo + 65536 - 7 modulo 2^32.
    const auto want = static_cast<std::int32_t>(static_cast<std::uint32_t>(hi) + static_cast<std::uint32_t>(lo) * 2u +
                                                65536u - 7u);
    CHECK(run(total)(0) == want);

    Program q;
    auto f = q.input<float>("f", {-1});
    auto i32 = cast<std::int32_t>(f);
    Session<cpu> c(q);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const xt::xarray<float> fv = {1e10f, -1e10f, inf, -inf, nan, -2.9f, 2.9f};
    CHECK(c.eval(i32, {{f, fv}}) == xt::xarray<std::int32_t>{hi, lo, hi, lo, 0, -2, 2});
}

TEST_CASE("hostile: an integer zero divisor anywhere in a large tensor is the same clean error on two threads") {
    Program p;
    auto a = p.input<std::int64_t>("a", {-1});
    auto b = p.input<std::int64_t>("b", {-1});
    auto q = a / b;
    SessionOptions opts;
    opts.threads = 2;
    Session<cpu> s(p, opts);
    const std::size_t n = 300'000;
    xt::xarray<std::int64_t> av = xt::ones<std::int64_t>({n}), bv = xt::ones<std::int64_t>({n});
    for (std::size_t at : {std::size_t(0), n / 3, n / 2, n - 1}) {
        bv(at) = 0;
        CHECK_THROWS_CONTAINING(s.eval(q, {{a, av}, {b, bv}}), value_error, "[dlgraph.value.div0]");
        bv(at) = 1;
    }
    CHECK(s.eval(q, {{a, av}, {b, bv}}) == av);
}

TEST_CASE("hostile: grad ops called directly with inconsistent inputs are refused by inference") {
    auto binary_grad = [](std::int64_t axis) {
        return program({var("x", {2, 3, 4}), var("y", {3}), var("o", {2, 3, 4}), var("g", {2, 3, 4}),
                        var("dx", {-1, -1, -1}), var("dy", {-1})},
                       {fill("x", {2, 3, 4}), fill("y", {3}), fill("o", {2, 3, 4}), fill("g", {2, 3, 4}),
                        op("elementwise_add_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}},
                           {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, {attr_int("axis", axis)})});
    };
    for (std::int64_t axis : {-2, -3, 5})
        CHECK_THROWS_CONTAINING(load_program(binary_grad(axis)), shape_error, "[dlgraph.shape.broadcast]",
                                "elementwise_add_grad", "Y does not fit into X");
    CHECK_NOTHROW(load_program(binary_grad(1)));
    for (std::string type : {"relu_grad", "square_grad", "exp_grad", "tanh_grad"}) {
        auto unary = program({var("x", {2, 3, 4}), var("o", {3, 2}), var("g", {3, 2}), var("dx", {-1, -1, -1})},
                             {fill("x", {2, 3, 4}), fill("o", {3, 2}), fill("g", {3, 2}),
                              op(type, {{"X", {"x"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})});
        CHECK_THROWS_CONTAINING(load_program(unary), shape_error, "[dlgraph.shape.grad]", type.c_str(),
                                "Out is [3,2] but the forward op's Out is [2,3,4]");
    }
    // A gradient of Out alone takes no X (Paddle's relu_grad, tanh_grad ...);
    // one that reads X needs it.
    auto out_only = [](const std::string& type, std::vector<std::int64_t> g) {
        return program({var("o", {2, 3}), var("g", g), var("dx", {-1, -1})},
                       {fill("o", {2, 3}), fill("g", g),
                        op(type, {{"Out", {"o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})});
    };
    for (std::string type : {"relu_grad", "sigmoid_grad", "tanh_grad", "exp_grad", "sqrt_grad"}) {
        CHECK_NOTHROW(load_program(out_only(type, {2, 3})));
        CHECK_THROWS_CONTAINING(load_program(out_only(type, {3, 2})), shape_error, "[dlgraph.shape.grad]", type.c_str(),
                                "Out@GRAD is [3,2] but the forward op's Out is [2,3]");
    }
    for (std::string type : {"log_grad", "abs_grad", "square_grad"}) {
        const std::string want = "op '" + type + "' needs a variable in slot 'X'";
        CHECK_THROWS_CONTAINING(load_program(out_only(type, {2, 3})), graph_error, "[dlgraph.graph.slot]", want.c_str());
    }
    // Likewise a binary op's gradient takes no Out, except pow's.
    auto no_out = [](const std::string& type) {
        return program({var("x", {2, 3}), var("y", {3}), var("g", {2, 3}), var("dx", {-1, -1}), var("dy", {-1})},
                       {fill("x", {2, 3}), fill("y", {3}), fill("g", {2, 3}),
                        op(type, {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}})});
    };
    for (std::string type : {"elementwise_add_grad", "elementwise_mul_grad", "elementwise_max_grad"})
        CHECK_NOTHROW(load_program(no_out(type)));
    CHECK_THROWS_CONTAINING(load_program(no_out("elementwise_pow_grad")), graph_error, "[dlgraph.graph.slot]",
                            "op 'elementwise_pow_grad' needs a variable in slot 'Out'");
    auto reduce = program({var("x", {200, 300}), var("o", {300}), var("g", {3, 2}), var("dx", {-1, -1})},
                          {fill("x", {200, 300}), fill("o", {300}), fill("g", {3, 2}),
                           op("reduce_mean_grad", {{"X", {"x"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}},
                              {attr_ints("dim", {0})})});
    CHECK_THROWS_CONTAINING(load_program(reduce), shape_error, "[dlgraph.shape.grad]",
                            "Out@GRAD is [3,2] but the forward op's Out is [300]");
    auto mean = program({var("x", {20}), var("o", {1}), var("g", {20}), var("dx", {-1})},
                        {fill("x", {20}), fill("o", {1}), fill("g", {20}),
                         op("mean_grad", {{"X", {"x"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})});
    CHECK_THROWS_CONTAINING(load_program(mean), shape_error, "[dlgraph.shape.grad]", "Out@GRAD is [20]");
}

TEST_CASE("hostile: a variable of another kind in a tensor slot is refused") {
    auto p = program({var("x", {2}), var("o", {}, "FP32", "STEP_SCOPES")},
                     {fill("x", {2}), op("assign", {{"X", {"x"}}}, {{"Out", {"o"}}})});
    CHECK_THROWS_CONTAINING(load_program(p), graph_error, "[dlgraph.graph.kind]", "variable 'o' is a STEP_SCOPES",
                            "slot Out of assign takes a LOD_TENSOR");
    // feed and fetch take their lists, and only those.
    auto f = program({var("feed", {}, "FP32", "FEED_MINIBATCH"), var("x", {2})},
                     {op("feed", {{"X", {"x"}}}, {{"Out", {"x"}}}, {attr_int("col", 0)})});
    CHECK_THROWS_CONTAINING(load_program(f), graph_error, "[dlgraph.graph.kind]", "slot X of feed takes a FEED_MINIBATCH");
}

TEST_CASE("hostile: malformed JSON is a format or resource error, never an internal one") {
    auto p = program({var("a", {2})}, {fill("a", {2})});
    std::string big = p;
    big.replace(big.find("\"value\""), 0, "\"x\":1e999,");
    CHECK_THROWS_CONTAINING(load_program(R"({"version":1e999})"), format_error, "[dlgraph.format.json]");
    CHECK_THROWS_CONTAINING(load_program(std::string(100, '[') + std::string(100, ']')), resource_error,
                            "[dlgraph.resource.depth]", "deeper than 64");
    // Brackets inside strings do not count.
    CHECK_THROWS_CONTAINING(load_program("{\"version\":1,\"blocks\":[],\"x\":\"" + std::string(100, '[') + "\"}"),
                            format_error, "[dlgraph.format.field]");
    json j = json::parse(p);
    j["blocks"][0]["idx"] = std::int64_t(1) << 32;  // truncated to 0 before
    CHECK_THROWS_CONTAINING(load_program(j.dump()), format_error, "out of int32 range");
    j = json::parse(p);
    j["blocks"][0]["ops"][0]["outputs"].push_back({{"parameter", "Out"}, {"arguments", {"a"}}});
    CHECK_THROWS_CONTAINING(load_program(j.dump()), format_error, "slot 'Out' appears twice");
}

TEST_CASE("hostile: a slot with 65,536 or more variables keeps them all") {
    constexpr int n = 65'537;
    Program p;
    auto x = p.input<float>("x", {1});
    std::vector<Var<float>> many(n, x);
    auto total = sum(many);
    auto joined = concat(std::vector<Var<float>>(n - 1, x), 0);
    Session<cpu> s(p);
    const xt::xarray<float> xv = {1.0f};
    auto t = s.eval(total, {{x, xv}});
    CHECK(t.shape() == std::vector<std::size_t>{1});
    CHECK(t(0) == float(n));
    auto c = s.eval(joined, {{x, xv}});
    CHECK(c.shape() == std::vector<std::size_t>{std::size_t(n - 1)});
    CHECK(xt::all(xt::equal(c, 1.0f)));
}

TEST_CASE("hostile: a split into 65,537 outputs and a 20,000-op chain plan in linear time and compute right") {
    constexpr int n = 65'537;
    Program q;
    auto x = q.input<float>("x", {n});
    auto parts = split(x, n, 0);
    Session<cpu> t(q);
    xt::xarray<float> xv = xt::arange<float>(0, n);
    auto got = t.eval({TargetRef(parts[7]), TargetRef(parts[n - 1])}, {{x, xv}});
    CHECK(got[0].item<float>() == 7.0f);
    CHECK(got[1].item<float>() == float(n - 1));

    constexpr int m = 20'000;
    std::vector<json> cv = {var("v0", {1})}, co = {fill("v0", {1}, -2)};
    for (int i = 0; i < m; ++i) {
        cv.push_back(var("v" + std::to_string(i + 1), {1}));
        co.push_back(op(i % 2 ? "relu" : "scale", {{"X", {"v" + std::to_string(i)}}}, {{"Out", {"v" + std::to_string(i + 1)}}}));
    }
    Session<cpu> chain(load_program(program(cv, co)));
    // scale (1.0) and relu alternate: -2 -> -2 -> 0 -> 0 ...
    CHECK(chain.eval(TargetRef("v" + std::to_string(m))).item<float>() == 0.0f);
    SessionOptions no_in_place;
    no_in_place.in_place = false;  // every value its own item: the linear placement
    Session<cpu> chain2(load_program(program(cv, co)), no_in_place);
    CHECK(chain2.eval(TargetRef("v1")).item<float>() == -2.0f);
    CHECK(chain2.eval(TargetRef("v" + std::to_string(m))).item<float>() == 0.0f);
}

TEST_CASE("hostile: the placement above the greedy's limit keeps live values apart") {
    // Random lifetimes and sizes; any two values live at one step must not overlap.
    std::mt19937 rng(7);
    for (int round = 0; round < 20; ++round) {
        std::vector<detail::arena_item> items;
        const int n = 200 + round * 50;
        for (int i = 0; i < n; ++i) {
            const int first = static_cast<int>(rng() % 100), len = static_cast<int>(rng() % (round % 3 ? 5 : 60));
            items.push_back({i, 16 * (1 + rng() % 64), 0, first, first + len});
        }
        std::size_t total = detail::place_items_linear(items), sum = 0;
        for (auto& a : items) sum += a.bytes;
        CHECK(total <= sum);
        for (auto& a : items) {
            CHECK(a.offset + a.bytes <= total);
            for (auto& b : items)
                if (&a != &b && !(a.last < b.first || b.last < a.first))
                    CHECK((a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset));
        }
    }
}

TEST_CASE("hostile: SessionOptions::max_bytes refuses a plan before it allocates, and the session still works") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = relu(x) * 2.0f;
    SessionOptions opts;
    opts.max_bytes = 4096;
    Session<cpu> s(p, opts);
    const xt::xarray<float> small = xt::ones<float>({std::size_t(100)}), big = xt::ones<float>({std::size_t(2000)});
    CHECK_THROWS_CONTAINING(s.eval(y, {{x, big}}), resource_error, "[dlgraph.resource.size]", "more than the limit of 4.0 KiB");
    CHECK(s.eval(y, {{x, small}}) == small * 2.0f);
    // The arena: each value fits, the buffer for two live ones does not.
    Program q;
    auto a = q.input<float>("a", {-1});
    auto b = relu(a), c = exp(a);
    auto d = b + c;
    SessionOptions tight;
    tight.max_bytes = 3000;
    tight.in_place = false;
    tight.fuse = false;
    Session<cpu> t(q, tight);
    const xt::xarray<float> av = xt::zeros<float>({std::size_t(700)});
    CHECK_THROWS_CONTAINING(t.eval(d, {{a, av}}), resource_error, "[dlgraph.resource.arena]", "on the host");
}

TEST_CASE("hostile: --lenient drops PaddlePaddle's framework attributes, naming each once") {
    auto p = program({var("x", {2}), var("y", {2})},
                     {op("relu", {{"X", {"x"}}}, {{"Out", {"y"}}},
                         {attr_int("op_role", 0), {{"name", "op_callstack"}, {"type", "STRINGS"}, {"strings", {"a", "b"}}},
                          attr_bool("use_mkldnn", false), attr_bool("is_test", true)}),
                      op("relu", {{"X", {"y"}}}, {{"Out", {"y"}}}, {attr_int("op_role", 1)})});
    CHECK_THROWS_CONTAINING(load_program(p), format_error, "[dlgraph.format.attr]", "has no attribute 'op_role'");
    std::vector<std::string> ignored;
    ProgramDesc d = load_program(p, LoadOptions{true, &ignored});
    CHECK(ignored == std::vector<std::string>{"is_test", "op_callstack", "op_role", "use_mkldnn"});
    CHECK(d.blocks[0].ops[0].attrs.empty());
    // Only framework attributes: an unknown one is still an error.
    auto q = program({var("x", {2}), var("y", {2})}, {op("relu", {{"X", {"x"}}}, {{"Out", {"y"}}}, {attr_int("alpha", 0)})});
    CHECK_THROWS_CONTAINING(load_program(q, LoadOptions{true}), format_error, "has no attribute 'alpha'");
}

namespace {
// Every persistable's bytes (empty for one without a value).
// Every persistable's bytes (read through a host copy: some live on a device).
template <class S> std::map<std::string, std::string> persistable_bytes(S& s) {
    std::map<std::string, std::string> out;
    for (auto& vd : s.program().blocks[0].vars) {
        if (!vd.persistable) continue;
        const Variable* v = s.scope().find_local(vd.name);
        const Tensor* t = v && v->initialized() && v->is<Tensor>() ? &v->get<Tensor>() : nullptr;
        Tensor host;
        if (t && t->initialized()) host.copy_from(*t);
        out[vd.name] = t && t->initialized() ? std::string(static_cast<const char*>(host.raw()), host.bytes()) : "";
    }
    return out;
}
}  // namespace

namespace {
// On the CPU, or on a device whose persistables live in device memory
// (copied on the device before the call, rebound to the copy on failure).
template <class Device> void failed_eval_changes_no_persistable() {
    // A training step (Adam) followed by an op that can fail on its data:
    // the optimizer's writes come before the failure.
    Program p;
    auto x = p.input<float>("x", {-1, 3});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto num = p.input<std::int32_t>("num", {-1});
    auto den = p.input<std::int32_t>("den", {-1});
    auto w = p.parameter<float>("w", {3, 4}, init::uniform(-1, 1, 3));
    auto b = p.parameter<float>("b", {4}, init::constant(0.1));
    auto [prob, xent] = softmax_with_cross_entropy(matmul(x, w) + b, label);
    auto loss = mean(xent);
    auto step = Adam(0.1).minimize(loss);
    auto ratio = num / den;  // after the optimizer ops in program order
    std::vector<TargetRef> targets(step.targets().begin(), step.targets().end());
    targets.push_back(TargetRef(ratio));
    targets.push_back(TargetRef(loss));
    const xt::xarray<float> xv = {{1, 2, 3}, {-1, 0, 2}};
    const xt::xtensor<std::int64_t, 2> lv = {{0}, {3}};
    const xt::xarray<std::int32_t> nv = {6, 7}, good = {2, 7}, bad = {2, 0};
    auto feeds = [&](const xt::xarray<std::int32_t>& d) {
        return std::vector<Feed>{{x, xv}, {label, lv}, {num, nv}, {den, d}};
    };
    Session<Device> s(p);
    Session<cpu> ref(p);
    std::vector<Tensor> out(targets.size());
    s.eval_into(targets, feeds(good), out);  // one good step: moments hold values
    ref.eval_into(targets, feeds(good), out);
    const auto before = persistable_bytes(s);

    // A real fault after the optimizer: every persistable as it was.
    CHECK_THROWS_CONTAINING(s.eval_into(targets, feeds(bad), out), value_error, "[dlgraph.value.div0]");
    CHECK(persistable_bytes(s) == before);
    // A bad label (before the optimizer) too.
    const xt::xtensor<std::int64_t, 2> far = {{0}, {9}};
    CHECK_THROWS_CONTAINING(s.eval_into(targets, std::vector<Feed>{{x, xv}, {label, far}, {num, nv}, {den, good}}, out),
                            value_error, "[dlgraph.value.label]");
    CHECK(persistable_bytes(s) == before);

    // A failure injected after each step in turn.
    std::vector<std::string> fed{"x", "label", "num", "den"};
    const std::size_t steps = s.plan(targets, fed).steps.size();
    REQUIRE(steps > 10);
    for (std::size_t k = 0; k < steps; ++k) {
        detail::test_fail_at_step = k;
        INFO("failing after step " << k);
        CHECK_THROWS_CONTAINING(s.eval_into(targets, feeds(good), out), value_error, "[dlgraph.value.injected]");
        detail::test_fail_at_step = SIZE_MAX;
        CHECK(persistable_bytes(s) == before);
    }
    // Then training goes on exactly as in a session that never failed.
    s.eval_into(targets, feeds(good), out);
    std::vector<Tensor> ref_out(targets.size());
    ref.eval_into(targets, feeds(good), ref_out);
    CHECK(persistable_bytes(s) == persistable_bytes(ref));
    if constexpr (!std::is_same_v<Device, cpu>)  // the copies were made on the device
        CHECK(test_support::context_of(s.device()).device_copies > 0);
}
}  // namespace

TEST_CASE("hostile: a failed evaluation changes no persistable, at whichever step it fails") {
    failed_eval_changes_no_persistable<cpu>();
}

TEST_CASE("hostile: on a device too, a failed evaluation changes no persistable (they live in device memory)") {
    failed_eval_changes_no_persistable<test_support::counting_device>();
}

TEST_CASE("hostile: rollback covers persistables an initializer gave during the call, and calls that reshape") {
    // w's initializer runs inside the first call; the division after it fails.
    auto p = program({var("x", {-1, 3}), var("n", {-1}, "INT32"), var("d", {-1}, "INT32"), var("q", {-1}, "INT32"),
                      var("w", {3}), var("y", {-1, 3}), var("w2", {3})},
                     {fill("w", {3}, 0.5), op("elementwise_mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"y"}}}),
                      op("scale", {{"X", {"w"}}}, {{"Out", {"w"}}}, {attr_float("scale", 2.0)}),
                      op("elementwise_div", {{"X", {"n"}}, {"Y", {"d"}}}, {{"Out", {"q"}}})});
    json j = json::parse(p);
    for (auto& v : j["blocks"][0]["vars"])
        if (v["name"] == "w") v["persistable"] = true;
    Session<cpu> s(load_program(j.dump()));
    const xt::xarray<float> x2 = {{1, 2, 3}, {4, 5, 6}}, x4 = xt::ones<float>({std::size_t(4), std::size_t(3)});
    const xt::xarray<std::int32_t> n = {4}, good = {2}, zero = {0};
    // The scale op as a target (a persistable named as a target is read, not computed).
    const std::vector<TargetRef> targets{TargetRef("y"), TargetRef::op_only(2), TargetRef("q")};
    CHECK_THROWS_CONTAINING(s.eval(targets, {{"x", x2}, {"n", n}, {"d", zero}}), value_error, "[dlgraph.value.div0]");
    CHECK_FALSE(s.scope().find_local("w")->initialized());
    // y = x * 0.5, then w doubles.
    CHECK(to_xarray<float>(s.eval(targets, {{"x", x2}, {"n", n}, {"d", good}})[0]) == x2 * 0.5f);
    const xt::xarray<float> w1 = {1, 1, 1};
    CHECK(to_xarray<float>(s.scope().find_local("w")->get<Tensor>()) == w1);
    // A failing call that also reshapes the plan (a bigger batch): w keeps its value.
    CHECK_THROWS_CONTAINING(s.eval(targets, {{"x", x4}, {"n", n}, {"d", zero}}), value_error, "[dlgraph.value.div0]");
    CHECK(to_xarray<float>(s.scope().find_local("w")->get<Tensor>()) == w1);
    // The session goes on with either batch.
    CHECK(to_xarray<float>(s.eval(targets, {{"x", x4}, {"n", n}, {"d", good}})[0]) == x4);
    CHECK(to_xarray<float>(s.eval(targets, {{"x", x2}, {"n", n}, {"d", good}})[0]) == x2 * 2.0f);
}

TEST_CASE("hostile: an INT attribute given as LONG must fit in int32") {
    auto p = program({var("x", {2, 3}), var("y", {3}), var("z", {2, 3})},
                     {fill("x", {2, 3}), fill("y", {3}),
                      op("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"z"}}},
                         {attr_long("axis", std::numeric_limits<std::int64_t>::max())})});
    CHECK_THROWS_CONTAINING(load_program(p), format_error, "[dlgraph.format.attr]", "out of range");
}

TEST_CASE("hostile: a variable written again with another shape or dtype, after a step used it, is refused") {
    // Found by fuzz_program: y is written [65536], read by the division,
    // then written [3]; one tensor per variable meant the division ran
    // with Y [3] and read past it.
    const std::vector<json> vars{var("x", {}, "INT32"), var("y", {}, "INT32"), var("o", {}, "INT32")};
    auto div = op("elementwise_div", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}});
    Session<cpu> s(load_program(program(vars, {fill("x", {1}, -3, 2), fill("y", {65536}, -3, 2), div,
                                               fill("y", {3}, -4, 2)})));
    const std::vector<TargetRef> targets{TargetRef("o"), TargetRef("y")};
    CHECK_THROWS_CONTAINING(s.eval(targets, {}), shape_error, "[dlgraph.shape.rewrite]",
                            "fill_constant (op #3) writes 'y' as INT32 [3], but it was INT32 [65536] for an earlier step");
    // A write that nothing later needs is pruned: writing y twice with nothing between is no error.
    Session<cpu> twice(load_program(program(vars, {fill("y", {8}, 1, 2), fill("y", {3}, 2, 2)})));
    CHECK(twice.eval(TargetRef("y"), {}).numel() == 3);
    // The same dtype and shape again is fine (in-place updates do it).
    Session<cpu> same(load_program(
        program(vars, {fill("x", {1}, 6, 2), fill("y", {3}, 1, 2), div, fill("x", {1}, 7, 2), fill("y", {3}, 2, 2)})));
    const std::vector<TargetRef> both{TargetRef("o"), TargetRef("y")};
    auto r = same.eval(both, {});
    CHECK(r[1].numel() == 3);
}
