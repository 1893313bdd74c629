// A custom operator in a model: an MLP with Mish activations (mish.hpp,
// registered by mish.cpp) learns y = sin(3x) + x/2 on [-1, 1]. It checks
// Mish's gradient against finite differences, trains with Adam, saves a
// checkpoint, reloads it in a new session from the saved JSON, and checks
// the reloaded model gives the same predictions bit for bit.
//
//   custom_op [OUT_DIR]     (writes OUT_DIR/custom_op_model; default .)
//
// The saved program uses op "mish": the dlgraph CLI built with mish.cpp
// (target dlgraph_mish) runs it; the plain CLI names the op as unknown.
#include "mish.hpp"

#include <dlgraph/npy.hpp>
#include <dlgraph/optimizer.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

using namespace dlgraph;

namespace {

// Largest |analytic - numeric| / max(1, |numeric|) of d sum(w * mish(x)) / dx, in FP64.
double mish_gradient_error() {
    Program p;
    xt::xarray<double> x0 = {{-6.0, -2.5, -1.0, -0.3}, {0.0, 0.4, 1.7, 8.0}};
    auto x = p.parameter<double>("x", {2, 4}, init::constant(0));
    auto w = p.input<double>("w", {2, 4});
    auto loss = reduce_sum(mish(x) * w);
    auto grads = append_backward(loss);
    xt::xarray<double> wv = {{0.5, -1.0, 2.0, 1.5}, {-0.7, 1.1, 0.9, -2.0}};
    Session<cpu> s(p);
    auto loss_at = [&](const xt::xarray<double>& xv) { return s.eval(loss, {{x, xv}, {w, wv}}).flat(0); };
    const xt::xarray<double> analytic = s.eval(grads.at(0).second, {{x, x0}, {w, wv}});
    double worst = 0;
    for (std::size_t i = 0; i < x0.size(); ++i) {
        const double eps = 1e-6;
        xt::xarray<double> up = x0, down = x0;
        up.flat(i) += eps;
        down.flat(i) -= eps;
        const double numeric = (loss_at(up) - loss_at(down)) / (2 * eps);
        worst = std::max(worst, std::abs(analytic.flat(i) - numeric) / std::max(1.0, std::abs(numeric)));
    }
    return worst;
}

xt::xarray<float> target_of(const xt::xarray<float>& x) { return xt::sin(3.0f * x) + 0.5f * x; }

}  // namespace

int main(int argc, char** argv) {
    const std::string out_dir = argc > 1 ? argv[1] : ".";
    if (out_dir == "--help" || out_dir == "-h" || argc > 2) {
        std::printf("usage: custom_op [OUT_DIR]   (writes OUT_DIR/custom_op_model; default .)\n");
        return argc > 2 ? 2 : 0;
    }
    try {
        // 1. The op's gradient against central differences.
        const double grad_err = mish_gradient_error();
        std::printf("mish gradient vs finite differences (FP64): largest relative error %.2e\n", grad_err);

        // 2. A model that uses it: 1 -> 32 -> 32 -> 1, Mish in between.
        Program p;
        auto x = p.input<float>("x", {-1, 1});
        auto y = p.input<float>("y", {-1, 1});
        auto w1 = p.parameter<float>("w1", {1, 32}, init::xavier_uniform(1));
        auto b1 = p.parameter<float>("b1", {32}, init::constant(0));
        auto w2 = p.parameter<float>("w2", {32, 32}, init::xavier_uniform(2));
        auto b2 = p.parameter<float>("b2", {32}, init::constant(0));
        auto w3 = p.parameter<float>("w3", {32, 1}, init::xavier_uniform(3));
        auto b3 = p.parameter<float>("b3", {1}, init::constant(0));
        auto h = mish(matmul(mish(matmul(x, w1) + b1), w2) + b2);
        auto pred = p.rename(matmul(h, w3) + b3, "pred");
        auto loss = p.rename(mean(square(pred - y)), "loss");
        const TrainStep step = Adam(1e-2).minimize(loss);

        // 3. Train on random batches; report the loss on a fixed grid.
        Session<cpu> s(p);
        const xt::xarray<float> grid = xt::reshape_view(xt::linspace<float>(-1, 1, 201), {201, 1});
        const xt::xarray<float> grid_y = target_of(grid);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1, 1);
        xt::xarray<float> bx = xt::zeros<float>({64, 1});
        const double first = s.eval(loss, {{x, grid}, {y, grid_y}}).flat(0);
        std::printf("grid loss before training: %.5f\n", first);
        for (int it = 1; it <= 1500; ++it) {
            for (auto& v : bx) v = u(rng);
            const xt::xarray<float> by = target_of(bx);
            s.eval(step.targets(), {{x, bx}, {y, by}});
            if (it % 500 == 0) std::printf("step %4d: grid loss %.5f\n", it, double(s.eval(loss, {{x, grid}, {y, grid_y}}).flat(0)));
        }
        const double last = s.eval(loss, {{x, grid}, {y, grid_y}}).flat(0);

        // 4. Save, reload from the checkpoint's JSON in a new session, compare.
        const std::string ckpt = out_dir + "/custom_op_model";
        std::filesystem::create_directories(out_dir);
        save_checkpoint(s, ckpt);
        Session<cpu> again(load_checkpoint_program(ckpt));
        load_checkpoint(again, ckpt);
        const xt::xarray<float> before = s.eval(pred, {{x, grid}});
        const xt::xarray<float> after = to_xarray<float>(again.eval(TargetRef("pred"), {{"x", grid}}));
        const bool same = before == after;
        // The grid and its predictions as .npy, for the CLI check (examples/custom_op/cli_check.sh).
        write_npy(out_dir + "/custom_op_x.npy", tensor_view_of(grid));
        write_npy(out_dir + "/custom_op_pred.npy", tensor_view_of(before));
        std::printf("saved %s; the reloaded model's predictions are %s\n", ckpt.c_str(),
                    same ? "identical" : "DIFFERENT");
        std::printf("grid loss: %.5f -> %.5f\n", first, last);
        const bool ok = grad_err < 1e-6 && last < first / 20 && same;
        std::printf("%s\n", ok ? "ok" : "FAILED");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "custom_op: error: %s\n", e.what());
        return 1;
    }
}
