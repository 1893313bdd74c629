// Host-side helpers of the embedded example (run.sh):
//   embedded_tools images DATA_DIR N OUT.hpp   the first N Fashion-MNIST test images and labels as a header
//   embedded_tools npy DATA_DIR SET FIRST N X.npy LABELS.npy
//                                               N images of SET (train or t10k) from FIRST, as the demo
//                                               feeds them ([N, 784] FP32 in [0, 1]), and their labels
//                                               (INT64): calibration and evaluation data for emit
//   embedded_tools compare HOST.txt TARGET.txt  agreement of two firmware outputs: top-1 classes, the
//                                               largest difference of the probabilities, accuracy
//   embedded_tools within FP32.txt INT8.txt P   the two models' accuracy on the same images: exit status
//                                               0 when they are at most P points apart
#include <dlgraph/data/idx.hpp>
#include <dlgraph/npy.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int images(const std::string& dir, int n, const std::string& out) {
    auto im = dlgraph::data::read_idx(dir + "/t10k-images-idx3-ubyte.gz");
    auto lb = dlgraph::data::read_idx(dir + "/t10k-labels-idx1-ubyte.gz");
    if (im.dims.size() != 3 || im.dims[1] * im.dims[2] != 784 || lb.dims.size() != 1 || im.dims[0] < n ||
        lb.dims[0] < n) {
        std::cerr << "embedded_tools: " << dir << " does not hold " << n << " 28x28 test images with labels\n";
        return 1;
    }
    std::ostringstream h;
    h << "// The first " << n << " Fashion-MNIST test images (written by embedded_tools).\n#pragma once\n#include <cstdint>\n"
      << "inline constexpr int image_count = " << n << ";\n"
      << "inline constexpr std::uint8_t image_labels[" << n << "] = {";
    for (int i = 0; i < n; ++i) h << (i ? "," : "") << int(lb.bytes[static_cast<std::size_t>(i)]);
    h << "};\ninline constexpr std::uint8_t image_pixels[" << n << "][784] = {\n";
    for (int i = 0; i < n; ++i) {
        h << "{";
        for (int k = 0; k < 784; ++k) h << (k ? "," : "") << int(im.bytes[static_cast<std::size_t>(i) * 784 + k]);
        h << "},\n";
    }
    h << "};\n";
    std::ofstream(out) << h.str();
    return 0;
}

int npy(const std::string& dir, const std::string& set, int first, int n, const std::string& x_out,
        const std::string& labels_out) {
    auto im = dlgraph::data::read_idx(dir + "/" + set + "-images-idx3-ubyte.gz");
    auto lb = dlgraph::data::read_idx(dir + "/" + set + "-labels-idx1-ubyte.gz");
    if (im.dims.size() != 3 || im.dims[1] * im.dims[2] != 784 || lb.dims.size() != 1 || first < 0 || n < 1 ||
        im.dims[0] < first + n || lb.dims[0] < first + n) {
        std::cerr << "embedded_tools: " << dir << " does not hold images " << first << " to " << first + n - 1
                  << " of the " << set << " set\n";
        return 1;
    }
    dlgraph::Tensor x(dlgraph::DataType::FP32, dlgraph::Shape{n, 784});
    dlgraph::Tensor y(dlgraph::DataType::INT64, dlgraph::Shape{n});
    for (std::int64_t i = 0; i < n; ++i) {
        const std::size_t at = static_cast<std::size_t>(first + i);
        for (std::int64_t k = 0; k < 784; ++k)
            x.data<float>()[i * 784 + k] = im.bytes[at * 784 + static_cast<std::size_t>(k)] / 255.0f;  // as the demo
        y.data<std::int64_t>()[i] = lb.bytes[at];
    }
    dlgraph::write_npy(x_out, x);
    dlgraph::write_npy(labels_out, y);
    return 0;
}

struct line {
    int index = -1, label = -1, best = -1;
    float prob[10] = {};
};

std::vector<line> read_output(const std::string& path) {
    std::ifstream in(path);
    std::vector<line> v;
    std::string s;
    while (std::getline(in, s)) {
        if (s.rfind("done", 0) == 0) break;
        std::istringstream is(s);
        line l;
        is >> l.index >> l.label >> l.best;
        for (float& p : l.prob) {
            std::string hex;
            is >> hex;
            const auto bits = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
            std::memcpy(&p, &bits, 4);
        }
        if (!is) break;
        v.push_back(l);
    }
    return v;
}

int compare(const std::string& a, const std::string& b) {
    const auto host = read_output(a), target = read_output(b);
    if (host.empty() || host.size() != target.size()) {
        std::cerr << "embedded_tools: " << a << " has " << host.size() << " results, " << b << " has "
                  << target.size() << "\n";
        return 1;
    }
    int same = 0, right_host = 0, right_target = 0, bitwise = 0;
    double max_diff = 0;
    for (std::size_t i = 0; i < host.size(); ++i) {
        same += host[i].best == target[i].best;
        right_host += host[i].best == host[i].label;
        right_target += target[i].best == target[i].label;
        bitwise += std::memcmp(host[i].prob, target[i].prob, sizeof host[i].prob) == 0;
        for (int c = 0; c < 10; ++c) max_diff = std::max(max_diff, std::fabs(double(host[i].prob[c]) - target[i].prob[c]));
    }
    const auto n = static_cast<double>(host.size());
    std::printf("images %zu: same top-1 class %d/%zu; probabilities bit for bit equal in %d; largest |difference| "
                "%.3g; accuracy host %.2f%%, target %.2f%%\n",
                host.size(), same, host.size(), bitwise, max_diff, 100 * right_host / n, 100 * right_target / n);
    return same == static_cast<int>(host.size()) ? 0 : 1;
}

int within(const std::string& a, const std::string& b, double points) {
    const auto fp32 = read_output(a), int8 = read_output(b);
    if (fp32.empty() || fp32.size() != int8.size()) {
        std::cerr << "embedded_tools: " << a << " has " << fp32.size() << " results, " << b << " has " << int8.size()
                  << "\n";
        return 1;
    }
    int same = 0, right_fp32 = 0, right_int8 = 0;
    for (std::size_t i = 0; i < fp32.size(); ++i) {
        same += fp32[i].best == int8[i].best;
        right_fp32 += fp32[i].best == fp32[i].label;
        right_int8 += int8[i].best == int8[i].label;
    }
    const double n = static_cast<double>(fp32.size()), acc_fp32 = 100 * right_fp32 / n, acc_int8 = 100 * right_int8 / n;
    std::printf("images %zu: accuracy FP32 %.2f%%, INT8 %.2f%% (%+.2f points, at most %.2f allowed); same class %d\n",
                fp32.size(), acc_fp32, acc_int8, acc_int8 - acc_fp32, points, same);
    return std::fabs(acc_int8 - acc_fp32) <= points ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string cmd = argc > 1 ? argv[1] : "";
        if (cmd == "images" && argc == 5) return images(argv[2], std::stoi(argv[3]), argv[4]);
        if (cmd == "compare" && argc == 4) return compare(argv[2], argv[3]);
        if (cmd == "within" && argc == 5) return within(argv[2], argv[3], std::stod(argv[4]));
        if (cmd == "npy" && argc == 8) return npy(argv[2], argv[3], std::stoi(argv[4]), std::stoi(argv[5]), argv[6], argv[7]);
        std::cerr << "usage: embedded_tools images DATA_DIR N OUT.hpp | npy DATA_DIR SET FIRST N X.npy LABELS.npy\n"
                     "       | compare HOST.txt TARGET.txt | within FP32.txt INT8.txt POINTS\n";
    } catch (const std::exception& e) {
        std::cerr << "embedded_tools: " << e.what() << "\n";
    }
    return 2;
}
