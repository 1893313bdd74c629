// Trains a character-level transformer on the license texts every Debian
// system ships (/usr/share/common-licenses, package base-files: the GPL,
// LGPL, GFDL, Apache, MPL, Artistic, BSD and CC0 texts, about 250 KB):
// token and position embeddings, blocks of causal (masked) multi-head
// self-attention and a GELU feed-forward layer, each after a layer norm and
// added back to its input, then a final layer norm and the output layer.
// AdamW (no decay for biases, norms and embeddings) with a linear warm-up,
// a cosine decay and gradient clipping by global norm. After each epoch it
// reports the validation loss next to the unigram baseline's (the loss of
// predicting every character by its frequency in the training text); at
// the end it saves a checkpoint and samples a few lines.
//   char_transformer [--text DIR|FILE] [--steps N] [--epochs N] [--batch N] [--context N] [--width N]
//                    [--heads N] [--blocks N] [--lr X] [--threads N] [--seed N] [--out DIR] [--sample N]
#include <dlgraph/checkpoint.hpp>
#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>

using namespace dlgraph;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

struct options {
    std::string text = "/usr/share/common-licenses";
    std::string out = "out";
    int steps = 1500;    // training steps in all
    int epochs = 6;      // validation reports (the steps split evenly)
    int batch = 32;      // windows per step
    int context = 64;    // characters a position sees (itself and those before it)
    int width = 64;      // model width
    int heads = 4;
    int blocks = 2;
    double lr = 3e-3;    // peak learning rate, after the warm-up
    int threads = 0;
    unsigned seed = 1;
    int sample = 240;    // characters to sample at the end
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
            return argv[++i];
        };
        if (a == "--text") o.text = next();
        else if (a == "--out") o.out = next();
        else if (a == "--steps") o.steps = std::stoi(next());
        else if (a == "--epochs") o.epochs = std::stoi(next());
        else if (a == "--batch") o.batch = std::stoi(next());
        else if (a == "--context") o.context = std::stoi(next());
        else if (a == "--width") o.width = std::stoi(next());
        else if (a == "--heads") o.heads = std::stoi(next());
        else if (a == "--blocks") o.blocks = std::stoi(next());
        else if (a == "--lr") o.lr = std::stod(next());
        else if (a == "--threads") o.threads = std::stoi(next());
        else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--sample") o.sample = std::stoi(next());
        else throw std::runtime_error("unknown option " + a);
    }
    if (o.steps < 1 || o.epochs < 1 || o.batch < 1 || o.context < 2 || o.width < 1 || o.heads < 1 || o.blocks < 1 ||
        o.width % o.heads != 0)
        throw std::runtime_error("steps, epochs, batch, width, heads and blocks must be positive, context at least 2, "
                                 "and width a multiple of heads");
    return o;
}

// The text as ids of its distinct characters; the last tenth is for validation.
struct corpus {
    std::vector<char> chars;      // id -> character
    std::array<int, 256> id{};    // character -> id
    std::vector<std::int64_t> train, valid;
    std::size_t files = 0;
};

corpus load(const std::string& path) {
    std::vector<fs::path> files;
    if (fs::is_directory(path)) {
        // Regular files only: GPL, LGPL and GFDL are also there as links.
        for (const auto& e : fs::directory_iterator(path))
            if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
        std::sort(files.begin(), files.end());
    } else {
        files.push_back(path);
    }
    std::string text;
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) throw std::runtime_error("cannot read " + f.string());
        std::ostringstream ss;
        ss << in.rdbuf();
        text += ss.str();
        text += '\n';
    }
    corpus c;
    c.files = files.size();
    c.id.fill(-1);
    for (unsigned char ch : text)
        if (c.id[ch] < 0) {
            c.id[ch] = 0;
            c.chars.push_back(static_cast<char>(ch));
        }
    std::sort(c.chars.begin(), c.chars.end());
    for (std::size_t i = 0; i < c.chars.size(); ++i) c.id[static_cast<unsigned char>(c.chars[i])] = static_cast<int>(i);
    const std::size_t cut = text.size() - text.size() / 10;
    for (std::size_t i = 0; i < text.size(); ++i)
        (i < cut ? c.train : c.valid).push_back(c.id[static_cast<unsigned char>(text[i])]);
    return c;
}

struct model {
    Program p;
    Var<float> loss, probs;
    TrainStep step;
};

// A dense layer x W (+ b) with its parameters NAME.w [in, out] and NAME.b.
Var<float> dense(Program& p, const Var<float>& x, const std::string& name, std::int64_t in, std::int64_t out, bool bias,
                 std::int64_t& seed) {
    auto w = p.parameter<float>(name + ".w", {in, out}, init::normal(0, 0.02, seed++));
    auto y = matmul(x, w);
    if (!bias) return y;
    return y + p.parameter<float>(name + ".b", {out}, init::constant(0));
}

model build(const options& o, std::int64_t vocab, std::int64_t steps) {
    model m;
    Program& p = m.p;
    const std::int64_t T = o.context, D = o.width, H = o.heads, dh = D / H;
    std::int64_t seed = o.seed * 1000;
    auto ids = p.input<std::int64_t>("ids", {-1, T});
    auto labels = p.input<std::int64_t>("labels", {-1, 1});
    auto x = embedding(ids, "tok", Embedding{.rows = vocab, .width = D, .init = init::normal(0, 0.02, seed++)}) +
             p.parameter<float>("pos.w", {T, D}, init::normal(0, 0.02, seed++));
    // The causal mask: -1e9 where a key comes after the query (column j >
    // row i, the running sums of ones along each axis), 0 elsewhere.
    auto ones = p.constant<float>(1, {T, T});
    auto mask = where(greater_than(cumsum(ones, 1), cumsum(ones, 0)), p.constant<float>(-1e9f, {T, T}),
                      p.constant<float>(0, {T, T}));
    auto heads = [&](const Var<float>& v) { return transpose(reshape(v, {0, 0, H, dh}), {0, 2, 1, 3}); };  // [B, H, T, dh]
    for (int b = 0; b < o.blocks; ++b) {
        const std::string n = "block" + std::to_string(b);
        auto h = layer_norm(x, n + ".ln1", LayerNorm{.begin_norm_axis = 2});
        auto q = heads(dense(p, h, n + ".q", D, D, false, seed));
        auto k = heads(dense(p, h, n + ".k", D, D, false, seed));
        auto v = heads(dense(p, h, n + ".v", D, D, false, seed));
        auto att = softmax(matmul(q, k, false, true, 1.0 / std::sqrt(static_cast<double>(dh))) + mask);  // [B, H, T, T]
        auto ctx = reshape(transpose(matmul(att, v), {0, 2, 1, 3}), {0, 0, D});                         // [B, T, D]
        x = x + dense(p, ctx, n + ".proj", D, D, true, seed);
        auto h2 = layer_norm(x, n + ".ln2", LayerNorm{.begin_norm_axis = 2});
        x = x + dense(p, gelu(dense(p, h2, n + ".ff1", D, 4 * D, true, seed)), n + ".ff2", 4 * D, D, true, seed);
    }
    auto logits = dense(p, layer_norm(x, "final.ln", LayerNorm{.begin_norm_axis = 2}), "out", D, vocab, true, seed);
    m.probs = p.rename(softmax(logits), "probs");
    auto [sm, loss] = softmax_with_cross_entropy(reshape(logits, {-1, vocab}), labels);
    m.loss = p.rename(mean(loss), "loss");
    const std::int64_t warmup = std::max<std::int64_t>(1, steps / 15);
    const auto schedule = LRSchedule::cosine(o.lr, std::max<std::int64_t>(1, steps - warmup), o.lr / 10).with_warmup(warmup);
    // Weight decay for the dense layers' matrices only (minGPT's choice).
    auto decays = [](const std::string& name) {
        return name.size() > 2 && name.compare(name.size() - 2, 2, ".w") == 0 && name != "tok.w" && name != "pos.w";
    };
    m.step = AdamW(schedule, 0.1).decay_if(decays).clip_by_global_norm(1.0).minimize(m.loss);
    return m;
}

// `rows` windows of context + 1 characters into ids [rows, T] and the next
// characters, labels [rows * T, 1].
void fill(const std::vector<std::int64_t>& text, const std::vector<std::size_t>& starts, std::int64_t T, Tensor& ids,
          Tensor& labels) {
    const auto rows = static_cast<std::int64_t>(starts.size());
    ids.resize(DataType::INT64, Shape{rows, T});
    labels.resize(DataType::INT64, Shape{rows * T, 1});
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t t = 0; t < T; ++t) {
            ids.data<std::int64_t>()[r * T + t] = text[starts[static_cast<std::size_t>(r)] + static_cast<std::size_t>(t)];
            labels.data<std::int64_t>()[r * T + t] = text[starts[static_cast<std::size_t>(r)] + static_cast<std::size_t>(t) + 1];
        }
}

// The mean loss over the validation text, in windows that do not overlap.
double validation_loss(Session<cpu>& s, const corpus& c, const options& o) {
    const auto T = static_cast<std::size_t>(o.context);
    std::vector<std::size_t> all;
    for (std::size_t at = 0; at + T + 1 <= c.valid.size(); at += T) all.push_back(at);
    Tensor ids, labels;
    std::vector<Tensor> out(1);
    const std::vector<TargetRef> targets{TargetRef("loss")};
    double sum = 0;
    for (std::size_t b = 0; b < all.size(); b += static_cast<std::size_t>(o.batch)) {
        std::vector<std::size_t> starts(all.begin() + static_cast<std::ptrdiff_t>(b),
                                        all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), b + static_cast<std::size_t>(o.batch))));
        fill(c.valid, starts, o.context, ids, labels);
        const std::vector<Feed> feeds{{"ids", ids}, {"labels", labels}};
        s.eval_into(targets, feeds, out);
        sum += static_cast<double>(out[0].item<float>()) * static_cast<double>(starts.size());
    }
    return sum / static_cast<double>(all.size());
}

// The loss of predicting each validation character by its frequency in the
// training text (add-one smoothed): what a model without context can reach.
double unigram_loss(const corpus& c) {
    std::vector<double> count(c.chars.size(), 1.0);
    for (auto id : c.train) count[static_cast<std::size_t>(id)] += 1;
    const double total = static_cast<double>(c.train.size() + c.chars.size());
    double sum = 0;
    for (auto id : c.valid) sum -= std::log(count[static_cast<std::size_t>(id)] / total);
    return sum / static_cast<double>(c.valid.size());
}

// Characters sampled one at a time from the model's distribution at the
// last position, after a prompt from the validation text.
std::string sample(Session<cpu>& s, const corpus& c, const options& o, std::mt19937& rng) {
    const auto T = static_cast<std::size_t>(o.context);
    std::vector<std::int64_t> window(c.valid.begin(), c.valid.begin() + static_cast<std::ptrdiff_t>(T));
    std::string text;
    for (auto id : window) text += c.chars[static_cast<std::size_t>(id)];
    const std::size_t prompt = text.size();
    Tensor ids(DataType::INT64, Shape{1, o.context});
    std::vector<Tensor> out(1);
    const std::vector<TargetRef> targets{TargetRef("probs")};
    for (int i = 0; i < o.sample; ++i) {
        std::copy(window.begin(), window.end(), ids.data<std::int64_t>());
        const std::vector<Feed> feeds{{"ids", ids}};
        s.eval_into(targets, feeds, out);
        const float* p = out[0].data<float>() + (T - 1) * c.chars.size();
        std::discrete_distribution<int> pick(p, p + c.chars.size());
        const int next = pick(rng);
        text += c.chars[static_cast<std::size_t>(next)];
        window.erase(window.begin());
        window.push_back(next);
    }
    return text.substr(0, prompt) + "|" + text.substr(prompt);
}

int run(const options& o) {
    const corpus c = load(o.text);
    const auto T = static_cast<std::size_t>(o.context);
    if (c.train.size() < T + 2 || c.valid.size() < T + 2) throw std::runtime_error("the text is too short for the context");
    std::printf("%zu files, %zu characters (%zu distinct): %zu to train on, %zu to validate\n", c.files,
                c.train.size() + c.valid.size(), c.chars.size(), c.train.size(), c.valid.size());
    model m = build(o, static_cast<std::int64_t>(c.chars.size()), o.steps);
    Session<cpu> s(m.p, SessionOptions{.threads = o.threads});
    std::int64_t params = 0;
    for (auto& [w, g] : m.step.param_grads) params += Shape(m.p.desc().blocks[0].find_var(w)->dims).numel();
    const double baseline = unigram_loss(c);
    std::printf("model: %d blocks, width %d, %d heads, context %d, %lld parameters; AdamW, %d steps of %d windows\n",
                o.blocks, o.width, o.heads, o.context, static_cast<long long>(params), o.steps, o.batch);
    std::printf("unigram baseline: validation loss %.4f nats per character\n", baseline);

    std::mt19937 rng(o.seed);
    std::uniform_int_distribution<std::size_t> start(0, c.train.size() - T - 1);
    const std::vector<TargetRef> targets = m.step.with({TargetRef("loss")});
    std::vector<Tensor> out(targets.size());
    Tensor ids, labels;
    std::vector<std::size_t> starts(static_cast<std::size_t>(o.batch));
    const bool tty = isatty(STDOUT_FILENO);
    const auto t0 = clock_type::now();
    double last_valid = 0;
    int step = 0;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        const int until = o.steps * epoch / o.epochs;
        double loss_sum = 0;
        const int first = step;
        for (; step < until; ++step) {
            for (auto& at : starts) at = start(rng);
            fill(c.train, starts, o.context, ids, labels);
            const std::vector<Feed> feeds{{"ids", ids}, {"labels", labels}};
            s.eval_into(targets, feeds, out);
            loss_sum += out.back().item<float>();
            const int done = step + 1 - first, total = until - first;
            if (tty ? (done % 5 == 0 || done == total) : done == total) {
                const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
                const int width = 30, filled = width * done / total;
                std::string bar(static_cast<std::size_t>(filled), '#');
                bar.resize(width, '.');
                std::printf("%sepoch %d/%d [%s] %4d/%d  loss %.4f  %5.1f steps/s  %4.0fs left%s", tty ? "\r" : "", epoch,
                            o.epochs, bar.c_str(), done, total, loss_sum / done, (step + 1) / secs,
                            secs / (step + 1) * (o.steps - step - 1), tty ? "" : "\n");
                std::fflush(stdout);
            }
        }
        last_valid = validation_loss(s, c, o);
        std::printf("%sepoch %d/%d: train loss %.4f, validation loss %.4f (unigram baseline %.4f)\n", tty ? "\n" : "",
                    epoch, o.epochs, loss_sum / std::max(1, step - first), last_valid, baseline);
    }
    const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
    fs::create_directories(o.out);
    const std::string ckpt = o.out + "/char_transformer_model";
    save_checkpoint(s, ckpt);
    std::printf("trained %d steps in %.1fs; validation loss %.4f vs the unigram baseline's %.4f (%.1f%% lower)\n",
                o.steps, secs, last_valid, baseline, 100 * (1 - last_valid / baseline));
    std::printf("saved the checkpoint to %s\n", ckpt.c_str());
    if (o.sample > 0) {
        std::printf("sampled (prompt|continuation):\n%s\n", sample(s, c, o, rng).c_str());
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(parse(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "char_transformer: error: %s\n", e.what());
        return 1;
    }
}
