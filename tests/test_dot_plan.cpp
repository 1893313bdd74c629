// to_dot for programs and plans (well-formed DOT, escaped labels, the right
// nodes and edges), the plan JSON and the describe() listing with memory.
#include <doctest/doctest.h>

#include <dlgraph/builder.hpp>
#include <dlgraph/dot.hpp>
#include <dlgraph/plan_io.hpp>

using namespace dlgraph;

namespace {

// y = relu(x * w + b): ops #0 and #1 initialize w and b.
struct SmallNet {
    Program p;
    Var<float> x, w, b, y;
    SmallNet() {
        x = p.input<float>("x", {-1, 3});
        w = p.parameter<float>("w", {3}, init::constant(0.5));
        b = p.parameter<float>("b", {3}, init::constant(0.1));
        y = relu(x * w + b);
    }
};

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
    return n;
}

// The first line of `text` that starts with `prefix`.
std::string line_of(const std::string& text, const std::string& prefix) {
    auto at = text.find("\n" + prefix);
    if (at == std::string::npos) return {};
    return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

// A light DOT check: one digraph, balanced braces and brackets outside
// strings, every string closed, every statement ends with ';'.
void check_dot_syntax(const std::string& dot) {
    REQUIRE(dot.rfind("digraph ", 0) == 0);
    REQUIRE(dot.size() >= 2);
    CHECK(dot.substr(dot.size() - 2) == "}\n");
    int braces = 0, brackets = 0;
    bool in_string = false, negative = false, raw_newline = false;
    for (std::size_t i = 0; i < dot.size(); ++i) {
        char c = dot[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
            else raw_newline = raw_newline || c == '\n';
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '{') ++braces;
        else if (c == '}') --braces;
        else if (c == '[') ++brackets;
        else if (c == ']') --brackets;
        negative = negative || braces < 0 || brackets < 0;
    }
    CHECK_FALSE(raw_newline);
    CHECK_FALSE(negative);
    CHECK_FALSE(in_string);
    CHECK(braces == 0);
    CHECK(brackets == 0);
    std::size_t start = 0;
    for (auto nl = dot.find('\n'); nl != std::string::npos; start = nl + 1, nl = dot.find('\n', start)) {
        std::string line = dot.substr(start, nl - start);
        if (line.empty() || line.back() == '{' || line == "}") continue;
        if (line.back() != ';') CHECK_MESSAGE(line.back() == ';', line);
    }
}

}  // namespace

TEST_CASE("dot: a program's ops, variables and slot-labeled edges") {
    SmallNet n;
    std::string dot = to_dot(n.p.desc());
    check_dot_syntax(dot);
    CHECK(dot.rfind("digraph program {", 0) == 0);
    CHECK(count(dot, "shape=box") == 5);      // 2 initializers + mul, add, relu
    CHECK(count(dot, "shape=ellipse") == 6);  // x, w, b and three results
    CHECK(dot.find("label=\"elementwise_mul\\n#2\"") != std::string::npos);
    CHECK(dot.find("label=\"x\\nFP32 [-1,3]\"") != std::string::npos);
    // Persistable variables look different.
    CHECK(count(dot, "fillcolor=\"#d9d9d9\"") == 2);
    CHECK(dot.find("w\\nFP32 [3]\\npersistable") != std::string::npos);
    // x -> mul labeled X, mul -> its output labeled Out, w's initializer -> w.
    CHECK(dot.find("v0 -> op2 [label=\"X\"];") != std::string::npos);
    CHECK(dot.find("v1 -> op2 [label=\"Y\"];") != std::string::npos);
    CHECK(dot.find("op0 -> v1 [label=\"Out\"];") != std::string::npos);
    CHECK(count(dot, " -> ") == 2 + 3 + 3 + 2);  // initializers: 1 each; mul, add: 3 each; relu: 2
}

TEST_CASE("dot: labels escape quotes, backslashes and newlines") {
    Program p;
    auto x = p.input<float>("a\"quoted\\name\nx", {2});
    auto y = relu(x);
    (void)y;
    std::string dot = to_dot(p.desc());
    check_dot_syntax(dot);
    CHECK(dot.find("a\\\"quoted\\\\name\\nx\\nFP32 [2]") != std::string::npos);
}

TEST_CASE("dot: no quoted string ends in an escaped backslash") {
    ProgramDesc p;
    p.blocks[0].vars.push_back({"v\\", VarType::LOD_TENSOR, DataType::FP32, {2}, 0, false});
    OpDesc op;
    op.type = "t\\";
    op.set_input("X\\", {"v\\"});
    op.set_output("Out", {"undeclared\\"});
    p.blocks[0].ops.push_back(op);
    std::string dot = to_dot(p);
    check_dot_syntax(dot);
    CHECK(dot.find("\\\\\"") == std::string::npos);
    CHECK(dot.find("[label=\"X\\\\ \"]") != std::string::npos);
    CHECK(dot.find("label=\"v\\\\ \\nFP32 [2]\"") != std::string::npos);
    CHECK(dot.find("undeclared\\\\ \\n(undeclared)") != std::string::npos);
}

TEST_CASE("dot: a plan shows only planned steps and values, with feeds, persistables and slots") {
    SmallNet n;
    std::vector<TargetRef> targets{n.y};
    std::vector<std::string> fed{"x"};
    ExecutionPlan plan = make_plan(n.p.desc(), targets, fed);
    std::string dot = to_dot(plan);
    check_dot_syntax(dot);
    CHECK(dot.rfind("digraph plan {", 0) == 0);
    CHECK(count(dot, "shape=box") == 3);  // initializers are not part of the plan
    CHECK(dot.find("fill_constant") == std::string::npos);
    CHECK(count(dot, "shape=ellipse") == 6);
    CHECK(dot.find("x\\nFP32 [-1,3]\\nfeed") != std::string::npos);
    CHECK(dot.find("w\\nFP32 [3]\\npersistable") != std::string::npos);
    CHECK(dot.find("\\nintermediate") != std::string::npos);  // arena slots come with shapes
    CHECK(dot.find("\\ntarget") != std::string::npos);
    CHECK(count(dot, "fillcolor=\"#cfe2f3\"") == 1);  // the one feed
    CHECK(dot.find("label=\"elementwise_add\\n#3\"") != std::string::npos);
}

TEST_CASE("plan JSON: targets, fed, steps by value name, values with lifetimes and slots") {
    SmallNet n;
    std::vector<TargetRef> targets{n.y};
    std::vector<std::string> fed{"x"};
    ExecutionPlan plan = make_plan(n.p.desc(), targets, fed);
    json j = plan;
    CHECK(j["targets"].size() == 1);
    CHECK(j["targets"][0]["var"] == n.y.name());
    CHECK(j["targets"][0]["op"] == 4);
    CHECK(j["fed"] == json::array({"x"}));
    REQUIRE(j["steps"].size() == 3);
    auto& mul = j["steps"][0];
    CHECK(mul["op_index"] == 2);
    CHECK(mul["type"] == "elementwise_mul");
    CHECK(mul["label"] == "elementwise_mul (op #2)");
    CHECK(mul["place"] == "cpu");
    CHECK(j["device"] == "cpu");
    CHECK(mul["inputs"] == json{{"X", {"x"}}, {"Y", {"w"}}});
    CHECK(mul["outputs"] == json{{"Out", {"elementwise_mul_0"}}});
    REQUIRE(j["values"].size() == plan.values.size());
    for (auto& v : j["values"]) {
        int k = plan.value_index(v["name"].get<std::string>());
        REQUIRE(k >= 0);
        const PlannedValue& pv = plan.values[static_cast<std::size_t>(k)];
        CHECK(v["kind"] == std::string(value_kind_names[static_cast<int>(pv.kind)]));
        CHECK(v["dtype"] == "FP32");
        CHECK(v["dims"] == json(pv.declared.shape.vec()));
        CHECK(v["target"] == pv.target);
        CHECK(v["place"] == "cpu");
        CHECK(v["copy_of"].is_null());
        if (pv.kind == ValueKind::intermediate) CHECK(v["first_step"] == pv.first_step);
        else CHECK(v["first_step"].is_null());
        if (pv.target) CHECK(v["last_step"].is_null());
        else CHECK(v["last_step"] == pv.last_step);
    }
    CHECK(j["values"][0]["name"] == "x");
    CHECK(j["values"][0]["kind"] == "feed");
    CHECK(j["values"][0]["dims"] == json::array({-1, 3}));
}

TEST_CASE("describe: steps, values, and memory for concrete shapes") {
    SmallNet n;
    std::vector<TargetRef> targets{n.y};
    std::vector<std::string> fed{"x"};
    ExecutionPlan plan = make_plan(n.p.desc(), targets, fed);

    std::string text = describe(plan);
    CHECK(text.find("#2 elementwise_mul  X=x,Y=w -> Out=elementwise_mul_0\n") != std::string::npos);
    CHECK(text.find("#4 relu  X=elementwise_add_0 -> Out=relu_0\n") != std::string::npos);
    CHECK(text.find("fed: x\n") != std::string::npos);
    CHECK(text.find("targets: relu_0 (op #4)\n") != std::string::npos);
    CHECK(text.find("feed") != std::string::npos);
    CHECK(text.find("persistable") != std::string::npos);
    CHECK(text.find("slot 0") == std::string::npos);  // no memory before shapes are known
    CHECK(text.find("live #2..#3") != std::string::npos);  // elementwise_mul_0: written by #2, read by #3
    CHECK(text.find("#4..end  target") != std::string::npos);
    CHECK(text.find("memory:") == std::string::npos);

    // Concrete metas: x is [4,3].
    std::vector<VarMeta> metas(plan.values.size());
    std::vector<bool> known(plan.values.size(), false);
    metas[static_cast<std::size_t>(plan.value_index("x"))] = {DataType::FP32, Shape{4, 3}};
    known[static_cast<std::size_t>(plan.value_index("x"))] = true;
    for (int v : plan.scope_reads) {
        metas[static_cast<std::size_t>(v)] = plan.values[static_cast<std::size_t>(v)].declared;
        known[static_cast<std::size_t>(v)] = true;
    }
    const ExecutionPlan unshaped = plan;
    shape_plan(plan, metas, known, nullptr, PlanOptions{});
    const MemoryPlan& m = plan.memory;
    CHECK(m.host().unshared_bytes == 3 * 48);

    text = describe(plan);
    CHECK(line_of(text, "  x ").find("FP32 [4,3]  48 bytes") != std::string::npos);
    CHECK(line_of(text, "  w ").find("12 bytes") != std::string::npos);
    CHECK(line_of(text, "  relu_0 ").find("48 bytes") != std::string::npos);
    CHECK(text.find("memory:\n") != std::string::npos);
    // Slot 0 is shared: elementwise_add_0 writes over elementwise_mul_0, its X,
    // which dies at #3 (in place), so both sit at offset 0; the target has
    // slot 1. Without in-place execution the second would sit after the first.
    INFO(text);
    CHECK(text.find("slot 0: 48 bytes on cpu (elementwise_mul_0, elementwise_add_0)\n") != std::string::npos);
    CHECK(text.find("slot 1: 48 bytes on cpu (relu_0)\n") != std::string::npos);
    CHECK(line_of(text, "  elementwise_add_0 ").find("slot 0 @0") != std::string::npos);
    CHECK(plan_memory(plan, plan.metas, false).slot_bytes[0] == 96);
    CHECK(plan_memory(plan, plan.metas, false).value_offset[static_cast<std::size_t>(plan.value_index("elementwise_add_0"))] ==
          48);
    CHECK(text.find("  cpu: arena " + std::to_string(m.host().arena_bytes) + " bytes in " +
                    std::to_string(m.slot_bytes.size()) + " slots, one buffer per value 144 bytes, lower bound " +
                    std::to_string(m.host().lower_bound) + " bytes\n") != std::string::npos);

    json j = plan_json(plan);
    CHECK(j["memory"]["places"]["cpu"]["arena_bytes"] == m.host().arena_bytes);
    CHECK(j["memory"]["places"]["cpu"]["unshared_bytes"] == 144);
    CHECK(j["memory"]["places"]["cpu"]["lower_bound"] == m.host().lower_bound);
    CHECK(j["memory"]["slot_bytes"] == json(m.slot_bytes));
    CHECK(j["memory"]["slot_place"] == json::array({"cpu", "cpu"}));
    CHECK(j["memory"]["values"][0] ==
          json{{"name", "x"}, {"dtype", "FP32"}, {"shape", {4, 3}}, {"bytes", 48}, {"slot", nullptr}, {"offset", nullptr}});
    CHECK_FALSE(plan_json(unshaped).contains("memory"));

    // Shapes the ops reject leave the plan as it was.
    metas[static_cast<std::size_t>(plan.value_index("x"))] = {DataType::FP32, Shape{4, 5}};
    ExecutionPlan again = unshaped;
    CHECK_THROWS_AS(shape_plan(again, metas, known, nullptr, PlanOptions{}), shape_error);
    CHECK_FALSE(again.shaped);
}
