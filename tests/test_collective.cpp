// The collective ops in one process (tests/mpi runs them on 2-4): their
// inference and errors, a session without a communicator, the one-process
// group (SelfCommunicator), Paddle's JSON form, the gradient of
// c_allreduce_sum, the data-parallel option of the optimizers, and a
// communicator that fails mid-run.
#include <dlgraph/optimizer.hpp>

#include <cstring>

#include "test_helpers.hpp"

using namespace dlgraph;

namespace {
SessionOptions self() {
    SessionOptions o;
    o.comms = {std::make_shared<SelfCommunicator>()};
    return o;
}
// A communicator whose every call fails, as one whose peer is gone.
struct failing_comm final : Communicator {
    int calls = 0;
    int rank() const noexcept override { return 0; }
    int size() const noexcept override { return 2; }
    std::string describe() const override { return "rank 0 of 2 (failing)"; }
    void all_reduce(void*, std::int64_t, DataType, ReduceOp, const char* what) override { fail(what); }
    void broadcast(void*, std::int64_t, DataType, int, const char* what) override { fail(what); }
    void all_gather(const void*, std::int64_t, DataType, void*, const char* what) override { fail(what); }
    [[noreturn]] void abort(int) noexcept override { std::abort(); }
    void fail(const char* what) {
        ++calls;
        throw comm_error("dlgraph.comm.timeout", std::string(what) + ": no answer");
    }
};
}  // namespace

TEST_CASE("collectives: with one process they keep X (all-gather stacks one part), in every dtype") {
    auto one = [](auto tag) {
        using T = typename decltype(tag)::type;
        CAPTURE(to_string(dtype_of<T>));
        Program p;
        auto x = p.input<T>("x", {-1, 2});
        std::vector<Var<T>> outs{c_broadcast(x), c_allgather(x, 1)};
        if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, std::int16_t> && !std::is_same_v<T, float16>)
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) outs.push_back(c_allreduce(x, op));
        Session<cpu> s(p, self());
        Tensor in(dtype_of<T>, Shape{3, 2});
        for (std::size_t i = 0; i < in.bytes(); ++i) static_cast<unsigned char*>(in.raw())[i] = static_cast<unsigned char>(i % 2);
        for (auto& o : outs) CHECK(same_bits(s.eval(TargetRef(o.name()), {{"x", in}}), in));
    };
    visit_dtype(DataType::FP32, one);
    for (int t = 0; t < num_dtypes; ++t) visit_dtype(static_cast<DataType>(t), one);
}

TEST_CASE("collectives: inference checks dtypes, attributes and shapes") {
    Program p;
    auto b = p.input<bool>("b", {3});
    auto x = p.input<float>("x", {-1, 4});
    auto s = p.input<float>("s", {});
    CHECK_THROWS_CONTAINING(c_allreduce_sum(b), type_error, "c_allreduce_sum", "BOOL");
    CHECK_THROWS_CONTAINING(c_allreduce_sum(x, -1), shape_error, "[dlgraph.shape.attr]", "ring_id -1 is negative");
    CHECK_THROWS_CONTAINING(c_broadcast(x, -2), shape_error, "root -2 is negative");
    CHECK_THROWS_CONTAINING(c_allgather(x, 0), shape_error, "nranks 0 must be at least 1");
    CHECK_THROWS_CONTAINING(c_allgather(s, 2), shape_error, "[dlgraph.shape.rank]", "X is a scalar");
    CHECK(c_allgather(x, 3).shape() == Shape{-1, 4});
    CHECK(c_allgather(p.input<float>("y", {5, 4}), 3).shape() == Shape{15, 4});
    CHECK_THROWS_CONTAINING(c_allgather(p.input<float>("z", {std::int64_t(1) << 40}), 1 << 30), error,
                            "[dlgraph.resource.size]", "nranks 1073741824 times dim 0");
}

TEST_CASE("collectives: a session without a communicator for the ring refuses the plan and stays usable") {
    Program p;
    auto x = p.input<float>("x", {2});
    auto y = c_allreduce_sum(x);
    auto z = c_allreduce_sum(x, 1);
    auto r = relu(x);
    Session<cpu> none(p);
    CHECK_THROWS_CONTAINING(none.eval(y, {{"x", xt::xarray<float>{1, 2}}}), comm_error, "[dlgraph.comm.missing]",
                            "c_allreduce_sum (op #0) uses ring_id 0, but the session has no communicator for it",
                            "SessionOptions::comms");
    CHECK(none.eval(r, {{"x", xt::xarray<float>{-1, 2}}}) == xt::xarray<float>{0, 2});
    Session<cpu> ring0(p, self());
    CHECK(ring0.eval(y, {{"x", xt::xarray<float>{1, 2}}}) == xt::xarray<float>{1, 2});
    CHECK_THROWS_CONTAINING(ring0.eval(z, {{"x", xt::xarray<float>{1, 2}}}), comm_error, "[dlgraph.comm.missing]",
                            "uses ring_id 1");
}

TEST_CASE("collectives: Paddle's in-place form loads from JSON, runs, and round-trips") {
    const char* text = R"({"version":1,"blocks":[{"idx":0,"parent_idx":-1,
 "vars":[{"name":"g","type":"LOD_TENSOR","persistable":true,"lod_tensor":{"tensor":{"data_type":"FP32","dims":[3]},"lod_level":0}}],
 "ops":[{"type":"c_allreduce_sum","inputs":[{"parameter":"X","arguments":["g"]}],"outputs":[{"parameter":"Out","arguments":["g"]}],
         "attrs":[{"name":"ring_id","type":"INT","i":0},{"name":"use_calc_stream","type":"BOOLEAN","b":true}]}]}]})";
    ProgramDesc desc = load_program(text);
    CHECK(load_program(nlohmann::json(desc).dump()) == desc);
    Session<cpu> s(desc, self());
    s.scope().var("g").get_mutable<Tensor>() = tensor_of<float>(Shape{3}, {1, 2, 3});
    s.eval(TargetRef::op_only(0));
    CHECK(same_bits(s.eval("g"), tensor_of<float>(Shape{3}, {1, 2, 3})));
}

TEST_CASE("collectives: the gradient of c_allreduce_sum is the all-reduced gradient") {
    Program p;
    auto x = p.parameter<double>("x", {3}, init::constant(0.5));
    auto w = p.input<double>("w", {3});
    auto loss = reduce_sum(c_allreduce_sum(x) * w);
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    int collectives = 0;
    for (auto& op : p.desc().blocks[0].ops) collectives += op.type == "c_allreduce_sum";
    CHECK(collectives == 2);  // forward and backward
    Session<cpu> s(p, self());
    CHECK(s.eval(grads[0].second, {{"w", xt::xarray<double>{1, -2, 4}}}) == xt::xarray<double>{1, -2, 4});
    // max, min and prod are not differentiable: no gradient flows through them.
    Program q;
    auto y = q.parameter<double>("y", {3}, init::constant(0.5));
    CHECK(append_backward(reduce_sum(c_allreduce(y, ReduceOp::max))).empty());
}

TEST_CASE("data parallel: one all-reduce and a 1/nranks scale per gradient, on one process, the same bits") {
    auto build = [](Program& p, int nranks) {
        auto x = p.input<float>("x", {-1, 4});
        auto w = p.parameter<float>("w", {4, 3}, init::uniform(-1, 1, 5));
        auto b = p.parameter<float>("b", {3}, init::constant(0.1));
        auto loss = mean(square(matmul(x, w) + b));
        SGD opt(0.1);
        if (nranks) opt.data_parallel(nranks);
        return opt.minimize(loss);
    };
    Program dp, plain, four;
    TrainStep a = build(dp, 1), c = build(plain, 0);
    build(four, 4);
    int reduces = 0, quarter = 0;
    for (auto& op : four.desc().blocks[0].ops) {
        reduces += op.type == "c_allreduce_sum";
        if (op.type == "scale")
            for (auto& at : op.attrs) quarter += at.name == "scale" && at.f == 0.25;
    }
    CHECK(reduces == 2);
    CHECK(quarter == 2);
    Session<cpu> s(dp, self()), ref(plain);
    CHECK(broadcast_persistables(s, *self().comms[0]) == 3);  // w, b, the learning rate
    xt::xarray<float> x = {{1, 2, 3, 4}, {-1, 0.5, 2, 0}};
    for (int k = 0; k < 5; ++k) {
        s.eval(a.targets(), {{"x", x}});
        ref.eval(c.targets(), {{"x", x}});
    }
    CHECK(same_bits(s.eval("w"), ref.eval("w")));
    CHECK(same_bits(s.eval("b"), ref.eval("b")));
    Session<cpu> without(dp);
    CHECK_THROWS_CONTAINING(without.eval(a.targets(), {{"x", x}}), comm_error, "[dlgraph.comm.missing]");
    CHECK_THROWS_CONTAINING(SGD(0.1).data_parallel(-1).minimize(Var<float>(dp.state(), "w", -1)), graph_error,
                            "data parallel over -1 ranks");
}

TEST_CASE("collectives: a communicator that fails mid-run leaves the session as it was") {
    Program p;
    auto counter = p.parameter<float>("counter", {1}, init::constant(0), false);
    const int inc = p.append("increment", {{"X", {counter.name()}}}, {}, {Attribute::make_float("step", 1.0)}, nullptr,
                             {{"Out", {counter.name()}}});
    (void)inc;
    const int reduce = p.append("c_allreduce_sum", {{"X", {counter.name()}}}, {}, {}, nullptr, {{"Out", {counter.name()}}});
    auto comm = std::make_shared<failing_comm>();
    SessionOptions o;
    o.comms = {comm};
    Session<cpu> s(p, o);
    s.initialize_persistables();
    CHECK_THROWS_CONTAINING(s.eval(TargetRef::op_only(reduce)), comm_error, "[dlgraph.comm.timeout] c_allreduce_sum: no answer");
    CHECK(comm->calls == 1);
    CHECK(s.eval(counter)(0) == 0.0f);  // the increment before it was rolled back
}
