// JSON for program descriptions through nlohmann's ADL to_json / from_json,
// with the field names of PaddlePaddle's framework.proto under the usual
// protobuf-to-JSON mapping (enums as names, repeated fields as arrays) and a
// top-level "version". Structural errors name the JSON path of the fault.
// Semantic checks (known ops, declared variables) live in validate.hpp.
#pragma once

#include <string>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "dlgraph/config.hpp"
#include "dlgraph/desc.hpp"

namespace dlgraph {

using json = nlohmann::json;

namespace detail {

[[noreturn]] inline void bad_field(const std::string& path, const std::string& what) {
    throw format_error("dlgraph.format.field", path + ": " + what);
}

DLGRAPH_INLINE std::string json_kind(const json& j);

// Reads JSON with a path for every message.
struct reader {
    const json& j;
    std::string path;

    reader at(const char* key) const { return {j.at(key), path.empty() ? key : path + "." + key}; }
    reader at(std::size_t i) const { return {j[i], path + "[" + std::to_string(i) + "]"}; }
    bool has(const char* key) const { return j.contains(key); }

    const reader& expect(bool ok, const char* kind) const {
        if (!ok) bad_field(path, std::string("expected ") + kind + ", found " + json_kind(j));
        return *this;
    }
    const reader& object() const { return expect(j.is_object(), "an object"); }
    const reader& array() const { return expect(j.is_array(), "an array"); }
    std::string str() const { expect(j.is_string(), "a string"); return j.get<std::string>(); }
    bool boolean() const { expect(j.is_boolean(), "a boolean"); return j.get<bool>(); }
    std::int64_t integer() const {
        expect(j.is_number_integer() || j.is_number_unsigned(), "an integer");
        if (j.is_number_unsigned() && j.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
            bad_field(path, "integer out of range");
        return j.get<std::int64_t>();
    }
    // An integer that must fit in int32 (indices, levels).
    std::int32_t integer32() const {
        const std::int64_t v = integer();
        if (v < INT32_MIN || v > INT32_MAX) bad_field(path, "integer out of int32 range");
        return static_cast<std::int32_t>(v);
    }
    double number() const { expect(j.is_number(), "a number"); return j.get<double>(); }
    std::size_t size() const { return j.size(); }

    // Required field.
    reader field(const char* key) const {
        object();
        if (!j.contains(key)) bad_field(path.empty() ? key : path + "." + key, "missing field");
        return at(key);
    }
    // Optional field: calls f(reader) when present.
    template <class F> void optional(const char* key, F&& f) const {
        object();
        if (j.contains(key)) f(at(key));
    }
    template <class F> void each(F&& f) const {
        array();
        for (std::size_t i = 0; i < j.size(); ++i) f(at(i));
    }
    // Fails on keys outside `known` (a typo must not be silently ignored).
    void only(std::initializer_list<const char*> known) const {
        object();
        for (auto& [k, v] : j.items()) {
            bool ok = false;
            for (auto* n : known) ok = ok || k == n;
            if (!ok) bad_field(path.empty() ? k : path + "." + k, "unknown field");
        }
    }
};

template <class E, std::size_t N>
E enum_from(const reader& r, const std::string_view (&names)[N]) {
    auto s = r.str();
    for (std::size_t i = 0; i < N; ++i)
        if (!names[i].empty() && names[i] == s) return static_cast<E>(i);
    bad_field(r.path, "unknown value '" + s + "'");
}

DLGRAPH_INLINE Attribute read_attr(const reader& r);

DLGRAPH_INLINE std::vector<OpSlot> read_slots(const reader& r);

DLGRAPH_INLINE OpDesc read_op(const reader& r);

DLGRAPH_INLINE VarDesc read_var(const reader& r);

DLGRAPH_INLINE BlockDesc read_block(const reader& r);

}  // namespace detail

// ---- ADL serializers -------------------------------------------------------

DLGRAPH_INLINE void to_json(json& j, const Attribute& a);
inline void to_json(json& j, const OpSlot& s) { j = json{{"parameter", s.parameter}, {"arguments", s.arguments}}; }
DLGRAPH_INLINE void to_json(json& j, const OpDesc& op);
DLGRAPH_INLINE void to_json(json& j, const VarDesc& v);
DLGRAPH_INLINE void to_json(json& j, const BlockDesc& b);
inline void to_json(json& j, const ProgramDesc& p) { j = json{{"version", p.version}, {"blocks", p.blocks}}; }

inline void from_json(const json& j, Attribute& a) { a = detail::read_attr({j, "attr"}); }
inline void from_json(const json& j, OpDesc& op) { op = detail::read_op({j, "op"}); }
inline void from_json(const json& j, VarDesc& v) { v = detail::read_var({j, "var"}); }
inline void from_json(const json& j, BlockDesc& b) { b = detail::read_block({j, "block"}); }
// Structural parse only; load_program() (validate.hpp) also checks meaning.
DLGRAPH_INLINE void from_json(const json& j, ProgramDesc& p);

// Programs nest 7 levels deep (program, blocks, block, ops, op, attrs,
// attr); a document deeper than this is refused.
inline constexpr int max_json_depth = 64;

// Parses JSON text; malformed or truncated text becomes a format_error, and
// nesting deeper than max_json_depth a resource_error.
DLGRAPH_INLINE json parse_json_text(std::string_view text);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph::detail {

DLGRAPH_INLINE std::string json_kind(const json& j) {
    switch (j.type()) {
        case json::value_t::null: return "null";
        case json::value_t::object: return "an object";
        case json::value_t::array: return "an array";
        case json::value_t::string: return "a string";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "an integer";
        case json::value_t::number_float: return "a number";
        default: return "a value";
    }
}

DLGRAPH_INLINE Attribute read_attr(const reader& r) {
    r.only({"name", "type", "i", "f", "s", "ints", "floats", "strings", "b", "bools", "block_idx", "l"});
    Attribute a;
    a.name = r.field("name").str();
    a.type = enum_from<AttrType>(r.field("type"), attr_type_names);
    auto need = [&](const char* k) { return r.field(k); };
    switch (a.type) {
        case AttrType::INT: {
            auto f = need("i");
            a.i = f.integer();
            if (a.i < INT32_MIN || a.i > INT32_MAX) bad_field(f.path, "INT attribute out of int32 range");
            break;
        }
        case AttrType::LONG: a.i = need("l").integer(); break;
        case AttrType::FLOAT: a.f = need("f").number(); break;
        case AttrType::STRING: a.s = need("s").str(); break;
        case AttrType::INTS: need("ints").each([&](const reader& e) { a.ints.push_back(e.integer()); }); break;
        case AttrType::FLOATS: need("floats").each([&](const reader& e) { a.floats.push_back(e.number()); }); break;
        case AttrType::STRINGS: need("strings").each([&](const reader& e) { a.strings.push_back(e.str()); }); break;
        case AttrType::BOOLEAN: a.b = need("b").boolean(); break;
        case AttrType::BOOLEANS: need("bools").each([&](const reader& e) { a.bools.push_back(e.boolean()); }); break;
        case AttrType::BLOCK: a.block_idx = need("block_idx").integer32(); break;
    }
    return a;
}

DLGRAPH_INLINE std::vector<OpSlot> read_slots(const reader& r) {
    std::vector<OpSlot> out;
    std::unordered_set<std::string> seen;
    r.each([&](const reader& e) {
        e.only({"parameter", "arguments"});
        OpSlot s{e.field("parameter").str(), {}};
        e.optional("arguments", [&](const reader& a) { a.each([&](const reader& x) { s.arguments.push_back(x.str()); }); });
        if (!seen.insert(s.parameter).second) bad_field(e.path, "slot '" + s.parameter + "' appears twice");
        out.push_back(std::move(s));
    });
    return out;
}

DLGRAPH_INLINE OpDesc read_op(const reader& r) {
    r.only({"type", "inputs", "outputs", "attrs", "is_target"});
    OpDesc op;
    op.type = r.field("type").str();
    r.optional("inputs", [&](const reader& x) { op.inputs = read_slots(x); });
    r.optional("outputs", [&](const reader& x) { op.outputs = read_slots(x); });
    std::unordered_set<std::string> seen;
    r.optional("attrs", [&](const reader& x) {
        x.each([&](const reader& e) {
            auto a = read_attr(e);
            if (!seen.insert(a.name).second) bad_field(e.path, "attribute '" + a.name + "' appears twice");
            op.attrs.push_back(std::move(a));
        });
    });
    r.optional("is_target", [&](const reader& x) { op.is_target = x.boolean(); });
    return op;
}

DLGRAPH_INLINE VarDesc read_var(const reader& r) {
    r.only({"name", "type", "persistable", "lod_tensor"});
    VarDesc v;
    v.name = r.field("name").str();
    if (v.name.empty()) bad_field(r.path + ".name", "empty variable name");
    v.type = enum_from<VarType>(r.field("type"), var_type_names);
    r.optional("persistable", [&](const reader& x) { v.persistable = x.boolean(); });
    if (v.type == VarType::LOD_TENSOR) {
        auto lt = r.field("lod_tensor");
        lt.only({"tensor", "lod_level"});
        auto t = lt.field("tensor");
        t.only({"data_type", "dims"});
        v.data_type = enum_from<DataType>(t.field("data_type"), dtype_names);
        t.optional("dims", [&](const reader& d) {
            d.each([&](const reader& e) {
                auto n = e.integer();
                if (n < -1) bad_field(e.path, "dim " + std::to_string(n) + " is invalid (use -1 for unknown)");
                v.dims.push_back(n);
            });
        });
        if (v.dims.size() > 8) bad_field(t.path + ".dims", "rank above 8 is not supported");
        lt.optional("lod_level", [&](const reader& x) { v.lod_level = x.integer32(); });
    }
    return v;
}

DLGRAPH_INLINE BlockDesc read_block(const reader& r) {
    r.only({"idx", "parent_idx", "vars", "ops"});
    BlockDesc b;
    b.idx = r.field("idx").integer32();
    r.optional("parent_idx", [&](const reader& x) { b.parent_idx = x.integer32(); });
    std::unordered_set<std::string> names;
    r.optional("vars", [&](const reader& x) {
        x.each([&](const reader& e) {
            auto v = read_var(e);
            if (!names.insert(v.name).second) bad_field(e.path, "variable '" + v.name + "' is declared twice");
            b.vars.push_back(std::move(v));
        });
    });
    r.optional("ops", [&](const reader& x) { x.each([&](const reader& e) { b.ops.push_back(read_op(e)); }); });
    return b;
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE void to_json(json& j, const Attribute& a) {
    j = json{{"name", a.name}, {"type", attr_type_name(a.type)}};
    switch (a.type) {
        case AttrType::INT: j["i"] = a.i; break;
        case AttrType::LONG: j["l"] = a.i; break;
        case AttrType::FLOAT: j["f"] = a.f; break;
        case AttrType::STRING: j["s"] = a.s; break;
        case AttrType::INTS: j["ints"] = a.ints; break;
        case AttrType::FLOATS: j["floats"] = a.floats; break;
        case AttrType::STRINGS: j["strings"] = a.strings; break;
        case AttrType::BOOLEAN: j["b"] = a.b; break;
        case AttrType::BOOLEANS: j["bools"] = a.bools; break;
        case AttrType::BLOCK: j["block_idx"] = a.block_idx; break;
    }
}

DLGRAPH_INLINE void to_json(json& j, const OpDesc& op) {
    j = json{{"type", op.type}, {"inputs", op.inputs}, {"outputs", op.outputs}, {"attrs", op.attrs}};
    if (op.is_target) j["is_target"] = true;
}

DLGRAPH_INLINE void to_json(json& j, const VarDesc& v) {
    j = json{{"name", v.name}, {"type", var_type_name(v.type)}, {"persistable", v.persistable}};
    if (v.type == VarType::LOD_TENSOR)
        j["lod_tensor"] = {{"tensor", {{"data_type", dtype_name(v.data_type)}, {"dims", v.dims}}},
                           {"lod_level", v.lod_level}};
}

DLGRAPH_INLINE void to_json(json& j, const BlockDesc& b) {
    j = json{{"idx", b.idx}, {"parent_idx", b.parent_idx}, {"vars", b.vars}, {"ops", b.ops}};
}

DLGRAPH_INLINE void from_json(const json& j, ProgramDesc& p) {
    detail::reader r{j, ""};
    r.only({"version", "blocks"});
    auto ver = r.field("version");
    p.version = ver.integer32();
    if (p.version != format_version)
        detail::bad_field("version", "unsupported format version " + std::to_string(p.version) + " (this dlgraph reads " +
                                         std::to_string(format_version) + ")");
    p.blocks.clear();
    auto blocks = r.field("blocks");
    blocks.each([&](const detail::reader& e) { p.blocks.push_back(detail::read_block(e)); });
    if (p.blocks.empty()) detail::bad_field("blocks", "a program needs at least one block");
    for (std::size_t i = 0; i < p.blocks.size(); ++i) {
        if (p.blocks[i].idx != static_cast<std::int32_t>(i))
            detail::bad_field("blocks[" + std::to_string(i) + "].idx",
                              "block index " + std::to_string(p.blocks[i].idx) + " does not match its position " +
                                  std::to_string(i));
        auto pi = p.blocks[i].parent_idx;
        if (pi < -1 || pi >= static_cast<std::int32_t>(i))
            detail::bad_field("blocks[" + std::to_string(i) + "].parent_idx",
                              "parent block " + std::to_string(pi) + " must be an earlier block or -1");
    }
}

DLGRAPH_INLINE json parse_json_text(std::string_view text) {
    // Nesting deeper than any program needs is refused before parsing, so
    // that a hostile file cannot make the document (and its recursive
    // destruction) arbitrarily deep. Brackets inside strings do not count.
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_json_depth)
                throw resource_error("dlgraph.resource.depth",
                                     "JSON nested deeper than " + std::to_string(max_json_depth) + " levels");
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    try {
        return json::parse(text);
    } catch (const json::parse_error& e) {
        throw format_error("dlgraph.format.json", std::string("malformed JSON: ") + e.what());
    } catch (const json::exception& e) {  // a number out of range (1e999) and the like
        throw format_error("dlgraph.format.json", std::string("invalid JSON: ") + e.what());
    }
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
