// Session<cuda> on a real GPU: every op case of the op suite against the
// CPU, training against the CPU, one wait per eval, no device allocation
// after warm-up, faults on the device, two sessions from two threads, and
// memory given back on close. Where no GPU is visible the binary prints why
// and exits 77, which ctest reports as skipped (never as passed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include <dlgraph/checkpoint.hpp>
#include <dlgraph/cuda/cuda.hpp>
#include <dlgraph/cuda/nccl.hpp>
#include <dlgraph/ops/conv.hpp>
#include <dlgraph/optimizer.hpp>
#include <dlgraph/parallel.hpp>

#include "../op_cases.hpp"
#include "../test_helpers.hpp"

using namespace dlgraph;

namespace {

// Element-wise closeness: integers and bools exactly; FP32 within `f32`
// and FP64 within `f64` relative to max(|expected|, 1); NaN matches NaN,
// an infinity itself.
template <class T> bool close(T got, T want, double tol) {
    if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(want)) return std::isnan(got);
        if (std::isinf(want)) return got == want;
        return std::abs(static_cast<double>(got) - static_cast<double>(want)) <=
               tol * std::max(std::abs(static_cast<double>(want)), 1.0);
    } else {
        return got == want;
    }
}

// "" when `got` matches `want`, else the first difference.
std::string compare(const Tensor& got, const Tensor& want, double f32, double f64) {
    if (got.dtype() != want.dtype()) return "dtype " + to_string(got.dtype()) + " vs " + to_string(want.dtype());
    if (!(got.shape() == want.shape())) return "shape " + to_string(got.shape()) + " vs " + to_string(want.shape());
    std::string diff;
    visit_dtype(want.dtype(), [&]<class T>(type_tag<T>) {
        if constexpr (std::is_same_v<T, float16>) {
            if (std::memcmp(got.raw(), want.raw(), want.bytes()) != 0) diff = "FP16 bits differ";
        } else {
            const T* g = got.data<T>();
            const T* w = want.data<T>();
            const double tol = std::is_same_v<T, float> ? f32 : f64;
            for (std::int64_t i = 0; i < want.numel(); ++i)
                if (!close(g[i], w[i], tol)) {
                    diff = "element " + std::to_string(i) + ": " + std::to_string(static_cast<double>(g[i])) + " vs " +
                           std::to_string(static_cast<double>(w[i]));
                    return;
                }
        }
    });
    return diff;
}

xt::xarray<float> batch(std::size_t rows, std::size_t cols, std::uint64_t seed) {
    xt::xarray<float> a = xt::zeros<float>({rows, cols});
    std::uint64_t g = seed;
    for (auto& v : a) {
        g = g * 6364136223846793005ULL + 1442695040888963407ULL;
        v = static_cast<float>(static_cast<double>(g >> 11) * 0x1.0p-53 * 4.0 - 2.0);
    }
    return a;
}

// x [-1, 20] -> matmul + bias -> softmax cross entropy against label -> mean; Adam.
auto adam_classifier(Program& p) {
    auto x = p.input<float>("x", {-1, 20});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto w = p.parameter<float>("w", {20, 5}, init::xavier_uniform(11));
    auto b = p.parameter<float>("b", {5}, init::constant(0));
    auto [prob, xent] = softmax_with_cross_entropy(matmul(x, w) + b, label);
    auto loss = mean(xent);
    auto step = Adam(0.01).minimize(loss);
    return std::tuple{x, label, loss, step};
}

}  // namespace

// ---- without a GPU (ctest cuda.host) ---------------------------------------------------------

// The ops a CUDA session runs on the host, and why.
const std::set<std::string> host_only = {
    "feed", "fetch", "save", "load", "save_combine", "load_combine",  // files and the caller's lists
    "memcpy_h2d", "memcpy_d2h",                                       // the copies themselves
    "uniform_random", "gaussian_random",  // the host's generator: the CPU's exact numbers
    "range",  // its inputs are read while planning, on the host; Out is a short list
};

TEST_CASE("cuda host: every op has a CUDA kernel at each of its CPU dtypes, but the host-only ones") {
    int with_kernel = 0;
    for (const OpDef& def : op_table()) {
        CAPTURE(def.type);
        const bool host = host_only.count(std::string(def.type)) > 0;
        for (int t = 0; t < num_dtypes; ++t) {
            const auto dt = static_cast<DataType>(t);
            CAPTURE(to_string(dt));
            if (!def.supports(dt)) {
                CHECK_FALSE(cuda_has_kernel(def, dt));
                continue;
            }
            CHECK(cuda_has_kernel(def, dt) == !host);
            with_kernel += !host;
        }
    }
    MESSAGE(with_kernel << " (op, dtype) pairs have a CUDA kernel");
}

TEST_CASE("cuda host: every fusible op can run inside a fused chain on the device, and plans fuse device steps") {
    const auto ctx = cuda_planning_context();
    for (const OpDef& def : op_table()) {
        CAPTURE(def.type);
        for (DataType t : {DataType::FP32, DataType::FP64}) {
            const bool fusible = def.fusible.arity != 0 && def.fusible.fn(t) && cuda_has_kernel(def, t);
            CHECK((ctx->fused_code(def, t) >= 0) == fusible);
        }
        CHECK(ctx->fused_code(def, DataType::INT32) == -1);
    }
    CHECK(static_cast<bool>(ctx->fused_kernel()));
    // a * b + bias, then 40 tanh: 42 device steps in chains of at most max_device_chain.
    Program p;
    auto a = p.input<float>("a", {-1, 8});
    auto b = p.input<float>("b", {-1, 8});
    auto bias = p.input<float>("bias", {8});
    Var<float> y = a * b + bias;
    for (int i = 0; i < 40; ++i) y = tanh(y);
    const std::vector<TargetRef> targets{y};
    const std::vector<std::string> fed{"a", "b", "bias"};
    const std::vector<VarMeta> metas{{DataType::FP32, Shape{5, 8}}, {DataType::FP32, Shape{5, 8}}, {DataType::FP32, Shape{8}}};
    const ExecutionPlan plan = plan_program(p.desc(), targets, fed, metas, {}, ctx.get());
    REQUIRE(plan.fused.size() == 2);
    CHECK(plan.fused[0].last - plan.fused[0].first + 1 == max_device_chain);
    CHECK(plan.fused[0].row == 8);
    CHECK(plan.fused[1].last + 1 - plan.fused[0].first == 42);
    for (const FusedChainPlan& c : plan.fused)
        for (int s = c.first; s <= c.last; ++s) CHECK(plan.steps[static_cast<std::size_t>(s)].place == Place::device);
    PlanOptions off;
    off.fuse = false;
    CHECK(plan_program(p.desc(), targets, fed, metas, {}, ctx.get(), off).fused.empty());
}

// The CUDA window kernels take NCHW: a step whose data_format (or
// data_layout) is NHWC runs on the host (OpDef::host_only_with), with
// copies around it, but batch_norm, whose kernel takes either.
TEST_CASE("cuda host: NHWC convolutions and pooling are placed on the host, NCHW ones on the device") {
    const auto ctx = cuda_planning_context();
    Program p;
    auto x = p.input<float>("x", {2, 8, 8, 3});
    auto xn = p.input<float>("xn", {2, 3, 8, 8});
    auto f = p.parameter<float>("f", {4, 3, 3, 3}, init::constant(0.1));
    auto y = conv2d(x, f, Conv2d{.data_format = "NHWC"});  // [2, 6, 6, 4]
    auto z = pool2d(batch_norm(y, "bn", BatchNorm{.data_layout = "NHWC"}),
                    Pool2d{.ksize = {2, 2}, .strides = {2, 2}, .data_format = "NHWC"});
    auto zn = pool2d(conv2d(xn, f), Pool2d{.ksize = {2, 2}, .strides = {2, 2}});
    const std::vector<TargetRef> targets{z, zn};
    const std::vector<std::string> fed{"x", "xn"};
    const ExecutionPlan plan = make_plan(p.desc(), targets, fed, ctx.get());  // places steps; no shapes needed
    int seen = 0;
    for (const auto& st : plan.steps) {
        if (!st.def) continue;
        CAPTURE(st.label);
        if (st.def->type == "conv2d") CHECK((st.place == Place::host) == ops::conv2d_op::nhwc(st.attrs.data()));
        if (st.def->type == "pool2d") CHECK((st.place == Place::host) == ops::pool2d_op::nhwc(st.attrs.data()));
        if (st.def->type == "batch_norm") CHECK(st.place == Place::device);
        seen += st.def->type == "conv2d" || st.def->type == "pool2d";
    }
    CHECK(seen == 4);
}

namespace {
// A host communicator that says it moves CUDA memory, for planning.
struct cuda_memory_comm final : Communicator {
    int rank() const noexcept override { return 0; }
    int size() const noexcept override { return 1; }
    std::string describe() const override { return "rank 0 of 1 (CUDA memory, for planning)"; }
    std::string_view memory() const noexcept override { return "cuda"; }
    void all_reduce(void*, std::int64_t, DataType, ReduceOp, const char*) override {}
    void broadcast(void*, std::int64_t, DataType, int, const char*) override {}
    void all_gather(const void*, std::int64_t, DataType, void*, const char*) override {}
    [[noreturn]] void abort(int) noexcept override { std::abort(); }
};
// x -> c_allreduce_sum (ring 0) -> relu -> c_allgather (ring 1) -> c_broadcast (ring 0).
struct collective_chain {
    Program p;
    Var<float> x = p.input<float>("x", {-1, 3});
    Var<float> y = c_broadcast(c_allgather(relu(c_allreduce_sum(x, 0)), 1, 1), 0, 0);
};
}  // namespace

TEST_CASE("cuda host: collective steps run on the device for a ring whose communicator moves its memory") {
    const auto ctx = cuda_planning_context();
    collective_chain n;
    const std::vector<TargetRef> targets{n.y};
    const std::vector<std::string> fed{"x"};
    auto places = [&](std::uint64_t device_rings) {
        const ExecutionPlan plan = make_plan(n.p.desc(), targets, fed, ctx.get(), device_rings);
        std::string got;
        for (const auto& st : plan.steps)
            got += (got.empty() ? "" : " ") + std::string(st.def->type) + (st.place == Place::device ? "@cuda" : "@cpu");
        return got;
    };
    // (A copy runs where it writes.)
    CHECK(places(0) == "c_allreduce_sum@cpu memcpy_h2d@cuda relu@cuda memcpy_d2h@cuda c_allgather@cpu c_broadcast@cpu");
    CHECK(places(1) == "memcpy_h2d@cuda c_allreduce_sum@cuda relu@cuda memcpy_d2h@cuda c_allgather@cpu "
                       "memcpy_h2d@cuda c_broadcast@cuda memcpy_d2h@cuda");
    CHECK(places(3) == "memcpy_h2d@cuda c_allreduce_sum@cuda relu@cuda c_allgather@cuda c_broadcast@cuda memcpy_d2h@cuda");
    // Bits beyond ring 63 are never set: such rings run on the host.
    CHECK(places(~std::uint64_t(0)) == places(3));
    // A CPU session never asks for device rings; its steps are all host steps whatever the communicator says.
    SessionOptions o;
    o.comms = {std::make_shared<cuda_memory_comm>(), std::make_shared<SelfCommunicator>()};
    Session<cpu> cpu_session(n.p, o);
    xt::xarray<float> x = {{1, -2, 3}};
    CHECK(cpu_session.eval(TargetRef(n.y), {{n.x, x}}).shape() == Shape{1, 3});
}

// dlgraph::cuda links no NCCL: it is loaded when a communicator is made.
TEST_CASE("cuda host: NCCL is loaded at run time; one that cannot be loaded is a clear error") {
    // First a library that is not there (the first successful load is kept).
    CHECK_THROWS_CONTAINING(nccl::library_version("/nonexistent/libnccl.so.2"), comm_error, "[dlgraph.comm.nccl]",
                            "cannot load NCCL from '/nonexistent/libnccl.so.2' (Options::library)",
                            "set DLGRAPH_NCCL_LIBRARY");
    CHECK_THROWS_CONTAINING(nccl::Communicator(0, {.library = "/nonexistent/libnccl.so.2"}), comm_error,
                            "[dlgraph.comm.nccl]", "cannot load NCCL");
#ifdef DLGRAPH_TEST_NCCL_LIBRARY
    // The toolkit's NCCL, where it has one: every function dlgraph calls resolves.
    if (std::FILE* f = std::fopen(DLGRAPH_TEST_NCCL_LIBRARY, "rb")) {
        std::fclose(f);
        const int v = nccl::library_version(DLGRAPH_TEST_NCCL_LIBRARY);
        MESSAGE("NCCL " << DLGRAPH_TEST_NCCL_LIBRARY << ": version code " << v);
        CHECK(v >= 2000);
        CHECK(v < 30000);
        std::string why;
        if (!cuda_available(&why)) {  // no GPU: making a communicator is an error, not a crash
            CHECK_THROWS_CONTAINING(nccl::Communicator(0), comm_error, "[dlgraph.comm.nccl]",
                                    "nccl::Communicator on NCCL rank 0 of 1 (GPU 0)");
            try {
                nccl::Communicator c(0);
            } catch (const comm_error& e) {
                MESSAGE("without a GPU: " << std::string(e.what()));
            }
        }
    } else {
        MESSAGE("no NCCL at " << DLGRAPH_TEST_NCCL_LIBRARY << ": only the load errors are checked");
    }
#endif
}

TEST_CASE("cuda host: without a GPU a CUDA session is a clear error") {
    std::string why;
    if (cuda_available(&why)) return;  // a GPU machine: the GPU cases below cover sessions
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = relu(x);
    (void)y;
    CHECK_THROWS_CONTAINING(Session<cuda>(p), session_error, "[dlgraph.cuda.unavailable]", "no GPU is usable here");
}

// ---- on a GPU (ctest cuda.gpu) ---------------------------------------------------------------

// The FP32 tolerance of an op case. Matrix products are cuBLAS's: it sums
// the K products in blocks of its own order, and for the suite's largest
// case (K = 512, values in [-1, 1]) its sums and the CPU's differ by up to
// about 1.5e-5 (both within K * 2^-24 * sum |a||b| of the exact value);
// TF32 would differ by about 1e-3.
static double fp32_tolerance(const std::string& case_name) {
    const std::string op = case_name.substr(0, case_name.find('/'));
    return op == "mul" || op == "matmul" || op == "mul_grad" || op == "matmul_grad" ? 1e-4 : 1e-5;
}

TEST_CASE("cuda: every op case gives the CPU's results (FP32 within 1e-5, FP64 within 1e-12)") {
    int checked = 0;
    for (const op_case& c : all_op_cases()) {
        CAPTURE(c.name);
        // Random fills run on the host in a CUDA session too (same bits);
        // ops with reductions on the device may add in another order.
        Session<cpu> ref(c.program);
        Session<cuda> dev(c.program);
        std::vector<Tensor> want = run_op_case_in(ref, c), got = run_op_case_in(dev, c);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
            CAPTURE(c.fetch[i]);
            CHECK(compare(got[i], want[i], fp32_tolerance(c.name), 1e-12) == "");
        }
        ++checked;
    }
    MESSAGE(checked << " op cases compared");
}

// Each reduction kernel path (a whole tensor, rows, columns, split over
// blocks and folded again, the general walk) at odd and large sizes.
TEST_CASE("cuda: reductions of odd and large sizes give the CPU's results") {
    struct shape_case {
        std::vector<std::int64_t> dims, axes;  // no axes: all
    };
    const std::int64_t big = (std::int64_t(1) << 20) + 3;
    const std::vector<shape_case> shapes = {
        {{1}, {}},          {{7}, {}},          {{1023}, {}},          {{big}, {}},
        {{1023, 1029}, {1}}, {{7, 131073}, {1}}, {{131073, 7}, {0}},    {{4099, 1025}, {0}},
        {{5, 7, 3, 11}, {0, 2}}, {{5, 7, 3, 11}, {1, 2}}, {{3, 1, 65541}, {0, 1}}, {{2, 3, 4}, {2, 0}},
    };
    for (const shape_case& sc : shapes) {
        const Shape shape(sc.dims);
        CAPTURE(to_string(shape));
        std::string axes = "axes";
        for (std::int64_t a : sc.axes) axes += " " + std::to_string(a);
        CAPTURE(axes);
        Program p;
        auto x = p.input<double>("x", shape);
        auto xf = p.input<float>("xf", shape);
        auto near_one = p.input<double>("near_one", shape);
        const std::vector<TargetRef> targets = {reduce_sum(x, sc.axes),      reduce_mean(x, sc.axes),
                                                reduce_max(x, sc.axes),      reduce_min(x, sc.axes),
                                                reduce_prod(near_one, sc.axes), reduce_max(xf, sc.axes),
                                                reduce_min(xf, sc.axes),     reduce_sum(xf, sc.axes, true)};
        Tensor xv(DataType::FP64, shape), xfv(DataType::FP32, shape), nv(DataType::FP64, shape);
        std::uint64_t g = 12345;
        for (std::int64_t i = 0; i < xv.numel(); ++i) {
            g = g * 6364136223846793005ULL + 1442695040888963407ULL;
            const double u = static_cast<double>(g >> 11) * 0x1.0p-53;  // [0, 1): sums do not cancel
            xv.data<double>()[i] = u;
            xfv.data<float>()[i] = static_cast<float>(u * 4 - 2);
            nv.data<double>()[i] = 1 + (u - 0.5) * 1e-6;
        }
        const std::vector<Feed> feeds = {{"x", xv}, {"xf", xfv}, {"near_one", nv}};
        Session<cpu> ref(p);
        Session<cuda> dev(p);
        const std::vector<Tensor> want = ref.eval(targets, feeds), got = dev.eval(targets, feeds);
        for (std::size_t i = 0; i < want.size(); ++i) {
            CAPTURE(i);
            // FP32 sums of up to 2^20 terms in another order: 1e-4 relative to max(|sum|, 1).
            CHECK(compare(got[i], want[i], i == 7 ? 1e-4 : 0.0, 1e-12) == "");
        }
    }
}

// A broadcast operand's gradient is a reduction over its broadcast dims (a
// bias over rows, a column vector over columns).
TEST_CASE("cuda: gradients of broadcast operands at large sizes give the CPU's results") {
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4099, 1025}, {7, 131073}, {131073, 3}}) {
        CAPTURE(rows);
        CAPTURE(cols);
        Program p;
        auto x = p.input<double>("x", {rows, cols});
        auto b = p.parameter<double>("b", {cols}, init::uniform(-1, 1, 3));
        auto c = p.parameter<double>("c", {rows, 1}, init::uniform(-1, 1, 4));
        auto loss = reduce_sum((x * b + c) * x);
        std::vector<TargetRef> targets;
        for (auto& [param, grad] : append_backward(loss)) targets.push_back(grad);
        REQUIRE(targets.size() == 2);
        Tensor xv(DataType::FP64, Shape{rows, cols});
        std::uint64_t g = 777;
        for (std::int64_t i = 0; i < xv.numel(); ++i) {
            g = g * 6364136223846793005ULL + 1442695040888963407ULL;
            xv.data<double>()[i] = static_cast<double>(g >> 11) * 0x1.0p-53 * 2 - 1;
        }
        Session<cpu> ref(p);
        Session<cuda> dev(p);
        const std::vector<Tensor> want = ref.eval(targets, {{"x", xv}}), got = dev.eval(targets, {{"x", xv}});
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(compare(got[i], want[i], 0.0, 1e-12) == "");
    }
}

// The losses, layer_norm, reduce_prod's gradient and the optimizers of
// src/cuda/train_kernels.cu at sizes that take many blocks (the op suite's
// cases are small): two training steps of a model built from all of them,
// in FP64 on the CPU and the GPU; the parameters and losses after each.
TEST_CASE("cuda: the losses, layer_norm and adagrad, rmsprop, lamb train at large sizes as on the CPU") {
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{4099, 257}, {3, 131073}}) {
        for (const std::string opt : {"adagrad", "rmsprop", "lamb"}) {
            CAPTURE(rows);
            CAPTURE(cols);
            CAPTURE(opt);
            Program p;
            auto x = p.parameter<double>("x", {rows, cols}, init::uniform(-2, 2, 1));
            auto scale = p.parameter<double>("scale", {cols}, init::uniform(0.5, 1.5, 2));
            auto bias = p.parameter<double>("bias", {cols}, init::uniform(-0.5, 0.5, 3));
            auto label = p.input<double>("label", {rows, cols});
            auto target = p.input<double>("target", {rows, cols});
            auto h = layer_norm(x, std::optional(scale), std::optional(bias), 1);
            auto loss = reduce_sum(sigmoid_cross_entropy_with_logits(h, label, true, 0)) +
                        kl_div(h, target, "batchmean") + reduce_mean(smooth_l1_loss(h, target, 2.0)) +
                        reduce_mean(huber_loss(h, label, 0.5)) + reduce_mean(reduce_prod(h * 1e-3 + 1.0, {1}));
            // Adagrad's epsilon is large: near |g| = epsilon its step amplifies
            // a gradient's last-bit differences (from sums in another order) 1e5 times.
            TrainStep step = opt == "adagrad" ? Adagrad(0.1, 0.1).minimize(loss)
                             : opt == "rmsprop" ? RMSProp(0.01, 0.9, 1e-6, 0.5, true).minimize(loss)
                                                : Lamb(0.01, 0.01).minimize(loss);
            Tensor lv(DataType::FP64, Shape{rows, cols}), tv(DataType::FP64, Shape{rows, cols});
            std::uint64_t g = 99;
            for (std::int64_t i = 0; i < lv.numel(); ++i) {
                g = g * 6364136223846793005ULL + 1442695040888963407ULL;
                const double u = static_cast<double>(g >> 11) * 0x1.0p-53;
                lv.data<double>()[i] = i % 5 == 0 ? 0.0 : u;  // 0 is ignore_index: a fifth of the labels
                tv.data<double>()[i] = i % 7 == 0 ? 0.0 : u;  // a target of 0 adds nothing
            }
            const std::vector<Feed> feeds = {{"label", lv}, {"target", tv}};
            Session<cpu> ref(p);
            Session<cuda> dev(p);
            for (int it = 0; it < 2; ++it) {
                CAPTURE(it);
                const std::vector<Tensor> want = ref.eval(step.with({loss}), feeds), got = dev.eval(step.with({loss}), feeds);
                CHECK(compare(got.back(), want.back(), 0.0, 1e-11) == "");  // the loss, after the step's ops
                for (const char* name : {"x", "scale", "bias"}) {
                    CAPTURE(name);
                    Tensor on_host;
                    on_host.copy_from(dev.scope().find_local(name)->get<Tensor>());
                    CHECK(compare(on_host, ref.scope().find_local(name)->get<Tensor>(), 0.0, 1e-11) == "");
                }
            }
        }
    }
}

// The window ops' kernels (src/cuda/window_kernels.cu) in a model: strided,
// padded, dilated and depthwise convolutions, batch norm (training, then
// its moving statistics), max, average (ceil_mode, padding counted) and
// adaptive pooling, and a seeded dropout (the same masks: the counter-based
// draws of the kernel core), trained three steps with momentum in FP64 on
// the CPU and the GPU; the losses, parameters and moving statistics after each.
TEST_CASE("cuda: a small CNN trains as on the CPU (conv2d, depthwise_conv2d, batch_norm, pool2d, dropout)") {
    for (const std::int64_t images : {2, 33}) {
        CAPTURE(images);
        Program p;
        auto x = p.input<double>("x", {-1, 3, 17, 15});
        auto label = p.input<std::int64_t>("label", {-1, 1});
        auto w1 = p.parameter<double>("w1", {8, 3, 3, 3}, init::uniform(-0.3, 0.3, 1));
        auto wd = p.parameter<double>("wd", {16, 1, 3, 3}, init::uniform(-0.3, 0.3, 2));
        auto wg = p.parameter<double>("wg", {16, 4, 1, 1}, init::uniform(-0.3, 0.3, 3));
        auto wf = p.parameter<double>("wf", {64, 5}, init::uniform(-0.3, 0.3, 4));
        auto h = relu(batch_norm(conv2d(x, w1, Conv2d{.strides = {2, 1}, .paddings = {1, 1}}), "bn1"));  // [N, 8, 9, 15]
        h = depthwise_conv2d(h, wd, Conv2d{.paddings = {2, 2}, .dilations = {2, 2}});                    // [N, 16, 9, 15]
        h = conv2d(h, wg, Conv2d{.groups = 4});                                                            // grouped 1x1
        h = max_pool2d(h, 3, 2, 1);                                                                        // [N, 16, 5, 8]
        h = pool2d(h, Pool2d{.pooling_type = "avg", .ksize = {2, 3}, .strides = {2, 2}, .paddings = {1, 1},
                             .exclusive = false, .ceil_mode = true});
        h = dropout(h, "drop", Dropout{.prob = 0.3, .implementation = "upscale_in_train", .seed = 7});
        h = pool2d(h, Pool2d{.pooling_type = "avg", .ksize = {2, 2}, .adaptive = true});                  // [N, 16, 2, 2]
        auto logits = matmul(flatten(h), wf);
        auto [prob, xent] = softmax_with_cross_entropy(logits, label);
        auto loss = mean(xent);
        TrainStep step = Momentum(0.1, 0.9).minimize(loss);
        Tensor xv(DataType::FP64, Shape{images, 3, 17, 15}), lv(DataType::INT64, Shape{images, 1});
        std::uint64_t g = 5;
        for (std::int64_t i = 0; i < xv.numel(); ++i) {
            g = g * 6364136223846793005ULL + 1442695040888963407ULL;
            xv.data<double>()[i] = static_cast<double>(g >> 11) * 0x1.0p-53 * 4 - 2;
        }
        for (std::int64_t i = 0; i < images; ++i) lv.data<std::int64_t>()[i] = (i * 7) % 5;
        const std::vector<Feed> feeds = {{"x", xv}, {"label", lv}};
        Session<cpu> ref(p);
        Session<cuda> dev(p);
        for (int it = 0; it < 3; ++it) {
            CAPTURE(it);
            const std::vector<Tensor> want = ref.eval(step.with({loss}), feeds), got = dev.eval(step.with({loss}), feeds);
            CHECK(compare(got.back(), want.back(), 0.0, 1e-11) == "");
            for (const std::string& name : ref.scope().local_names()) {  // parameters, velocities, moving statistics
                const Variable& var = *ref.scope().find_local(name);
                if (!var.is<Tensor>() || !var.get<Tensor>().initialized()) continue;
                CAPTURE(name);
                const Variable* on_device = dev.scope().find_local(name);
                REQUIRE(on_device != nullptr);
                Tensor on_host;
                on_host.copy_from(on_device->get<Tensor>());
                CHECK(compare(on_host, var.get<Tensor>(), 0.0, 1e-11) == "");
            }
        }
    }
}

// NHWC convolutions and pooling run on the host in a CUDA session (copies
// around them), batch_norm NHWC on the device: a training step as on the CPU.
TEST_CASE("cuda: an NHWC network trains as on the CPU (its convolutions and pooling on the host)") {
    Program p;
    auto x = p.input<double>("x", {-1, 9, 7, 4});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto f = p.parameter<double>("f", {6, 2, 3, 2}, init::uniform(-1, 1, 1));
    auto fd = p.parameter<double>("fd", {12, 1, 3, 3}, init::uniform(-1, 1, 2));
    auto w = p.parameter<double>("w", {48, 3}, init::uniform(-1, 1, 3));
    auto h = conv2d(x, f, Conv2d{.strides = {2, 1}, .paddings = {1, 0, 2, 1}, .dilations = {1, 2}, .groups = 2,
                                 .data_format = "NHWC"});
    h = batch_norm(h, "bn", BatchNorm{.data_layout = "NHWC"});
    h = depthwise_conv2d(relu(h), fd, Conv2d{.paddings = {1, 1}, .data_format = "NHWC"});
    h = pool2d(h, Pool2d{.pooling_type = "avg", .ksize = {2, 2}, .adaptive = true, .data_format = "NHWC"});
    auto loss = mean(softmax_with_cross_entropy(matmul(flatten(h), w), label).second);
    TrainStep step = SGD(0.1).minimize(loss);
    Tensor xv(DataType::FP64, Shape{5, 9, 7, 4}), lv(DataType::INT64, Shape{5, 1});
    std::uint64_t g = 17;
    for (std::int64_t i = 0; i < xv.numel(); ++i) {
        g = g * 6364136223846793005ULL + 1442695040888963407ULL;
        xv.data<double>()[i] = static_cast<double>(g >> 11) * 0x1.0p-53 * 4 - 2;
    }
    for (std::int64_t i = 0; i < 5; ++i) lv.data<std::int64_t>()[i] = i % 3;
    const std::vector<Feed> feeds = {{"x", xv}, {"label", lv}};
    Session<cpu> ref(p);
    Session<cuda> dev(p);
    for (int it = 0; it < 2; ++it) {
        const std::vector<Tensor> want = ref.eval(step.with({loss}), feeds), got = dev.eval(step.with({loss}), feeds);
        CHECK(compare(got.back(), want.back(), 0.0, 1e-11) == "");
    }
    for (const char* name : {"f", "fd", "w", "bn.scale", "bn.bias", "bn.mean", "bn.variance"}) {
        CAPTURE(name);
        Tensor on_host;
        on_host.copy_from(dev.scope().find_local(name)->get<Tensor>());
        CHECK(compare(on_host, ref.scope().find_local(name)->get<Tensor>(), 0.0, 1e-11) == "");
    }
}

// Fused chains on the device (one kernel per chain): the same bits as the
// CUDA session's steps one by one (the same functors, no contraction), and
// the CPU's results within the tolerance; full, scalar and row operands,
// unary gradients, odd sizes around the kernel's 16-byte groups.
TEST_CASE("cuda: element-wise chains run as one kernel and compute what their steps compute one by one") {
    auto check_dtype = [&]<class T>(type_tag<T>) {
        for (const std::int64_t rows : {std::int64_t(1), std::int64_t(3), std::int64_t(341), std::int64_t(1) << 17}) {
            constexpr std::int64_t cols = 7;
            CAPTURE(rows);
            Program p;
            auto a = p.input<T>("a", {-1, cols});
            auto b = p.input<T>("b", {-1, cols});
            auto c = p.input<T>("c", {-1, cols});
            auto bias = p.parameter<T>("bias", {cols}, init::uniform(-1, 1, 5));
            auto s = p.parameter<T>("s", {1}, init::constant(0.75));
            auto h = tanh(relu(a * bias + c) * s);            // row, full and scalar operands
            auto triad = a * b + c;                              // full operands only
            auto u = sigmoid(exp(triad) - b) / (b * b + s);      // the running value on either side
            auto loss = reduce_sum(h * b) + reduce_sum(u);
            std::vector<TargetRef> targets{h, triad, u};
            for (auto& [param, grad] : append_backward(loss)) targets.push_back(grad);  // tanh_grad, relu_grad: a chain
            const Shape shape{rows, cols};
            auto fill = [&](std::uint64_t g, double lo, double hi) {
                Tensor t(dtype_of<T>, shape);
                for (std::int64_t i = 0; i < t.numel(); ++i) {
                    g = g * 6364136223846793005ULL + 1442695040888963407ULL;
                    t.data<T>()[i] = static_cast<T>(lo + (hi - lo) * static_cast<double>(g >> 11) * 0x1.0p-53);
                }
                return t;
            };
            const std::vector<Feed> feeds = {{"a", fill(1, -2, 2)}, {"b", fill(2, 0.5, 1.5)}, {"c", fill(3, -1, 1)}};
            const std::vector<std::string> fed{"a", "b", "c"};
            SessionOptions unfused_opts;
            unfused_opts.fuse = false;
            Session<cpu> ref(p);
            Session<cuda> dev(p), plain(p, unfused_opts);
            const std::vector<Tensor> want = ref.eval(targets, feeds), base = plain.eval(targets, feeds);
            for (int run = 0; run < 3; ++run) {  // eager, recorded, replayed
                CAPTURE(run);
                const CudaStats before = cuda_stats(dev.device());
                const std::vector<Tensor> got = dev.eval(targets, feeds);
                const CudaStats after = cuda_stats(dev.device());
                REQUIRE(got.size() == want.size());
                for (std::size_t i = 0; i < want.size(); ++i) {
                    CAPTURE(i);
                    CHECK(compare(got[i], base[i], 0.0, 0.0) == "");  // bit for bit
                    // The gradients (from 3 on) are sums over up to 2^20 terms
                    // that cancel, added in another order than the CPU's.
                    CHECK(compare(got[i], want[i], i < 3 ? 1e-5 : 1e-3, 1e-12) == "");
                }
                if (run == 0) MESSAGE("kernel steps launched: " << after.kernel_steps - before.kernel_steps);
            }
            const auto chains = dev.fused_steps(targets, fed);
            CHECK(chains.size() >= 3);
            CHECK(plain.fused_steps(targets, fed).empty());
            const CudaStats fs = cuda_stats(dev.device()), ps = cuda_stats(plain.device());
            MESSAGE(chains.size() << " fused chains; graph failures " << fs.graph_failures << ", unfused session "
                                  << ps.kernel_steps << " steps launched in 1 call");
        }
    };
    check_dtype(type_tag<float>{});
    check_dtype(type_tag<double>{});
}

TEST_CASE("cuda: an MLP's forward pass waits once per eval and allocates nothing after warm-up") {
    Program p;
    auto x = p.input<float>("x", {-1, 784});
    auto w1 = p.parameter<float>("w1", {784, 256}, init::xavier_uniform(1));
    auto b1 = p.parameter<float>("b1", {256}, init::constant(0.01));
    auto w2 = p.parameter<float>("w2", {256, 10}, init::xavier_uniform(2));
    auto b2 = p.parameter<float>("b2", {10}, init::constant(0));
    auto prob = softmax(mul(relu(mul(x, w1) + b1), w2) + b2);
    Session<cpu> ref(p);
    Session<cuda> s(p);
    const auto xv = batch(64, 784, 3);
    for (int run = 0; run < 3; ++run) {
        const CudaStats before = cuda_stats(s.device());
        Tensor got = s.eval(TargetRef(prob), {{x, xv}});
        const CudaStats after = cuda_stats(s.device());
        CHECK(compare(got, ref.eval(TargetRef(prob), {{x, xv}}), 1e-5, 1e-12) == "");
        if (run > 0) {
            CHECK(after.synchronizations - before.synchronizations == 1);
            CHECK(after.device_mallocs == before.device_mallocs);
            CHECK(after.copies_to_device - before.copies_to_device == 1);  // x only: weights stay on the device
            CHECK(after.copies_to_host - before.copies_to_host == 1);      // prob
        }
    }
    const std::vector<TargetRef> targets{prob};
    const std::vector<std::string> fed{"x"};
    const MemoryPlan m = s.memory_plan(targets, fed);
    const CudaStats st = cuda_stats(s.device());
    MESSAGE("device arena " << m.device().arena_bytes << " B, reserved " << st.reserved_bytes << " B, "
                            << st.device_mallocs << " cudaMalloc calls");
}

TEST_CASE("cuda: device steps are recorded as a CUDA graph and replayed, as eager runs compute") {
    Program pa, pb;
    auto [xa, la, lossa, stepa] = adam_classifier(pa);
    auto [xb, lb, lossb, stepb] = adam_classifier(pb);
    Session<cuda> replayed(pa);
    const bool graphs = cuda::options.graphs;
    cuda::options.graphs = false;
    Session<cuda> eager(pb);
    cuda::options.graphs = graphs;
    auto labels_for = [](std::size_t rows) {
        xt::xarray<std::int64_t> l = xt::xarray<std::int64_t>::from_shape({rows, 1});
        for (std::size_t i = 0; i < rows; ++i) l(i, 0) = static_cast<std::int64_t>(i * 3 % 5);
        return l;
    };
    for (std::size_t rows : {32, 32, 32, 32, 9, 9, 9, 32}) {  // a new batch size records again
        CAPTURE(rows);
        const auto x = batch(rows, 20, rows);
        const auto labels = labels_for(rows);
        const CudaStats before = cuda_stats(replayed.device());
        auto a = replayed.eval(stepa.with({lossa}), {{xa, x}, {la, labels}});
        auto b = eager.eval(stepb.with({lossb}), {{xb, x}, {lb, labels}});
        const CudaStats after = cuda_stats(replayed.device());
        CHECK(compare(a.back(), b.back(), 1e-6, 1e-12) == "");
        if (before.synchronizations > 0) {  // after the first call's initializers
            CHECK(after.synchronizations - before.synchronizations == 1);
            CHECK((after.device_mallocs == before.device_mallocs || rows == 9));
        }
        MESSAGE("rows " << rows << ": recorded " << after.graphs_recorded - before.graphs_recorded << ", replayed "
                        << after.graph_replays - before.graph_replays << ", steps launched one by one "
                        << after.kernel_steps - before.kernel_steps);
    }
    const CudaStats r = cuda_stats(replayed.device()), e = cuda_stats(eager.device());
    CHECK(r.graph_failures == 0);
    MESSAGE("graph recordings failed: " << r.graph_failures << " (" << std::string(r.graph_failure) << ")");
    // The step is one run of device steps (the feeds' copies come first):
    // recorded on the second call of each batch size and replayed from then
    // on, 3 + 2 times; the last call's new shapes run eagerly.
    CHECK(r.graphs_recorded == 2);
    CHECK(r.graph_replays == 5);
    CHECK(e.graphs_recorded == 0);
    CHECK(e.graph_replays == 0);
    Tensor wr, we;  // the weights, on the host
    wr.copy_from(replayed.scope().find_local("w")->get<Tensor>());
    we.copy_from(eager.scope().find_local("w")->get<Tensor>());
    CHECK(compare(wr, we, 1e-6, 1e-12) == "");
}

TEST_CASE("cuda: training with Adam follows the CPU, and its checkpoint loads into a CPU session") {
    Program pa, pb;
    auto [xa, la, lossa, stepa] = adam_classifier(pa);
    auto [xb, lb, lossb, stepb] = adam_classifier(pb);
    Session<cpu> ref(pa);
    Session<cuda> s(pb);
    const auto x = batch(32, 20, 7);
    xt::xarray<std::int64_t> labels = xt::xarray<std::int64_t>::from_shape({32, 1});
    for (std::size_t i = 0; i < 32; ++i) labels(i, 0) = static_cast<std::int64_t>(i * 7 % 5);
    for (int it = 0; it < 20; ++it) {
        auto a = ref.eval(stepa.with({lossa}), {{xa, x}, {la, labels}});
        auto b = s.eval(stepb.with({lossb}), {{xb, x}, {lb, labels}});
        CHECK(compare(b.back(), a.back(), 1e-4, 1e-12) == "");
    }
    test_temp_dir dir;
    save_checkpoint(s, dir.file("ckpt"));
    Session<cpu> loaded(load_checkpoint_program(dir.file("ckpt")));
    load_checkpoint(loaded, dir.file("ckpt"));
    CHECK(compare(loaded.scope().find_local("w")->get<Tensor>(), ref.scope().find_local("w")->get<Tensor>(), 1e-4,
                  1e-12) == "");
}

TEST_CASE("cuda: a fault on the device is the CPU's error, and the session keeps working") {
    Program p;
    auto x = p.input<std::int32_t>("x", {-1});
    auto d = p.input<std::int32_t>("d", {-1});
    auto q = x / d;
    Session<cuda> s(p);
    xt::xarray<std::int32_t> xv = {7, 8, 9}, good = {1, 2, 3}, bad = {1, 0, 3};
    CHECK_THROWS_CONTAINING(s.eval(q, {{x, xv}, {d, bad}}), value_error, "[dlgraph.value.div0]",
                            "integer division by zero");
    CHECK(s.eval(q, {{x, xv}, {d, good}}) == xt::xarray<std::int32_t>{7, 4, 3});

    Program p2;
    auto logits = p2.input<float>("logits", {-1, 3});
    auto label = p2.input<std::int64_t>("label", {-1, 1});
    auto [prob, xent] = softmax_with_cross_entropy(logits, label);
    Session<cuda> s2(p2);
    xt::xarray<float> lv = {{1, 2, 3}, {0, 0, 0}, {1, 1, 1}};
    xt::xarray<std::int64_t> ok = xt::xarray<std::int64_t>::from_shape({3, 1}), out_of_range = ok;
    ok(0, 0) = 2;
    ok(1, 0) = 0;
    ok(2, 0) = 1;
    out_of_range(0, 0) = 2;  // rows 1 and 2 are bad: the error names row 1, as on the CPU
    out_of_range(1, 0) = 3;
    out_of_range(2, 0) = -1;
    CHECK_THROWS_CONTAINING(s2.eval(TargetRef(xent), {{logits, lv}, {label, out_of_range}}), value_error,
                            "[dlgraph.value.label]", "label 3 (row 1) is out of range [0, 3)");
    CHECK(s2.eval(TargetRef(xent), {{logits, lv}, {label, ok}}).numel() == 3);

    // one_hot: an id out of range is the CPU's error, naming the lowest bad position.
    Program p3;
    auto ids = p3.input<std::int64_t>("ids", {-1});
    auto hot = one_hot<float>(ids, 4);
    Session<cpu> ref3(p3);
    Session<cuda> s3(p3);
    const xt::xarray<std::int64_t> some_bad = {1, 3, 7, -2, 4}, fine = {0, 3, 2};
    std::string want, got;
    try {
        ref3.eval(hot, {{ids, some_bad}});
    } catch (const dlgraph::error& e) {
        want = e.what();
    }
    try {
        s3.eval(hot, {{ids, some_bad}});
    } catch (const dlgraph::error& e) {
        got = e.what();
    }
    CHECK(want.find("[dlgraph.value.") != std::string::npos);
    CHECK(got == want);
    CHECK(s3.eval(hot, {{ids, fine}}) == ref3.eval(hot, {{ids, fine}}));

    // bce_loss: a probability outside [0, 1] after a step that met no fault;
    // the error names the lowest bad position and the bce_loss step.
    Program p4;
    auto pr = p4.input<double>("prob", {-1});
    auto target = p4.input<double>("target", {-1});
    auto loss = bce_loss(relu(pr), target);
    Session<cpu> ref4(p4);
    Session<cuda> s4(p4);
    const xt::xarray<double> probs = {0.5, 1.25, 0.25, 3.0}, targets = {1, 0, 1, 0}, ok_probs = {0.5, 0.75, 0.25, 1.0};
    auto message = [&](auto& session) {
        try {
            session.eval(loss, {{pr, probs}, {target, targets}});
        } catch (const dlgraph::error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string cpu_error = message(ref4);
    CHECK(cpu_error.find("bce_loss (op #1)") != std::string::npos);
    CHECK(message(s4) == cpu_error);
    CHECK(xt::allclose(s4.eval(loss, {{pr, ok_probs}, {target, targets}}),
                       ref4.eval(loss, {{pr, ok_probs}, {target, targets}}), 1e-12, 1e-12));
}

TEST_CASE("cuda: a training step whose labels are bad changes no parameter (the fault is seen after Adam ran)") {
    Program p;
    auto [x, label, loss, step] = adam_classifier(p);
    Session<cuda> s(p);
    const auto xv = batch(4, 20, 5);
    xt::xarray<std::int64_t> good = xt::xarray<std::int64_t>::from_shape({4, 1}), bad = good;
    for (std::size_t i = 0; i < 4; ++i) good(i, 0) = bad(i, 0) = static_cast<std::int64_t>(i);
    bad(2, 0) = 7;
    s.eval(step.with({loss}), {{x, xv}, {label, good}});
    auto values = [&] {
        std::map<std::string, std::string> out;
        for (auto& vd : s.program().blocks[0].vars) {
            if (!vd.persistable) continue;
            const Variable* v = s.scope().find_local(vd.name);
            if (!v || !v->initialized() || !v->is<Tensor>()) continue;
            Tensor h;
            h.copy_from(v->get<Tensor>());
            out[vd.name] = std::string(static_cast<const char*>(h.raw()), h.bytes());
        }
        return out;
    };
    const auto before = values();
    CHECK_THROWS_CONTAINING(s.eval(step.with({loss}), {{x, xv}, {label, bad}}), value_error, "[dlgraph.value.label]",
                            "label 7 (row 2)");
    CHECK(values() == before);
    s.eval(step.with({loss}), {{x, xv}, {label, good}});
    CHECK(values() != before);
}

TEST_CASE("cuda: two sessions on one GPU from two threads give the CPU's results") {
    Program p;
    auto x = p.input<float>("x", {-1, 64});
    auto w = p.parameter<float>("w", {64, 32}, init::xavier_uniform(5));
    auto y = tanh(mul(x, w));
    Session<cpu> ref(p);
    const auto xv = batch(128, 64, 9);
    const Tensor want = ref.eval(TargetRef(y), {{x, xv}});
    std::string errors[2];
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
            try {
                Session<cuda> s(p);
                for (int i = 0; i < 50; ++i) {
                    const std::string d = compare(s.eval(TargetRef(y), {{x, xv}}), want, 1e-5, 1e-12);
                    if (!d.empty()) errors[t] = d;
                }
            } catch (const std::exception& e) {
                errors[t] = e.what();
            }
        });
    for (auto& th : threads) th.join();
    CHECK(errors[0] == "");
    CHECK(errors[1] == "");
}

// Feeds and fetches go through the context's pinned staging from a plan's
// second call (the first call's wait grows it); the results are the same,
// also when a call's copies outgrow it again, and without staging.
TEST_CASE("cuda: feeds and fetches go through pinned staging after the first call") {
    Program p;
    auto x = p.input<float>("x", {-1, 100});
    auto y = relu(x) * 2.0f;
    auto z = reduce_sum(x, {1});
    Session<cpu> ref(p);
    const bool staging = cuda::options.pinned_staging;
    for (const bool on : {true, false}) {
        CAPTURE(on);
        cuda::options.pinned_staging = on;
        Session<cuda> s(p);
        std::vector<std::size_t> staged;  // per call
        // 64 rows: 25,600 bytes a copy; 160 rows: more than the staging holds at
        // first; 1000 rows: 400,000 bytes, more than a staged copy's 64 KiB.
        for (const std::size_t rows : {64, 64, 64, 160, 160, 1000}) {
            CAPTURE(rows);
            const auto xv = batch(rows, 100, rows);
            const CudaStats before = cuda_stats(s.device());
            const std::vector<Tensor> got = s.eval({y, z}, {{x, xv}}), want = ref.eval({y, z}, {{x, xv}});
            for (std::size_t i = 0; i < want.size(); ++i) CHECK(compare(got[i], want[i], 1e-5, 0.0) == "");
            const CudaStats after = cuda_stats(s.device());
            const std::size_t copies = after.copies_to_device + after.copies_to_host - before.copies_to_device -
                                       before.copies_to_host;
            CHECK(copies == 3);  // x in, y and z out
            if (!on) CHECK(after.staged_copies == 0);
            if (!on) CHECK(after.staging_bytes == 0);
            if (on) CHECK(after.staging_bytes > 0);  // after the first call's wait
            staged.push_back(after.staged_copies - before.staged_copies);
        }
        // The first call finds no staging; the fourth finds it too small for
        // x and one of the fetches (its wait grows it); the fifth fits; the
        // sixth stages only z (4,000 bytes).
        if (on) CHECK(staged == std::vector<std::size_t>{0, 3, 3, 1, 3, 1});
    }
    cuda::options.pinned_staging = staging;
}

TEST_CASE("cuda: close gives the plan's device memory back") {
    Program p;
    auto x = p.input<float>("x", {-1, 100});
    auto w = p.parameter<float>("w", {100, 100}, init::xavier_uniform(5));
    auto y = relu(mul(x, w));
    Session<cuda> s(p);
    s.eval(TargetRef(y), {{x, batch(256, 100, 1)}});
    const CudaStats busy = cuda_stats(s.device());
    s.close();
    const CudaStats closed = cuda_stats(s.device());
    CHECK(closed.allocated_bytes < busy.allocated_bytes);
    // Only the cuBLAS workspace and the fault slots (256 of 40 bytes) are left.
    CHECK(closed.allocated_bytes <= cuda::options.cublas_workspace_bytes + (std::size_t(16) << 10));
    cuda_release_cached(s.device());
    CHECK(cuda_stats(s.device()).reserved_bytes <= cuda::options.cublas_workspace_bytes + (std::size_t(2) << 20));
}

// ---- NCCL on the GPU ------------------------------------------------------------------------

namespace {
// A one-rank NCCL communicator on GPU 0, or null (with the reason given)
// where NCCL cannot be loaded: then the NCCL cases are skipped, saying so,
// unless DLGRAPH_REQUIRE_NCCL is set (scripts/gpu_check.sh sets it), which
// makes that a failure.
std::shared_ptr<nccl::Communicator> one_rank_nccl() {
    try {
        return std::make_shared<nccl::Communicator>(0);
    } catch (const comm_error& e) {
        if (std::getenv("DLGRAPH_REQUIRE_NCCL")) FAIL(e.what());
        MESSAGE("SKIPPED, NCCL cannot be used here: " << e.what());
        return nullptr;
    }
}
// rows x 3 values in -3 .. 3 (bool: true for those above 0; FP16: the bits of
// numbers near 1).
template <class T> Tensor numbered(std::int64_t rows, int seed) {
    Tensor t(dtype_of<T>, Shape{rows, 3});
    for (std::int64_t i = 0; i < t.numel(); ++i) {
        const int v = static_cast<int>((i * 37 + seed) % 7) - 3;
        if constexpr (std::is_same_v<T, bool>) {
            t.data<T>()[i] = v > 0;
        } else if constexpr (std::is_same_v<T, float16>) {
            const std::uint16_t bits = static_cast<std::uint16_t>(0x3c00 + v);
            std::memcpy(t.data<T>() + i, &bits, sizeof bits);
        } else {
            t.data<T>()[i] = static_cast<T>(v);
        }
    }
    return t;
}
}  // namespace

TEST_CASE("cuda: collective ops over a one-rank NCCL communicator run on the device, as the host's do") {
    const auto comm = one_rank_nccl();
    if (!comm) return;
    MESSAGE(comm->describe() << ", NCCL version code " << nccl::library_version());
    CHECK(comm->memory() == "cuda");
    auto one = [&](auto tag) {
        using T = typename decltype(tag)::type;
        CAPTURE(to_string(dtype_of<T>));
        Program p;
        auto x = p.input<T>("x", {-1, 3});
        std::vector<Var<T>> outs{c_broadcast(x), c_allgather(x, 1)};
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                      std::is_same_v<T, std::int64_t>)
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod})
                outs.push_back(c_allreduce(x, op));
        std::vector<TargetRef> targets(outs.begin(), outs.end());
        SessionOptions host_ring, device_ring;
        host_ring.comms = {std::make_shared<SelfCommunicator>()};
        device_ring.comms = {comm};
        Session<cpu> ref(p, host_ring);
        Session<cuda> s(p, device_ring);
        for (std::int64_t rows : {0, 1, 341, 1 << 17}) {  // empty, one, 1023 and 393216 elements
            CAPTURE(rows);
            const Tensor in = numbered<T>(rows, static_cast<int>(rows));
            const CudaStats before = cuda_stats(s.device());
            const auto got = s.eval(targets, {{"x", in}});
            const CudaStats after = cuda_stats(s.device());
            const auto want = ref.eval(targets, {{"x", in}});
            for (std::size_t k = 0; k < outs.size(); ++k) CHECK(same_bits(got[k], want[k]));
            // The collectives ran on the device: x went up once, the results came down, one wait.
            CHECK(after.synchronizations - before.synchronizations == 1);
            if (rows) CHECK(after.copies_to_device - before.copies_to_device == 1);
        }
    };
    for (int t = 0; t < num_dtypes; ++t) visit_dtype(static_cast<DataType>(t), one);
}

TEST_CASE("cuda: data-parallel training over one-rank NCCL has the bits of the host all-reduce, and follows the CPU") {
    const auto comm = one_rank_nccl();
    if (!comm) return;
    auto build = [](Program& p) {
        auto x = p.input<float>("x", {-1, 20});
        auto label = p.input<std::int64_t>("label", {-1, 1});
        auto w1 = p.parameter<float>("w1", {20, 32}, init::xavier_uniform(3));
        auto b1 = p.parameter<float>("b1", {32}, init::constant(0.01));
        auto w2 = p.parameter<float>("w2", {32, 5}, init::xavier_uniform(4));
        auto b2 = p.parameter<float>("b2", {5}, init::constant(0));
        auto [prob, xent] = softmax_with_cross_entropy(matmul(relu(matmul(x, w1) + b1), w2) + b2, label);
        auto loss = mean(xent);
        TrainStep step = SGD(0.1).data_parallel(1).minimize(loss);
        return std::tuple{x, label, loss, step};
    };
    Program pn, ph, pc;
    auto [xn, ln, lossn, stepn] = build(pn);
    auto [xh, lh, lossh, steph] = build(ph);
    auto [xc, lc, lossc, stepc] = build(pc);
    SessionOptions on_nccl, on_host;
    on_nccl.comms = {comm};
    on_host.comms = {std::make_shared<SelfCommunicator>()};
    Session<cuda> nccl_session(pn, on_nccl), host_session(ph, on_host);
    Session<cpu> ref(pc, on_host);
    CHECK(broadcast_persistables(nccl_session, *comm) == 5);  // w1, b1, w2, b2, the learning rate
    CHECK(broadcast_persistables(host_session, *on_host.comms[0]) == 5);
    const auto x = batch(32, 20, 9);
    xt::xarray<std::int64_t> labels = xt::xarray<std::int64_t>::from_shape({32, 1});
    for (std::size_t i = 0; i < 32; ++i) labels(i, 0) = static_cast<std::int64_t>(i * 3 % 5);
    for (int it = 0; it < 20; ++it) {
        const CudaStats before = cuda_stats(nccl_session.device());
        auto a = nccl_session.eval(stepn.with({lossn}), {{xn, x}, {ln, labels}});
        const CudaStats after = cuda_stats(nccl_session.device());
        auto b = host_session.eval(steph.with({lossh}), {{xh, x}, {lh, labels}});
        auto c = ref.eval(stepc.with({lossc}), {{xc, x}, {lc, labels}});
        CHECK(same_bits(a.back(), b.back()));
        CHECK(compare(a.back(), c.back(), 1e-4, 1e-12) == "");
        if (it > 0) {
            CHECK(after.synchronizations - before.synchronizations == 1);
            CHECK(after.copies_to_host - before.copies_to_host == 1);  // the loss: the gradients stay on the GPU
        }
    }
    for (const char* w : {"w1", "b1", "w2", "b2"}) {
        CAPTURE(w);
        CHECK(same_bits(nccl_session.eval(w), host_session.eval(w)));
    }
    // The runs of device steps between the all-reduces are replayed as CUDA
    // graphs; the all-reduces themselves never enter a recording.
    const CudaStats st = cuda_stats(nccl_session.device());
    CHECK(st.graph_replays > 0);
    CHECK(st.graph_failures == 0);
    MESSAGE("NCCL session: " << st.graphs_recorded << " graphs recorded, " << st.graph_replays << " replays");
}

TEST_CASE("cuda: an NCCL communicator given host memory is a clear error, and the session keeps working") {
    const auto comm = one_rank_nccl();
    if (!comm) return;
    std::vector<float> host(8, 1.0f);
    CHECK_THROWS_CONTAINING(comm->all_reduce(host.data(), 8, DataType::FP32, ReduceOp::sum, "test"), comm_error,
                            "[dlgraph.comm.memory]", "not in GPU memory");
    CHECK_FALSE(comm->broken());
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = c_allreduce_sum(x);
    auto z = relu(x);
    SessionOptions o;
    o.comms = {comm};
    Session<cpu> s(p, o);  // a CPU session runs the collective on the host, where NCCL has no memory
    xt::xarray<float> xv = {1, -2, 3};
    CHECK_THROWS_CONTAINING(s.eval(TargetRef(y), {{x, xv}}), comm_error, "[dlgraph.comm.memory]");
    CHECK(s.eval(TargetRef(z), {{x, xv}}).data<float>()[2] == 3.0f);
    CHECK_THROWS_CONTAINING(broadcast_persistables(s, *comm), comm_error, "[dlgraph.comm.memory]",
                            "moves cuda memory, but the session runs on cpu");
}

// `--host`: the cases that need no GPU. Otherwise the GPU cases, or exit
// code 77 (ctest: skipped) where no GPU is visible.
int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const bool host = argc > 1 && std::strcmp(argv[argc - 1], "--host") == 0;
    if (host) {
        context.addFilter("test-case", "cuda host:*");
        return context.run();
    }
    std::string why;
    if (!cuda_available(&why)) {
        std::printf("dlgraph_cuda_tests: SKIPPED, no usable GPU here (%s)\n", why.c_str());
        return 77;  // ctest's SKIP_RETURN_CODE
    }
    context.addFilter("test-case-exclude", "cuda host:*");
    return context.run();
}
