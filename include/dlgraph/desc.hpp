// Program descriptions: plain value types mirroring PaddlePaddle's
// framework.proto (VarDesc, OpDesc, BlockDesc, ProgramDesc). They say what to
// compute, never how; the Planner and the Session decide the how.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dlgraph/dtype.hpp"
#include "dlgraph/error.hpp"

namespace dlgraph {

enum class AttrType : int { INT = 0, FLOAT = 1, STRING = 2, INTS = 3, FLOATS = 4, STRINGS = 5,
                            BOOLEAN = 6, BOOLEANS = 7, BLOCK = 8, LONG = 9 };
inline constexpr std::string_view attr_type_names[] = {"INT",     "FLOAT",    "STRING",   "INTS", "FLOATS",
                                                       "STRINGS", "BOOLEAN", "BOOLEANS", "BLOCK", "LONG"};
inline std::string_view attr_type_name(AttrType t) { return attr_type_names[static_cast<int>(t)]; }

// OpDesc.Attr. Only the field that `type` names is meaningful. FLOAT values
// are kept in double precision (a superset of the proto's float).
struct Attribute {
    std::string name;
    AttrType type = AttrType::INT;
    std::int64_t i = 0;  // INT (int32 range) and LONG
    double f = 0;
    std::string s;
    std::vector<std::int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    bool b = false;
    std::vector<bool> bools;
    std::int32_t block_idx = 0;

    static Attribute of(std::string n, AttrType t) {
        Attribute a;
        a.name = std::move(n);
        a.type = t;
        return a;
    }
    static Attribute make_int(std::string n, std::int64_t v) { Attribute a = of(std::move(n), AttrType::INT); a.i = v; return a; }
    static Attribute make_long(std::string n, std::int64_t v) { Attribute a = of(std::move(n), AttrType::LONG); a.i = v; return a; }
    static Attribute make_float(std::string n, double v) { Attribute a = of(std::move(n), AttrType::FLOAT); a.f = v; return a; }
    static Attribute make_string(std::string n, std::string v) { Attribute a = of(std::move(n), AttrType::STRING); a.s = std::move(v); return a; }
    static Attribute make_ints(std::string n, std::vector<std::int64_t> v) { Attribute a = of(std::move(n), AttrType::INTS); a.ints = std::move(v); return a; }
    static Attribute make_floats(std::string n, std::vector<double> v) { Attribute a = of(std::move(n), AttrType::FLOATS); a.floats = std::move(v); return a; }
    static Attribute make_strings(std::string n, std::vector<std::string> v) { Attribute a = of(std::move(n), AttrType::STRINGS); a.strings = std::move(v); return a; }
    static Attribute make_bool(std::string n, bool v) { Attribute a = of(std::move(n), AttrType::BOOLEAN); a.b = v; return a; }
    static Attribute make_bools(std::string n, std::vector<bool> v) { Attribute a = of(std::move(n), AttrType::BOOLEANS); a.bools = std::move(v); return a; }
    static Attribute make_block(std::string n, std::int32_t v) { Attribute a = of(std::move(n), AttrType::BLOCK); a.block_idx = v; return a; }

    friend bool operator==(const Attribute& a, const Attribute& b) {
        if (a.name != b.name || a.type != b.type) return false;
        switch (a.type) {
            case AttrType::INT: case AttrType::LONG: return a.i == b.i;
            case AttrType::FLOAT: return a.f == b.f;
            case AttrType::STRING: return a.s == b.s;
            case AttrType::INTS: return a.ints == b.ints;
            case AttrType::FLOATS: return a.floats == b.floats;
            case AttrType::STRINGS: return a.strings == b.strings;
            case AttrType::BOOLEAN: return a.b == b.b;
            case AttrType::BOOLEANS: return a.bools == b.bools;
            case AttrType::BLOCK: return a.block_idx == b.block_idx;
        }
        return false;
    }
};

// OpDesc.Var: a slot ("parameter") and the variables bound to it.
struct OpSlot {
    std::string parameter;
    std::vector<std::string> arguments;
    friend bool operator==(const OpSlot&, const OpSlot&) = default;
};

struct OpDesc {
    std::string type;
    std::vector<OpSlot> inputs;
    std::vector<OpSlot> outputs;
    std::vector<Attribute> attrs;
    bool is_target = false;

    const OpSlot* input(std::string_view slot) const { return find(inputs, slot); }
    const OpSlot* output(std::string_view slot) const { return find(outputs, slot); }
    const Attribute* attr(std::string_view name) const {
        for (auto& a : attrs)
            if (a.name == name) return &a;
        return nullptr;
    }
    OpDesc& set_input(std::string slot, std::vector<std::string> args) { return set(inputs, std::move(slot), std::move(args)); }
    OpDesc& set_output(std::string slot, std::vector<std::string> args) { return set(outputs, std::move(slot), std::move(args)); }
    OpDesc& set_attr(Attribute a) {
        for (auto& x : attrs)
            if (x.name == a.name) { x = std::move(a); return *this; }
        attrs.push_back(std::move(a));
        return *this;
    }
    friend bool operator==(const OpDesc&, const OpDesc&) = default;

private:
    static const OpSlot* find(const std::vector<OpSlot>& v, std::string_view slot) {
        for (auto& s : v)
            if (s.parameter == slot) return &s;
        return nullptr;
    }
    OpDesc& set(std::vector<OpSlot>& v, std::string slot, std::vector<std::string> args) {
        for (auto& s : v)
            if (s.parameter == slot) { s.arguments = std::move(args); return *this; }
        v.push_back({std::move(slot), std::move(args)});
        return *this;
    }
};

enum class VarType : int { LOD_TENSOR = 1, SELECTED_ROWS = 2, FEED_MINIBATCH = 3, FETCH_LIST = 4,
                           STEP_SCOPES = 5, LOD_RANK_TABLE = 6, LOD_TENSOR_ARRAY = 7 };
inline constexpr std::string_view var_type_names[] = {"",       "LOD_TENSOR",     "SELECTED_ROWS",  "FEED_MINIBATCH",
                                                      "FETCH_LIST", "STEP_SCOPES", "LOD_RANK_TABLE", "LOD_TENSOR_ARRAY"};
inline std::string_view var_type_name(VarType t) { return var_type_names[static_cast<int>(t)]; }

struct VarDesc {
    std::string name;
    VarType type = VarType::LOD_TENSOR;
    DataType data_type = DataType::FP32;
    std::vector<std::int64_t> dims;  // -1 = unknown
    std::int32_t lod_level = 0;
    bool persistable = false;
    friend bool operator==(const VarDesc&, const VarDesc&) = default;
};

struct BlockDesc {
    std::int32_t idx = 0;
    std::int32_t parent_idx = -1;
    std::vector<VarDesc> vars;
    std::vector<OpDesc> ops;

    const VarDesc* find_var(std::string_view name) const {
        for (auto& v : vars)
            if (v.name == name) return &v;
        return nullptr;
    }
    VarDesc* find_var(std::string_view name) {
        for (auto& v : vars)
            if (v.name == name) return &v;
        return nullptr;
    }
    friend bool operator==(const BlockDesc&, const BlockDesc&) = default;
};

// Name -> declaration of one block, for code that looks names up in a loop
// over ops (find_var is a linear search). Points into the block: valid while
// its `vars` are not changed. The first of two equal names wins, as in
// find_var.
class VarIndex {
public:
    explicit VarIndex(const BlockDesc& b) {
        map_.reserve(b.vars.size());
        for (auto& v : b.vars) map_.emplace(v.name, &v);
    }
    const VarDesc* find(std::string_view name) const {
        auto it = map_.find(name);
        return it == map_.end() ? nullptr : it->second;
    }

private:
    std::unordered_map<std::string_view, const VarDesc*> map_;
};

inline constexpr int format_version = 1;

struct ProgramDesc {
    std::vector<BlockDesc> blocks{BlockDesc{}};
    int version = format_version;
    friend bool operator==(const ProgramDesc&, const ProgramDesc&) = default;
};

}  // namespace dlgraph
