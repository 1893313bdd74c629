// Checkpoint directories: a small trained model's checkpoint (program.json
// and one .npy per persistable) with one file replaced by the input (its
// first byte picks the file), loaded as the CLI and a server would: the
// program from the directory, a session, load_checkpoint, one evaluation.
// A load that fails must leave the session's values as they were.
#include <dlgraph/checkpoint.hpp>
#include <dlgraph/optimizer.hpp>

#include "fuzz_common.hpp"

using namespace dlgraph;
namespace fs = std::filesystem;

namespace {

struct model {
    std::string dir;
    std::vector<std::string> files;  // program.json, then the .npy files
};

const model& base() {
    static const model m = [] {
        Program p;
        auto x = p.input<float>("x", {-1, 3});
        auto label = p.input<std::int64_t>("label", {-1, 1});
        auto w = p.parameter<float>("w", {3, 2}, init::uniform(-1, 1, 1));
        auto b = p.parameter<float>("b", {2}, init::constant(0.1));
        auto [prob, loss] = softmax_with_cross_entropy(matmul(x, w) + b, label);
        auto step = Adam(0.01).minimize(mean(loss));
        Session<cpu> s(p);
        const xt::xarray<float> xv = {{1, 2, 3}, {0, -1, 2}};
        const xt::xtensor<std::int64_t, 2> lv = {{0}, {1}};
        s.eval(step.targets(), {{x, xv}, {label, lv}});
        model m;
        m.dir = fuzz::scratch_path("base-checkpoint");
        save_checkpoint(s, m.dir);
        m.files.push_back("program.json");
        for (auto& e : fs::directory_iterator(m.dir))
            if (e.path().filename() != "program.json") m.files.push_back(e.path().filename().string());
        std::sort(m.files.begin() + 1, m.files.end());
        return m;
    }();
    return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const model& m = base();
    static const std::string dir = fuzz::scratch_path("checkpoint");
    // The scratch copy of the model: a file system call interrupted by a
    // signal (EINTR, e.g. libFuzzer's timers) is tried again, and an input
    // is skipped if the copy cannot be made; that is the harness, not dlgraph.
    bool copied = false;
    for (int attempt = 0; attempt < 3 && !copied; ++attempt) {
        std::error_code ec;
        fs::remove_all(dir, ec);
        fs::copy(m.dir, dir, ec);
        copied = !ec;
    }
    if (!copied) return 0;
    const std::string& replaced = m.files[data[0] % m.files.size()];
    fuzz::write_file((fs::path(dir) / replaced).string(),
                     std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
    try {
        Session<cpu> s(load_checkpoint_program(dir));
        const xt::xarray<float> xv = {{1, 2, 3}};
        // w's value, when the (possibly mutated) program keeps it a tensor.
        auto w_value = [&]() -> const Tensor* {
            const Variable* v = s.scope().find_local("w");
            return v && v->initialized() && v->is<Tensor>() ? &v->get<Tensor>() : nullptr;
        };
        Tensor before;
        try {
            load_checkpoint(s, m.dir);  // the good values first (the mutated program may refuse them)
        } catch (const error&) {
        }
        if (const Tensor* w = w_value()) before.copy_from(*w);
        try {
            load_checkpoint(s, dir);
        } catch (const error&) {
            const Tensor* now = w_value();
            if (before.initialized() && (!now || now->bytes() != before.bytes() ||
                                         std::memcmp(now->raw(), before.raw(), now->bytes()) != 0))
                fuzz::finding("a failed load_checkpoint changed a value");
        }
        std::vector<std::string> names;
        for (auto& op : s.program().blocks[0].ops)
            for (auto& sl : op.outputs)
                for (auto& a : sl.arguments) names.push_back(a);
        if (!names.empty()) {
            try {
                (void)s.eval(TargetRef(names.back()), {{"x", xv}});
            } catch (const error&) {
            }
        }
    } catch (const error&) {
    }
    return 0;
}
