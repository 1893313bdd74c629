// Descriptions and their JSON: round trips (a property test over generated
// programs) and every kind of malformed input, checked by message.
#include <dlgraph/dlgraph.hpp>

#include <random>

#include "test_helpers.hpp"

using namespace dlgraph;

TEST_CASE("save then load gives an equal program, over many generated programs") {
    std::mt19937 rng(1234);
    for (int i = 0; i < 200; ++i) {
        ProgramDesc p = random_program(rng).desc();
        std::string text = save_program(p, i % 2 ? -1 : 2);
        ProgramDesc q = load_program(text);
        REQUIRE(q == p);
        CHECK(save_program(q, 2) == save_program(p, 2));
    }
}

TEST_CASE("the JSON mirrors framework.proto field names and enum names") {
    Program p;
    auto x = p.input<float>("x", {-1, 784});
    auto w = p.parameter<float>("w", {784}, init::constant(0.5));
    auto y = x * w;
    (void)y;
    json j = json::parse(p.to_json());
    CHECK(j["version"] == 1);
    auto& var = j["blocks"][0]["vars"][0];
    CHECK(var == json::parse(R"({"name":"x","type":"LOD_TENSOR","persistable":false,
        "lod_tensor":{"tensor":{"data_type":"FP32","dims":[-1,784]},"lod_level":0}})"));
    auto& op = j["blocks"][0]["ops"][1];
    CHECK(op["type"] == "elementwise_mul");
    CHECK(op["inputs"][0] == json::parse(R"({"parameter":"X","arguments":["x"]})"));
    CHECK(op["attrs"][0] == json::parse(R"({"name":"axis","type":"INT","i":-1})"));
    CHECK(j["blocks"][0]["vars"][1]["persistable"] == true);
    CHECK(j["blocks"][0]["parent_idx"] == -1);
}

TEST_CASE("every attribute type round-trips") {
    OpDesc op;
    op.type = "anything";
    op.attrs = {Attribute::make_int("i", -7),        Attribute::make_long("l", 1LL << 40),
                Attribute::make_float("f", 0.125),   Attribute::make_string("s", "hi \"there\""),
                Attribute::make_ints("is", {1, -2}), Attribute::make_floats("fs", {0.5, -1e-30}),
                Attribute::make_strings("ss", {"a", ""}), Attribute::make_bool("b", true),
                Attribute::make_bools("bs", {true, false}), Attribute::make_block("blk", 3)};
    json j = op;
    OpDesc back = j.get<OpDesc>();
    CHECK(back == op);
}

namespace {
const char* good = R"({"version":1,"blocks":[{"idx":0,"parent_idx":-1,
 "vars":[{"name":"x","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP32","dims":[-1,3]},"lod_level":0}},
         {"name":"y","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP32","dims":[-1,3]},"lod_level":0}}],
 "ops":[{"type":"relu","inputs":[{"parameter":"X","arguments":["x"]}],"outputs":[{"parameter":"Out","arguments":["y"]}],"attrs":[]}]}]})";

std::string with(std::string text, const std::string& from, const std::string& to) {
    auto pos = text.find(from);
    REQUIRE(pos != std::string::npos);
    return text.replace(pos, from.size(), to);
}
}  // namespace

TEST_CASE("a well-formed program loads") { CHECK(load_program(good).blocks[0].ops.size() == 1); }

TEST_CASE("malformed and truncated JSON") {
    CHECK_THROWS_CONTAINING(load_program("{\"version\":1,"), format_error, "[dlgraph.format.json]", "malformed JSON");
    std::string g = good;
    for (std::size_t cut : {std::size_t(1), g.size() / 3, g.size() / 2, g.size() - 1})
        CHECK_THROWS_CONTAINING(load_program(g.substr(0, cut)), format_error, "[dlgraph.format.json]");
    CHECK_THROWS_CONTAINING(load_program(""), format_error, "[dlgraph.format.json]");
    CHECK_THROWS_CONTAINING(load_program("[1,2]"), format_error, "expected an object");
}

TEST_CASE("wrong field types and missing fields name their JSON path") {
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"version\":1", "\"version\":\"1\"")), format_error,
                            "version: expected an integer, found a string");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"version\":1", "\"version\":2")), format_error,
                            "unsupported format version 2");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"dims\":[-1,3]", "\"dims\":[-1,\"3\"]")), format_error,
                            "blocks[0].vars[0].lod_tensor.tensor.dims[1]: expected an integer");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"dims\":[-1,3]", "\"dims\":[-2,3]")), format_error,
                            "dims[0]: dim -2 is invalid");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"data_type\":\"FP32\"", "\"data_type\":\"FP33\"")),
                            format_error, "blocks[0].vars[0].lod_tensor.tensor.data_type: unknown value 'FP33'");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"type\":\"relu\",", "")), format_error,
                            "blocks[0].ops[0].type: missing field");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"arguments\":[\"x\"]", "\"arguments\":\"x\"")), format_error,
                            "blocks[0].ops[0].inputs[0].arguments: expected an array, found a string");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"persistable\":false,", "\"persistent\":false,")),
                            format_error, "blocks[0].vars[0].persistent: unknown field");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"idx\":0", "\"idx\":1")), format_error,
                            "blocks[0].idx: block index 1 does not match its position 0");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"name\":\"y\"", "\"name\":\"x\"")), format_error,
                            "blocks[0].vars[1]: variable 'x' is declared twice");
}

TEST_CASE("unknown ops, undeclared variables and wrong slots") {
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"type\":\"relu\"", "\"type\":\"relux\"")), graph_error,
                            "[dlgraph.graph.unknown_op]", "blocks[0].ops[0].type: unknown op type 'relux'");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"arguments\":[\"x\"]", "\"arguments\":[\"h2\"]")),
                            graph_error, "[dlgraph.graph.undeclared]",
                            "blocks[0].ops[0].inputs.X: variable 'h2' is not declared");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"parameter\":\"X\"", "\"parameter\":\"Input\"")),
                            graph_error, "[dlgraph.graph.slot]", "op 'relu' has no input slot 'Input' (slots: X)");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"arguments\":[\"x\"]", "\"arguments\":[\"x\",\"y\"]")),
                            graph_error, "slot 'X' of op 'relu' takes one variable, found 2");
    CHECK_THROWS_CONTAINING(load_program(with(good, "\"attrs\":[]", R"("attrs":[{"name":"alpha","type":"FLOAT","f":1}])")),
                            format_error, "blocks[0].ops[0].attrs.alpha: op 'relu' has no attribute 'alpha'");
}

TEST_CASE("declared dtypes and shapes must agree with inference") {
    CHECK_THROWS_CONTAINING(
        load_program(with(good, R"("name":"y","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP32")",
                          R"("name":"y","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP64")")),
        type_error, "[dlgraph.type.declared]", "relu writes FP32 to 'y', which is declared FP64");
    CHECK_THROWS_CONTAINING(
        load_program(with(good, R"("data_type":"FP32","dims":[-1,3]},"lod_level":0}}],)",
                          R"("data_type":"FP32","dims":[-1,4]},"lod_level":0}}],)")),
        shape_error, "[dlgraph.shape.declared]", "relu writes shape [-1,3] to 'y', which is declared [-1,4]");
}

TEST_CASE("attribute type mismatch names the op and both types") {
    Program p;
    auto x = p.input<float>("x", {2});
    CHECK_THROWS_CONTAINING(p.append("scale", {{"X", {x.name()}}}, {{"Out", 1}}, {Attribute::make_string("scale", "2")}),
                            format_error, "op 'scale' expects FLOAT, found STRING");
    CHECK(p.op_count() == 0);
}
