// dlgraph: the command-line tool. Runs a program on .npy feeds, benchmarks
// it, and shows programs and plans (text, JSON, Graphviz DOT). See docs/cli.md.
//
// Every failure exits with status 1 and writes exactly one line to stderr:
//   dlgraph: error: [dlgraph.some.id] message
#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <new>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "dlgraph/autodiff.hpp"
#ifdef DLGRAPH_HAS_CUDA
#include "dlgraph/cuda/cuda.hpp"
#endif
#include "dlgraph/dot.hpp"
#include "dlgraph/fixed/emit.hpp"
#include "dlgraph/npy.hpp"
#include "dlgraph/plan_io.hpp"
#include "dlgraph/session.hpp"
#include "dlgraph/validate.hpp"
#ifdef DLGRAPH_HAS_MPI
#include "dlgraph/mpi.hpp"
#endif

namespace {

using namespace dlgraph;
namespace fs = std::filesystem;

constexpr const char* usage_text =
    "usage: dlgraph COMMAND PROGRAM.json [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  run PROGRAM.json --fetch NAME... [--feed NAME=FILE.npy...] [--params DIR] [--out DIR]\n"
    "                   [--backward LOSS] [--device cpu|cuda]\n"
    "      Evaluate the fetched variables and write each to OUT/<NAME>.npy (OUT defaults to \".\").\n"
    "      --params DIR loads the persistable variables the fetches need from DIR/<NAME>.npy (a\n"
    "      checkpoint directory works); without it the program's initializer ops give them values.\n"
    "      --backward LOSS first appends the backward pass of LOSS for every persistable FP32/FP64\n"
    "      variable, so that gradients such as W@GRAD can be fetched.\n"
    "  bench PROGRAM.json --fetch NAME... [--feed NAME=FILE.npy...] [--params DIR] [--threads N]\n"
    "                     [--runs N] [--warmup N] [--json] [--device cpu|cuda]\n"
    "      Plan once, run --warmup times (default 5), then time --runs runs (default 100) and print\n"
    "      the latency (min, median, p90, max, in microseconds), the time per op type (from as many\n"
    "      more runs, timed per op) and the plan's memory. --threads sets the session's threads\n"
    "      (default 1; 0: every hardware thread). --json prints it all as one JSON object.\n"
    "  inspect PROGRAM.json\n"
    "      List blocks, variables (dtype, dims, persistable) and ops (slots, attributes).\n"
    "  plan PROGRAM.json --fetch NAME... [--feed NAME=FILE.npy | --feed NAME ...] [--json]\n"
    "                    [--backward LOSS] [--device cpu|cuda]\n"
    "      Show the execution plan; with a .npy file for every feed, also the concrete shapes\n"
    "      and the memory the plan takes. --json prints the plan as JSON.\n"
    "  dot PROGRAM.json [--fetch NAME...] [--feed NAME...] [-o FILE] [--backward LOSS]\n"
    "      Graphviz DOT of the program, or of the plan for the fetched variables.\n"
    "  emit PROGRAM.json --fetch NAME... --feed NAME=D1,D2,...  [--params DIR] [-o FILE]\n"
    "                    [--namespace NAME] [--arena-budget SIZE] [--weights fp32|int8]\n"
    "                    [--calibrate NAME=FILE.npy...] [--evaluate NAME=FILE.npy...] [--labels FILE.npy]\n"
    "      Write a fixed model: one C++ header with the weights (from --params, a checkpoint\n"
    "      directory works) as constexpr arrays and run(feeds..., fetches..., arena), a flat\n"
    "      sequence of kernel calls with the shapes given (every feed needs one) and the\n"
    "      arena planned as Session<cpu> plans it. No heap, exceptions or threads at run time\n"
    "      (docs/design.md, \"Fixed models\"). --namespace names the model's namespace (default\n"
    "      model); --arena-budget makes a larger arena a compile error. --weights int8 computes\n"
    "      the products with 2-D weights in INT8 (weights per output channel, inputs per tensor,\n"
    "      int32 sums), the inputs' scales from --calibrate (a batch of every feed), and reports\n"
    "      how the INT8 outputs compare with FP32 on --evaluate (default: the calibration batch),\n"
    "      with --labels the accuracy of both.\n"
    "  ops [--json]\n"
    "      List every op this build knows (built-in, and registered by code linked into it:\n"
    "      dlgraph_add_cli in CMake): slots, attributes with defaults, dtypes, gradient, doc.\n"
    "  help, --help\n"
    "      Print this text.\n"
    "\n"
    "run, bench and plan take --device cpu|cuda (default cpu): cuda runs the ops that have CUDA\n"
    "kernels on the GPU (a build with the CUDA backend); plan --device cuda needs no GPU and\n"
    "shows where each step runs and every copy between host and GPU.\n"
    "\n"
    "Every command takes --lenient: drop the attributes PaddlePaddle's framework puts on ops\n"
    "(op_role, op_callstack, use_mkldnn, ...) where the op has no such attribute, and name them\n"
    "once on stderr; without it such an attribute is an error. run and bench take\n"
    "--max-memory SIZE (bytes, or with a K, M, G or T suffix; default: the machine's memory):\n"
    "a value or plan buffer larger than that is an error before anything is allocated.\n"
    "\n"
    "Without --feed, plan and dot treat the program's inputs (variables that ops read but no op\n"
    "writes, not persistable) as fed. Variable names in file names are escaped: bytes outside\n"
    "[A-Za-z0-9._-] become %XX (uppercase hex), e.g. fc_0.w@GRAD -> fc_0.w%40GRAD.npy.\n"
    "Errors: exit status 1 and one line on stderr, \"dlgraph: error: [id] message\".\n";

[[noreturn]] void usage_fail(const std::string& msg) {
    throw error("dlgraph.cli.usage", msg + " (see 'dlgraph --help')");
}

// ---- arguments ----------------------------------------------------------------

struct Args {
    std::string command;
    std::string program;
    std::vector<std::string> fetch;
    std::vector<std::string> feed;  // NAME=FILE or NAME, as given
    std::string params;
    std::string out;
    std::string output;  // -o
    std::string backward;  // --backward LOSS
    int threads = 1, runs = 100, warmup = 5;  // bench
    bool has_params = false, has_out = false, has_output = false, has_backward = false, json = false;
    bool has_threads = false, has_runs = false, has_warmup = false;
    bool lenient = false, has_max_memory = false, has_device = false;
    std::string device = "cpu";  // --device cpu|cuda
    std::string name_space = "model";  // emit --namespace
    std::uint64_t arena_budget = 0;    // emit --arena-budget
    bool has_namespace = false, has_arena_budget = false, has_weights = false, has_labels = false;
    std::string weights = "fp32";                    // emit --weights
    std::vector<std::string> calibrate, evaluate;    // emit --calibrate, --evaluate NAME=FILE.npy
    std::string labels;                              // emit --labels FILE.npy
    std::uint64_t max_memory = physical_memory_bytes();
};

// "512M", "2G", "1048576": bytes, with an optional binary suffix.
std::uint64_t size_option(const std::string& opt, const std::string& value) {
    std::uint64_t n = 0;
    const char* end = value.data() + value.size();
    const auto [at, ec] = std::from_chars(value.data(), end, n);
    std::uint64_t unit = 1;
    if (ec == std::errc() && at + 1 == end) {
        switch (*at) {
            case 'K': unit = 1ull << 10; break;
            case 'M': unit = 1ull << 20; break;
            case 'G': unit = 1ull << 30; break;
            case 'T': unit = 1ull << 40; break;
            default: unit = 0;
        }
    } else if (ec != std::errc() || at != end) {
        unit = 0;
    }
    if (unit == 0 || n == 0 || n > max_shape_bytes / unit)
        usage_fail("option " + opt + " needs a size in bytes (with an optional K, M, G or T suffix) from 1 to " +
                   std::to_string(max_shape_bytes) + ", not '" + value + "'");
    return n * unit;
}

// A whole decimal number in [lo, hi] given to option `opt`.
int count_option(const std::string& opt, const std::string& value, int lo, int hi) {
    int n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || n < lo || n > hi)
        usage_fail("option " + opt + " needs a whole number from " + std::to_string(lo) + " to " +
                   std::to_string(hi) + ", not '" + value + "'");
    return n;
}

Args parse_args(int argc, char** argv) {
    Args a;
    a.command = argv[1];
    const std::set<std::string> commands{"run", "bench", "inspect", "plan", "dot", "emit"};
    if (!commands.count(a.command)) usage_fail("unknown command '" + a.command + "'");
    // Options each command takes.
    std::set<std::string> allowed;
    if (a.command == "run")
        allowed = {"--fetch", "--feed", "--params", "--out", "--backward", "--max-memory", "--device"};
    if (a.command == "bench")
        allowed = {"--fetch", "--feed", "--params", "--threads", "--runs", "--warmup", "--json", "--max-memory", "--device"};
    if (a.command == "plan") allowed = {"--fetch", "--feed", "--json", "--backward", "--device"};
    if (a.command == "dot") allowed = {"--fetch", "--feed", "-o", "--output", "--backward"};
    if (a.command == "emit")
        allowed = {"--fetch",   "--feed",         "--params",  "-o",        "--output",  "--namespace",
                   "--arena-budget", "--weights", "--calibrate", "--evaluate", "--labels"};
    allowed.insert("--lenient");

    for (int i = 2; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg.size() > 1 && arg[0] == '-') {
            std::string opt = arg, value;
            bool inline_value = false;
            if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
                opt = arg.substr(0, eq);
                value = arg.substr(eq + 1);
                inline_value = true;
            }
            if (!allowed.count(opt)) usage_fail("'" + a.command + "' does not take option '" + opt + "'");
            if (opt == "--json" || opt == "--lenient") {
                if (inline_value) usage_fail("option " + opt + " takes no value");
                (opt == "--json" ? a.json : a.lenient) = true;
                continue;
            }
            if (!inline_value) {
                if (i + 1 >= argc) usage_fail("option " + opt + " needs a value");
                value = argv[++i];
            }
            if (value.empty()) usage_fail("option " + opt + " needs a non-empty value");
            auto once = [&](bool& seen, std::string& dst) {
                if (seen) usage_fail("option " + opt + " is given twice");
                seen = true;
                dst = value;
            };
            auto once_count = [&](bool& seen, int& dst, int lo, int hi) {
                if (seen) usage_fail("option " + opt + " is given twice");
                seen = true;
                dst = count_option(opt, value, lo, hi);
            };
            if (opt == "--fetch") a.fetch.push_back(value);
            else if (opt == "--feed") a.feed.push_back(value);
            else if (opt == "--params") once(a.has_params, a.params);
            else if (opt == "--out") once(a.has_out, a.out);
            else if (opt == "--backward") once(a.has_backward, a.backward);
            else if (opt == "--device") {
                once(a.has_device, a.device);
                if (a.device != "cpu" && a.device != "cuda")
                    usage_fail("option --device takes cpu or cuda, not '" + a.device + "'");
#ifndef DLGRAPH_HAS_CUDA
                if (a.device == "cuda")
                    throw session_error("dlgraph.cuda.unavailable",
                                        "this dlgraph was built without the CUDA backend (CMake found no nvcc)");
#endif
            }
            else if (opt == "--threads") once_count(a.has_threads, a.threads, 0, 1024);
            else if (opt == "--runs") once_count(a.has_runs, a.runs, 1, 10'000'000);
            else if (opt == "--warmup") once_count(a.has_warmup, a.warmup, 0, 10'000'000);
            else if (opt == "--namespace") once(a.has_namespace, a.name_space);
            else if (opt == "--weights") {
                once(a.has_weights, a.weights);
                if (a.weights != "fp32" && a.weights != "int8")
                    usage_fail("option --weights takes fp32 or int8, not '" + a.weights + "'");
            }
            else if (opt == "--calibrate") a.calibrate.push_back(value);
            else if (opt == "--evaluate") a.evaluate.push_back(value);
            else if (opt == "--labels") once(a.has_labels, a.labels);
            else if (opt == "--arena-budget") {
                if (a.has_arena_budget) usage_fail("option " + opt + " is given twice");
                a.has_arena_budget = true;
                a.arena_budget = size_option(opt, value);
            }
            else if (opt == "--max-memory") {
                if (a.has_max_memory) usage_fail("option " + opt + " is given twice");
                a.has_max_memory = true;
                a.max_memory = size_option(opt, value);
            }
            else once(a.has_output, a.output);  // -o, --output
        } else {
            if (!a.program.empty()) usage_fail("unexpected argument '" + arg + "'");
            a.program = arg;
        }
    }
    if (a.program.empty()) usage_fail("'" + a.command + "' needs a PROGRAM.json");
    if ((a.command == "run" || a.command == "bench" || a.command == "plan" || a.command == "emit") && a.fetch.empty())
        usage_fail("'" + a.command + "' needs at least one --fetch NAME");
    return a;
}

struct FeedSpec {
    std::string name;
    std::string file;  // empty: a name only
};

// NAME[=FILE] specs of `option` (--feed, or emit's --calibrate/--evaluate).
std::vector<FeedSpec> parse_feeds(const std::vector<std::string>& specs, bool need_file,
                                  const std::string& option = "--feed") {
    std::vector<FeedSpec> out;
    std::set<std::string> seen;
    for (auto& s : specs) {
        auto eq = s.find('=');
        FeedSpec f;
        f.name = s.substr(0, eq);
        if (eq != std::string::npos) f.file = s.substr(eq + 1);
        if (f.name.empty()) usage_fail(option + " '" + s + "' names no variable");
        if (eq != std::string::npos && f.file.empty()) usage_fail(option + " '" + s + "' names no file");
        if (need_file && f.file.empty()) usage_fail(option + " '" + s + "' needs the form NAME=FILE.npy");
        if (!seen.insert(f.name).second)
            usage_fail("variable '" + f.name + "' is " + (option == "--feed" ? "fed" : "given to " + option) + " twice");
        out.push_back(std::move(f));
    }
    return out;
}

std::vector<TargetRef> fetch_targets(const std::vector<std::string>& names) {
    std::vector<TargetRef> t;
    for (auto& n : names)
        if (std::find(t.begin(), t.end(), TargetRef(n)) == t.end()) t.emplace_back(n);
    return t;
}

// ---- helpers ---------------------------------------------------------------------

std::string npy_path(const std::string& dir, const std::string& name) {
    return (fs::path(dir) / (escape_file_name(name) + ".npy")).string();
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i) s += ",";
        s += std::to_string(dims[i]);
    }
    return s + "]";
}

std::string number_text(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

std::string attr_text(const Attribute& a) {
    auto list = [](const auto& v, auto f) {
        std::string s = "[";
        bool first = true;
        for (auto&& x : v) {
            if (!first) s += ",";
            s += f(x);
            first = false;
        }
        return s + "]";
    };
    switch (a.type) {
        case AttrType::INT:
        case AttrType::LONG: {
            std::string s = std::to_string(a.i);
            if ((a.name == "dtype" || a.name == "in_dtype" || a.name == "out_dtype") && a.i >= 0 && a.i < num_dtypes)
                s += " (" + to_string(static_cast<DataType>(a.i)) + ")";
            return s;
        }
        case AttrType::FLOAT: return number_text(a.f);
        case AttrType::STRING: return json(a.s).dump();
        case AttrType::INTS: return list(a.ints, [](std::int64_t x) { return std::to_string(x); });
        case AttrType::FLOATS: return list(a.floats, [](double x) { return number_text(x); });
        case AttrType::STRINGS: return list(a.strings, [](const std::string& x) { return json(x).dump(); });
        case AttrType::BOOLEAN: return a.b ? "true" : "false";
        case AttrType::BOOLEANS: return list(a.bools, [](bool x) { return std::string(x ? "true" : "false"); });
        case AttrType::BLOCK: return "block " + std::to_string(a.block_idx);
    }
    return "?";
}

std::string slots_text(const std::vector<OpSlot>& slots) {
    std::string s;
    for (auto& sl : slots) {
        if (!s.empty()) s += ", ";
        s += sl.parameter + "=";
        if (sl.arguments.size() != 1) s += "[";
        for (std::size_t i = 0; i < sl.arguments.size(); ++i) {
            if (i) s += ",";
            s += sl.arguments[i];
        }
        if (sl.arguments.size() != 1) s += "]";
    }
    return s;
}

// Variables of block 0 that some op reads and no op writes (not persistable).
std::vector<std::string> program_inputs(const ProgramDesc& p) {
    const BlockDesc& b = p.blocks.at(0);
    std::set<std::string> written;
    for (auto& op : b.ops)
        for (auto& s : op.outputs) written.insert(s.arguments.begin(), s.arguments.end());
    std::vector<std::string> out;
    for (auto& op : b.ops)
        for (auto& s : op.inputs)
            for (auto& a : s.arguments) {
                const VarDesc* vd = b.find_var(a);
                if (!vd || vd->persistable || vd->type != VarType::LOD_TENSOR || written.count(a)) continue;
                if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
            }
    return out;
}

// Plans `targets`, feeding the named variables, or (when none are named) the
// program's inputs that the targets need.
// With `device`, steps are placed on it where it has a kernel.
ExecutionPlan plan_for(const ProgramDesc& p, const std::vector<TargetRef>& targets, const std::vector<std::string>& fed,
                       bool default_fed, const DeviceContext* device = nullptr) {
    if (!default_fed) return make_plan(p, targets, fed, device);
    ExecutionPlan all = make_plan(p, targets, program_inputs(p));
    std::vector<std::string> used;
    for (std::size_t i = 0; i < all.fed.size(); ++i)
        if (all.feed_values[i] >= 0) used.push_back(all.fed[i]);
    return make_plan(p, targets, used, device);
}

// Checks a tensor against a declaration, as the session checks feeds.
void check_against(const VarDesc& vd, const Tensor& t, const std::string& what, const std::string& type_id,
                   const std::string& shape_id) {
    if (t.dtype() != vd.data_type)
        throw type_error(type_id, what + " is " + to_string(t.dtype()) + " but variable '" + vd.name + "' is " +
                                      to_string(vd.data_type));
    if (!vd.dims.empty() && !dims_compatible(Shape(vd.dims), t.shape()))
        throw shape_error(shape_id, what + " has shape " + to_string(t.shape()) + " but variable '" + vd.name +
                                        "' is declared " + dims_text(vd.dims));
}

// The program file, loaded leniently with --lenient (naming what it dropped).
ProgramDesc load_program_arg(const Args& a) {
    std::vector<std::string> ignored;
    ProgramDesc desc = load_program_file(a.program, LoadOptions{a.lenient, &ignored});
    if (!ignored.empty()) {
        std::string names;
        for (auto& n : ignored) names += (names.empty() ? "" : ", ") + n;
        std::cerr << "dlgraph: note: --lenient ignored these attributes: " << names << std::endl;
    }
    return desc;
}

// The processes the collective ops reach: under mpirun (in a build with
// MPI), every process of the job; otherwise this process alone.
struct job {
#ifdef DLGRAPH_HAS_MPI
    std::unique_ptr<mpi::Environment> env;
#endif
    std::shared_ptr<Communicator> comm;
    ~job() { comm.reset(); }  // before MPI goes
};
job& the_job() {
    static job j;
    return j;
}
const std::shared_ptr<Communicator>& communicator() {
    job& j = the_job();
    if (j.comm) return j.comm;
#ifdef DLGRAPH_HAS_MPI
    if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK")) {
        j.env = std::make_unique<mpi::Environment>();
        j.comm = mpi::world();
        return j.comm;
    }
#endif
    j.comm = std::make_shared<SelfCommunicator>();
    return j.comm;
}
// Rank 0 of the job writes the outputs and reports (every rank computes).
bool lead_rank() { return communicator()->rank() == 0; }

// The session's options from the command line.
SessionOptions session_options(const Args& a) {
    SessionOptions opts;
    opts.threads = a.threads;
    opts.max_bytes = a.max_memory;
    opts.comms = {communicator()};
    return opts;
}

// The program file with, for --backward LOSS, the backward pass of LOSS
// appended for every persistable FP32/FP64 tensor (so that W@GRAD can be
// fetched). A fetched NAME@GRAD that the pass did not create is explained.
ProgramDesc load_for(const Args& a) {
    ProgramDesc desc = load_program_arg(a);
    if (!a.has_backward) return desc;
    std::set<std::string> params;
    for (auto& v : desc.blocks.at(0).vars)
        if (v.persistable && v.type == VarType::LOD_TENSOR &&
            (v.data_type == DataType::FP32 || v.data_type == DataType::FP64))
            params.insert(v.name);
    append_backward(desc, a.backward, params);
    const BlockDesc& blk = desc.blocks.at(0);
    const std::string suffix = grad_var_name("");
    for (auto& f : a.fetch) {
        if (blk.find_var(f) || !f.ends_with(suffix)) continue;
        const std::string base = f.substr(0, f.size() - suffix.size());
        if (!blk.find_var(base)) continue;  // the planner reports the unknown name
        throw graph_error("dlgraph.graph.backward",
                          "cannot fetch '" + f + "': " +
                              (params.count(base) ? "the loss '" + a.backward + "' does not depend on '" + base + "'"
                                                  : "the backward pass gives '" + base + "' no gradient (gradients "
                                                    "go to persistable FP32/FP64 variables and the values between "
                                                    "them and the loss)"));
    }
    return desc;
}

// Reads every persistable variable that `plan` takes from the scope from
// DIR/<escaped name>.npy into the session's root scope.
// The persistable variable `name` of `blk` from DIR/<escaped name>.npy,
// checked against its declaration.
Tensor read_param(const std::string& dir, const BlockDesc& blk, const std::string& name) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw io_error("dlgraph.io.open", "--params '" + dir + "' is not a directory");
    const std::string path = npy_path(dir, name);
    if (!fs::exists(path, ec))
        throw io_error("dlgraph.io.param_missing", "persistable variable '" + name + "' has no file '" + path +
                                                       "' in --params directory");
    Tensor t = read_npy(path);
    check_against(*blk.find_var(name), t, "'" + path + "'", "dlgraph.type.param", "dlgraph.shape.param");
    return t;
}

template <class Device> void load_params(Session<Device>& session, const ExecutionPlan& plan, const std::string& dir) {
    const BlockDesc& blk = session.program().blocks[0];
    for (int v : plan.scope_reads) {
        const std::string& name = plan.values[static_cast<std::size_t>(v)].name;
        session.scope().var(name).template get_mutable<Tensor>() = read_param(dir, blk, name);
    }
}

// ---- commands --------------------------------------------------------------------

// The --feed NAME=FILE.npy options of `run` and `bench`: names and values.
std::pair<std::vector<std::string>, std::vector<Tensor>> read_feeds(const std::vector<std::string>& specs) {
    std::pair<std::vector<std::string>, std::vector<Tensor>> r;
    for (auto& f : parse_feeds(specs, true)) {
        r.first.push_back(f.name);
        r.second.push_back(read_npy(f.file));
    }
    return r;
}

template <class Device> int run_on(const Args& a) {
    ProgramDesc desc = load_for(a);
    const auto [fed_names, fed_values] = read_feeds(a.feed);
    const auto targets = fetch_targets(a.fetch);
    Session<Device> session(std::move(desc), session_options(a));
    if (a.has_params) load_params(session, session.plan(targets, fed_names), a.params);

    std::vector<Feed> feeds;
    feeds.reserve(fed_names.size());
    for (std::size_t i = 0; i < fed_names.size(); ++i) feeds.emplace_back(fed_names[i], fed_values[i]);
    std::vector<Tensor> results = session.eval(targets, feeds);
    if (!lead_rank()) return 0;

    const std::string out_dir = a.has_out ? a.out : ".";
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec || !fs::is_directory(out_dir))
        throw io_error("dlgraph.io.mkdir", "cannot create output directory '" + out_dir + "'" +
                                               (ec ? ": " + ec.message() : std::string()));
    std::string report;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const std::string path = npy_path(out_dir, targets[i].var);
        write_npy(path, results[i]);
        report += targets[i].var + " " + to_string(results[i].dtype()) + " " + to_string(results[i].shape()) + " " +
                  path + "\n";
    }
    std::cout << report;
    return 0;
}

int cmd_run(const Args& a) {
#ifdef DLGRAPH_HAS_CUDA
    if (a.device == "cuda") return run_on<cuda>(a);
#endif
    return run_on<cpu>(a);
}

// The q-quantile of sorted values, interpolated linearly between ranks (as
// NumPy's percentile does by default).
double quantile(const std::vector<double>& sorted, double q) {
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

std::string fixed_text(double v, int decimals) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
    return std::string(buf, r.ptr);
}

std::string pad_left(const std::string& s, std::size_t w) { return std::string(w - std::min(w, s.size()), ' ') + s; }
std::string pad_right(const std::string& s, std::size_t w) { return s + std::string(w - std::min(w, s.size()), ' '); }

struct OpTime {
    std::string type;  // an op type, or a fused chain's types joined by '+'
    int count = 0;     // steps (or chains) of this type in the plan
    std::chrono::nanoseconds total{};
};

// What `bench` measured: latencies of whole runs (sorted), time per op type
// (largest first) from separate profiled runs, and the memory plan used.
struct BenchResult {
    std::vector<std::string> fetch, fed;
    std::vector<Tensor> fed_values;
    std::vector<double> latency;  // microseconds
    std::vector<OpTime> ops;
    std::chrono::nanoseconds ops_total{};
    MemoryPlan memory;
};

// Sums step times per op type. A fused chain of element-wise steps runs as
// its last step (the others do nothing), so it counts as one entry named by
// all its op types.
std::vector<OpTime> time_per_op(const ExecutionPlan& plan, const std::vector<std::pair<int, int>>& chains,
                                const std::vector<std::chrono::nanoseconds>& step_time, std::chrono::nanoseconds& total) {
    std::vector<OpTime> ops;
    for (std::size_t s = 0; s < plan.steps.size();) {
        std::size_t last = s;
        for (auto& [first, end] : chains)
            if (static_cast<std::size_t>(first) == s) last = static_cast<std::size_t>(end);
        std::string type;
        std::chrono::nanoseconds t{};
        for (std::size_t k = s; k <= last; ++k) {
            type += (k > s ? "+" : "") + std::string(plan.steps[k].def->type);
            t += step_time[k];
        }
        auto it = std::find_if(ops.begin(), ops.end(), [&](const OpTime& o) { return o.type == type; });
        if (it == ops.end()) it = ops.insert(ops.end(), OpTime{type});
        ++it->count;
        it->total += t;
        total += t;
        s = last + 1;
    }
    std::stable_sort(ops.begin(), ops.end(), [](const OpTime& x, const OpTime& y) { return x.total > y.total; });
    return ops;
}

template <class Device> BenchResult bench_on(const Args& a) {
    BenchResult r;
    ProgramDesc desc = load_program_arg(a);
    std::tie(r.fed, r.fed_values) = read_feeds(a.feed);
    const auto targets = fetch_targets(a.fetch);
    for (auto& t : targets) r.fetch.push_back(t.var);
    Session<Device> session(std::move(desc), session_options(a));
    // Planned once here; every run below finds this bound plan.
    const ExecutionPlan& plan = session.plan(targets, r.fed);
    if (a.has_params) load_params(session, plan, a.params);
    std::vector<Feed> feeds;
    feeds.reserve(r.fed.size());
    for (std::size_t i = 0; i < r.fed.size(); ++i) feeds.emplace_back(r.fed[i], r.fed_values[i]);
    std::vector<Tensor> out(targets.size());
    // The first run also initializes persistables and infers shapes.
    for (int i = 0; i < a.warmup; ++i) session.eval_into(targets, feeds, out);
    using clock = std::chrono::steady_clock;
    r.latency.resize(static_cast<std::size_t>(a.runs));
    for (auto& l : r.latency) {
        const auto t0 = clock::now();
        session.eval_into(targets, feeds, out);
        l = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    }
    std::sort(r.latency.begin(), r.latency.end());
    // Ops are timed in runs of their own, so that reading the clock around
    // every kernel does not count in the latencies above.
    std::vector<std::chrono::nanoseconds> step_time;
    for (int i = 0; i < a.runs; ++i) session.eval_into_profiled(targets, feeds, out, step_time);
    r.ops = time_per_op(plan, session.fused_steps(targets, r.fed), step_time, r.ops_total);
    // The memory plan the runs above used (the shapes of these feeds).
    r.memory = session.memory_plan(targets, r.fed);
    return r;
}

BenchResult run_bench(const Args& a) {
#ifdef DLGRAPH_HAS_CUDA
    if (a.device == "cuda") return bench_on<cuda>(a);
#endif
    return bench_on<cpu>(a);
}

double micros(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::micro>(d).count(); }
double share_of(const BenchResult& r, const OpTime& o) {
    return r.ops_total.count() > 0 ? micros(o.total) / micros(r.ops_total) : 0.0;
}
double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

json bench_json(const Args& a, const BenchResult& r) {
    json jops = json::array();
    for (auto& o : r.ops)
        jops.push_back({{"type", o.type},
                        {"count", o.count},
                        {"total_us", micros(o.total)},
                        {"per_run_us", micros(o.total) / a.runs},
                        {"share", share_of(r, o)}});
    const auto& l = r.latency;
    const MemoryFigures& mem = r.memory.host();
    return {{"program", a.program},
            {"fetch", r.fetch},
            {"fed", r.fed},
            {"threads", a.threads},
            {"warmup", a.warmup},
            {"runs", a.runs},
            {"latency_us",
             {{"min", l.front()}, {"median", quantile(l, 0.5)}, {"p90", quantile(l, 0.9)}, {"max", l.back()}, {"mean", mean_of(l)}}},
            {"ops", std::move(jops)},
            {"device", a.device},
            {"memory", {{"arena_bytes", mem.arena_bytes}, {"lower_bound", mem.lower_bound}, {"unshared_bytes", mem.unshared_bytes}}},
            {"device_memory", {{"arena_bytes", r.memory.device().arena_bytes},
                               {"lower_bound", r.memory.device().lower_bound},
                               {"unshared_bytes", r.memory.device().unshared_bytes}}}};
}

std::string bench_text(const Args& a, const BenchResult& r) {
    auto count = [](int n, const std::string& what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
    std::string text = "bench " + a.program + ": " + count(a.runs, "run") + " after " + count(a.warmup, "warm-up run") +
                       ", " + (a.threads ? count(a.threads, "thread") : "every hardware thread") + "\n";
    text += "fetch:";
    for (auto& f : r.fetch) text += " " + f;
    text += "\nfed:";
    if (r.fed.empty()) text += " (none)";
    for (std::size_t i = 0; i < r.fed.size(); ++i)
        text += " " + r.fed[i] + " " + to_string(r.fed_values[i].dtype()) + " " + to_string(r.fed_values[i].shape());
    const auto& l = r.latency;
    text += "\nlatency (us): min " + fixed_text(l.front(), 3) + "  median " + fixed_text(quantile(l, 0.5), 3) + "  p90 " +
            fixed_text(quantile(l, 0.9), 3) + "  max " + fixed_text(l.back(), 3) + "  mean " + fixed_text(mean_of(l), 3) + "\n";
    text += "time per op type, summed over " + count(a.runs, "more run") + " with each op timed:\n";
    if (r.ops.empty()) text += "  (no ops)\n";
    std::vector<std::array<std::string, 5>> rows{{"type", "count", "total us", "us per run", "share"}};
    for (auto& o : r.ops)
        rows.push_back({o.type, std::to_string(o.count), fixed_text(micros(o.total), 3),
                        fixed_text(micros(o.total) / a.runs, 3), fixed_text(100 * share_of(r, o), 1) + "%"});
    std::array<std::size_t, 5> w{};
    for (auto& row : rows)
        for (std::size_t c = 0; c < row.size(); ++c) w[c] = std::max(w[c], row[c].size());
    if (!r.ops.empty())
        for (auto& row : rows) {
            std::string line = "  " + pad_right(row[0], w[0]);
            for (std::size_t c = 1; c < row.size(); ++c) line += "  " + pad_left(row[c], w[c]);
            text += line + "\n";
        }
    const MemoryFigures& mem = r.memory.host();
    text += "memory: arena " + std::to_string(mem.arena_bytes) + " bytes in " + std::to_string(r.memory.slot_bytes.size()) +
            " slots, lower bound " + std::to_string(mem.lower_bound) + " bytes, one buffer per value " +
            std::to_string(mem.unshared_bytes) + " bytes\n";
    if (a.device != "cpu") {
        const MemoryFigures& dev = r.memory.device();
        text += a.device + " memory: arena " + std::to_string(dev.arena_bytes) + " bytes, lower bound " +
                std::to_string(dev.lower_bound) + " bytes, one buffer per value " + std::to_string(dev.unshared_bytes) +
                " bytes\n";
    }
    return text;
}

int cmd_bench(const Args& a) {
    const BenchResult r = run_bench(a);
    if (a.json) std::cout << bench_json(a, r).dump(2) << "\n";
    else std::cout << bench_text(a, r);
    return 0;
}

int cmd_inspect(const Args& a) {
    ProgramDesc p = load_program_arg(a);
    std::string out = "program " + a.program + ": format version " + std::to_string(p.version) + ", " +
                      std::to_string(p.blocks.size()) + (p.blocks.size() == 1 ? " block\n" : " blocks\n");
    for (auto& b : p.blocks) {
        out += "block " + std::to_string(b.idx) + " (parent " + std::to_string(b.parent_idx) + "): " +
               std::to_string(b.vars.size()) + " variables, " + std::to_string(b.ops.size()) + " ops\n";
        out += "  variables:\n";
        std::size_t w = 0;
        for (auto& v : b.vars) w = std::max(w, v.name.size());
        for (auto& v : b.vars) {
            std::string line = "    " + v.name + std::string(w - v.name.size(), ' ') + "  ";
            if (v.type == VarType::LOD_TENSOR) line += to_string(v.data_type) + " " + dims_text(v.dims);
            else line += std::string(var_type_name(v.type));
            if (v.lod_level) line += " lod_level=" + std::to_string(v.lod_level);
            if (v.persistable) line += "  persistable";
            out += line + "\n";
        }
        out += "  ops:\n";
        for (std::size_t i = 0; i < b.ops.size(); ++i) {
            auto& op = b.ops[i];
            std::string line = "    #" + std::to_string(i) + " " + op.type + "  ";
            std::string ins = slots_text(op.inputs);
            line += (ins.empty() ? "(no inputs)" : ins) + " -> " + slots_text(op.outputs);
            if (!op.attrs.empty()) {
                line += "  {";
                for (std::size_t k = 0; k < op.attrs.size(); ++k)
                    line += std::string(k ? ", " : "") + op.attrs[k].name + "=" + attr_text(op.attrs[k]);
                line += "}";
            }
            if (op.is_target) line += "  target";
            out += line + "\n";
        }
    }
    std::cout << out;
    return 0;
}

// `dlgraph ops`: every op of the table, then the registered ones.
int cmd_ops(bool as_json) {
    std::vector<const OpDef*> defs;
    for (auto& d : op_table()) defs.push_back(&d);
    const std::size_t builtin = defs.size();
    for (auto* d : registered_ops()) defs.push_back(d);
    auto slot_text = [](const SlotDef& sd) {
        return std::string(sd.name) + (sd.duplicable ? "[]" : "") + (sd.optional ? "?" : "");
    };
    if (as_json) {
        json out = json::array();
        for (std::size_t i = 0; i < defs.size(); ++i) {
            const OpDef& d = *defs[i];
            json o{{"type", std::string(d.type)}, {"registered", i >= builtin}, {"doc", std::string(d.doc)}, {"dtypes", d.supported_dtypes()},
                   {"inputs", json::array()}, {"outputs", json::array()}, {"attrs", json::object()},
                   {"grad", d.grad_maker ? "maker" : std::string(d.grad_spec.type)}, {"fusible", d.fusible.arity != 0}};
            for (auto& sd : d.inputs) o["inputs"].push_back(slot_text(sd));
            for (auto& sd : d.outputs) o["outputs"].push_back(slot_text(sd));
            for (auto& ad : d.attrs) o["attrs"][std::string(ad.name)] = ad.required ? "(required)" : attr_text(ad.value);
            out.push_back(std::move(o));
        }
        std::cout << out.dump(1) << "\n";
        return 0;
    }
    std::string text = std::to_string(builtin) + " built-in ops, " + std::to_string(defs.size() - builtin) +
                       " registered (X[]: several variables, X?: optional)\n";
    for (std::size_t i = 0; i < defs.size(); ++i) {
        const OpDef& d = *defs[i];
        std::string ins, outs, attrs;
        for (auto& sd : d.inputs) ins += (ins.empty() ? "" : ", ") + slot_text(sd);
        for (auto& sd : d.outputs) outs += (outs.empty() ? "" : ", ") + slot_text(sd);
        for (auto& ad : d.attrs)
            attrs += (attrs.empty() ? "" : ", ") + std::string(ad.name) + "=" + (ad.required ? "(required)" : attr_text(ad.value));
        text += std::string(d.type) + (i >= builtin ? "  (registered)" : "") + "\n    " + (ins.empty() ? "(no inputs)" : ins) +
                " -> " + outs + (attrs.empty() ? "" : "  {" + attrs + "}") + "\n    dtypes: " + d.supported_dtypes();
        if (d.differentiable()) text += "; gradient: " + (d.grad_maker ? std::string("by its grad maker") : std::string(d.grad_spec.type));
        if (d.fusible.arity) text += "; fusible";
        if (!d.doc.empty()) text += "\n    " + std::string(d.doc);
        text += "\n";
    }
    std::cout << text;
    return 0;
}

int cmd_plan(const Args& a) {
    ProgramDesc p = load_for(a);
    const auto feeds_spec = parse_feeds(a.feed, false);
    std::vector<std::string> fed;
    for (auto& f : feeds_spec) fed.push_back(f.name);
    std::unique_ptr<DeviceContext> device;  // --device cuda: planned as Session<cuda> would, without a GPU
#ifdef DLGRAPH_HAS_CUDA
    if (a.device == "cuda") device = cuda_planning_context();
#endif
    ExecutionPlan plan = plan_for(p, fetch_targets(a.fetch), fed, feeds_spec.empty(), device.get());
    const BlockDesc& blk = p.blocks[0];

    // Concrete metas need a file for every feed the plan uses.
    bool concrete = !feeds_spec.empty();
    for (std::size_t i = 0; i < feeds_spec.size(); ++i)
        if (feeds_spec[i].file.empty() && plan.feed_values[i] >= 0) concrete = false;
    if (concrete) {
        std::vector<VarMeta> metas(plan.values.size());
        std::vector<bool> known(plan.values.size(), false);
        for (std::size_t i = 0; i < feeds_spec.size(); ++i) {
            if (feeds_spec[i].file.empty()) continue;
            Tensor t = read_npy(feeds_spec[i].file);
            check_against(*blk.find_var(feeds_spec[i].name), t, "feed '" + feeds_spec[i].name + "'",
                          "dlgraph.type.feed", "dlgraph.shape.feed");
            if (int v = plan.feed_values[i]; v >= 0) {
                metas[static_cast<std::size_t>(v)] = {t.dtype(), t.shape()};
                known[static_cast<std::size_t>(v)] = true;
            }
        }
        for (int v : plan.scope_reads) {
            const PlannedValue& pv = plan.values[static_cast<std::size_t>(v)];
            if (!pv.declared.shape.known())
                throw shape_error("dlgraph.shape.unknown", "persistable variable '" + pv.name + "' is declared " +
                                                               to_string(pv.declared.shape) +
                                                               "; its shape must be known to size the plan");
            metas[static_cast<std::size_t>(v)] = pv.declared;
            known[static_cast<std::size_t>(v)] = true;
        }
        shape_plan(plan, std::move(metas), std::move(known), device.get(), PlanOptions{});
    }
    if (a.json) std::cout << plan_json(plan).dump(2) << "\n";
    else std::cout << describe(plan);
    return 0;
}

int cmd_dot(const Args& a) {
    ProgramDesc p = load_for(a);
    std::string text;
    if (a.fetch.empty()) {
        if (!a.feed.empty()) usage_fail("'dot' takes --feed only together with --fetch");
        text = to_dot(p);
    } else {
        std::vector<std::string> fed;
        for (auto& f : parse_feeds(a.feed, false)) fed.push_back(f.name);
        text = to_dot(plan_for(p, fetch_targets(a.fetch), fed, fed.empty()));
    }
    if (a.has_output) detail::write_file_atomic(a.output, {text});
    else std::cout << text;
    return 0;
}

// The shape of an emit --feed NAME=D1,D2,...: whole numbers >= 1.
Shape feed_shape(const std::string& spec, const std::string& dims) {
    std::vector<std::int64_t> d;
    const char* p = dims.data();
    const char* end = p + dims.size();
    while (p <= end) {
        std::int64_t n = 0;
        const auto [at, ec] = std::from_chars(p, end, n);
        if (ec != std::errc() || n < 1 || (at != end && *at != ',') || d.size() == static_cast<std::size_t>(max_rank))
            usage_fail("--feed '" + spec + "' needs the form NAME=D1,D2,... (at most " + std::to_string(max_rank) +
                       " dims, each a whole number from 1)");
        d.push_back(n);
        p = at + 1;
    }
    return Shape(d);
}

int cmd_emit(const Args& a) {
    ProgramDesc desc = load_for(a);
    std::vector<fixed::EmitFeed> feeds;
    for (auto& f : parse_feeds(a.feed, false)) {
        if (f.file.empty()) usage_fail("--feed '" + f.name + "' needs the form NAME=D1,D2,... (the shape to emit for)");
        feeds.push_back({f.name, feed_shape(f.name + "=" + f.file, f.file)});
    }
    const std::vector<std::string> fetches(a.fetch.begin(), a.fetch.end());
    const BlockDesc& blk = desc.blocks[0];
    auto param = [&](const std::string& name) -> Tensor {
        if (!a.has_params)
            throw io_error("dlgraph.io.param_missing",
                           "the model needs the weight '" + name + "': give --params DIR (a checkpoint directory)");
        return read_param(a.params, blk, name);
    };
    fixed::EmitOptions opts;
    opts.name = a.name_space;
    opts.source = fs::path(a.program).filename().string();
    opts.arena_budget = a.arena_budget;
    opts.int8 = a.weights == "int8";
    if (!opts.int8 && (!a.calibrate.empty() || !a.evaluate.empty() || a.has_labels))
        usage_fail("--calibrate, --evaluate and --labels go with --weights int8");
    for (auto& f : parse_feeds(a.calibrate, true, "--calibrate")) opts.calibration[f.name] = read_npy(f.file);
    for (auto& f : parse_feeds(a.evaluate, true, "--evaluate")) opts.evaluation[f.name] = read_npy(f.file);
    if (a.has_labels) opts.labels = read_npy(a.labels);
    const fixed::EmittedModel m = fixed::emit(desc, feeds, fetches, param, opts);
    if (opts.int8) {
        const fixed::Int8Report& r = m.int8;
        std::ostream& out = a.has_output ? std::cout : std::cerr;  // the header may be on stdout
        out << "int8: " << r.products << (r.products == 1 ? " product" : " products") << " in INT8, "
            << r.float_products << " in floating point";
        if (r.products > 0) {
            out << "; on " << r.rows << " rows of " << (opts.evaluation.empty() ? "the calibration" : "the evaluation")
                << " data, the same class as FP32 for " << r.same_class << ", largest |difference| "
                << r.max_abs_diff;
            if (r.correct_fp32 >= 0) {
                auto pct = [&](std::int64_t c) { return 100.0 * static_cast<double>(c) / static_cast<double>(r.rows); };
                char buf[128];
                std::snprintf(buf, sizeof buf, "; accuracy FP32 %.2f%%, INT8 %.2f%% (%+.2f points)", pct(r.correct_fp32),
                              pct(r.correct_int8), pct(r.correct_int8) - pct(r.correct_fp32));
                out << buf;
            }
        }
        out << "\n";
    }
    if (!a.has_output) {
        std::cout << m.header;
        return 0;
    }
    detail::write_file_atomic(a.output, {m.header});
    std::cout << "wrote " << a.output << ": " << m.steps << " steps, weights " << m.weight_bytes
              << " bytes, arena " << m.planned_arena_bytes << " bytes planned (liveness lower bound " << m.lower_bound
              << "; Session<cpu> plans " << m.session_arena_bytes << ")"
              << (m.quant_bytes ? " + the INT8 inputs' buffer, " + std::to_string(m.quant_bytes) + " bytes" : "")
              << (m.gemm_workspaces.empty() ? "" : " + the products' workspace (computed by the compiler)") << "\n";
    return 0;
}

// One line: newlines inside a message become spaces.
std::string one_line(std::string s) {
    for (auto& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc < 2) usage_fail("no command given");
        const std::string cmd = argv[1];
        if (cmd == "help" || cmd == "--help" || cmd == "-h") {
            std::cout << usage_text;
            return 0;
        }
        for (int i = 2; i < argc; ++i)
            if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
                std::cout << usage_text;
                return 0;
            }
        if (cmd == "ops") {
            if (argc > 3 || (argc == 3 && std::string(argv[2]) != "--json"))
                usage_fail("'ops' takes only --json");
            const int rc = cmd_ops(argc == 3);
            std::cout.flush();
            if (!std::cout) throw io_error("dlgraph.io.write", "cannot write to standard output");
            return rc;
        }
        Args a = parse_args(argc, argv);
        int rc = 0;
        if (a.command == "run") rc = cmd_run(a);
        else if (a.command == "bench") rc = cmd_bench(a);
        else if (a.command == "inspect") rc = cmd_inspect(a);
        else if (a.command == "plan") rc = cmd_plan(a);
        else if (a.command == "emit") rc = cmd_emit(a);
        else rc = cmd_dot(a);
        std::cout.flush();
        if (!std::cout) throw io_error("dlgraph.io.write", "cannot write to standard output");
        return rc;
    } catch (const dlgraph::error& e) {
        std::cerr << "dlgraph: error: " << one_line(e.what()) << std::endl;
        // Under mpirun, a rank that fails stops the job rather than leave its peers waiting.
        if (const auto& c = the_job().comm; c && c->size() > 1) c->abort(1);
    } catch (const std::bad_alloc&) {
        std::cerr << "dlgraph: error: [dlgraph.resource.alloc] out of memory" << std::endl;
    } catch (const std::exception& e) {
        std::cerr << "dlgraph: error: [dlgraph.internal] " << one_line(e.what()) << std::endl;
    } catch (...) {
        std::cerr << "dlgraph: error: [dlgraph.internal] unknown exception" << std::endl;
    }
    return 1;
}
