// The op suite's table: one or more small standalone cases for every op of
// the op table (ops/op_table.hpp), each a complete program (its inputs
// declared and fed, the op built as an OpDesc with Paddle's slot names and
// attributes, its outputs declared) with seeded deterministic inputs.
//
// A case says what to compute, never how: run_op_case runs one on
// Session<cpu> with given SessionOptions, and another device policy can run
// the same table. tests/test_op_suite.cpp uses it to check that every op has
// a case, that the outputs keep the bits stored in tests/data/op_golden.txt,
// and that threads, fusion, in-place execution and prepacking change no bit.
//
// Names are "<op>/<dtype>/<variant>", e.g. "elementwise_add/FP32/broadcast_axis1";
// a case whose program has several ops (element-wise chains that the session
// fuses) is named "chain/<dtype>/<ops>". The dtype is the one that selects the
// kernel (the output's for ops without inputs, the input's for cast).
//
// Inputs come from std::mt19937_64 seeded by a hash of the case name and the
// variable name (so adding or reordering cases changes no other case's data),
// mapped to values by the suite's own arithmetic, never by the standard's
// distributions (whose output is implementation-defined).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dlgraph/dlgraph.hpp>

struct op_case {
    std::string name;  // "<op>/<dtype>/<variant>"
    dlgraph::ProgramDesc program;
    // Every input of the program. Feeds of persistable variables (optimizer
    // state, weights) are values the program reads from the session's scope.
    std::vector<std::pair<std::string, dlgraph::Tensor>> feeds;
    std::vector<std::string> fetch;  // the outputs to hash, in order
};

// Ops of the op table that have no case, and why. The coverage test fails
// for an op that has neither a case nor an entry here.
struct not_in_suite_entry {
    std::string_view op;
    std::string_view reason;
};
inline constexpr not_in_suite_entry not_in_suite[] = {
    {"feed", "reads a FEED_MINIBATCH tensor list that must be set in the session's scope; a case feeds and fetches "
             "tensors only (covered by test_ops.cpp)"},
    {"fetch", "writes a FETCH_LIST tensor list in the session's scope, not a tensor a case can fetch "
              "(covered by test_ops.cpp)"},
    {"save", "has no output tensor: its result is a .npy file written to disk (covered by test_checkpoint.cpp)"},
    {"load", "reads a .npy file that must exist on disk before the run (covered by test_checkpoint.cpp)"},
    {"save_combine", "has no output tensor: its result is a .npz file written to disk (covered by test_checkpoint.cpp)"},
    {"load_combine", "reads a .npz file that must exist on disk before the run (covered by test_checkpoint.cpp)"},
    // The collective ops need a communicator (SessionOptions::comms) and
    // their results depend on the other processes.
    {"c_allreduce_sum", "needs a communicator (covered by test_collective.cpp with one process, tests/mpi with 2-4)"},
    {"c_allreduce_max", "needs a communicator (covered by test_collective.cpp with one process, tests/mpi with 2-4)"},
    {"c_allreduce_min", "needs a communicator (covered by test_collective.cpp with one process, tests/mpi with 2-4)"},
    {"c_allreduce_prod", "needs a communicator (covered by test_collective.cpp with one process, tests/mpi with 2-4)"},
    {"c_broadcast", "needs a communicator (covered by test_collective.cpp with one process, tests/mpi with 2-4)"},
    {"c_allgather", "needs a communicator (covered by test_collective.cpp with one process, tests/mpi with 2-4)"},
};

// Every case, in a fixed order.
std::vector<op_case> all_op_cases();

// What a run did beyond its results: fused chains, packed weights and the
// arena's size (to show that an option under test took effect).
struct op_case_run_info {
    std::size_t fused_chains = 0;
    std::size_t packed_steps = 0;
    std::size_t arena_bytes = 0;
};

// Where run_op_case puts the values of persistable variables: in the
// session's root scope, as a loaded checkpoint would (the default: a weight
// there is one the session may keep packed), or fed with the call like every
// other input (a fed persistable shadows the scope's).
enum class persistables { in_scope, fed };

// Runs `c` in `session` (made from c.program, on any device) and returns
// the fetched tensors (one per c.fetch); `fed` (optional) gets the names fed.
template <class Session>
std::vector<dlgraph::Tensor> run_op_case_in(Session& session, const op_case& c, persistables where = persistables::in_scope,
                                            std::vector<std::string>* fed = nullptr) {
    const dlgraph::BlockDesc& blk = c.program.blocks[0];
    std::vector<dlgraph::Feed> feeds;
    std::vector<std::string> names;
    feeds.reserve(c.feeds.size());
    for (auto& [name, value] : c.feeds) {
        const dlgraph::VarDesc* vd = blk.find_var(name);
        if (vd && vd->persistable && where == persistables::in_scope) {
            session.scope().var(name).template get_mutable<dlgraph::Tensor>() = value;
        } else {
            feeds.emplace_back(std::string_view(name), value);
            names.push_back(name);
        }
    }
    const std::vector<dlgraph::TargetRef> targets(c.fetch.begin(), c.fetch.end());
    std::vector<dlgraph::Tensor> out =
        session.eval(std::span<const dlgraph::TargetRef>(targets), std::span<const dlgraph::Feed>(feeds));
    if (fed) *fed = std::move(names);
    return out;
}

// Runs `c` on a fresh Session<cpu> built from c.program with `options` and
// returns the fetched tensors (one per c.fetch).
std::vector<dlgraph::Tensor> run_op_case(const op_case& c, const dlgraph::SessionOptions& options = {},
                                         op_case_run_info* info = nullptr,
                                         persistables where = persistables::in_scope);

// FNV-1a 64 of a tensor: its dtype (4 bytes), rank (4 bytes) and dims (8
// bytes each), little-endian, then its raw bytes as stored (little-endian on
// every host dlgraph runs on).
std::uint64_t tensor_hash(const dlgraph::Tensor& t);
// 16 lower-case hex digits.
std::string hash_hex(std::uint64_t h);
