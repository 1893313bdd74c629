// dlgraph in one page: build a small network with expression syntax,
// evaluate it with feeds, override an intermediate value, save the program
// as JSON, load it into a fresh session and get the same answer.
#include <dlgraph/dlgraph.hpp>
#include <dlgraph/dot.hpp>
#include <dlgraph/plan_io.hpp>

#include <fstream>
#include <iostream>
#include <xtensor/xio.hpp>

using namespace dlgraph;

int run(const std::string& out_dir);

int main(int argc, char** argv) {
    const std::string arg = argc > 1 ? argv[1] : ".";
    if (arg == "--help" || arg == "-h" || argc > 2) {
        std::cout << "usage: quickstart [OUT_DIR]   (writes quickstart_program.json and quickstart.dot there; default .)\n";
        return argc > 2 ? 2 : 0;
    }
    try {
        return run(arg);
    } catch (const std::exception& e) {  // an output directory that cannot be written, ...
        std::cerr << "quickstart: error: " << e.what() << "\n";
        return 1;
    }
}

int run(const std::string& out_dir) {

    // 1. Build: a two-layer network; shapes are checked on each line.
    Program p;
    auto x = p.input<float>("x", {-1, 4});  // a batch of any size
    auto w1 = p.parameter<float>("w1", {4, 8}, init::uniform(-0.5, 0.5, 1));
    auto b1 = p.parameter<float>("b1", {8}, init::constant(0.1));
    auto w2 = p.parameter<float>("w2", {8, 3}, init::normal(0, 0.5, 2));
    auto b2 = p.parameter<float>("b2", {3}, init::constant(0.0));
    auto h = relu(matmul(x, w1) + b1);
    auto logits = matmul(h, w2) + b2;
    auto probs = softmax(logits);
    std::cout << "built " << p.op_count() << " ops; probs has shape " << to_string(probs.shape()) << "\n";

    // 2. Evaluate with a feed. Only the ops the target needs run.
    Session<cpu> s(p);
    xt::xarray<float> batch = {{1, 2, 3, 4}, {-1, 0, 1, 0}};
    xt::xarray<float> out = s.eval(probs, {{x, batch}});
    std::cout << "probs =\n" << out << "\n";

    // 3. Feed an intermediate: the hidden layer is overridden, x is not needed.
    xt::xarray<float> hidden = xt::ones<float>({1, 8});
    std::cout << "probs with h = 1:\n" << s.eval(probs, {{h, hidden}}) << "\n";

    // 4. A shape mistake is caught on the line that makes it.
    try {
        auto bad = matmul(x, w2);
        (void)bad;
    } catch (const dlgraph::error& e) {
        std::cout << "caught: " << e.what() << "\n";
    }

    // 5. Save, load into a new session, same answer (same seeds, same values).
    const std::string path = out_dir + "/quickstart_program.json";
    std::ofstream(path) << p.to_json();
    Session<cpu> loaded(load_program_file(path));
    Tensor again = loaded.eval(TargetRef(probs.name()), {{"x", batch}});
    const bool same = to_xarray<float>(again) == out;
    std::cout << "saved " << path << "; reloaded program gives " << (same ? "the same" : "DIFFERENT")
              << " probabilities\n";

    // 6. Inspect: the execution plan and a Graphviz drawing of the program.
    std::vector<std::string> fed{"x"};
    const ExecutionPlan& plan = s.plan(std::vector<TargetRef>{probs}, fed);
    std::cout << describe(plan);
    std::ofstream(out_dir + "/quickstart.dot") << to_dot(p.desc());
    std::cout << "wrote " << out_dir << "/quickstart.dot (render with: dot -Tsvg quickstart.dot)\n";
    return same ? 0 : 1;
}
