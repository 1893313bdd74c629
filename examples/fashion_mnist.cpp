// Trains an MLP (784-256-10, ReLU, softmax cross-entropy, Adam with a
// learning rate decayed each epoch) on
// Fashion-MNIST with dlgraph, reports test accuracy after each epoch, saves
// a checkpoint, and writes the loss and accuracy curves as SVG. With
// --model cnn, a convolutional network instead: two blocks of 3x3
// convolution, batch norm, ReLU and 2x2 max pooling, then a hidden fully
// connected layer with dropout, and the output layer.
//   fashion_mnist [--model mlp|cnn] [--data DIR] [--epochs N] [--batch N] [--lr X] [--decay X] [--hidden N]
//                 [--channels C1,C2] [--limit N] [--threads N] [--out DIR]
//   fashion_mnist --eval-only CHECKPOINT_DIR     (a new process, same accuracy)
//   fashion_mnist --device cuda ...              (on the GPU, in a build with dlgraph::cuda)
//   mpirun -np 2 fashion_mnist --data-parallel   (data parallel over the processes, in a build with
//                                                 dlgraph::mpi: each process trains on its share of every
//                                                 batch, the gradients are averaged over the processes,
//                                                 so training is one process's to rounding; rank 0
//                                                 reports and saves the checkpoint)
#include <dlgraph/checkpoint.hpp>
#include <dlgraph/data/idx.hpp>
#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>
#ifdef DLGRAPH_HAS_CUDA
#include <dlgraph/cuda/cuda.hpp>
#endif
#ifdef DLGRAPH_HAS_MPI
#include <dlgraph/mpi.hpp>
#endif
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "fashion_mnist_models.hpp"
#include "svg_plot.hpp"

using namespace dlgraph;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
    std::string model = "mlp";  // or cnn
    std::string data = "/usr/share/datasets/fashion-mnist";
    std::string out = "out";
    std::string eval_only;
    int epochs = 0;  // 0: the model's default (mlp 12, cnn 8)
    int batch = 64;
    int hidden = 0;  // 0: the model's default (mlp 256, cnn 128)
    std::int64_t channels[2] = {32, 64};  // cnn: the two convolutions' output channels
    double lr = 1e-3;
    double decay = 0.75;  // learning rate multiplier per epoch
    std::int64_t limit = 0;  // use only the first N training examples (0: all)
    int threads = 0;         // per kernel (0: every core); results do not depend on it
    std::string device = "cpu";  // cpu, or cuda (a build with the CUDA backend)
    bool data_parallel = false;  // over the processes of an mpirun job (a build with MPI)
};

// The processes of the job, with --data-parallel; else null.
std::shared_ptr<Communicator> comm;

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
            return argv[++i];
        };
        if (a == "--model") o.model = next();
        else if (a == "--data") o.data = next();
        else if (a == "--out") o.out = next();
        else if (a == "--eval-only") o.eval_only = next();
        else if (a == "--epochs") o.epochs = std::stoi(next());
        else if (a == "--batch") o.batch = std::stoi(next());
        else if (a == "--hidden") o.hidden = std::stoi(next());
        else if (a == "--lr") o.lr = std::stod(next());
        else if (a == "--decay") o.decay = std::stod(next());
        else if (a == "--limit") o.limit = std::stoll(next());
        else if (a == "--channels") {
            const std::string v = next();
            const auto comma = v.find(',');
            if (comma == std::string::npos) throw std::runtime_error("--channels needs C1,C2, not " + v);
            o.channels[0] = std::stoll(v.substr(0, comma));
            o.channels[1] = std::stoll(v.substr(comma + 1));
        }
        else if (a == "--device") o.device = next();
        else if (a == "--threads") o.threads = std::stoi(next());
        else if (a == "--data-parallel") o.data_parallel = true;
        else throw std::runtime_error("unknown option " + a + " (see the comment at the top of fashion_mnist.cpp)");
    }
    if (o.model != "mlp" && o.model != "cnn") throw std::runtime_error("unknown model '" + o.model + "' (mlp or cnn)");
    const bool cnn = o.model == "cnn";
    if (o.epochs == 0) o.epochs = cnn ? 8 : 12;
    if (o.hidden == 0) o.hidden = cnn ? 128 : 256;
    return o;
}

// The model; its key variables get names so that the saved program can be
// evaluated by name in another process.
struct model {
    Program p;
    TrainStep step;
};

// nranks > 0: data parallel over that many processes.
model build(const options& o, int nranks) {
    model m;
    Program& p = m.p;
    auto x = p.input<float>("x", {-1, 784});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    const fashion_mnist::logits l = o.model == "cnn" ? fashion_mnist::cnn(p, x, o.channels[0], o.channels[1], o.hidden)
                                                     : fashion_mnist::mlp(p, x, o.hidden);
    // The loss trains; "prob" and "accuracy" evaluate.
    auto loss = p.rename(mean(softmax_with_cross_entropy(l.train, label).second), "loss");
    auto prob = p.rename(softmax(p.rename(l.test, "logits")), "prob");  // what a fixed model returns (examples/embedded)
    auto [top1, top1_index] = top_k(prob, 1);
    p.rename(accuracy(top1, top1_index, label), "accuracy");
    Adam opt(o.lr);
    if (nranks > 0) opt.data_parallel(nranks);
    m.step = opt.minimize(loss);
    return m;
}

// Test accuracy through the program's "accuracy" variable, fed by name.
template <class Device> std::pair<double, std::int64_t> evaluate(Session<Device>& s, const data::dataset& test) {
    data::batcher batches(test, 1000);
    Tensor x, y;
    std::vector<Tensor> out(1);
    const std::vector<TargetRef> targets{TargetRef("accuracy")};
    double correct = 0;
    for (std::int64_t b = 0; b < batches.batches(); ++b) {
        batches.fill(b, x, y);
        const std::vector<Feed> feeds{{"x", x}, {"label", y}};
        s.eval_into(targets, feeds, out);
        correct += static_cast<double>(out[0].item<float>()) * static_cast<double>(x.shape()[0]);
    }
    const auto n = static_cast<std::int64_t>(std::llround(correct));
    return {static_cast<double>(n) / static_cast<double>(test.count), n};
}

void progress(int epoch, int epochs, std::int64_t done, std::int64_t total, double loss, double examples_per_s,
              double seconds_left, bool tty) {
    const int width = 30;
    const int filled = static_cast<int>(width * done / total);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    std::printf("%sepoch %2d/%d [%s] %5lld/%lld  loss %.4f  %6.0f ex/s  %3.0fs left%s", tty ? "\r" : "", epoch, epochs,
                bar.c_str(), static_cast<long long>(done), static_cast<long long>(total), loss, examples_per_s,
                seconds_left, tty ? "" : "\n");
    std::fflush(stdout);
}

// Share `rank` of `size` equal shares of t's rows (the last batch of an
// epoch may be short: its shares differ by at most a row).
void rows_of(const Tensor& t, int rank, int size, Tensor& out) {
    const std::int64_t rows = t.shape()[0], begin = rows * rank / size, end = rows * (rank + 1) / size;
    Shape s = t.shape();
    s[0] = end - begin;
    out.resize(t.dtype(), s);
    const std::size_t row_bytes = t.bytes() / static_cast<std::size_t>(rows > 0 ? rows : 1);
    if (out.bytes() > 0)
        std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + static_cast<std::size_t>(begin) * row_bytes, out.bytes());
}

template <class Device> int train(const options& o) {
    const auto t0 = clock_type::now();
    data::dataset train_set = data::load_images_and_labels(o.data + "/train-images-idx3-ubyte.gz", o.data + "/train-labels-idx1-ubyte.gz");
    data::dataset test_set = data::load_images_and_labels(o.data + "/t10k-images-idx3-ubyte.gz", o.data + "/t10k-labels-idx1-ubyte.gz");
    if (o.limit > 0 && o.limit < train_set.count) train_set.count = o.limit;
    // Data parallel: every rank shuffles alike and takes its share of each
    // batch (rows [rank * share, (rank + 1) * share)); the gradients'
    // average over the ranks is then the whole batch's.
    const int rank = comm ? comm->rank() : 0, size = comm ? comm->size() : 1;
    if (o.batch % size != 0)
        throw std::runtime_error("--batch " + std::to_string(o.batch) + " does not split evenly over " +
                                 std::to_string(size) + " processes");
    const std::int64_t share = o.batch / size;
    const bool lead = rank == 0;  // reports, evaluates and saves
    if (!lead && !std::freopen("/dev/null", "w", stdout)) throw std::runtime_error("cannot silence rank " + std::to_string(rank));
    if (comm) std::printf("data parallel over %d processes (%s), %lld examples of each batch per process\n", size,
                          comm->describe().c_str(), static_cast<long long>(share));
    std::printf("Fashion-MNIST: %lld training and %lld test images (%.1fs to load)\n",
                static_cast<long long>(train_set.count), static_cast<long long>(test_set.count),
                std::chrono::duration<double>(clock_type::now() - t0).count());

    model m = build(o, comm ? size : 0);
    SessionOptions so{.threads = o.threads};
    if (comm) so.comms = {comm};
    Session<Device> s(m.p, so);
    if (comm) broadcast_persistables(s, *comm);  // every rank starts from rank 0's parameters
    data::batcher batches(train_set, o.batch, /*seed=*/42);
    const std::vector<TargetRef> targets = m.step.with({TargetRef("loss")});
    std::vector<Tensor> out(targets.size());
    Tensor batch_x, batch_y, x, y;
    const bool tty = isatty(STDOUT_FILENO);
    std::vector<std::pair<double, double>> loss_curve, acc_curve;
    const auto train_start = clock_type::now();
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        // The learning rate is a variable of the program: decay it each epoch.
        set_scalar(s, m.step.learning_rate, o.lr * std::pow(o.decay, epoch - 1));
        batches.shuffle();
        double loss_sum = 0, window = 0;
        int window_n = 0;
        const std::int64_t nb = batches.batches();
        const auto epoch_start = clock_type::now();
        for (std::int64_t b = 0; b < nb; ++b) {
            batches.fill(b, batch_x, batch_y);
            if (size == 1) {
                std::swap(x, batch_x);
                std::swap(y, batch_y);
            } else {
                rows_of(batch_x, rank, size, x);
                rows_of(batch_y, rank, size, y);
            }
            const std::vector<Feed> feeds{{"x", x}, {"label", y}};
            s.eval_into(targets, feeds, out);
            const double l = out.back().item<float>();
            loss_sum += l;
            window += l;
            ++window_n;
            if ((b + 1) % 50 == 0 || b + 1 == nb) {
                loss_curve.emplace_back(epoch - 1 + static_cast<double>(b + 1) / static_cast<double>(nb), window / window_n);
                window = 0;
                window_n = 0;
            }
            if (lead && (tty ? ((b + 1) % 10 == 0 || b + 1 == nb) : ((b + 1) % (nb / 4 + 1) == 0))) {
                const double secs = std::chrono::duration<double>(clock_type::now() - epoch_start).count();
                const double rate = static_cast<double>((b + 1) * o.batch) / secs;
                // The batches left at this epoch's rate (evaluations not counted).
                const double left = secs / static_cast<double>(b + 1) *
                                    static_cast<double>(nb - b - 1 + nb * (o.epochs - epoch));
                progress(epoch, o.epochs, b + 1, nb, loss_sum / static_cast<double>(b + 1), rate, left, tty);
            }
        }
        if (!lead) continue;
        auto [acc, correct] = evaluate(s, test_set);
        acc_curve.emplace_back(epoch, acc);
        std::printf("%sepoch %2d/%d: train loss %.4f, test accuracy %.4f (%lld/%lld)\n", tty ? "\n" : "", epoch, o.epochs,
                    loss_sum / static_cast<double>(nb), acc, static_cast<long long>(correct),
                    static_cast<long long>(test_set.count));
    }
    const double train_secs = std::chrono::duration<double>(clock_type::now() - train_start).count();
    if (!lead) return 0;
    std::filesystem::create_directories(o.out);
    const std::string stem = o.out + (o.model == "cnn" ? "/fashion_mnist_cnn" : "/fashion_mnist");
    const std::string ckpt = stem + "_model";
    save_checkpoint(s, ckpt);
    svg_plot::write(stem + "_curves.svg", {{"training loss (mean of 50 batches)", "epoch", loss_curve, "#d62728"},
                                           {"test accuracy", "epoch", acc_curve, "#1f77b4"}});
    auto [acc, correct] = evaluate(s, test_set);
    std::printf("trained in %.1fs; final test accuracy %.4f (%lld/%lld)\n", train_secs, acc,
                static_cast<long long>(correct), static_cast<long long>(test_set.count));
    std::printf("saved the checkpoint to %s and the curves to %s_curves.svg\n", ckpt.c_str(), stem.c_str());
    return 0;
}

template <class Device> int eval_only(const options& o) {
    data::dataset test_set = data::load_images_and_labels(o.data + "/t10k-images-idx3-ubyte.gz", o.data + "/t10k-labels-idx1-ubyte.gz");
    Session<Device> s(load_checkpoint_program(o.eval_only), SessionOptions{.threads = o.threads});
    load_checkpoint(s, o.eval_only);
    auto [acc, correct] = evaluate(s, test_set);
    std::printf("loaded %s; final test accuracy %.4f (%lld/%lld)\n", o.eval_only.c_str(), acc,
                static_cast<long long>(correct), static_cast<long long>(test_set.count));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef DLGRAPH_HAS_MPI
    std::unique_ptr<mpi::Environment> env;
#endif
    int rc = 1;
    try {
        options o = parse(argc, argv);
        if (o.data_parallel) {
#ifdef DLGRAPH_HAS_MPI
            env = std::make_unique<mpi::Environment>(argc, argv);
            comm = mpi::world();
#else
            throw std::runtime_error("--data-parallel: this build has no MPI (scripts/setup.sh --with-mpi, then build again)");
#endif
        }
        if (o.device == "cpu") rc = o.eval_only.empty() ? train<cpu>(o) : eval_only<cpu>(o);
#ifdef DLGRAPH_HAS_CUDA
        else if (o.device == "cuda") rc = o.eval_only.empty() ? train<cuda>(o) : eval_only<cuda>(o);
#else
        else if (o.device == "cuda") throw std::runtime_error("this build has no CUDA backend (CMake found no nvcc)");
#endif
        else throw std::runtime_error("unknown device '" + o.device + "' (cpu or cuda)");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fashion_mnist: error: %s\n", e.what());
        // A rank that fails stops the job rather than leave its peers waiting.
        if (comm && comm->size() > 1) comm->abort(1);
        rc = 1;
    }
    comm.reset();  // before MPI goes (env)
    return rc;
}
