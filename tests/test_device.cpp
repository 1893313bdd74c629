// The device seam, proved with the counting device (counting_device.hpp):
// steps placed on the device when it has a kernel and on the host when it
// does not, copies exactly where values cross, per-place arenas, one wait
// per run, persistables in device memory, faults, and results bit for bit
// those of Session<cpu>.
#include <dlgraph/checkpoint.hpp>
#include <dlgraph/optimizer.hpp>

#include "counting_device.hpp"
#include "test_helpers.hpp"

using namespace dlgraph;
using test_support::context_of;
using test_support::counting_device;

namespace {

// x [-1, 5] -> relu(mul(x, w) + b) -> softmax
struct small_mlp {
    Program p;
    Var<float> x, w, b, h, y;
    small_mlp() {
        x = p.input<float>("x", {-1, 5});
        w = p.parameter<float>("w", {5, 4}, init::uniform(-1, 1, 3));
        b = p.parameter<float>("b", {4}, init::uniform(-0.5, 0.5, 4));
        h = relu(mul(x, w) + b);
        y = softmax(h);
    }
};

xt::xarray<float> batch(std::size_t rows, std::uint64_t seed) {
    xt::xarray<float> a = xt::zeros<float>({rows, std::size_t(5)});
    std::uint64_t g = seed;
    for (auto& v : a) {
        g = g * 6364136223846793005ULL + 1442695040888963407ULL;
        v = static_cast<float>(static_cast<double>(g >> 11) * 0x1.0p-53 * 4.0 - 2.0);
    }
    return a;
}


struct ops_on_device {
    explicit ops_on_device(std::set<std::string> ops) { counting_device::ops = std::move(ops); }
    ~ops_on_device() { counting_device::ops.clear(); }
};

int count_type(const ExecutionPlan& p, std::string_view type) {
    int n = 0;
    for (auto& st : p.steps) n += st.def->type == type;
    return n;
}

}  // namespace

TEST_CASE("device: an op the device lacks runs on the host, with one copy each way, the bits are the CPU's") {
    ops_on_device only({"mul", "elementwise_add", "relu"});  // not softmax
    small_mlp n;
    Session<cpu> ref(n.p);
    Session<counting_device> s(n.p);
    auto& dev = context_of(s.device());
    const xt::xarray<float> x = batch(6, 1);
    for (int run = 0; run < 3; ++run) {
        const std::size_t to_dev = dev.to_device_copies, to_host = dev.to_host_copies, waits = dev.waits;
        Tensor got = s.eval(TargetRef(n.y), {{n.x, x}});
        CHECK(same_bits(got, ref.eval(TargetRef(n.y), {{n.x, x}})));
        if (run > 0) {  // the first run also initializes w and b
            CHECK(dev.to_device_copies - to_dev == 1);  // x
            CHECK(dev.to_host_copies - to_host == 1);   // relu's result, for softmax
            CHECK(dev.waits - waits == 1);              // before softmax, the only host step
        }
    }
    const std::vector<TargetRef> targets{n.y};
    const std::vector<std::string> fed{"x"};
    const ExecutionPlan& plan = s.plan(targets, fed);
    CHECK(plan.device == "test");
    CHECK(count_type(plan, "memcpy_h2d") == 1);
    CHECK(count_type(plan, "memcpy_d2h") == 1);
    for (auto& st : plan.steps) {
        INFO(st.label);
        if (st.def->type == "softmax") CHECK(st.place == Place::host);
        else CHECK(st.place == Place::device);
    }
    const std::string text = describe(plan);
    INFO(text);
    CHECK(text.find("copy memcpy_h2d  X=x -> Out=x@test\n") != std::string::npos);
    CHECK(text.find("mul  X=x@test,Y=w -> Out=mul_0  [test]\n") != std::string::npos);
    CHECK(text.find("copy memcpy_d2h  X=relu_0 -> Out=relu_0@cpu\n") != std::string::npos);
    CHECK(text.find("softmax  X=relu_0@cpu -> Out=softmax_0\n") != std::string::npos);
    CHECK(text.find("  w ") != std::string::npos);
    CHECK(text.find(" on test") != std::string::npos);
    CHECK(dev.memory->misplaced == 0);
    // Persistables live in the device's memory; reading them copies them out.
    const Tensor& w = s.scope().find_local("w")->get<Tensor>();
    CHECK(w.place() == Place::device);
    CHECK(dev.memory->owns(w.raw(), w.bytes()));
    CHECK(to_xarray<float>(w) == ref.eval(n.w));
    CHECK_THROWS_CONTAINING((void)w.values<float>(), value_error, "[dlgraph.value.place]", "device memory");
}

TEST_CASE("device: with every op on the device, a run copies only feeds in and targets out, and waits once") {
    small_mlp n;
    Session<cpu> ref(n.p);
    Session<counting_device> s(n.p);
    auto& dev = context_of(s.device());
    const xt::xarray<float> x = batch(3, 2);
    for (int run = 0; run < 3; ++run) {
        const std::size_t to_dev = dev.to_device_copies, to_host = dev.to_host_copies, waits = dev.waits;
        std::vector<Tensor> got = s.eval({TargetRef(n.y), TargetRef(n.h)}, {{n.x, x}});
        CHECK(same_bits(got[0], ref.eval(TargetRef(n.y), {{n.x, x}})));
        CHECK(same_bits(got[1], ref.eval(TargetRef(n.h), {{n.x, x}})));
        if (run > 0) {
            CHECK(dev.to_device_copies - to_dev == 1);
            CHECK(dev.to_host_copies - to_host == 2);
            CHECK(dev.waits - waits == 1);
        }
    }
    // Per-place memory: the intermediates share the device's arena; the
    // targets come back to host buffers of their own.
    const std::vector<TargetRef> targets{n.y, n.h};
    const std::vector<std::string> fed{"x"};
    const MemoryPlan m = s.memory_plan(targets, fed);
    REQUIRE(m.slot_place.size() >= 4);
    CHECK(m.slot_place[0] == Place::host);
    CHECK(m.slot_place[1] == Place::device);
    CHECK(m.slot_place[2] == Place::host);
    CHECK(m.slot_place[3] == Place::host);
    CHECK(m.device().arena_bytes > 0);
    CHECK(m.device().lower_bound <= m.device().arena_bytes);
    CHECK(m.host().arena_bytes == m.slot_bytes[0] + m.slot_bytes[2] + m.slot_bytes[3]);
    CHECK(dev.memory->in_use >= m.device().arena_bytes);
    CHECK(dev.memory->misplaced == 0);
}

TEST_CASE("device: a copy to the device starts the run of device steps it feeds, so it splits no run and adds no wait") {
    ops_on_device only({"mul", "elementwise_add", "relu"});  // not softmax
    Program p;
    auto x = p.input<float>("x", {-1, 5});
    auto b = p.input<float>("b", {4});  // fed, read in the middle of the first run
    auto c = p.input<float>("c", {4});  // fed, read only after the host step
    auto w = p.parameter<float>("w", {5, 4}, init::uniform(-1, 1, 3));
    auto y = relu(softmax(relu(mul(x, w) + b)) + c);
    const std::vector<TargetRef> targets{y};
    const std::vector<std::string> fed{"x", "b", "c"};
    Session<cpu> ref(p);
    Session<counting_device> s(p);
    auto& dev = context_of(s.device());
    xt::xarray<float> bv = {0.5f, -0.25f, 1.0f, 0.0f}, cv = {-0.1f, 0.2f, 0.0f, 0.3f};
    const std::vector<Feed> feeds = {{"x", batch(3, 2)}, {"b", bv}, {"c", cv}};
    CHECK(same_bits(s.eval(targets, feeds)[0], ref.eval(targets, feeds)[0]));
    const std::size_t waits = dev.waits;
    CHECK(same_bits(s.eval(targets, feeds)[0], ref.eval(targets, feeds)[0]));
    CHECK(dev.waits - waits == 2);  // before softmax, and at the end
    const ExecutionPlan& plan = s.plan(targets, fed);
    std::string order;
    for (auto& st : plan.steps) order += st.label.substr(0, st.label.find(" (")) + (st.is_copy() ? "(" + plan.values[static_cast<std::size_t>(st.ins[0])].name + ") " : " ");
    CHECK(order ==
          "memcpy_h2d(x) memcpy_h2d(b) mul elementwise_add relu memcpy_d2h(relu_0) softmax memcpy_h2d(softmax_0) "
          "memcpy_h2d(c) elementwise_add relu memcpy_d2h(relu_1) ");
}

TEST_CASE("device: a value read by several device steps is copied once, a host step writing a device value copies it back") {
    SUBCASE("one copy per value and place") {
        Program p;
        auto x = p.input<double>("x", {4});
        auto y = relu(x) + x * x;
        Session<counting_device> s(p);
        xt::xarray<double> xv = {-1.0, 2.0, -3.0, 4.0};
        CHECK(s.eval(y, {{x, xv}}) == Session<cpu>(p).eval(y, {{x, xv}}));
        const std::vector<TargetRef> t{y};
        const std::vector<std::string> fed{"x"};
        CHECK(count_type(s.plan(t, fed), "memcpy_h2d") == 1);
    }
    SUBCASE("sgd on the host updates parameters that live on the device") {
        ops_on_device everything_but_sgd([] {
            std::set<std::string> ops;
            for (auto& d : op_table()) ops.insert(std::string(d.type));
            ops.erase("sgd");
            return ops;
        }());
        auto build = [](Program& p) {
            auto x = p.input<double>("x", {-1, 3});
            auto w = p.parameter<double>("w", {3, 2}, init::uniform(-1, 1, 5));
            auto loss = mean(square(matmul(x, w)));
            auto step = SGD(0.1).minimize(loss);
            return std::tuple{x, step, loss};
        };
        Program pa, pb;
        auto [xa, step_a, loss_a] = build(pa);
        auto [xb, step_b, loss_b] = build(pb);
        Session<cpu> ref(pa);
        Session<counting_device> s(pb);
        xt::xarray<double> xv = {{1.0, -2.0, 0.5}, {0.25, 1.5, -1.0}};
        for (int it = 0; it < 4; ++it) {
            auto a = ref.eval(step_a.with({loss_a}), {{xa, xv}});
            auto b = s.eval(step_b.with({loss_b}), {{xb, xv}});
            CHECK(same_bits(a.back(), b.back()));
        }
        CHECK(to_xarray<double>(s.scope().find_local("w")->get<Tensor>()) ==
              to_xarray<double>(ref.scope().find_local("w")->get<Tensor>()));
        const std::vector<std::string> fed{"x"};
        const ExecutionPlan& plan = s.plan(step_b.with({loss_b}), fed);
        std::string text = describe(plan);
        INFO(text);
        // The host step reads w and writes it in place: one copy out, one back.
        CHECK(text.find("copy memcpy_d2h  X=w -> Out=w@cpu\n") != std::string::npos);
        CHECK(text.find("sgd  Param=w@cpu,Grad=w@GRAD@cpu,LearningRate=" + step_b.learning_rate + "@cpu -> ParamOut=w@cpu\n") !=
              std::string::npos);
        CHECK(text.find("copy memcpy_h2d  X=w@cpu -> Out=w\n") != std::string::npos);
        CHECK(context_of(s.device()).memory->misplaced == 0);
    }
}

TEST_CASE("device: training is bit-identical to the CPU, checkpoints and set_scalar go through host copies") {
    auto build = [](Program& p) {
        auto x = p.input<float>("x", {-1, 5});
        auto label = p.input<std::int64_t>("label", {-1, 1});
        auto w = p.parameter<float>("w", {5, 3}, init::xavier_uniform(11));
        auto b = p.parameter<float>("b", {3}, init::constant(0));
        auto [prob, xent] = softmax_with_cross_entropy(matmul(x, w) + b, label);
        auto loss = mean(xent);
        auto step = Adam(0.05).minimize(loss);
        return std::tuple{x, label, loss, step};
    };
    Program pa, pb;
    auto [xa, la, lossa, stepa] = build(pa);
    auto [xb, lb, lossb, stepb] = build(pb);
    Session<cpu> ref(pa);
    Session<counting_device> s(pb);
    const xt::xarray<float> x = batch(8, 7);
    xt::xarray<std::int64_t> labels = xt::xarray<std::int64_t>::from_shape({8, 1});
    for (std::size_t i = 0; i < 8; ++i) labels(i, 0) = static_cast<std::int64_t>(i * 5 % 3);
    for (int it = 0; it < 5; ++it) {
        auto a = ref.eval(stepa.with({lossa}), {{xa, x}, {la, labels}});
        auto b = s.eval(stepb.with({lossb}), {{xb, x}, {lb, labels}});
        CHECK(same_bits(a.back(), b.back()));
    }
    set_scalar(ref, stepa.learning_rate, 0.01);
    set_scalar(s, stepb.learning_rate, 0.01);  // lives on the device: set on the host, uploaded
    CHECK(s.scope().find_local(stepb.learning_rate)->get<Tensor>().place() == Place::host);
    auto a = ref.eval(stepa.with({lossa}), {{xa, x}, {la, labels}});
    auto b = s.eval(stepb.with({lossb}), {{xb, x}, {lb, labels}});
    CHECK(same_bits(a.back(), b.back()));
    CHECK(s.scope().find_local(stepb.learning_rate)->get<Tensor>().place() == Place::device);

    test_temp_dir dir;
    save_checkpoint(s, dir.file("ckpt"));
    Session<cpu> loaded(load_checkpoint_program(dir.file("ckpt")));
    load_checkpoint(loaded, dir.file("ckpt"));
    for (auto& name : {std::string("w"), std::string("b")})
        CHECK(same_bits(loaded.scope().find_local(name)->get<Tensor>(), ref.scope().find_local(name)->get<Tensor>()));
    // And back: a checkpoint loads into a device session (host values, uploaded on the next run).
    Session<counting_device> again(pb);
    load_checkpoint(again, dir.file("ckpt"));
    CHECK(same_bits(again.eval(TargetRef(lossb), {{xb, x}, {lb, labels}}),
                    ref.eval(TargetRef(lossa), {{xa, x}, {la, labels}})));
    CHECK(context_of(s.device()).memory->misplaced == 0);
    CHECK(context_of(again.device()).memory->misplaced == 0);
}

TEST_CASE("device: a fault in a device step is the CPU's error, and the session keeps working") {
    Program p;
    auto x = p.input<std::int32_t>("x", {-1});
    auto d = p.input<std::int32_t>("d", {-1});
    auto q = x / d;
    Session<counting_device> s(p);
    xt::xarray<std::int32_t> xv = {7, 8, 9}, good = {1, 2, 3}, bad = {1, 0, 3};
    CHECK_THROWS_CONTAINING(s.eval(q, {{x, xv}, {d, bad}}), value_error, "[dlgraph.value.div0]", "elementwise_div (op #0)",
                            "integer division by zero");
    CHECK(s.eval(q, {{x, xv}, {d, good}}) == xt::xarray<std::int32_t>{7, 4, 3});
}

TEST_CASE("device: close gives every byte of device memory back") {
    small_mlp n;
    auto s = std::make_unique<Session<counting_device>>(n.p);
    auto memory = context_of(s->device()).memory;
    s->eval(n.y, {{n.x, batch(4, 3)}});
    CHECK(memory->in_use > 0);
    const std::size_t allocations = memory->allocations;
    s->eval(n.y, {{n.x, batch(4, 4)}});  // same shapes: nothing allocated
    CHECK(memory->allocations == allocations);
    s->close();
    CHECK(memory->in_use == 0);
    CHECK(memory->frees == memory->allocations);
    CHECK(memory->bad_frees == 0);
    CHECK(memory->blocks_free() == 1);  // coalesced back into one region
    s.reset();
}

TEST_CASE("device: plan JSON and DOT name places and copies") {
    ops_on_device only({"mul"});
    small_mlp n;
    Session<counting_device> s(n.p);
    s.eval(n.y, {{n.x, batch(2, 5)}});
    const std::vector<TargetRef> targets{n.y};
    const std::vector<std::string> fed{"x"};
    const ExecutionPlan& plan = s.plan(targets, fed);
    json j = plan;
    CHECK(j["device"] == "test");
    CHECK(j["steps"][0]["type"] == "memcpy_h2d");
    CHECK(j["steps"][0]["op_index"].is_null());
    CHECK(j["steps"][0]["place"] == "test");
    CHECK(j["steps"][1]["type"] == "mul");
    CHECK(j["steps"][1]["place"] == "test");
    CHECK(j["steps"].back()["type"] == "softmax");
    CHECK(j["steps"].back()["place"] == "cpu");
    bool copy_seen = false;
    for (auto& v : j["values"])
        if (v["name"] == "x@test") {
            copy_seen = true;
            CHECK(v["copy_of"] == "x");
            CHECK(v["place"] == "test");
        }
    CHECK(copy_seen);
    CHECK(j["memory"]["places"].contains("test"));
    CHECK(j["memory"]["slot_place"][1] == "test");
    const std::string dot = to_dot(plan);
    CHECK(dot.find("memcpy_h2d\\ncopy") != std::string::npos);
    CHECK(dot.find("mul\\n#") != std::string::npos);
    CHECK(dot.find(" on test") != std::string::npos);
}

namespace {

VarDesc tensor_var(const std::string& name, DataType t, std::vector<std::int64_t> dims, bool persistable = false) {
    VarDesc v;
    v.name = name;
    v.data_type = t;
    v.dims = std::move(dims);
    v.persistable = persistable;
    return v;
}

OpDesc op(const std::string& type, std::vector<std::pair<std::string, std::string>> ins,
          std::vector<std::pair<std::string, std::string>> outs, std::vector<Attribute> attrs = {}) {
    OpDesc o;
    o.type = type;
    for (auto& [slot, var] : ins) o.set_input(slot, {var});
    for (auto& [slot, var] : outs) o.set_output(slot, {var});
    for (auto& a : attrs) o.set_attr(a);
    return o;
}

}  // namespace

TEST_CASE("device: a value copied to the host, rewritten on the device and copied again gets two copies") {
    // #0 relu(x) -> a on the device; #1 softmax(a) on the host reads a@cpu;
    // #2 scale(a) -> a rewrites it on the device; #3 softmax(a) needs a new
    // copy, a@cpu.1, with a lifetime of its own.
    ops_on_device only({"relu", "scale"});
    ProgramDesc p;
    p.blocks.resize(1);
    BlockDesc& b = p.blocks[0];
    for (auto name : {"x", "a", "s1", "s2"}) b.vars.push_back(tensor_var(name, DataType::FP64, {3, 4}));
    b.ops.push_back(op("relu", {{"X", "x"}}, {{"Out", "a"}}));
    b.ops.push_back(op("softmax", {{"X", "a"}}, {{"Out", "s1"}}));
    b.ops.push_back(op("scale", {{"X", "a"}}, {{"Out", "a"}}, {Attribute::make_float("scale", -3.0)}));
    b.ops.push_back(op("softmax", {{"X", "a"}}, {{"Out", "s2"}}));
    xt::xarray<double> xv = {{1, -2, 3, -4}, {0.5, 0.25, -1, 2}, {-3, 3, 1, 1}};
    Session<cpu> ref(p);
    Session<counting_device> s(p);
    const std::vector<TargetRef> targets{TargetRef("s1"), TargetRef("s2")};
    for (int run = 0; run < 2; ++run) {
        auto want = ref.eval(targets, {{"x", xv}});
        auto got = s.eval(targets, {{"x", xv}});
        CHECK(same_bits(got[0], want[0]));
        CHECK(same_bits(got[1], want[1]));
    }
    const std::string text = describe(s.plan(targets, std::vector<std::string>{"x"}));
    INFO(text);
    CHECK(text.find("copy memcpy_d2h  X=a -> Out=a@cpu\n") != std::string::npos);
    CHECK(text.find("copy memcpy_d2h  X=a -> Out=a@cpu.1\n") != std::string::npos);
    CHECK(text.find("softmax  X=a@cpu.1 -> Out=s2\n") != std::string::npos);
    CHECK(context_of(s.device()).memory->misplaced == 0);
}

TEST_CASE("device: a persistable the plan only writes goes back to device memory after set_scalar put it on the host") {
    ops_on_device only({"assign"});
    ProgramDesc p;
    p.blocks.resize(1);
    BlockDesc& b = p.blocks[0];
    b.vars.push_back(tensor_var("lr", DataType::FP32, {1}, true));
    b.vars.push_back(tensor_var("v", DataType::FP32, {1}));
    b.ops.push_back(op("fill_constant", {}, {{"Out", "lr"}},
                       {Attribute::make_ints("shape", {1}), Attribute::make_float("value", 0.5),
                        Attribute::make_int("dtype", static_cast<int>(DataType::FP32))}));
    b.ops.push_back(op("assign", {{"X", "v"}}, {{"Out", "lr"}}));  // writes lr, never reads it
    Session<counting_device> s(p);
    const std::vector<TargetRef> write{TargetRef::op_only(1)};
    xt::xarray<float> v = {0.25f};
    s.eval(write, {{"v", v}});
    const Tensor* lr = &s.scope().find_local("lr")->get<Tensor>();
    CHECK(lr->place() == Place::device);
    set_scalar(s, "lr", 7.0);
    CHECK(s.scope().find_local("lr")->get<Tensor>().place() == Place::host);
    xt::xarray<float> w = {0.125f};
    s.eval(write, {{"v", w}});
    lr = &s.scope().find_local("lr")->get<Tensor>();
    CHECK(lr->place() == Place::device);
    CHECK(context_of(s.device()).memory->owns(lr->raw(), lr->bytes()));
    CHECK(lr->item<float>() == 0.125f);
}

TEST_CASE("device: a run that fails leaves no device work queued, a failed allocation leaves the session working") {
    ops_on_device only({"relu", "mul"});
    Program p;
    auto x = p.input<float>("x", {-1, 5});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto w = p.parameter<float>("w", {5, 3}, init::uniform(-1, 1, 9));
    auto [prob, loss] = softmax_with_cross_entropy(relu(mul(x, w)), label);  // on the host, after a copy
    Session<counting_device> s(p);
    Session<cpu> ref(p);
    auto& dev = context_of(s.device());
    const xt::xarray<float> xv = batch(4, 11);
    using labels_t = xt::xtensor<std::int64_t, 2>;
    const labels_t good = {{0}, {1}, {2}, {1}}, bad = {{0}, {7}, {2}, {1}};
    CHECK_THROWS_CONTAINING(s.eval(loss, {{x, xv}, {label, bad}}), value_error, "[dlgraph.value.label]", "label 7");
    CHECK(dev.queued() == 0);
    CHECK(same_bits(s.eval(TargetRef(loss), {{x, xv}, {label, good}}), ref.eval(TargetRef(loss), {{x, xv}, {label, good}})));

    // A bigger batch needs bigger arenas: the device refuses the allocation.
    const xt::xarray<float> big = batch(64, 12);
    xt::xarray<std::int64_t> labels = xt::zeros<std::int64_t>({std::size_t(64), std::size_t(1)});
    dev.allocations_left = 0;
    CHECK_THROWS_CONTAINING(s.eval(loss, {{x, big}, {label, labels}}), resource_error, "[dlgraph.resource.alloc]",
                            "could not allocate 2.0 KiB on the test");
    dev.allocations_left = -1;
    CHECK(same_bits(s.eval(TargetRef(loss), {{x, big}, {label, labels}}),
                    ref.eval(TargetRef(loss), {{x, big}, {label, labels}})));
    CHECK(same_bits(s.eval(TargetRef(loss), {{x, xv}, {label, good}}), ref.eval(TargetRef(loss), {{x, xv}, {label, good}})));
    CHECK(dev.memory->misplaced == 0);
}

TEST_CASE("device: a tensor in device memory can be fed (it is copied to the host)") {
    small_mlp n;
    Session<counting_device> s(n.p);
    Session<cpu> ref(n.p);
    const xt::xarray<float> xv = batch(5, 13);
    s.eval(n.y, {{n.x, xv}});
    const Tensor& w = s.scope().find_local("w")->get<Tensor>();
    REQUIRE(w.place() == Place::device);
    Program q;
    auto a = q.input<float>("a", {5, 4});
    auto r = relu(a);
    Session<cpu> plain(q);
    CHECK(plain.eval(r, {{a, w}}) == ref.eval(relu(n.w)));
}

TEST_CASE("device: a scope value in device memory sets range's length, and a new value gives a new one") {
    ops_on_device only({"scale"});
    Program p;
    auto n = p.parameter<std::int64_t>("n", {1}, init::constant(4), false);
    auto x = p.parameter<float>("x", {3}, init::constant(1), false);
    auto y = scale(x, 2.0);  // a device step, so the session has device work
    auto r = arange(p.constant<std::int64_t>(0), n, p.constant<std::int64_t>(1));
    Session<counting_device> s(p);
    const std::vector<TargetRef> targets{r, y};
    auto got = s.eval(targets, std::vector<Feed>{});
    const std::string text = describe(s.plan(targets, std::vector<std::string>{}));
    INFO(text);
    CHECK(text.find("memcpy_d2h  X=n -> ") != std::string::npos);  // n lives in device memory
    CHECK(values_of<std::int64_t>(got[0]) == std::vector<std::int64_t>{0, 1, 2, 3});
    s.scope().var("n").get_mutable<Tensor>() = tensor_of<std::int64_t>({1}, {2});
    got = s.eval(targets, std::vector<Feed>{});
    CHECK(values_of<std::int64_t>(got[0]) == std::vector<std::int64_t>{0, 1});
    got = s.eval(targets, std::vector<Feed>{});  // unchanged: the same plan, the same length
    CHECK(values_of<std::int64_t>(got[0]) == std::vector<std::int64_t>{0, 1});
}
