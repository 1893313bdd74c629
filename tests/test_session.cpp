// Session behaviour: evaluation with feeds, pruning, persistable variables,
// plan caching, errors by message, and that a failed call leaves the session
// working.
#include <dlgraph/dlgraph.hpp>

#include "test_helpers.hpp"

using namespace dlgraph;

TEST_CASE("the seed example: c = a * b, then a fed") {
    Program p;
    auto a = p.variable<float>("a", 1.0f);
    auto b = p.variable<float>("b", 2.0f);
    auto c = a * b;
    Session<cpu> s(p);
    CHECK(s.eval(c)(0) == 2.0f);
    CHECK(s.eval(c, {{a, 3.0}})(0) == 6.0f);
    CHECK(s.eval(c, {{"a", 3}})(0) == 6.0f);
    CHECK(s.eval(c)(0) == 2.0f);  // a feed lasts one call
}

TEST_CASE("feeding an intermediate variable overrides its producer") {
    Program p;
    auto x = p.input<double>("x", {3});
    auto h = exp(x);
    auto y = h + 1.0;
    Session<cpu> s(p);
    xt::xarray<double> xv = {0, 1, 2}, hv = {10, 20, 30};
    auto full = s.eval(y, {{x, xv}});
    CHECK(full(1) == doctest::Approx(std::exp(1.0) + 1));
    auto cut = s.eval(y, {{h, hv}});  // x is not needed any more
    CHECK(cut == xt::xarray<double>{11, 21, 31});
}

TEST_CASE("an op the targets do not need never runs") {
    Program p;
    auto one = p.constant<std::int32_t>(1, {1});
    auto zero = p.constant<std::int32_t>(0, {1});
    auto bad = one / zero;  // integer division by zero throws if it runs
    auto good = one + one;
    Session<cpu> s(p);
    CHECK(s.eval(good)(0) == 2);
    CHECK_THROWS_CONTAINING(s.eval(bad), value_error, "[dlgraph.value.div0]");
    CHECK(s.eval(good)(0) == 2);  // and the session still works
    const auto& plan = s.plan(std::vector<TargetRef>{good}, {});
    for (auto& st : plan.steps) CHECK(st.def->type != "elementwise_div");
}

TEST_CASE("several targets, by handle and by name, and op targets") {
    Program p;
    auto x = p.input<float>("x", {2});
    auto y = x * 2.0f;
    auto z = y + x;
    Session<cpu> s(p);
    xt::xarray<float> xv = {1, 2};
    auto r = s.eval({y, z, TargetRef(z.name())}, {{x, xv}});
    REQUIRE(r.size() == 3);
    CHECK(to_xarray<float>(r[0]) == xt::xarray<float>{2, 4});
    CHECK(to_xarray<float>(r[1]) == xt::xarray<float>{3, 6});
    CHECK(to_xarray<float>(r[2]) == xt::xarray<float>{3, 6});
    auto op = s.eval(TargetRef::op_only(z.op()), {{x, xv}});
    CHECK_FALSE(op.initialized());
}

TEST_CASE("persistable variables are initialized once and keep their values") {
    Program p;
    auto w = p.parameter<float>("w", {4}, init::uniform(-1, 1));  // seed 0: fresh random each run
    auto y = w * 1.0f;
    Session<cpu> s(p);
    auto w1 = s.eval(w);
    auto y1 = s.eval(y);
    CHECK(y1 == w1);
    CHECK(s.eval(w) == w1);
    // Two sessions on one program have independent scopes.
    Session<cpu> s2(p);
    CHECK_FALSE(s2.eval(w) == w1);
    CHECK(s.eval(w) == w1);
    // Feeding a persistable overrides it for that call only.
    xt::xarray<float> ones = xt::ones<float>({4});
    CHECK(s.eval(y, {{w, ones}}) == ones);
    CHECK(s.eval(y) == w1);
}

TEST_CASE("the same seed gives the same parameters") {
    Program p;
    auto w = p.parameter<double>("w", {3, 2}, init::normal(0, 1, 42));
    Session<cpu> a(p), b(p);
    CHECK(a.eval(w) == b.eval(w));
}

TEST_CASE("a session sees ops appended to its program later") {
    Program p;
    auto x = p.variable<float>("x", 3.0f);
    Session<cpu> s(p);
    CHECK(s.eval(x)(0) == 3.0f);
    auto y = x * x;
    CHECK(s.eval(y)(0) == 9.0f);
}

TEST_CASE("plans are cached per targets and fed names") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = relu(x);
    Session<cpu> s(p);
    xt::xarray<float> v1 = {-1, 2}, v2 = {3, -4, 5};
    s.eval(y, {{x, v1}});
    s.eval(y, {{x, v2}});  // new shape: same plan, new shape pass
    CHECK(s.cached_plans() == 1);
    CHECK(s.eval(y, {{x, v2}}) == xt::xarray<float>{3, 0, 5});
}

TEST_CASE("feeds: missing, unknown, wrong dtype, wrong shape") {
    Program p;
    auto x = p.input<float>("x", {-1, 3});
    auto y = relu(x);
    Session<cpu> s(p);
    CHECK_THROWS_CONTAINING(s.eval(y), feed_error, "[dlgraph.feed.missing]", "relu (op #0) needs 'x'");
    xt::xarray<double> wrong_type = xt::zeros<double>({2, 3});
    CHECK_THROWS_CONTAINING(s.eval(y, {{x, wrong_type}}), type_error, "[dlgraph.type.feed]",
                            "feed 'x' is FP64 but the variable is FP32");
    xt::xarray<float> wrong_shape = xt::zeros<float>({2, 4});
    CHECK_THROWS_CONTAINING(s.eval(y, {{x, wrong_shape}}), shape_error, "[dlgraph.shape.feed]",
                            "feed 'x' has shape [2,4] but the variable is declared [-1,3]");
    xt::xarray<float> ok = {{-1, 0, 1}};
    CHECK_THROWS_CONTAINING(s.eval(y, {{x, ok}, {"nope", ok}}), feed_error, "[dlgraph.feed.unknown]",
                            "feed 'nope' names no variable");
    CHECK(s.eval(y, {{x, ok}}) == xt::xarray<float>{{0, 0, 1}});  // still works
}

TEST_CASE("a variable fed twice is an error, also when a plan for as many feeds is cached") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto z = p.input<float>("z", {-1});
    auto y = relu(x) + z;
    Session<cpu> s(p);
    xt::xarray<float> a = {-1, 2}, b = {10, 20};
    CHECK(s.eval(y, {{x, a}, {z, b}}) == xt::xarray<float>{10, 22});  // caches the plan for {x, z}
    CHECK_THROWS_CONTAINING(s.eval(y, {{x, a}, {x, a}}), feed_error, "[dlgraph.feed.twice]", "fed twice");
    CHECK_THROWS_CONTAINING(s.eval(relu(x), {{x, a}, {x, a}}), feed_error, "[dlgraph.feed.twice]");
    CHECK(s.eval(y, {{z, b}, {x, a}}) == xt::xarray<float>{10, 22});  // still works, in either order
}

TEST_CASE("shape mismatches at run time leave the session as it was") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = p.input<float>("y", {-1});
    auto z = x + y;
    Session<cpu> s(p);
    xt::xarray<float> a = {1, 2, 3}, b = {1, 2};
    CHECK_THROWS_CONTAINING(s.eval(z, {{x, a}, {y, b}}), shape_error, "[dlgraph.shape.broadcast]",
                            "elementwise_add (op #0)", "X is [3] but Y is [2]");
    xt::xarray<float> c = {10, 20, 30};
    CHECK(s.eval(z, {{x, a}, {y, c}}) == xt::xarray<float>{11, 22, 33});
}

TEST_CASE("cycles in a loaded program are reported") {
    // op 0 reads b, which only op 1 (later) writes.
    const char* text = R"({"version":1,"blocks":[{"idx":0,"parent_idx":-1,"vars":[
      {"name":"a","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP32","dims":[2]},"lod_level":0}},
      {"name":"b","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP32","dims":[2]},"lod_level":0}}],
      "ops":[{"type":"relu","inputs":[{"parameter":"X","arguments":["b"]}],"outputs":[{"parameter":"Out","arguments":["a"]}]},
             {"type":"relu","inputs":[{"parameter":"X","arguments":["a"]}],"outputs":[{"parameter":"Out","arguments":["b"]}]}]}]})";
    Session<cpu> s(load_program(text));
    CHECK_THROWS_CONTAINING(s.eval(TargetRef("b")), graph_error, "[dlgraph.graph.cycle]",
                            "relu (op #0) reads 'b', which only the later relu (op #1) writes");
    // Feeding b cuts the cycle.
    xt::xarray<float> bv = {-1, 1};
    CHECK(to_xarray<float>(s.eval(TargetRef("a"), {{"b", bv}})) == xt::xarray<float>{0, 1});
}

TEST_CASE("unset variables, wrong reads and a persistable without initializer") {
    Scope scope;
    auto& v = scope.var("t");
    CHECK_THROWS_CONTAINING(v.get<Tensor>(), value_error, "[dlgraph.value.unset]", "variable 't' holds no value");
    v.get_mutable<Tensor>() = Tensor::scalar(1.5f);
    CHECK_THROWS_CONTAINING(v.get<std::string>(), type_error, "variable 't' holds a tensor, not a string");
    CHECK_THROWS_CONTAINING(v.get<Tensor>().item<double>(), type_error, "tensor is FP32 but was read as FP64");

    ProgramDesc d;
    d.blocks[0].vars.push_back({"w", VarType::LOD_TENSOR, DataType::FP32, {2}, 0, true});
    d.blocks[0].vars.push_back({"y", VarType::LOD_TENSOR, DataType::FP32, {2}, 0, false});
    OpDesc op;
    op.type = "relu";
    op.set_input("X", {"w"}).set_output("Out", {"y"});
    d.blocks[0].ops.push_back(op);
    Session<cpu> s(d);
    CHECK_THROWS_CONTAINING(s.eval(TargetRef("y")), value_error, "[dlgraph.value.unset]",
                            "persistable variable 'w' has no value");
    s.scope().var("w").get_mutable<Tensor>() = to_tensor(xt::xarray<float>{-2, 2});
    CHECK(to_xarray<float>(s.eval(TargetRef("y"))) == xt::xarray<float>{0, 2});
}

TEST_CASE("a closed session throws on every call") {
    Program p;
    auto a = p.variable<float>("a", 1.0f);
    Session<cpu> s(p);
    CHECK(s.eval(a)(0) == 1.0f);
    s.close();
    CHECK(s.closed());
    CHECK_THROWS_CONTAINING(s.eval(a), session_error, "[dlgraph.session.closed]");
    CHECK_THROWS_CONTAINING(s.scope(), session_error, "[dlgraph.session.closed]");
}

TEST_CASE("builder errors: shapes at the call, programs mixed, bad targets") {
    Program p, q;
    auto a = p.input<float>("a", {2, 3});
    auto b = p.input<float>("b", {4});
    CHECK_THROWS_CONTAINING(a + b, shape_error, "elementwise_add", "X is [2,3] but Y is [4]");
    CHECK(p.op_count() == 0);  // the failed call added nothing
    auto c = q.input<float>("c", {3});
    CHECK_THROWS_CONTAINING(a + c, graph_error, "[dlgraph.graph.program]", "belong to different programs");
    CHECK_THROWS_CONTAINING(p.input<float>("a", {1}), graph_error, "variable 'a' is already declared");
    Session<cpu> s(p);
    CHECK_THROWS_CONTAINING(s.eval(TargetRef("zz")), graph_error, "variable 'zz' is not declared");
    CHECK_THROWS_CONTAINING(s.eval(TargetRef::op_only(99)), graph_error, "target op #99 does not exist");
    CHECK_THROWS_CONTAINING(p.var<double>("a"), type_error, "variable 'a' is FP32, not FP64");
}

TEST_CASE("feeds of scalars convert to the variable's dtype") {
    Program p;
    auto i = p.variable<std::int64_t>("i", 5);
    auto j = i * i;
    Session<cpu> s(p);
    CHECK(s.eval(j, {{i, 7}})(0) == 49);
    CHECK(s.eval(j, {{i, 3.9}})(0) == 9);  // truncates like a C++ conversion
}

TEST_CASE("results are copies, never views into the scope") {
    Program p;
    auto x = p.input<float>("x", {2});
    auto y = x + 1.0f;
    Session<cpu> s(p);
    xt::xarray<float> v = {1, 2};
    Tensor first = s.eval(TargetRef(y), {{x, v}});
    xt::xarray<float> w = {5, 6};
    s.eval(TargetRef(y), {{x, w}});
    CHECK(to_xarray<float>(first) == xt::xarray<float>{2, 3});
}

TEST_CASE("eval_into reuses the caller's tensors and every result stays correct") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = x * 2.0f + 1.0f;
    auto z = y * y;
    Session<cpu> s(p);
    const std::vector<TargetRef> targets{y, z};
    std::vector<Tensor> out(2);
    Tensor kept;
    for (int i = 0; i < 6; ++i) {
        xt::xarray<float> xv = xt::xarray<float>::from_shape({5});
        xv.fill(static_cast<float>(i));
        const std::vector<Feed> feeds{{x.name(), xv}};
        s.eval_into(targets, feeds, out);
        CHECK(to_xarray<float>(out[0]) == xt::xarray<float>(xt::ones<float>({5}) * (2.0f * i + 1)));
        CHECK(to_xarray<float>(out[1]) == xt::xarray<float>(xt::ones<float>({5}) * (2.0f * i + 1) * (2.0f * i + 1)));
        if (i == 1) kept = out[0];
    }
    CHECK(to_xarray<float>(kept) == xt::xarray<float>(xt::ones<float>({5}) * 3.0f));
}

TEST_CASE("eval_into computes each target in the caller's buffer, the same one every call") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = x * 2.0f + 1.0f;  // read by z too
    auto z = y * y;
    Session<cpu> s(p);
    const std::vector<TargetRef> targets{y, z};
    std::vector<Tensor> out(2);
    xt::xarray<float> xv = xt::xarray<float>::from_shape({100000});
    const void* mine[2] = {};
    for (int i = 0; i < 5; ++i) {
        xv.fill(static_cast<float>(i));
        s.eval_into(targets, std::vector<Feed>{{x.name(), xv}}, out);
        CHECK(to_xarray<float>(out[0]) == xt::xarray<float>(xt::ones<float>({100000}) * (2.0f * i + 1)));
        CHECK(to_xarray<float>(out[1]) == xt::xarray<float>(xt::ones<float>({100000}) * (2.0f * i + 1) * (2.0f * i + 1)));
        if (i == 1) mine[0] = out[0].raw(), mine[1] = out[1].raw();
        if (i > 1) {
            CHECK(out[0].raw() == mine[0]);
            CHECK(out[1].raw() == mine[1]);
        }
    }
    // A call that fails after its first step gives the caller its buffers
    // back; the next one is right.
    detail::test_fail_at_step = 0;
    CHECK_THROWS_CONTAINING(s.eval_into(targets, std::vector<Feed>{{x.name(), xv}}, out), value_error,
                            "[dlgraph.value.injected]");
    detail::test_fail_at_step = SIZE_MAX;
    CHECK(out[0].raw() == mine[0]);
    CHECK(out[1].raw() == mine[1]);
    xv.fill(7.0f);
    s.eval_into(targets, std::vector<Feed>{{x.name(), xv}}, out);
    CHECK(to_xarray<float>(out[1]) == xt::xarray<float>(xt::ones<float>({100000}) * 225.0f));
    CHECK(out[1].raw() == mine[1]);
}

TEST_CASE("eval_into with its output fed back (h = f(h)) reads the feed intact") {
    // The feed borrows out[0]'s memory: the target must not be computed
    // into it while it is read (a transpose overwrites what it reads next).
    Program p;
    auto h = p.input<float>("h", {64, 64});
    auto next = transpose(h, {1, 0});
    Session<cpu> s(p);
    Tensor h0(DataType::FP32, {64, 64});
    for (std::int64_t i = 0; i < h0.numel(); ++i) h0.data<float>()[i] = float(i % 97) - 40.0f;
    std::vector<Tensor> out(1);
    const std::vector<TargetRef> targets{next};
    s.eval_into(targets, std::vector<Feed>{{"h", h0}}, out);
    for (int i = 0; i < 4; ++i) {
        Tensor fed;
        fed.copy_from(out[0]);
        const Tensor want = s.eval(TargetRef(next), {{"h", fed}});
        std::vector<Feed> feeds;  // emplaced: a Feed copied out of a list holds a copy
        feeds.emplace_back("h", out[0]);
        s.eval_into(targets, feeds, out);
        CHECK(same_bits(out[0], want));
    }
}

TEST_CASE("a target named twice in one eval_into gets the value in both outputs, run after run") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = relu(x) * 2.0f;
    Session<cpu> s(p);
    const std::vector<TargetRef> targets{y, y};
    std::vector<Tensor> out(2);
    for (float k : {1.f, 2.f, 3.f}) {
        xt::xarray<float> xv = {k, -k, 2 * k};
        s.eval_into(targets, std::vector<Feed>{{x, xv}}, out);
        const xt::xarray<float> want = {2 * k, 0, 4 * k};
        CHECK(to_xarray<float>(out[0]) == want);
        CHECK(to_xarray<float>(out[1]) == want);
    }
}

TEST_CASE("eval_into_profiled gives eval_into's results and adds up each step's time") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = relu(x * 2.0f - 1.0f);
    Session<cpu> s(p);
    const std::vector<TargetRef> targets{y};
    const std::vector<std::string> fed{x.name()};
    xt::xarray<float> xv = {0.0f, 1.0f, 2.0f};
    const std::vector<Feed> feeds{{x.name(), xv}};
    std::vector<Tensor> out(1);
    std::vector<std::chrono::nanoseconds> step_time(7, std::chrono::nanoseconds(5));  // resized, not summed into
    s.eval_into_profiled(targets, feeds, out, step_time);
    CHECK(to_xarray<float>(out[0]) == xt::xarray<float>{0.0f, 1.0f, 3.0f});
    const std::size_t steps = s.plan(targets, fed).steps.size();
    REQUIRE(steps >= 2);
    REQUIRE(step_time.size() == steps);
    auto total = [&] {
        std::chrono::nanoseconds t{};
        for (auto d : step_time) t += d;
        return t;
    };
    const auto first = total();
    CHECK(first > std::chrono::nanoseconds(0));
    for (auto d : step_time) CHECK(d >= std::chrono::nanoseconds(0));
    s.eval_into_profiled(targets, feeds, out, step_time);
    CHECK(total() >= first);
    CHECK(step_time.size() == steps);
    s.eval_into(targets, feeds, out);
    CHECK(to_xarray<float>(out[0]) == xt::xarray<float>{0.0f, 1.0f, 3.0f});
}

TEST_CASE("pruned evaluation equals full evaluation, over generated programs") {
    std::mt19937 rng(99);
    for (int trial = 0; trial < 40; ++trial) {
        Program p = random_program(rng);
        const BlockDesc& blk = p.desc().blocks[0];
        const Shape in_shape(blk.find_var("in0")->dims);
        std::vector<Tensor> inputs;
        std::vector<Feed> feeds;
        std::mt19937 vals(static_cast<unsigned>(trial));
        std::uniform_real_distribution<double> u(-2, 2);
        for (auto& v : blk.vars) {
            if (v.name.rfind("in", 0) != 0) continue;
            Tensor t(DataType::FP64, {3, in_shape[1]});
            for (auto& e : t.values<double>()) e = u(vals);
            inputs.push_back(std::move(t));
        }
        std::size_t k = 0;
        for (auto& v : blk.vars)
            if (v.name.rfind("in", 0) == 0) feeds.emplace_back(std::string_view(v.name), inputs[k++]);
        // Every op output at once, then each alone in a fresh session.
        std::vector<TargetRef> all;
        for (std::size_t i = 0; i < blk.ops.size(); ++i)
            all.emplace_back(blk.ops[i].outputs[0].arguments[0], static_cast<int>(i));
        Session<cpu> full(p);
        auto together = full.eval(all, feeds);
        for (std::size_t i = 0; i < all.size(); ++i) {
            Session<cpu> one(p);
            auto alone = one.eval(std::span<const TargetRef>(&all[i], 1), feeds);
            REQUIRE(alone[0].shape() == together[i].shape());
            auto a = alone[0].values<double>();
            auto b = together[i].values<double>();
            CHECK(std::equal(a.begin(), a.end(), b.begin()));
        }
    }
}

TEST_CASE("dlgraph tensors can be fed directly") {
    Program p;
    auto x = p.input<std::int64_t>("x", {2});
    auto y = x * x;
    Session<cpu> s(p);
    Tensor t(DataType::INT64, {2});
    t.data<std::int64_t>()[0] = 3;
    t.data<std::int64_t>()[1] = -4;
    CHECK(s.eval(y, {{x, t}}) == xt::xarray<std::int64_t>{9, 16});
    CHECK(s.eval(y, {{x, Tensor(t)}}) == xt::xarray<std::int64_t>{9, 16});  // an rvalue is moved in
}

TEST_CASE("ops without a kernel for a dtype are refused on the line that builds them") {
    Program p;
    auto i = p.input<std::int32_t>("i", {2});
    CHECK_THROWS_CONTAINING(exp(i), type_error, "[dlgraph.type.kernel]", "exp (op #0): no kernel for INT32",
                            "it has: FP32, FP64");
    CHECK(p.op_count() == 0);
    auto a = p.input<float>("a", {2});
    auto b = p.input<double>("b", {2});
    CHECK_THROWS_CONTAINING(p.append("sum", {{"X", {a.name(), a.name(), b.name()}}}, {{"Out", 1}}, {}), type_error,
                            "X[0] is FP32 but X[2] is FP64");
}

TEST_CASE("every op in the table has a valid way to choose its kernel and a kernel") {
    // Row k of DLGRAPH_OP_LIST names the op its definition makes (a def
    // that returns another op's type, or rows out of order, fail here).
    static constexpr std::string_view listed[] = {
#define DLGRAPH_X(name) #name,
        DLGRAPH_OP_LIST(DLGRAPH_X)
#undef DLGRAPH_X
    };
    REQUIRE(op_table().size() == std::size(listed));
    for (std::size_t k = 0; k < op_table().size(); ++k) {
        const OpDef& d = op_table()[k];
        INFO(d.type);
        CHECK(d.type == listed[k]);
        CHECK(kernel_choice_valid(d));
        CHECK(static_cast<bool>(d.infer));
        bool any = false;
        for (auto k2 : d.kernels) any = any || k2 != nullptr;
        CHECK(any);
        CHECK(find_op(d.type) == &d);  // and no other op has its name
    }
}
