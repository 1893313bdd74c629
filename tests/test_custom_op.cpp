// Ops from user code (register_op): the builder, JSON, the planner, fusion,
// autodiff and devices treat a registered op as a built-in one;
// registration refuses duplicates and definitions that contradict
// themselves, by message; the built-in table passes the same checks. The
// CLI with a registered op is examples/custom_op (ctest example.custom_op_cli).
#include <doctest/doctest.h>

#include <dlgraph/cpu/elementwise.hpp>

#include <atomic>
#include <cmath>
#include <cstring>

#include "counting_device.hpp"
#include "grad_check.hpp"
#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

// test_scaled_cube: Out = alpha * X^3, attribute alpha; its grad op reads X
// and Out@GRAD (GradSpec, attributes copied).
void same_as_x(const InferContext& c) {
    c.dtype_in(0, {DataType::FP32, DataType::FP64});
    c.set(0, c.dtype(0), c.shape(0));
}
struct cube_kernel {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T a = static_cast<T>(c.attr(0).f);
        const T* x = c.in(0).data<T>();
        T* y = c.out(0).data<T>();
        for (std::int64_t i = 0; i < c.in(0).numel(); ++i) y[i] = a * x[i] * x[i] * x[i];
    }
};
struct cube_grad_kernel {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T a = static_cast<T>(c.attr(0).f);
        const T* x = c.in(0).data<T>();
        const T* d = c.in(1).data<T>();
        T* dx = c.out(0).data<T>();
        for (std::int64_t i = 0; i < c.in(0).numel(); ++i) dx[i] = d[i] * T(3) * a * x[i] * x[i];
    }
};
OpDef cube_def() {
    OpDef d{"test_scaled_cube", {{"X"}}, {{"Out"}}, {{"alpha", Attribute::make_float("alpha", 1.0)}}, &same_as_x};
    d.kernels = cpu_kernels<cube_kernel, float, double>();
    d.grad_spec = {"test_scaled_cube_grad", {"X"}, {"Out"}, {"X"}};
    d.doc = "Out = alpha * X^3";
    return d;
}
OpDef cube_grad_def() {
    OpDef d{"test_scaled_cube_grad",
            {{"X"}, {"Out@GRAD"}, {"Out", false, true}},
            {{"X@GRAD"}},
            {{"alpha", Attribute::make_float("alpha", 1.0)}},
            &same_as_x};
    d.kernels = cpu_kernels<cube_grad_kernel, float, double>();
    return d;
}

// test_softsign: X / (1 + |X|), element-wise and fusible.
struct softsign_fn {
    static constexpr bool grad_reads_out = false;  // its grad reads X: test_softsign_grad fuses too
    template <class V> V operator()(V x) const { return x / (V(1) + kernels::vm::abs(x)); }
    template <class V> V grad(V x, V, V d) const { return d / ((V(1) + kernels::vm::abs(x)) * (V(1) + kernels::vm::abs(x))); }
};
OpDef softsign_def() {
    OpDef d{"test_softsign", {{"X"}}, {{"Out"}}, {}, &same_as_x};
    cpu_ops::elementwise_unary<softsign_fn, float, double>::attach(d);
    d.grad_spec = {"test_softsign_grad", {"X"}, {"Out"}, {"X"}};
    return d;
}
OpDef softsign_grad_def() {
    OpDef d = ops::elementwise_unary_grad::make("test_softsign_grad");
    cpu_ops::elementwise_unary_grad<softsign_fn>::attach(d);
    return d;
}

// test_negate: Out = -X with a kernel of its own for the counting device
// ("test"), which counts its calls.
std::atomic<int> device_negate_calls{0};
struct negate_kernel {
    template <class T> static void compute(cpu, const KernelContext& c) {
        for (std::int64_t i = 0; i < c.in(0).numel(); ++i) c.out(0).data<T>()[i] = -c.in(0).data<T>()[i];
    }
};
OpDef negate_def() {
    OpDef d{"test_negate", {{"X"}}, {{"Out"}}, {}, &same_as_x};
    d.kernels = cpu_kernels<negate_kernel, float, double>();
    KernelTable dev{};
    dev[static_cast<std::size_t>(DataType::FP32)] = [](const KernelContext& c) {
        ++device_negate_calls;
        negate_kernel::compute<float>(cpu{}, c);
    };
    d.device_kernels = {{"test", dev}};
    return d;
}

// Registers the test ops once per process (ctest runs each case alone).
void register_test_ops() {
    static const bool once = [] {
        register_op(cube_grad_def());
        register_op(cube_def());
        register_op(softsign_grad_def());
        register_op(softsign_def());
        register_op(negate_def());
        return true;
    }();
    (void)once;
}

template <element_type T> Var<T> scaled_cube(const Var<T>& x, double alpha) {
    return apply_op<T>("test_scaled_cube", {{"X", x}}, {Attribute::make_float("alpha", alpha)});
}
template <element_type T> Var<T> test_softsign(const Var<T>& x) { return apply_op<T>("test_softsign", {{"X", x}}); }

}  // namespace

// The compile-time guard over the table's rows rejects what it should.
constexpr std::string_view good_rows[] = {"relu", "relu_grad", "mul"};
constexpr std::string_view twice[] = {"relu", "mul", "relu"};
constexpr std::string_view grad_first[] = {"relu_grad", "relu"};
constexpr std::string_view grad_alone[] = {"mul", "mish_grad"};
static_assert(detail::op_rows_valid(good_rows));
static_assert(!detail::op_rows_valid(twice));
static_assert(!detail::op_rows_valid(grad_first));
static_assert(!detail::op_rows_valid(grad_alone));

TEST_CASE("built-in ops: each table row is its definition, and passes the checks registration makes") {
    REQUIRE(op_table().size() == std::size(detail::op_row_names));
    for (std::size_t i = 0; i < op_table().size(); ++i) {
        const OpDef& d = op_table()[i];
        INFO("row " << i << " " << detail::op_row_names[i]);
        CHECK(d.type == detail::op_row_names[i]);
        CHECK(find_op(d.type) == &d);
        CHECK_NOTHROW(check_op_definition(d));
    }
}

TEST_CASE("a registered op: builder, shape errors, FP64 gradient by finite differences, JSON round trip") {
    register_test_ops();
    REQUIRE(find_op("test_scaled_cube") != nullptr);
    CHECK(find_op("test_scaled_cube")->doc == "Out = alpha * X^3");
    CHECK(registered_ops().size() >= 5);  // other cases of this binary may register more

    // The gradient through the registered grad op, attributes carried over.
    grad_check::check({{"x", grad_check::random({3, 4}, 1)}},
                      [](Program&, const std::vector<Var<double>>& x) { return scaled_cube(x[0], -1.5); });
    grad_check::check({{"x", grad_check::random({5}, 2, -3, 3)}},
                      [](Program&, const std::vector<Var<double>>& x) { return test_softsign(x[0]) * x[0]; });

    // Its inference runs on the builder's line: a dtype it has no kernel for.
    Program p;
    auto xi = p.input<std::int32_t>("xi", {2});
    CHECK_THROWS_CONTAINING(scaled_cube(xi, 2.0), type_error, "test_scaled_cube", "X must be FP32 or FP64, not INT32");
    CHECK_THROWS_CONTAINING(apply_op<float>("test_scaled_cube", {{"X", xi}}, {Attribute::make_string("alpha", "2")}),
                            format_error, "op 'test_scaled_cube' expects FLOAT, found STRING");

    // Saved as JSON, loaded, run: the same values as the built program.
    auto x = p.input<float>("x", {-1, 3});
    auto y = p.rename(test_softsign(scaled_cube(x, 0.5)) + x, "y");
    const xt::xarray<float> xv = {{-2, -0.5, 0}, {0.25, 1, 3}};
    Session<cpu> built(p);
    const xt::xarray<float> want = built.eval(y, {{x, xv}});
    for (std::size_t i = 0; i < xv.size(); ++i) {
        const double c = 0.5 * std::pow(double(xv.flat(i)), 3);
        CHECK(double(want.flat(i)) == doctest::Approx(c / (1 + std::abs(c)) + xv.flat(i)).epsilon(1e-6));
    }
    const std::string json = p.to_json();
    CHECK(json.find("\"test_scaled_cube\"") != std::string::npos);
    Session<cpu> loaded(load_program(json));
    CHECK(to_xarray<float>(loaded.eval(TargetRef("y"), {{"x", xv}})) == want);

    // A program whose op is registered nowhere names it.
    std::string unknown = json;
    unknown.replace(unknown.find("\"test_scaled_cube\""), 18, "\"test_never_known\"");
    CHECK_THROWS_CONTAINING(load_program(unknown), graph_error, "[dlgraph.graph.unknown_op]",
                            "unknown op type 'test_never_known' (not a built-in op, nor one this program registered)");
}

TEST_CASE("apply_op: an output of another element type, or handles of two programs, change nothing") {
    register_test_ops();
    Program p;
    auto x = p.input<float>("x", {4});
    const ProgramDesc before = p.desc();
    CHECK_THROWS_CONTAINING(apply_op<double>("test_scaled_cube", {{"X", x}}), type_error, "[dlgraph.type.handle]",
                            "test_scaled_cube: its output Out is FP32, not FP64");
    CHECK(p.desc() == before);
    Program q;
    auto z = q.input<float>("z", {4});
    CHECK_THROWS_CONTAINING(apply_op<float>("elementwise_add", {{"X", x}, {"Y", z}}), graph_error,
                            "[dlgraph.graph.program]", "elementwise_add: its inputs belong to different programs");
    CHECK_THROWS_CONTAINING(apply_op<float>("no_such_op", {{"X", x}}), graph_error, "unknown op type 'no_such_op'");
    // Slots are checked as load_program checks them, before inference reads them.
    CHECK_THROWS_CONTAINING(apply_op<float>("relu_grad", {{"X", x}, {"Out", x}, {"Out@GRAD", x}}), graph_error,
                            "[dlgraph.graph.slot]", "op 'relu_grad' has no output slot 'Out' (slots: X@GRAD)");
    CHECK_THROWS_CONTAINING(apply_op<float>("elementwise_add", {{"X", x}}), graph_error, "[dlgraph.graph.slot]",
                            "op 'elementwise_add' needs a variable in slot 'Y'");
    CHECK_THROWS_CONTAINING(apply_op<float>("relu", {{"X", x}, {"W", x}}), graph_error, "[dlgraph.graph.slot]",
                            "op 'relu' has no input slot 'W' (slots: X)");
    CHECK_THROWS_CONTAINING(apply_op<float>("relu", {{"X", x, x}}), graph_error, "[dlgraph.graph.slot]",
                            "slot 'X' of op 'relu' takes one variable, found 2");
    CHECK(p.desc() == before);
    const auto dx = apply_op<float>("relu_grad", {{"X", x}, {"Out", x}, {"Out@GRAD", x}}, {}, "X@GRAD");
    CHECK(p.desc().blocks[0].ops.back().type == "relu_grad");
    CHECK(dx.shape() == Shape{4});
    // A built-in op through apply_op is the built-in op.
    auto r = apply_op<float>("relu", {{"X", x}});
    CHECK(p.desc().blocks[0].ops.back().type == "relu");
    CHECK(r.shape() == Shape{4});
}

TEST_CASE("registration refuses a type that exists, and definitions that contradict themselves, by message") {
    register_test_ops();
    const std::size_t count = registered_ops().size();
    CHECK_THROWS_CONTAINING(register_op(cube_def()), graph_error, "[dlgraph.op.duplicate]",
                            "op 'test_scaled_cube' is already registered");
    OpDef relu = cube_def();
    relu.type = "relu";
    CHECK_THROWS_CONTAINING(register_op(relu), graph_error, "[dlgraph.op.duplicate]", "op 'relu' is already a built-in op");

    struct bad_case {
        const char* what;
        void (*edit)(OpDef&);
        const char* message;
    };
    const bad_case cases[] = {
        {"no type", [](OpDef& d) { d.type = ""; }, "an op definition needs a type"},
        {"no infer", [](OpDef& d) { d.infer = nullptr; }, "op 'test_bad': no shape inference (infer)"},
        {"slot twice", [](OpDef& d) { d.inputs.push_back({"X"}); }, "input slot 'X' is declared twice"},
        {"unnamed output", [](OpDef& d) { d.outputs.push_back({""}); }, "output slot 1 has no name"},
        {"attribute twice", [](OpDef& d) { d.attrs.push_back(d.attrs[0]); }, "attribute 'alpha' is declared twice"},
        {"default named otherwise", [](OpDef& d) { d.attrs[0].value.name = "beta"; },
         "attribute 'alpha' has a default named 'beta'"},
        {"kernel slot", [](OpDef& d) { d.kernel_slot = 3; }, "its kernel is chosen by input slot 3, which is optional or does not exist (it has 1)"},
        {"kernel attribute", [](OpDef& d) { d.kernel_slot = -1, d.dtype_attr = 0; },
         "its kernel is chosen by attribute 0, which is not an INT attribute"},
        {"no CPU kernel", [](OpDef& d) { d.kernels = {}; }, "no CPU kernel (every op must run on the host)"},
        {"both grads", [](OpDef& d) { d.grad_maker = [](const GradRequest&) { return std::vector<OpDesc>{}; }; },
         "it has both a GradSpec and a grad maker"},
        {"grad of a slot it lacks", [](OpDef& d) { d.grad_spec.grads = {"W"}; }, "GradSpec.grads names slot 'W', which the op does not have"},
        {"grad output it lacks", [](OpDef& d) { d.grad_spec.outs = {"Y"}; }, "GradSpec.outs names slot 'Y'"},
        {"no_grad_inputs", [](OpDef& d) { d.no_grad_inputs = {"Label"}; }, "no_grad_inputs names slot 'Label'"},
        {"out_grads it lacks", [](OpDef& d) { d.grad_spec.out_grads = {"Y"}; }, "GradSpec.out_grads names slot 'Y'"},
        {"fusible, two outputs", [](OpDef& d) { d.fusible = softsign_def().fusible; d.outputs.push_back({"Z"}); },
         "fusible, but it has 2 output slots (one)"},
        {"fusible, a slot it lacks", [](OpDef& d) { d.fusible = softsign_def().fusible; d.fusible.slots = {2, 1}; },
         "fusible, it reads input slot 2, which does not exist (it has 1)"},
        {"fusible, an optional slot",
         [](OpDef& d) {
             d.fusible = softsign_def().fusible;
             d.inputs.push_back({"Y", false, true});
             d.fusible.slots = {1, 0};
         },
         "fusible, its input slot 'Y' must take one variable"},
        {"fusible, one slot twice",
         [](OpDef& d) {
             d.fusible = softsign_def().fusible;
             d.fusible.arity = 2;
             d.fusible.slots = {0, 0};
         },
         "fusible, it reads input slot 0 twice"},
        {"fusible, axis not INT",
         [](OpDef& d) {
             d.fusible = softsign_def().fusible;
             d.fusible.arity = 2;
             d.inputs.push_back({"Y"});
         },
         "fusible, its axis is attribute 0, which is not an INT attribute"},
        {"fusible, no block", [](OpDef& d) { d.fusible.arity = 1; }, "fusible, but it has no block function (fp32 or fp64)"},
        {"fusible arity", [](OpDef& d) { d.fusible.arity = 3; }, "fusible.arity is 3 (0, 1 or 2)"},
        {"prepack", [](OpDef& d) { d.prepack_input = 0; }, "prepack_input and prepack go together"},
        {"device twice", [](OpDef& d) { d.device_kernels = {{"cuda", d.kernels}, {"cuda", d.kernels}}; },
         "device 'cuda' has two kernel tables"},
    };
    for (auto& c : cases) {
        INFO(c.what);
        OpDef d = cube_def();
        d.type = "test_bad";
        c.edit(d);
        CHECK_THROWS_CONTAINING(register_op(d), graph_error, "[dlgraph.op.definition]", c.message);
        CHECK(find_op("test_bad") == nullptr);
    }
    // A GradSpec is checked against its grad op when that is known already.
    OpDef g{"test_bad", {{"X"}}, {{"Out"}}, {}, &same_as_x};
    g.kernels = cpu_kernels<negate_kernel, float>();
    g.grad_spec = {"test_scaled_cube_grad", {"X", "Scale"}, {"Out"}, {"X"}};
    g.inputs.push_back({"Scale", false, true});
    CHECK_THROWS_CONTAINING(register_op(g), graph_error,
                            "its grad op 'test_scaled_cube_grad' has no input slot 'Scale' for the GradSpec");
    g.grad_spec.ins = {"X"};
    g.grad_spec.grads = {"X", "Scale"};
    CHECK_THROWS_CONTAINING(register_op(g), graph_error,
                            "its grad op 'test_scaled_cube_grad' has no output slot 'Scale@GRAD' for the GradSpec");
    CHECK(registered_ops().size() == count);
}

TEST_CASE("a registered element-wise op fuses like a built-in one, with the same bits") {
    register_test_ops();
    for (std::size_t n : {5u, 70001u}) {
        Program p;
        auto a = p.input<double>("a", {-1});
        auto b = p.input<double>("b", {-1});
        auto z = exp(test_softsign(a * b)) + a;
        const xt::xarray<double> av = grad_check::random({n}, 3, -4, 4), bv = grad_check::random({n}, 4, -4, 4);
        const std::vector<TargetRef> targets{z};
        const std::vector<std::string> fed{"a", "b"};
        Session<cpu> plain(p, SessionOptions{1, false});
        const xt::xarray<double> want = plain.eval(z, {{a, av}, {b, bv}});
        for (int threads : {1, 2}) {
            Session<cpu> s(p, SessionOptions{threads, true});
            CHECK(s.eval(z, {{a, av}, {b, bv}}) == want);
            CHECK(s.fused_steps(targets, fed) == std::vector<std::pair<int, int>>{{0, 3}});
        }
        for (std::size_t i = 0; i < n; ++i) {
            const double m = av(i) * bv(i);
            CHECK(want(i) == doctest::Approx(std::exp(m / (1 + std::abs(m))) + av(i)).epsilon(1e-12));
        }
    }
    // Its gradient (grad_reads_out declared) fuses with exp's: exp_grad,
    // test_softsign_grad as one pass.
    Program p;
    auto x = p.parameter<double>("x", {1000}, init::constant(0.5));
    auto grads = append_backward(reduce_sum(exp(test_softsign(x))));
    REQUIRE(grads.size() == 1);
    const xt::xarray<double> xv = grad_check::random({1000}, 5, -4, 4);
    const std::vector<TargetRef> targets{grads[0].second};
    const std::vector<std::string> fed{"x"};
    Session<cpu> plain(p, SessionOptions{1, false}), fused(p);
    const xt::xarray<double> want = plain.eval(grads[0].second, {{x, xv}});
    CHECK(fused.eval(grads[0].second, {{x, xv}}) == want);
    const auto& steps = fused.plan(targets, fed).steps;
    const auto ranges = fused.fused_steps(targets, fed);
    REQUIRE(ranges.size() == 1);
    CHECK(steps[static_cast<std::size_t>(ranges[0].first)].def->type == "exp_grad");
    CHECK(steps[static_cast<std::size_t>(ranges[0].second)].def->type == "test_softsign_grad");
    for (std::size_t i = 0; i < 1000; ++i) {
        const double d = 1 + std::abs(xv(i));
        CHECK(want(i) == doctest::Approx(std::exp(xv(i) / d) / (d * d)).epsilon(1e-12));
    }
}

TEST_CASE("a registered op's kernel for a device runs there, without one, the op runs on the host") {
    register_test_ops();
    test_support::counting_device::ops = {"relu"};
    Program p;
    auto x = p.input<float>("x", {3});
    auto y = relu(apply_op<float>("test_negate", {{"X", x}}));
    auto z = apply_op<float>("test_negate", {{"X", scaled_cube(y, 2.0)}});
    Session<test_support::counting_device> s(p);
    const int calls = device_negate_calls;
    const xt::xarray<float> got = s.eval(z, {{x, xt::xarray<float>{-1, 2, -3}}});
    CHECK(got == xt::xarray<float>{-2, 0, -54});
    CHECK(device_negate_calls - calls == 2);
    const std::vector<TargetRef> targets{z};
    const std::vector<std::string> fed{"x"};
    for (auto& st : s.plan(targets, fed).steps) {
        INFO(st.label);
        if (st.def->type == "test_scaled_cube") CHECK(st.place == Place::host);  // no kernel for the device
        else if (st.def->type == "test_negate" || st.def->type == "relu") CHECK(st.place == Place::device);
    }
    test_support::counting_device::ops.clear();
    Session<cpu> host(p);
    CHECK(host.eval(z, {{x, xt::xarray<float>{-1, 2, -3}}}) == got);
    CHECK(device_negate_calls - calls == 2);  // the CPU session uses the CPU kernel
}
