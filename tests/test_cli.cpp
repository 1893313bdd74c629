// The dlgraph command-line tool, run as a separate process (DLGRAPH_CLI):
// run with feeds and with --params, bench (text and JSON), inspect, plan
// (text and JSON, with and without concrete shapes), dot, help, and every
// error path giving exit status 1 and one "dlgraph: error: [id] ..." line on
// stderr.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <dlgraph/builder.hpp>
#include <dlgraph/npy.hpp>

#include "test_helpers.hpp"

#ifndef DLGRAPH_CLI
#define DLGRAPH_CLI ""
#endif

using namespace dlgraph;
namespace fs = std::filesystem;

namespace {

const bool no_cli = std::string_view(DLGRAPH_CLI).empty();

using CliTempDir = test_temp_dir;


// Single-quoted for /bin/sh.
std::string q(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

struct CliResult {
    int status = -1;
    std::string out, err;
};

// Runs the CLI with `args` (already quoted) in `dir`'s parent shell.
CliResult run_cli(const CliTempDir& dir, const std::string& args) {
    REQUIRE_MESSAGE(fs::exists(DLGRAPH_CLI), "the CLI " DLGRAPH_CLI " is not built (target dlgraph_cli)");
    const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
    const std::string cmd = q(DLGRAPH_CLI) + " " + args + " >" + q(out) + " 2>" + q(err);
    const int rc = std::system(cmd.c_str());
    CliResult r;
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = read_file_bytes(out);
    r.err = read_file_bytes(err);
    fs::remove(out);
    fs::remove(err);
    return r;
}

// Exit status 1 and exactly one stderr line "dlgraph: error: [ID] ...".
void check_error(const CliResult& r, const std::string& id, const std::string& also = "") {
    INFO("stderr: " << r.err);
    CHECK(r.status == 1);
    CHECK(r.err.rfind("dlgraph: error: [" + id + "] ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.back() == '\n');
    if (!also.empty()) CHECK(r.err.find(also) != std::string::npos);
}

Tensor fp32(const Shape& shape, std::initializer_list<float> values) {
    Tensor t(DataType::FP32, shape);
    std::copy(values.begin(), values.end(), t.data<float>());
    return t;
}

// y = relu(x * w + b) with x [-1,3] fed, w ("fc.w@0", needs escaping) and b
// parameters; ops: #0 init w, #1 init b, #2 mul, #3 add, #4 relu.
struct CliNet {
    CliTempDir dir;
    std::string program, x_file;
    Tensor x = fp32({2, 3}, {1, -2, 3, -4, 5, -6});
    CliNet() {
        Program p;
        auto xv = p.input<float>("x", {-1, 3});
        auto w = p.parameter<float>("fc.w@0", {3}, init::constant(0.5));
        auto b = p.parameter<float>("b", {3}, init::constant(0.25));
        auto y = relu(xv * w + b);
        REQUIRE(y.name() == "relu_0");
        program = dir.file("net.json");
        write_file_bytes(program, p.to_json());
        x_file = dir.file("x.npy");
        write_npy(x_file, x);
    }
    // relu(x * w + b) computed here.
    Tensor expected(const std::vector<float>& w, const std::vector<float>& b) const {
        Tensor y(DataType::FP32, {2, 3});
        for (int i = 0; i < 6; ++i)
            y.data<float>()[i] = std::max(0.0f, x.data<float>()[i] * w[static_cast<std::size_t>(i % 3)] +
                                                    b[static_cast<std::size_t>(i % 3)]);
        return y;
    }
};

void check_close(const Tensor& got, const Tensor& want) {
    REQUIRE(got.dtype() == want.dtype());
    REQUIRE(got.shape() == want.shape());
    for (std::int64_t i = 0; i < want.numel(); ++i)
        CHECK(got.data<float>()[i] == doctest::Approx(want.data<float>()[i]));
}

}  // namespace

TEST_CASE("cli: run evaluates fetches on .npy feeds and writes .npy results" * doctest::skip(no_cli)) {
    CliNet n;
    const std::string out = n.dir.file("out/sub");  // created by run
    auto r = run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) +
                                " --fetch relu_0 --fetch elementwise_mul_0 --out " + q(out));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    const std::string y_path = (fs::path(out) / "relu_0.npy").string();
    CHECK(r.out == "relu_0 FP32 [2,3] " + y_path + "\nelementwise_mul_0 FP32 [2,3] " +
                       (fs::path(out) / "elementwise_mul_0.npy").string() + "\n");
    check_close(read_npy(y_path), n.expected({0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}));
    check_close(read_npy((fs::path(out) / "elementwise_mul_0.npy").string()),
                fp32({2, 3}, {0.5f, -1, 1.5f, -2, 2.5f, -3}));

    // A persistable can be fetched; its file name is escaped. OUT defaults to ".".
    std::string cmd = "cd " + q(n.dir.path.string()) + " && " + q(DLGRAPH_CLI) + " run " + q(n.program) +
                      " --fetch fc.w@0 > /dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    check_close(read_npy(n.dir.file("fc.w%400.npy")), fp32({3}, {0.5f, 0.5f, 0.5f}));
    CHECK_FALSE(fs::exists(n.dir.file("fc.w%400.npy.tmp")));
}

TEST_CASE("cli: run evaluates a convolutional program (conv2d, pool2d, flatten_contiguous_range)" * doctest::skip(no_cli)) {
    CliTempDir dir;
    Program p;
    auto x = p.input<float>("x", {-1, 1, 6, 6});
    auto f = p.parameter<float>("conv.w", {3, 1, 3, 3}, init::uniform(-1, 1, 3));
    auto w = p.parameter<float>("fc.w", {12, 2}, init::uniform(-1, 1, 4));
    auto h = pool2d(relu(conv2d(x, f, {{1, 1}, {1, 1}})), {"avg", {3, 3}, {3, 3}});  // [N, 3, 2, 2]
    auto y = p.rename(matmul(flatten(h), w), "y");
    const std::string program = dir.file("cnn.json"), params = dir.file("params"), xf = dir.file("x.npy");
    write_file_bytes(program, p.to_json());
    Session<cpu> s(p);
    fs::create_directories(params);
    const std::vector<Tensor> weights = s.eval(std::vector<TargetRef>{f, w}, std::vector<Feed>{});
    write_npy((fs::path(params) / "conv.w.npy").string(), weights[0]);
    write_npy((fs::path(params) / "fc.w.npy").string(), weights[1]);
    Tensor xt(DataType::FP32, {2, 1, 6, 6});
    for (int i = 0; i < 72; ++i) xt.data<float>()[i] = static_cast<float>((i * 37) % 17) / 8.0f - 1.0f;
    write_npy(xf, xt);
    auto r = run_cli(dir, "run " + q(program) + " --params " + q(params) + " --feed x=" + q(xf) + " --fetch y --out " +
                              q(dir.file("out")));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    const Tensor got = read_npy(dir.file("out/y.npy"));
    const Tensor want = s.eval(std::vector<TargetRef>{y}, std::vector<Feed>{{"x", xt}})[0];
    REQUIRE(got.shape() == Shape{2, 2});
    CHECK(std::memcmp(got.raw(), want.raw(), want.bytes()) == 0);
}

TEST_CASE("cli: run --params loads persistables from DIR/<escaped name>.npy" * doctest::skip(no_cli)) {
    CliNet n;
    const std::string params = n.dir.file("params");
    fs::create_directories(params);
    write_npy((fs::path(params) / "fc.w%400.npy").string(), fp32({3}, {1, 2, 3}));
    write_npy((fs::path(params) / "b.npy").string(), fp32({3}, {-1, 0, 1}));
    const std::string base = "run " + q(n.program) + " --params " + q(params) + " --feed x=" + q(n.x_file) +
                             " --fetch relu_0 --out " + q(n.dir.file("o"));

    auto r = run_cli(n.dir, base);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    check_close(read_npy(n.dir.file("o/relu_0.npy")), n.expected({1, 2, 3}, {-1, 0, 1}));

    SUBCASE("a parameter of the wrong dtype") {
        Tensor wd(DataType::FP64, {3});
        for (int i = 0; i < 3; ++i) wd.data<double>()[i] = i;
        write_npy((fs::path(params) / "b.npy").string(), wd);
        check_error(run_cli(n.dir, base), "dlgraph.type.param", "'b'");
    }
    SUBCASE("a parameter of the wrong shape") {
        write_npy((fs::path(params) / "b.npy").string(), fp32({1, 3}, {1, 2, 3}));
        check_error(run_cli(n.dir, base), "dlgraph.shape.param", "'b'");
    }
    SUBCASE("a missing parameter file names the variable") {
        fs::remove(fs::path(params) / "fc.w%400.npy");
        check_error(run_cli(n.dir, base), "dlgraph.io.param_missing", "'fc.w@0'");
    }
    SUBCASE("a params directory that does not exist") {
        check_error(run_cli(n.dir, "run " + q(n.program) + " --params " + q(n.dir.file("nope")) + " --feed x=" +
                                       q(n.x_file) + " --fetch relu_0"),
                    "dlgraph.io.open", "nope");
    }
}

TEST_CASE("cli: run errors: one line on stderr with the right id" * doctest::skip(no_cli)) {
    CliNet n;
    const std::string o = " --out " + q(n.dir.file("o"));
    SUBCASE("missing program file") {
        check_error(run_cli(n.dir, "run " + q(n.dir.file("none.json")) + " --feed x=" + q(n.x_file) + " --fetch relu_0"),
                    "dlgraph.io.open", "none.json");
    }
    SUBCASE("malformed JSON") {
        write_file_bytes(n.dir.file("bad.json"), "{\"version\": 1, \"blocks\": [");
        check_error(run_cli(n.dir, "run " + q(n.dir.file("bad.json")) + " --fetch relu_0"), "dlgraph.format.json",
                    "bad.json");
    }
    SUBCASE("a program that is JSON but not a program") {
        write_file_bytes(n.dir.file("odd.json"), "{\"version\": 1, \"blocks\": [], \"extra\": 2}");
        check_error(run_cli(n.dir, "run " + q(n.dir.file("odd.json")) + " --fetch relu_0"), "dlgraph.format.field");
    }
    SUBCASE("a program with an unknown op names the file and the op") {
        std::string text = read_file_bytes(n.program);
        auto at = text.find("\"relu\"");
        REQUIRE(at != std::string::npos);
        text.replace(at, 6, "\"relux\"");
        write_file_bytes(n.dir.file("op.json"), text);
        check_error(run_cli(n.dir, "inspect " + q(n.dir.file("op.json"))), "dlgraph.graph.unknown_op",
                    n.dir.file("op.json") + ": blocks[0].ops[4].type: unknown op type 'relux'");
    }
    SUBCASE("a directory as the program") {
        check_error(run_cli(n.dir, "inspect " + q(n.dir.path.string())), "dlgraph.io.open", "directory");
    }
    SUBCASE("unknown fetch name") {
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch nosuch" + o),
                    "dlgraph.graph.undeclared", "nosuch");
    }
    SUBCASE("truncated .npy feed") {
        std::string bytes = read_file_bytes(n.x_file);
        write_file_bytes(n.x_file, bytes.substr(0, bytes.size() - 5));
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch relu_0" + o),
                    "dlgraph.io.npy_truncated", n.x_file);
    }
    SUBCASE("feed of the wrong dtype") {
        Tensor xd(DataType::FP64, {2, 3});
        for (int i = 0; i < 6; ++i) xd.data<double>()[i] = i;
        write_npy(n.x_file, xd);
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch relu_0" + o),
                    "dlgraph.type.feed", "'x'");
    }
    SUBCASE("feed of the wrong shape") {
        write_npy(n.x_file, fp32({3, 2}, {1, 2, 3, 4, 5, 6}));
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch relu_0" + o),
                    "dlgraph.shape.feed", "'x'");
    }
    SUBCASE("missing feed") {
        check_error(run_cli(n.dir, "run " + q(n.program) + " --fetch relu_0" + o), "dlgraph.feed.missing", "'x'");
    }
    SUBCASE("feed of an unknown variable") {
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --feed zz=" +
                                       q(n.x_file) + " --fetch relu_0" + o),
                    "dlgraph.feed.unknown", "'zz'");
    }
    SUBCASE("feed file that is not .npy") {
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.program) + " --fetch relu_0" + o),
                    "dlgraph.io.npy_magic", n.program);
    }
    SUBCASE("usage errors") {
        check_error(run_cli(n.dir, ""), "dlgraph.cli.usage");
        check_error(run_cli(n.dir, "frobnicate x.json"), "dlgraph.cli.usage", "frobnicate");
        check_error(run_cli(n.dir, "run " + q(n.program)), "dlgraph.cli.usage", "--fetch");
        check_error(run_cli(n.dir, "run " + q(n.program) + " --fetch"), "dlgraph.cli.usage", "--fetch");
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x --fetch relu_0"), "dlgraph.cli.usage");
        check_error(run_cli(n.dir, "run " + q(n.program) + " --fetch relu_0 --bogus"), "dlgraph.cli.usage", "--bogus");
        check_error(run_cli(n.dir, "run " + q(n.program) + " other.json --fetch relu_0"), "dlgraph.cli.usage");
        check_error(run_cli(n.dir, "inspect"), "dlgraph.cli.usage");
        check_error(run_cli(n.dir, "inspect " + q(n.program) + " --json"), "dlgraph.cli.usage");
        check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --feed x=" + q(n.x_file) +
                                       " --fetch relu_0"),
                    "dlgraph.cli.usage", "twice");
    }
    // Nothing was written by any failing run.
    CHECK_FALSE(fs::exists(n.dir.file("o/relu_0.npy")));
}

TEST_CASE("cli: help" * doctest::skip(no_cli)) {
    CliTempDir dir;
    for (const char* h : {"--help", "help", "run --help"}) {
        auto r = run_cli(dir, h);
        CHECK(r.status == 0);
        CHECK(r.out.rfind("usage: dlgraph", 0) == 0);
        CHECK(r.out.find("inspect") != std::string::npos);
        CHECK(r.err.empty());
    }
}

TEST_CASE("cli: inspect lists variables and ops" * doctest::skip(no_cli)) {
    CliNet n;
    auto r = run_cli(n.dir, "inspect " + q(n.program));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("block 0 (parent -1): 6 variables, 5 ops") != std::string::npos);
    CHECK(r.out.find("x                  FP32 [-1,3]\n") != std::string::npos);
    CHECK(r.out.find("fc.w@0             FP32 [3]  persistable\n") != std::string::npos);
    CHECK(r.out.find("#0 fill_constant  (no inputs) -> Out=fc.w@0  {value=0.5, shape=[3], dtype=5 (FP32)}") !=
          std::string::npos);
    CHECK(r.out.find("#2 elementwise_mul  X=x, Y=fc.w@0 -> Out=elementwise_mul_0  {axis=-1}") != std::string::npos);
}

TEST_CASE("cli: ops lists every built-in op with its slots, attributes and dtypes, as text and JSON" *
          doctest::skip(no_cli)) {
    CliNet n;
    auto r = run_cli(n.dir, "ops");
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.rfind(std::to_string(op_table().size()) + " built-in ops, 0 registered", 0) == 0);
    CHECK(r.out.find("\nsum\n    X[] -> Out\n") != std::string::npos);
    CHECK(r.out.find("\nconv2d\n    Input, Filter -> Output  {strides=[1,1], paddings=[0,0], ") != std::string::npos);
    CHECK(r.out.find("dtypes: FP32, FP64; gradient: relu_grad; fusible\n    Out = max(X, 0)\n") != std::string::npos);
    auto j = run_cli(n.dir, "ops --json");
    REQUIRE(j.status == 0);
    const json ops = json::parse(j.out);
    REQUIRE(ops.size() == op_table().size());
    CHECK(ops[0]["type"] == "elementwise_add");
    CHECK(ops[0]["attrs"]["axis"] == "-1");
    CHECK(ops[0]["registered"] == false);
    check_error(run_cli(n.dir, "ops --all"), "dlgraph.cli.usage", "'ops' takes only --json");
}

TEST_CASE("cli: plan without and with concrete shapes, text and JSON" * doctest::skip(no_cli)) {
    CliNet n;
    // Without --feed, the program's inputs (x) count as fed.
    auto r = run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0");
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("fed: x\n") != std::string::npos);
    CHECK(r.out.find("#2 elementwise_mul  X=x,Y=fc.w@0 -> Out=elementwise_mul_0\n") != std::string::npos);
    CHECK(r.out.find("#4 relu  X=elementwise_add_0 -> Out=relu_0\n") != std::string::npos);
    CHECK(r.out.find("memory:") == std::string::npos);

    r = run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --feed x=" + q(n.x_file));
    REQUIRE(r.status == 0);
    CHECK(r.out.find("FP32 [2,3]  24 bytes") != std::string::npos);
    CHECK(r.out.find(", one buffer per value 72 bytes, lower bound 48 bytes\n") != std::string::npos);
    CHECK(r.out.find("  cpu: arena ") != std::string::npos);

    r = run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --feed x=" + q(n.x_file) + " --json");
    REQUIRE(r.status == 0);
    json j = json::parse(r.out);
    CHECK(j["fed"] == json::array({"x"}));
    CHECK(j["steps"].size() == 3);
    CHECK(j["steps"][0]["inputs"]["Y"][0] == "fc.w@0");
    CHECK(j["memory"]["places"]["cpu"]["unshared_bytes"] == 72);
    CHECK(j["memory"]["places"]["cpu"]["lower_bound"] == 48);
    std::size_t slots = 0;
    for (auto& b : j["memory"]["slot_bytes"]) slots += b.get<std::size_t>();
    CHECK(j["memory"]["places"]["cpu"]["arena_bytes"] == slots);

    r = run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --json");
    REQUIRE(r.status == 0);
    CHECK_FALSE(json::parse(r.out).contains("memory"));

    // The feed's file is checked as run would check it.
    write_npy(n.x_file, fp32({2, 2}, {1, 2, 3, 4}));
    check_error(run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --feed x=" + q(n.x_file)),
                "dlgraph.shape.feed", "'x'");
    check_error(run_cli(n.dir, "plan " + q(n.program) + " --fetch nosuch"), "dlgraph.graph.undeclared", "nosuch");
}

TEST_CASE("cli: dot of the program and of a plan" * doctest::skip(no_cli)) {
    CliNet n;
    auto r = run_cli(n.dir, "dot " + q(n.program));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.rfind("digraph program {", 0) == 0);
    CHECK(r.out.find("fill_constant\\n#0") != std::string::npos);

    r = run_cli(n.dir, "dot " + q(n.program) + " --fetch relu_0");
    REQUIRE(r.status == 0);
    CHECK(r.out.rfind("digraph plan {", 0) == 0);
    CHECK(r.out.find("fill_constant") == std::string::npos);
    CHECK(r.out.find("x\\nFP32 [-1,3]\\nfeed") != std::string::npos);

    const std::string file = n.dir.file("plan.dot");
    r = run_cli(n.dir, "dot " + q(n.program) + " --fetch relu_0 -o " + q(file));
    REQUIRE(r.status == 0);
    CHECK(r.out.empty());
    CHECK(read_file_bytes(file).rfind("digraph plan {", 0) == 0);

    check_error(run_cli(n.dir, "dot " + q(n.program) + " -o " + q(n.dir.file("no/dir/g.dot"))), "dlgraph.io.open");
}

namespace {

// probs = softmax(relu(x @ w1) @ w2) with x [-1,4] fed: no two element-wise
// ops in a row, so no step is fused and every op type has its own entry.
struct BenchNet {
    CliTempDir dir;
    std::string program, x_file;
    BenchNet() {
        Program p;
        auto x = p.input<float>("x", {-1, 4});
        auto w1 = p.parameter<float>("w1", {4, 5}, init::constant(0.1));
        auto w2 = p.parameter<float>("w2", {5, 3}, init::constant(0.2));
        p.rename(softmax(matmul(relu(matmul(x, w1)), w2)), "probs");
        program = dir.file("mlp.json");
        write_file_bytes(program, p.to_json());
        x_file = dir.file("x.npy");
        write_npy(x_file, fp32({2, 4}, {1, -2, 3, -4, 5, -6, 7, -8}));
    }
};

}  // namespace

TEST_CASE("cli: bench prints latency, time per op type and memory" * doctest::skip(no_cli)) {
    BenchNet n;
    const std::string base = "bench " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch probs";
    auto r = run_cli(n.dir, base + " --runs 20 --warmup 2");
    INFO("stdout: " << r.out);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.rfind("bench " + n.program + ": 20 runs after 2 warm-up runs, 1 thread\n", 0) == 0);
    CHECK(r.out.find("\nfetch: probs\nfed: x FP32 [2,4]\n") != std::string::npos);
    CHECK(r.out.find("\nlatency (us): min ") != std::string::npos);
    for (const char* part : {" median ", " p90 ", " max "}) CHECK(r.out.find(part) != std::string::npos);
    CHECK(r.out.find("time per op type, summed over 20 more runs with each op timed:\n") != std::string::npos);
    // One line per op type: "  matmul  2  <total>  <per run>  <share>%".
    const std::vector<std::pair<std::string, int>> expected{{"matmul", 2}, {"relu", 1}, {"softmax", 1}};
    for (auto& [type, count] : expected) {
        auto at = r.out.find("\n  " + type + " ");
        REQUIRE(at != std::string::npos);
        std::istringstream line(r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1));
        std::string name, share;
        int steps = 0;
        double total = -1, per_run = -1;
        line >> name >> steps >> total >> per_run >> share;
        CHECK(steps == count);
        CHECK(total >= 0);
        CHECK(per_run == doctest::Approx(total / 20).epsilon(0.01));
        CHECK(share.back() == '%');
    }
    // The memory `plan` reports for the same feed (relu writes over the first
    // product in place).
    CHECK(r.out.find("\nmemory: arena 104 bytes in 2 slots, lower bound 64 bytes, one buffer per value 128 bytes\n") !=
          std::string::npos);
    auto plan = run_cli(n.dir, "plan " + q(n.program) + " --fetch probs --feed x=" + q(n.x_file));
    CHECK(plan.out.find("  cpu: arena 104 bytes in 2 slots, one buffer per value 128 bytes, lower bound 64 bytes\n") !=
          std::string::npos);

    r = run_cli(n.dir, base + " --runs=7 --threads 2 --json");
    REQUIRE(r.status == 0);
    json j = json::parse(r.out);
    CHECK(j["runs"] == 7);
    CHECK(j["threads"] == 2);
    CHECK(j["warmup"] == 5);
    CHECK(j["fetch"] == json::array({"probs"}));
    CHECK(j["fed"] == json::array({"x"}));
    const json& lat = j["latency_us"];
    for (const char* k : {"min", "median", "p90", "max"}) REQUIRE(lat[k].is_number());
    CHECK(lat["min"].get<double>() > 0);
    CHECK(lat["min"].get<double>() <= lat["median"].get<double>());
    CHECK(lat["median"].get<double>() <= lat["p90"].get<double>());
    CHECK(lat["p90"].get<double>() <= lat["max"].get<double>());
    REQUIRE(j["ops"].is_array());
    double shares = 0;
    std::map<std::string, int> counts;
    for (auto& o : j["ops"]) {
        counts[o["type"].get<std::string>()] = o["count"].get<int>();
        CHECK(o["total_us"].get<double>() >= 0);
        CHECK(o["share"].get<double>() >= 0);
        shares += o["share"].get<double>();
    }
    CHECK(counts == std::map<std::string, int>{{"matmul", 2}, {"relu", 1}, {"softmax", 1}});
    CHECK(shares == doctest::Approx(1.0));
    CHECK(j["memory"]["arena_bytes"] == 104);
    CHECK(j["memory"]["lower_bound"] == 64);
}

TEST_CASE("cli: bench counts a fused element-wise chain as one entry, and takes --params" * doctest::skip(no_cli)) {
    CliNet n;  // relu(x * w + b): three element-wise steps, which may run fused
    const std::string base = "bench " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch relu_0 --runs 5 --json";
    auto r = run_cli(n.dir, base);
    INFO("stdout: " << r.out);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    json j = json::parse(r.out);
    std::multiset<std::string> types;
    double shares = 0;
    for (auto& o : j["ops"]) {
        // "elementwise_mul+elementwise_add+relu" for a fused chain.
        const std::string t = o["type"].get<std::string>();
        for (int i = 0; i < o["count"].get<int>(); ++i)
            for (std::size_t at = 0; at <= t.size();) {
                const std::size_t plus = std::min(t.find('+', at), t.size());
                types.insert(t.substr(at, plus - at));
                at = plus + 1;
            }
        shares += o["share"].get<double>();
    }
    CHECK(types == std::multiset<std::string>{"elementwise_mul", "elementwise_add", "relu"});
    CHECK(shares == doctest::Approx(1.0));
    CHECK(j["memory"]["lower_bound"] == 48);

    // --params: the persistables come from the directory, as for run.
    const std::string params = n.dir.file("params");
    fs::create_directories(params);
    write_npy((fs::path(params) / "fc.w%400.npy").string(), fp32({3}, {1, 2, 3}));
    write_npy((fs::path(params) / "b.npy").string(), fp32({3}, {-1, 0, 1}));
    r = run_cli(n.dir, base + " --params " + q(params) + " --warmup 0");
    REQUIRE(r.status == 0);
    CHECK(json::parse(r.out)["runs"] == 5);
    fs::remove(fs::path(params) / "b.npy");
    check_error(run_cli(n.dir, base + " --params " + q(params)), "dlgraph.io.param_missing", "'b'");
}

TEST_CASE("cli: bench errors: one line on stderr with the right id" * doctest::skip(no_cli)) {
    CliNet n;
    const std::string prog = "bench " + q(n.program);
    const std::string base = prog + " --feed x=" + q(n.x_file) + " --fetch relu_0";
    check_error(run_cli(n.dir, base + " --bogus"), "dlgraph.cli.usage", "'--bogus'");
    check_error(run_cli(n.dir, base + " --out o"), "dlgraph.cli.usage", "'--out'");
    check_error(run_cli(n.dir, base + " --backward relu_0"), "dlgraph.cli.usage", "'--backward'");
    check_error(run_cli(n.dir, base + " --runs"), "dlgraph.cli.usage", "--runs needs a value");
    check_error(run_cli(n.dir, base + " --runs="), "dlgraph.cli.usage", "--runs needs a non-empty value");
    for (const char* bad : {"0", "-3", "abc", "12x", "1.5", "99999999999"})
        check_error(run_cli(n.dir, base + " --runs " + bad), "dlgraph.cli.usage",
                    "option --runs needs a whole number from 1 to 10000000, not '" + std::string(bad) + "'");
    check_error(run_cli(n.dir, base + " --warmup -1"), "dlgraph.cli.usage", "--warmup needs a whole number from 0");
    check_error(run_cli(n.dir, base + " --threads -1"), "dlgraph.cli.usage", "--threads needs a whole number from 0");
    check_error(run_cli(n.dir, base + " --runs 3 --runs 4"), "dlgraph.cli.usage", "--runs is given twice");
    check_error(run_cli(n.dir, base + " --json=1"), "dlgraph.cli.usage", "--json takes no value");
    check_error(run_cli(n.dir, prog + " --feed x=" + q(n.x_file)), "dlgraph.cli.usage", "--fetch");
    check_error(run_cli(n.dir, prog + " --feed x --fetch relu_0"), "dlgraph.cli.usage", "NAME=FILE.npy");
    check_error(run_cli(n.dir, "bench --fetch relu_0"), "dlgraph.cli.usage", "PROGRAM.json");
    check_error(run_cli(n.dir, prog + " --feed x=" + q(n.dir.file("nope.npy")) + " --fetch relu_0"),
                "dlgraph.io.open", "nope.npy");
    check_error(run_cli(n.dir, prog + " --feed x=" + q(n.x_file) + " --fetch nosuch"), "dlgraph.graph.undeclared",
                "nosuch");
    check_error(run_cli(n.dir, prog + " --fetch relu_0"), "dlgraph.feed.missing", "'x'");
    check_error(run_cli(n.dir, prog + " --feed zz=" + q(n.x_file) + " --feed x=" + q(n.x_file) + " --fetch relu_0"),
                "dlgraph.feed.unknown", "'zz'");
    check_error(run_cli(n.dir, "bench " + q(n.dir.file("none.json")) + " --fetch relu_0"), "dlgraph.io.open",
                "none.json");
    write_npy(n.x_file, fp32({3, 2}, {1, 2, 3, 4, 5, 6}));
    check_error(run_cli(n.dir, base), "dlgraph.shape.feed", "'x'");
}

TEST_CASE("cli: --max-memory refuses a plan that needs more, --lenient drops Paddle's framework attributes" *
          doctest::skip(no_cli)) {
    CliNet n;
    const std::string o = " --out " + q(n.dir.file("o"));
    // x is [2,3] FP32: 24 bytes per value.
    check_error(run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch relu_0 --max-memory 16" + o),
                "dlgraph.resource.size", "more than the limit of 16 bytes");
    auto ok = run_cli(n.dir, "run " + q(n.program) + " --feed x=" + q(n.x_file) + " --fetch relu_0 --max-memory=1K" + o);
    INFO("stderr: " << ok.err);
    CHECK(ok.status == 0);
    for (std::string bad : {"0", "12Q", "-5", "99999999999T", "1.5G"})
        check_error(run_cli(n.dir, "run " + q(n.program) + " --fetch relu_0 --max-memory " + q(bad)), "dlgraph.cli.usage",
                    "needs a size in bytes");
    check_error(run_cli(n.dir, "inspect " + q(n.program) + " --max-memory 1G"), "dlgraph.cli.usage",
                "does not take option '--max-memory'");

    // The same program with attributes PaddlePaddle's exporter adds.
    json j = json::parse(read_file_bytes(n.program));
    for (auto& op : j["blocks"][0]["ops"]) {
        op["attrs"].push_back({{"name", "op_role"}, {"type", "INT"}, {"i", 0}});
        op["attrs"].push_back({{"name", "op_namescope"}, {"type", "STRING"}, {"s", "/"}});
    }
    const std::string paddle = n.dir.file("paddle.json");
    write_file_bytes(paddle, j.dump());
    check_error(run_cli(n.dir, "inspect " + q(paddle)), "dlgraph.format.attr", "has no attribute 'op_role'");
    auto lenient = run_cli(n.dir, "run " + q(paddle) + " --lenient --feed x=" + q(n.x_file) + " --fetch relu_0" + o);
    INFO("stderr: " << lenient.err);
    REQUIRE(lenient.status == 0);
    CHECK(lenient.err == "dlgraph: note: --lenient ignored these attributes: op_namescope, op_role\n");
    check_close(read_npy((fs::path(n.dir.file("o")) / "relu_0.npy").string()), n.expected({0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}));
}

TEST_CASE("cli: --device cuda plans without a GPU, with a copy wherever a value crosses" * doctest::skip(no_cli)) {
    CliNet n;
#ifdef DLGRAPH_CLI_HAS_CUDA
    auto r = run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --device cuda");
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("plan: 5 steps, 8 values, 3 steps on cuda, 2 copies\n") != std::string::npos);
    CHECK(r.out.find("  copy memcpy_h2d  X=x -> Out=x@cuda\n") != std::string::npos);
    CHECK(r.out.find("  #4 relu  X=elementwise_add_0 -> Out=relu_0  [cuda]\n") != std::string::npos);
    CHECK(r.out.find("  copy memcpy_d2h  X=relu_0 -> Out=relu_0@cpu\n") != std::string::npos);
    CHECK(r.out.find("  fc.w@0             persistable   FP32 [3]     on cuda\n") != std::string::npos);
    // With a file for the feed: the memory of each place.
    r = run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --feed x=" + q(n.x_file) + " --device cuda");
    REQUIRE(r.status == 0);
    CHECK(r.out.find("  cuda: arena ") != std::string::npos);
    CHECK(r.out.find("  cpu: arena ") != std::string::npos);
    // Running needs a GPU: where there is none, the error says so.
    r = run_cli(n.dir, "run " + q(n.program) + " --fetch relu_0 --feed x=" + q(n.x_file) + " --out " +
                           q(n.dir.file("out")) + " --device cuda");
    if (r.status != 0) check_error(r, "dlgraph.cuda.unavailable", "no GPU is usable here");
#else
    check_error(run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --device cuda"), "dlgraph.cuda.unavailable",
                "built without the CUDA backend");
#endif
    check_error(run_cli(n.dir, "plan " + q(n.program) + " --fetch relu_0 --device gpu"), "dlgraph.cli.usage",
                "--device takes cpu or cuda, not 'gpu'");
    check_error(run_cli(n.dir, "inspect " + q(n.program) + " --device cuda"), "dlgraph.cli.usage",
                "'inspect' does not take option '--device'");
}

TEST_CASE("cli: emit writes a fixed model's header, and its errors" * doctest::skip(no_cli)) {
    CliNet n;
    const std::string params = n.dir.file("params");
    fs::create_directories(params);
    write_npy((fs::path(params) / "fc.w%400.npy").string(), fp32({3}, {1, 2, 3}));
    write_npy((fs::path(params) / "b.npy").string(), fp32({3}, {-1, 0, 1}));
    const std::string base = "emit " + q(n.program) + " --fetch relu_0 --params " + q(params);

    auto r = run_cli(n.dir, base + " --feed x=2,3 --namespace net -o " + q(n.dir.file("net.hpp")));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.rfind("wrote " + n.dir.file("net.hpp") + ": 3 steps, weights 24 bytes, arena ", 0) == 0);
    const std::string h = read_file_bytes(n.dir.file("net.hpp"));
    CHECK(h.find("namespace net {") != std::string::npos);
    CHECK(h.find("inline void run(const float (&x)[6], float (&relu_0)[6], std::span<std::byte, arena_bytes> arena) "
                 "noexcept") != std::string::npos);
    // Without -o the header goes to stdout.
    r = run_cli(n.dir, base + " --feed x=2,3");
    CHECK(r.status == 0);
    CHECK(r.out.find("namespace model {") != std::string::npos);
    CHECK(r.out.find("float (&relu_0)[6]") != std::string::npos);

    SUBCASE("a feed without a shape, or with a bad one") {
        check_error(run_cli(n.dir, base + " --feed x"), "dlgraph.cli.usage", "NAME=D1,D2,...");
        check_error(run_cli(n.dir, base + " --feed x=2,,3"), "dlgraph.cli.usage", "NAME=D1,D2,...");
        check_error(run_cli(n.dir, base + " --feed x=2,-3"), "dlgraph.cli.usage", "NAME=D1,D2,...");
    }
    SUBCASE("weights missing") {
        check_error(run_cli(n.dir, "emit " + q(n.program) + " --fetch relu_0 --feed x=2,3"), "dlgraph.io.param_missing",
                    "--params");
    }
    SUBCASE("an arena over its budget is for the compiler; a bad budget for the CLI") {
        check_error(run_cli(n.dir, base + " --feed x=2,3 --arena-budget 0"), "dlgraph.cli.usage", "--arena-budget");
    }
    SUBCASE("options of other commands") {
        check_error(run_cli(n.dir, base + " --feed x=2,3 --device cpu"), "dlgraph.cli.usage", "'--device'");
    }
    SUBCASE("--weights int8: the report, and the options' errors") {
        // relu(x * w + b) has no matrix product: nothing to quantize, no calibration needed.
        r = run_cli(n.dir, base + " --feed x=2,3 --weights int8 -o " + q(n.dir.file("int8.hpp")));
        INFO("stderr: " << r.err);
        REQUIRE(r.status == 0);
        CHECK(r.out.rfind("int8: 0 products in INT8, 0 in floating point\nwrote ", 0) == 0);
        check_error(run_cli(n.dir, base + " --feed x=2,3 --weights int4"), "dlgraph.cli.usage",
                    "option --weights takes fp32 or int8, not 'int4'");
        check_error(run_cli(n.dir, base + " --feed x=2,3 --calibrate x=" + q(n.x_file)), "dlgraph.cli.usage",
                    "--calibrate, --evaluate and --labels go with --weights int8");
        check_error(run_cli(n.dir, base + " --feed x=2,3 --weights fp32 --labels " + q(n.x_file)), "dlgraph.cli.usage",
                    "go with --weights int8");
        check_error(run_cli(n.dir, base + " --feed x=2,3 --weights int8 --calibrate x"), "dlgraph.cli.usage",
                    "--calibrate 'x' needs the form NAME=FILE.npy");
        check_error(run_cli(n.dir, base + " --feed x=2,3 --weights int8 --evaluate x=" + q(n.x_file) + " --evaluate x=" +
                                       q(n.x_file)),
                    "dlgraph.cli.usage", "variable 'x' is given to --evaluate twice");
    }
}

// emit --weights int8 on a program with a product: calibrated on a batch,
// compared on another, with labels.
TEST_CASE("cli: emit --weights int8 quantizes the products and reports the accuracy" * doctest::skip(no_cli)) {
    CliTempDir dir;
    Program p;
    auto x = p.input<float>("x", {-1, 3});
    auto w = p.parameter<float>("w", {3, 2}, init::constant(0));
    auto y = p.rename(softmax(matmul(x, w)), "prob");
    (void)y;
    const std::string program = dir.file("net.json"), params = dir.file("params");
    write_file_bytes(program, p.to_json());
    fs::create_directories(params);
    write_npy((fs::path(params) / "w.npy").string(), fp32({3, 2}, {1, -1, 0.5f, -0.5f, -2, 2}));
    const std::string cal = dir.file("cal.npy"), ev = dir.file("ev.npy"), labels = dir.file("labels.npy");
    write_npy(cal, fp32({4, 3}, {1, 2, 3, -1, -2, -3, 0.5f, 0, 0, 0, 0, 1}));
    write_npy(ev, fp32({2, 3}, {1, 0, 0, 0, 0, 1}));
    Tensor l(DataType::INT64, {2});
    l.data<std::int64_t>()[0] = 0;  // [1, 0, 0]: logits (1, -1), class 0
    l.data<std::int64_t>()[1] = 0;  // [0, 0, 1]: logits (-2, 2), class 1: wrong in both
    write_npy(labels, l);
    const std::string base = "emit " + q(program) + " --fetch prob --params " + q(params) + " --feed x=1,3 --weights int8";
    auto r = run_cli(dir, base + " --calibrate x=" + q(cal) + " --evaluate x=" + q(ev) + " --labels " + q(labels) +
                              " -o " + q(dir.file("m.hpp")));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("int8: 1 product in INT8, 0 in floating point; on 2 rows of the evaluation data, the same class as "
                     "FP32 for 2, largest |difference| ") == 0);
    CHECK(r.out.find("; accuracy FP32 50.00%, INT8 50.00% (+0.00 points)\n") != std::string::npos);
    CHECK(r.out.find("+ the INT8 inputs' buffer, 6 bytes") != std::string::npos);
    const std::string h = read_file_bytes(dir.file("m.hpp"));
    CHECK(h.find("std::int8_t w_q[6]") != std::string::npos);
    // Without an --evaluate batch, the calibration batch; without it at all, an error.
    r = run_cli(dir, base + " --calibrate x=" + q(cal));
    REQUIRE(r.status == 0);
    CHECK(r.err.find("on 4 rows of the calibration data") != std::string::npos);  // the header is on stdout
    check_error(run_cli(dir, base), "dlgraph.emit.calibrate", "INT8 weights need calibration data");
    check_error(run_cli(dir, base + " --calibrate x=" + q(ev) + " --labels " + q(labels) + " --evaluate x=" + q(cal)),
                "dlgraph.emit.calibrate", "there are 2 labels for 4 rows of 'prob'");
}
