// The collective ops and data-parallel training across the processes of an
// mpirun job (ctest runs this binary with 2, 3 and 4 processes). Every rank
// runs every case in the same order; each rank's inputs depend on its rank,
// and the references are computed from every rank's inputs on each rank.
//
//   test_mpi                 the doctest cases
//   test_mpi --fail MODE     a rank that fails (tests/mpi/fail_rank.sh):
//                            rank 1 gets a bad feed and then exits (exit),
//                            stops the job (abort) or hangs (hang)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <dlgraph/dlgraph.hpp>
#include <dlgraph/mpi.hpp>
#include <dlgraph/optimizer.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

using namespace dlgraph;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<mpi::Communicator> world;

int rank() { return world->rank(); }
int nranks() { return world->size(); }

SessionOptions with(std::shared_ptr<Communicator> c) {
    SessionOptions o;
    o.comms = {std::move(c)};
    return o;
}

// Rank r's element i, exact in every dtype (so any order of reduction
// gives the same bits); `prod` keeps products small.
template <class T> T value(int r, std::int64_t i, bool prod = false) {
    if constexpr (std::is_same_v<T, bool>) return (i + r) % 2 == 1;
    else if constexpr (std::is_same_v<T, float16>) return float16{static_cast<std::uint16_t>((i * 31 + r * 7) & 0x3bff)};
    else if (prod) return static_cast<T>((i + r) % 3 == 0 ? 2 : (i + r) % 3 == 1 ? -1 : 1);
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(static_cast<double>(i % 17 - 8) * 0.25 + r);
    else return static_cast<T>((i * 7 + r * 13) % 11 - 5);
}
template <class T> Tensor values(int r, std::int64_t n, bool prod = false) {
    Tensor t(dtype_of<T>, Shape{n});
    for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = value<T>(r, i, prod);
    return t;
}
bool same_bytes(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() &&
           (a.numel() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

template <class F> void for_math_types(F&& f) {
    f(type_tag<float>{});
    f(type_tag<double>{});
    f(type_tag<std::int32_t>{});
    f(type_tag<std::int64_t>{});
}
template <class F> void for_all_types(F&& f) {
    for_math_types(f);
    f(type_tag<bool>{});
    f(type_tag<std::int16_t>{});
    f(type_tag<float16>{});
}

const std::int64_t sizes[] = {0, 1, 7, 1000};

template <class T> void check_allreduce(const std::shared_ptr<Communicator>& comm, ReduceOp op) {
    for (std::int64_t n : sizes) {
        CAPTURE(n);
        Program p;
        auto x = p.input<T>("x", {-1});
        auto y = c_allreduce(x, op);
        Session<cpu> s(p, with(comm));
        const bool prod = op == ReduceOp::prod;
        Tensor got = s.eval(TargetRef(y.name()), {{"x", values<T>(rank(), n, prod)}});
        Tensor want = values<T>(0, n, prod);
        for (int r = 1; r < nranks(); ++r)
            for (std::int64_t i = 0; i < n; ++i) {
                T& w = want.data<T>()[i];
                const T v = value<T>(r, i, prod);
                w = op == ReduceOp::sum ? static_cast<T>(w + v) : op == ReduceOp::max ? std::max(w, v)
                    : op == ReduceOp::min ? std::min(w, v) : static_cast<T>(w * v);
            }
        CHECK(same_bytes(got, want));
    }
}

template <class T> void check_broadcast(const std::shared_ptr<Communicator>& comm) {
    for (std::int64_t n : sizes)
        for (int root = 0; root < nranks(); ++root) {
            CAPTURE(n);
            CAPTURE(root);
            Program p;
            auto y = c_broadcast(p.input<T>("x", {-1}), root);
            Session<cpu> s(p, with(comm));
            CHECK(same_bytes(s.eval(TargetRef(y.name()), {{"x", values<T>(rank(), n)}}), values<T>(root, n)));
        }
}

template <class T> void check_allgather(const std::shared_ptr<Communicator>& comm) {
    for (std::int64_t rows : {0, 1, 5}) {
        CAPTURE(rows);
        Program p;
        auto y = c_allgather(p.input<T>("x", {-1, 3}), nranks());
        Session<cpu> s(p, with(comm));
        Tensor mine = values<T>(rank(), rows * 3);
        mine.reshape(Shape{rows, 3});
        Tensor got = s.eval(TargetRef(y.name()), {{"x", mine}});
        Tensor want(dtype_of<T>, Shape{rows * nranks(), 3});
        for (int r = 0; r < nranks(); ++r) {
            Tensor part = values<T>(r, rows * 3);
            if (rows) std::memcpy(want.data<T>() + r * rows * 3, part.raw(), part.bytes());
        }
        CHECK(same_bytes(got, want));
    }
}

}  // namespace

TEST_CASE("c_allreduce_sum, _max, _min and _prod give every rank the reduction of every rank's X") {
    for_math_types([&]<class T>(type_tag<T>) {
        CAPTURE(to_string(dtype_of<T>));
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
            CAPTURE(reduce_op_name(op));
            check_allreduce<T>(world, op);
        }
    });
}

TEST_CASE("c_broadcast gives every rank the root's X, from every root, in every dtype") {
    for_all_types([&]<class T>(type_tag<T>) {
        CAPTURE(to_string(dtype_of<T>));
        check_broadcast<T>(world);
    });
}

TEST_CASE("c_allgather stacks every rank's X along dim 0 in rank order, in every dtype") {
    for_all_types([&]<class T>(type_tag<T>) {
        CAPTURE(to_string(dtype_of<T>));
        check_allgather<T>(world);
    });
}

TEST_CASE("tensors larger than one MPI call go in pieces, with the same results, checked or not") {
    for (bool checked : {true, false}) {
        CAPTURE(checked);
        auto small = mpi::world({.timeout = 30s, .check = checked, .max_chunk = 3});
        check_allreduce<float>(small, ReduceOp::sum);
        check_allreduce<std::int64_t>(small, ReduceOp::max);
        check_broadcast<double>(small);
        check_allgather<std::int32_t>(small);
    }
}

TEST_CASE("c_allreduce_sum in place (Out names X), as Paddle's programs write it") {
    Program p;
    auto w = p.parameter<float>("w", {5}, init::constant(rank() + 1));
    const int op = p.append("c_allreduce_sum", {{"X", {w.name()}}}, {}, {Attribute::make_int("ring_id", 0)}, nullptr,
                            {{"Out", {w.name()}}});
    Session<cpu> s(p, with(world));
    s.eval(TargetRef::op_only(op));
    s.eval(TargetRef::op_only(op));
    const float once = static_cast<float>(nranks() * (nranks() + 1) / 2);
    auto got = s.eval(w);
    for (float v : got) CHECK(v == once * static_cast<float>(nranks()));
}

TEST_CASE("ranks that disagree get the same clear error on every rank, and the communicator goes on") {
    if (nranks() == 1) return;  // one rank always agrees with itself
    auto comm = mpi::world({.timeout = 30s});
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = c_allreduce_sum(x);
    Session<cpu> s(p, with(comm));
    // Rank 0 sends 4 elements, the others 5.
    const std::int64_t n = rank() == 0 ? 4 : 5;
    CHECK_THROWS_WITH_AS(s.eval(y, {{"x", values<float>(rank(), n)}}),
                         doctest::Contains("[dlgraph.comm.mismatch] c_allreduce_sum on MPI rank"), comm_error);
    try {
        s.eval(y, {{"x", values<float>(rank(), n)}});
    } catch (const comm_error& e) {
        const std::string m = e.what();
        CHECK(m.find("rank 0: call #1 all-reduce (sum) of 4 FP32") != std::string::npos);
        if (nranks() > 1) CHECK(m.find("rank 1: call #1 all-reduce (sum) of 5 FP32") != std::string::npos);
    }
    // Every rank saw it; the next matching call works.
    Tensor got = s.eval(TargetRef(y.name()), {{"x", values<float>(rank(), 4)}});
    CHECK(got.numel() == 4);
    CHECK(comm->calls() == 3);

    // c_allgather's nranks must be the group's size: every rank says so.
    Program q;
    auto g = c_allgather(q.input<float>("x", {-1, 1}), nranks() + 1);
    Session<cpu> t(q, with(comm));
    Tensor one = values<float>(rank(), 2);
    one.reshape(Shape{2, 1});
    CHECK_THROWS_WITH_AS(t.eval(g, {{"x", one}}), doctest::Contains("[dlgraph.comm.size] c_allgather: nranks is"), comm_error);
    // A root that is no rank.
    Program b;
    auto bc = c_broadcast(b.input<float>("x", {-1}), nranks());
    Session<cpu> u(b, with(comm));
    CHECK_THROWS_WITH_AS(u.eval(bc, {{"x", values<float>(rank(), 2)}}),
                         doctest::Contains("[dlgraph.comm.root] c_broadcast: root"), comm_error);
}

namespace {
// A small classifier; `nranks` > 0 makes its SGD data parallel.
struct classifier {
    Program p;
    Var<float> x, loss;
    Var<std::int64_t> label;
    TrainStep step;
    classifier(int nranks, std::int64_t seed) {
        x = p.input<float>("x", {-1, 20});
        label = p.input<std::int64_t>("label", {-1, 1});
        auto w1 = p.parameter<float>("w1", {20, 32}, init::uniform(-0.3, 0.3, seed));
        auto b1 = p.parameter<float>("b1", {32}, init::uniform(-0.1, 0.1, seed + 1));
        auto w2 = p.parameter<float>("w2", {32, 10}, init::uniform(-0.3, 0.3, seed + 2));
        auto b2 = p.parameter<float>("b2", {10}, init::constant(0));
        auto logits = matmul(relu(matmul(x, w1) + b1), w2) + b2;
        loss = mean(softmax_with_cross_entropy(logits, label).second);
        SGD opt(0.2);
        if (nranks > 0) opt.data_parallel(nranks);
        step = opt.minimize(loss);
    }
};
// Global batch k of `rows` rows (the same on every rank).
std::pair<Tensor, Tensor> batch(int k, std::int64_t rows) {
    std::mt19937 gen(static_cast<unsigned>(1000 + k));
    std::normal_distribution<float> nd;
    Tensor x(DataType::FP32, Shape{rows, 20}), y(DataType::INT64, Shape{rows, 1});
    for (std::int64_t i = 0; i < rows * 20; ++i) x.data<float>()[i] = nd(gen);
    for (std::int64_t i = 0; i < rows; ++i) y.data<std::int64_t>()[i] = static_cast<std::int64_t>(gen() % 10);
    return {x, y};
}
Tensor rows_of(const Tensor& t, std::int64_t begin, std::int64_t n) {
    Shape s = t.shape();
    const std::int64_t width = t.numel() / s[0];
    s[0] = n;
    Tensor out(t.dtype(), s);
    std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * width * dtype_size(t.dtype()), out.bytes());
    return out;
}
}  // namespace

TEST_CASE("data parallel: 50 SGD steps keep every rank's parameters identical and match one process on the whole batch") {
    const std::int64_t per_rank = 32, global = per_rank * nranks();
    classifier dp(nranks(), 7 + rank());  // each rank draws other initial values ...
    Session<cpu> s(dp.p, with(world));
    CHECK(broadcast_persistables(s, *world) >= 4);  // ... and takes rank 0's
    classifier one(0, 7);                           // one process, rank 0's initial values, the whole batch
    Session<cpu> ref(one.p);
    for (int k = 0; k < 50; ++k) {
        auto [x, y] = batch(k, global);
        s.eval(dp.step.targets(), {{"x", rows_of(x, rank() * per_rank, per_rank)}, {"label", rows_of(y, rank() * per_rank, per_rank)}});
        ref.eval(one.step.targets(), {{"x", x}, {"label", y}});
    }
    for (const char* name : {"w1", "b1", "w2", "b2"}) {
        CAPTURE(name);
        Tensor mine = s.eval(name);
        // Bit-identical on every rank: gather them all.
        Tensor all(DataType::FP32, Shape{mine.numel() * nranks()});
        world->all_gather(mine.raw(), mine.numel(), DataType::FP32, all.raw(), "test");
        for (int r = 1; r < nranks(); ++r)
            CHECK(std::memcmp(all.data<float>() + r * mine.numel(), all.data<float>(), mine.bytes()) == 0);
        // The same training as one process on the whole batch, to rounding.
        Tensor want = ref.eval(name);
        double diff = 0, scale = 0;
        for (std::int64_t i = 0; i < mine.numel(); ++i) {
            diff = std::max(diff, std::abs(static_cast<double>(mine.data<float>()[i]) - want.data<float>()[i]));
            scale = std::max(scale, std::abs(static_cast<double>(want.data<float>()[i])));
        }
        CHECK(diff <= 1e-5 * scale);
    }
}

namespace {
// Rank 1 is fed a bad shape, so it never reaches the all-reduce its peers
// wait in; then it exits, stops the job, or hangs.
int fail_rank(const std::string& mode) {
    auto comm = mpi::world({.timeout = 3s});
    Program p;
    auto y = c_allreduce_sum(p.input<float>("x", {4}));
    Session<cpu> s(p, with(comm));
    try {
        s.eval(y, {{"x", values<float>(comm->rank(), comm->rank() == 1 ? 5 : 4)}});
        std::printf("rank %d: done\n", comm->rank());
        return 0;
    } catch (const error& e) {
        std::fprintf(stderr, "rank %d: %s\n", comm->rank(), e.what());
        std::fflush(stderr);
        if (comm->rank() == 1) {
            if (mode == "abort") comm->abort(3);
            if (mode == "hang") std::this_thread::sleep_for(120s);
        }
        return 1;
    }
}
}  // namespace

int main(int argc, char** argv) {
    mpi::Environment env(argc, argv);
    if (argc == 3 && std::string(argv[1]) == "--fail") return fail_rank(argv[2]);
    world = mpi::world({.timeout = 60s});
    doctest::Context ctx(argc, argv);
    const int rc = ctx.run();
    int failed = rc != 0;  // the job fails when any rank failed
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    world.reset();
    return failed;
}
