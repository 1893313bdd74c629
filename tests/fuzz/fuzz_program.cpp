// Programs as JSON: load (strict, or lenient for odd-sized inputs), check
// that what loads survives save and load unchanged, then plan the targets
// (the outputs of the last ops) with every program input fed a small tensor
// of its declared dtype, run the plan twice, and print it. A structure-aware
// mutator keeps most inputs valid JSON programs: it replaces numbers with
// boundary values, names with other ops' and variables' names, and
// duplicates or drops array elements, since random bytes rarely get past
// the JSON parser.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "fuzz_common.hpp"

using namespace dlgraph;

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace {

// Every tensor the program reads but no op writes (and no initializer
// gives), shaped by its declaration with unknown dims as 2.
std::vector<Feed> make_feeds(const BlockDesc& blk, std::vector<Tensor>& storage, std::uint32_t seed) {
    std::set<std::string> written, read;
    for (auto& op : blk.ops) {
        for (auto& s : op.outputs) written.insert(s.arguments.begin(), s.arguments.end());
        for (auto& s : op.inputs) read.insert(s.arguments.begin(), s.arguments.end());
    }
    std::vector<Feed> feeds;
    storage.reserve(read.size());
    std::mt19937 rng(seed);
    for (auto& name : read) {
        const VarDesc* vd = blk.find_var(name);
        if (!vd || vd->persistable || vd->type != VarType::LOD_TENSOR || written.count(name)) continue;
        Shape s;
        for (auto d : vd->dims) s.push_back(d < 0 ? 2 : std::min<std::int64_t>(d, 64));
        if (!(s == Shape(vd->dims)) && vd->dims.size() && std::count(vd->dims.begin(), vd->dims.end(), -1) == 0)
            continue;  // declared too large to feed cheaply: leave it missing
        if (vd->data_type == DataType::FP16) continue;
        Tensor t;
        t.resize(vd->data_type, s);
        auto* p = static_cast<unsigned char*>(t.raw());
        for (std::size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<unsigned char>(rng() % 7);  // small values
        if (vd->data_type == DataType::BOOL)
            for (std::size_t i = 0; i < t.bytes(); ++i) p[i] &= 1;
        storage.push_back(std::move(t));
        feeds.push_back(Feed(vd->name, storage.back()));  // a name that outlives the feed
    }
    return feeds;
}

void run_program(const ProgramDesc& p, std::uint32_t seed) {
    const BlockDesc& blk = p.blocks[0];
    std::vector<TargetRef> targets;
    for (auto it = blk.ops.rbegin(); it != blk.ops.rend() && targets.size() < 3; ++it)
        for (auto& s : it->outputs)
            for (auto& a : s.arguments)
                if (const VarDesc* vd = blk.find_var(a); vd && vd->type == VarType::LOD_TENSOR && targets.size() < 3)
                    targets.push_back(TargetRef(a));
    if (targets.empty()) return;
    std::vector<Tensor> storage;
    const std::vector<Feed> feeds = make_feeds(blk, storage, seed);
    SessionOptions opts;
    opts.max_bytes = fuzz::max_plan_bytes;
    opts.threads = seed % 3 == 0 ? 2 : 1;
    // The collective ops run on one process (a group of 1), or find no communicator.
    if (seed % 4 != 0) opts.comms = {std::make_shared<SelfCommunicator>()};
    Session<cpu> s(p, opts);
    try {
        std::vector<std::string> fed;
        for (auto& f : feeds) fed.emplace_back(f.name());
        const ExecutionPlan& plan = s.plan(targets, fed);
        (void)describe(plan);
        (void)plan_json(plan).dump();
    } catch (const error&) {
    }
    std::vector<Tensor> out(targets.size());
    for (int round = 0; round < 2; ++round) {
        try {
            s.eval_into(targets, feeds, out);
        } catch (const error&) {
        }
    }
}

// ---- the mutator ---------------------------------------------------------------------------

void collect(json& j, std::vector<json*>& nodes) {
    nodes.push_back(&j);
    if (j.is_array() || j.is_object())
        for (auto& c : j) collect(c, nodes);
}

const std::vector<std::string>& op_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (auto& d : op_table()) n.emplace_back(d.type);
        return n;
    }();
    return names;
}

void mutate(json& j, std::mt19937& rng) {
    std::vector<json*> nodes;
    collect(j, nodes);
    json& n = *nodes[rng() % nodes.size()];
    static const std::int64_t ints[] = {0,  1,  -1, 2,  -2, 3,     7,     8,        9,         64, 65536, 65537,
                                        std::int64_t(1) << 31,      (std::int64_t(1) << 31) - 1,
                                        -(std::int64_t(1) << 31),   std::int64_t(1) << 32, std::int64_t(1) << 62,
                                        std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()};
    static const double floats[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 1e38, -1e38, 1e308, 3.5e9};
    static const char* kinds[] = {"FP32", "FP64", "INT32", "INT64", "BOOL", "FP16", "INT16", "LOD_TENSOR",
                                  "FEED_MINIBATCH", "FETCH_LIST", "STEP_SCOPES", "INT", "LONG", "INTS", "FLOAT",
                                  "BOOLEAN", "STRING", "FLOATS"};
    if (n.is_number_integer() || n.is_number_unsigned()) {
        const auto near = static_cast<std::int64_t>(static_cast<std::uint64_t>(n.get<std::int64_t>()) + rng() % 5 - 2);
        n = rng() % 2 ? json(ints[rng() % std::size(ints)]) : json(near);
    } else if (n.is_number_float()) {
        n = floats[rng() % std::size(floats)];
    } else if (n.is_boolean()) {
        n = !n.get<bool>();
    } else if (n.is_string()) {
        switch (rng() % 3) {
            case 0: n = op_names()[rng() % op_names().size()]; break;
            case 1: n = kinds[rng() % std::size(kinds)]; break;
            default: {  // another string of the program (a variable's name, most often)
                std::vector<json*> strings;
                for (json* m : nodes)
                    if (m->is_string()) strings.push_back(m);
                n = *strings[rng() % strings.size()];
            }
        }
    } else if (n.is_array() && !n.empty()) {
        const std::size_t k = rng() % n.size();
        if (rng() % 2) n.push_back(n[k]);
        else n.erase(k);
    } else if (n.is_array()) {
        n.push_back(ints[rng() % std::size(ints)]);
    } else if (n.is_object() && !n.empty() && rng() % 4 == 0) {
        auto it = n.begin();
        std::advance(it, static_cast<long>(rng() % n.size()));
        n.erase(it);
    }
}

}  // namespace

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
    std::mt19937 rng(seed);
    if (rng() % 5 == 0) return LLVMFuzzerMutate(data, size, max_size);
    json j = json::parse(data, data + size, nullptr, false);
    if (j.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < edits; ++i) mutate(j, rng);
    const std::string out = j.dump();
    if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
    std::memcpy(data, out.data(), out.size());
    return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    ProgramDesc p;
    try {
        p = load_program(text, LoadOptions{size % 2 == 1});
    } catch (const error&) {
        return 0;
    }
    const std::string saved = save_program(p);
    ProgramDesc again;
    try {
        again = load_program(saved);
    } catch (const error& e) {
        fuzz::finding(std::string("a program that loaded does not load once saved: ") + e.what());
    }
    if (!(again == p)) fuzz::finding("a program changed through save and load");
    std::uint32_t seed = 0;
    for (std::size_t i = 0; i < size; ++i) seed = seed * 31 + data[i];
    run_program(p, seed);
    return 0;
}
