// Checks a program's meaning against the op table: known op types, known
// slots with the right number of variables, declared variables, attributes
// of the right type, and dtypes/shapes that agree with shape inference.
// Errors name the JSON path of the fault, e.g.
// "blocks[0].ops[3].inputs.X: variable 'h2' is not declared".
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "dlgraph/config.hpp"
#include "dlgraph/json.hpp"
#include "dlgraph/ops/op_table.hpp"

namespace dlgraph {

DLGRAPH_INLINE std::string op_path(int block, int op);

DLGRAPH_INLINE const OpDef& lookup_op(const std::string& type, const std::string& where);

// The op's attributes in `def.attrs` order, defaults filled in. INT and LONG
// are interchangeable where the value fits.
DLGRAPH_INLINE std::vector<Attribute> normalize_attrs(const OpDef& def, const OpDesc& op, const std::string& where);

namespace detail {
DLGRAPH_INLINE void check_slots(const std::vector<SlotDef>& defs, const std::vector<OpSlot>& slots, const OpDesc& op,
                                const char* kind, const std::string& where);
// Refuses a variable of another kind than its slot takes (a STEP_SCOPES
// variable as assign's Out).
DLGRAPH_INLINE void check_var_kind(const OpDef& def, const SlotDef& slot, const VarDesc& v, const std::string& at);
// Refuses declared dims whose size overflows (check_shape_size).
DLGRAPH_INLINE void check_declared_size(const VarDesc& v);
}  // namespace detail

// Finds the declaration of `name` in block `b` or its ancestors.
DLGRAPH_INLINE const VarDesc* find_var_desc(const ProgramDesc& p, int b, std::string_view name);

DLGRAPH_INLINE bool dims_compatible(const Shape& declared, const Shape& actual);

// Runs shape inference for `op` on declared metas (outputs start as
// declared), then checks that some device has a kernel for the result;
// shared by the builder and the validator.
DLGRAPH_INLINE void infer_op(const OpDef& def, const OpDesc& op, const std::vector<Attribute>& attrs,
                             const std::vector<const VarMeta*>& in_metas, const std::vector<VarMeta*>& out_metas,
                             std::string_view label);

// Flattens the op's variables in slot-definition order.
DLGRAPH_INLINE std::vector<std::string> slot_args(const std::vector<SlotDef>& defs, const std::vector<OpSlot>& slots);

// Validates every op of every block; throws with the path of the first fault.
DLGRAPH_INLINE void validate(const ProgramDesc& p);

// How a program is loaded. Strict by default: an attribute the op does not
// have is an error.
struct LoadOptions {
    // Accept and drop the attributes PaddlePaddle's framework puts on ops
    // (paddle_framework_attrs) where the op has no attribute of that name.
    bool lenient = false;
    // When set, receives each dropped attribute name once, sorted.
    std::vector<std::string>* ignored = nullptr;
};

// The attributes PaddlePaddle adds to every op (OpProtoAndCheckerMaker's
// op_role ... op_device, with_quant_attr) or to many ops for its own
// kernels (use_mkldnn, use_cudnn, is_test on ops that have no test mode):
// none changes what an op computes in dlgraph.
inline constexpr std::string_view paddle_framework_attrs[] = {
    "op_role",     "op_role_var",   "op_namescope",     "op_callstack",  "op_device",
    "with_quant_attr", "use_mkldnn", "use_cudnn",       "use_quantizer", "mkldnn_data_type",
    "is_test",     "use_xpu"};

// Parses and validates a program from JSON text.
DLGRAPH_INLINE ProgramDesc load_program(std::string_view text, const LoadOptions& opts = {});

DLGRAPH_INLINE std::string save_program(const ProgramDesc& p, int indent = 1);

DLGRAPH_INLINE std::string read_text_file(const std::string& path);

namespace detail {
// Rethrows `e` as the same type with `prefix: ` put before its message.
template <class E> [[noreturn]] void rethrow_prefixed(const E& e, const std::string& prefix) {
    throw E(e.id(), prefix + ": " + std::string(e.what()).substr(e.id().size() + 3));
}
}  // namespace detail

// Loads and validates a program file; every error names the file.
DLGRAPH_INLINE ProgramDesc load_program_file(const std::string& path, const LoadOptions& opts = {});

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph {

DLGRAPH_INLINE std::string op_path(int block, int op) {
    return "blocks[" + std::to_string(block) + "].ops[" + std::to_string(op) + "]";
}

DLGRAPH_INLINE const OpDef& lookup_op(const std::string& type, const std::string& where) {
    if (auto* d = find_op(type)) return *d;
    throw graph_error("dlgraph.graph.unknown_op", where + ": unknown op type '" + type +
                                                        "' (not a built-in op, nor one this program registered)");
}

DLGRAPH_INLINE std::vector<Attribute> normalize_attrs(const OpDef& def, const OpDesc& op, const std::string& where) {
    std::vector<Attribute> out;
    out.reserve(def.attrs.size());
    for (auto& ad : def.attrs) {
        const Attribute* a = op.attr(ad.name);
        if (!a) {
            if (ad.required)
                throw format_error("dlgraph.format.attr", where + ".attrs: op '" + op.type + "' needs attribute '" +
                                                              std::string(ad.name) + "'");
            out.push_back(ad.value);
            continue;
        }
        Attribute v = *a;
        const AttrType want = ad.value.type;
        bool intlike = (v.type == AttrType::INT || v.type == AttrType::LONG) &&
                       (want == AttrType::INT || want == AttrType::LONG);
        if (v.type != want && !intlike)
            throw format_error("dlgraph.format.attr", where + ".attrs." + v.name + ": op '" + op.type + "' expects " +
                                                          std::string(attr_type_name(want)) + ", found " +
                                                          std::string(attr_type_name(v.type)));
        if (want == AttrType::INT && (v.i < INT32_MIN || v.i > INT32_MAX))
            throw format_error("dlgraph.format.attr", where + ".attrs." + v.name + ": op '" + op.type +
                                                          "' takes an INT (int32) here; " + std::to_string(v.i) +
                                                          " is out of range");
        v.type = want;
        out.push_back(std::move(v));
    }
    for (auto& a : op.attrs)
        if (def.attr_index(a.name) < 0) {
            std::string known;
            for (auto& ad : def.attrs) known += (known.empty() ? "" : ", ") + std::string(ad.name);
            throw format_error("dlgraph.format.attr", where + ".attrs." + a.name + ": op '" + op.type +
                                                          "' has no attribute '" + a.name + "' (it has: " +
                                                          (known.empty() ? "none" : known) + ")");
        }
    return out;
}

}  // namespace dlgraph

namespace dlgraph::detail {

DLGRAPH_INLINE void check_slots(const std::vector<SlotDef>& defs, const std::vector<OpSlot>& slots, const OpDesc& op,
                                const char* kind, const std::string& where) {
    for (auto& s : slots) {
        bool known = false;
        for (auto& d : defs) known = known || d.name == s.parameter;
        if (!known) {
            std::string names;
            for (auto& d : defs) names += (names.empty() ? "" : ", ") + std::string(d.name);
            throw graph_error("dlgraph.graph.slot", where + "." + kind + "." + s.parameter + ": op '" + op.type +
                                                        "' has no " + (kind[0] == 'i' ? "input" : "output") +
                                                        " slot '" + s.parameter + "' (slots: " + names + ")");
        }
    }
    for (auto& d : defs) {
        const OpSlot* s = nullptr;
        for (auto& x : slots)
            if (x.parameter == d.name) {
                if (s)
                    throw graph_error("dlgraph.graph.slot", where + "." + kind + "." + std::string(d.name) +
                                                                ": slot '" + std::string(d.name) + "' is given twice");
                s = &x;
            }
        std::size_t n = s ? s->arguments.size() : 0;
        std::string p = where + "." + kind + "." + std::string(d.name);
        if (n == 0 && !d.optional)
            throw graph_error("dlgraph.graph.slot", p + ": op '" + op.type + "' needs a variable in slot '" +
                                                        std::string(d.name) + "'");
        if (n > 1 && !d.duplicable)
            throw graph_error("dlgraph.graph.slot", p + ": slot '" + std::string(d.name) + "' of op '" + op.type +
                                                        "' takes one variable, found " + std::to_string(n));
        if (s)
            for (auto& a : s->arguments)
                if (a.empty()) throw graph_error("dlgraph.graph.slot", p + ": empty variable name");
    }
}

DLGRAPH_INLINE void check_var_kind(const OpDef& def, const SlotDef& slot, const VarDesc& v, const std::string& at) {
    if (v.type != slot.kind)
        throw graph_error("dlgraph.graph.kind", at + ": variable '" + v.name + "' is a " +
                                                    std::string(var_type_name(v.type)) + " variable; slot " +
                                                    std::string(slot.name) + " of " + std::string(def.type) +
                                                    " takes a " + std::string(var_type_name(slot.kind)));
}

DLGRAPH_INLINE void check_declared_size(const VarDesc& v) {
    check_shape_size(Shape(v.dims), dtype_size(v.data_type), max_shape_bytes, "variable '" + v.name + "'");
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE const VarDesc* find_var_desc(const ProgramDesc& p, int b, std::string_view name) {
    while (b >= 0) {
        auto& blk = p.blocks[static_cast<std::size_t>(b)];
        if (auto* v = blk.find_var(name)) return v;
        b = blk.parent_idx;
    }
    return nullptr;
}

DLGRAPH_INLINE bool dims_compatible(const Shape& declared, const Shape& actual) {
    if (declared.rank() != actual.rank()) return false;
    for (int i = 0; i < declared.rank(); ++i)
        if (declared[i] >= 0 && actual[i] >= 0 && declared[i] != actual[i]) return false;
    return true;
}

DLGRAPH_INLINE void infer_op(const OpDef& def, const OpDesc& op, const std::vector<Attribute>& attrs,
                             const std::vector<const VarMeta*>& in_metas, const std::vector<VarMeta*>& out_metas,
                             std::string_view label) {
    std::vector<std::uint32_t> in_off{0}, out_off{0};
    for (auto& sd : def.inputs) {
        auto* s = op.input(sd.name);
        in_off.push_back(static_cast<std::uint32_t>(in_off.back() + (s ? s->arguments.size() : 0)));
    }
    for (auto& sd : def.outputs) {
        auto* s = op.output(sd.name);
        out_off.push_back(static_cast<std::uint32_t>(out_off.back() + (s ? s->arguments.size() : 0)));
    }
    InferContext ctx(def, label, {in_metas.data(), in_off.data()}, {out_metas.data(), out_off.data()}, attrs.data());
    def.infer(ctx);
    for (std::size_t k = 0; k < out_metas.size(); ++k)
        check_shape_size(out_metas[k]->shape, dtype_size(out_metas[k]->dtype), max_shape_bytes,
                         std::string(label) + ": output " + std::to_string(k));
    check_kernel(def, kernel_dtype(def, ctx, attrs.data()), label);
}

DLGRAPH_INLINE std::vector<std::string> slot_args(const std::vector<SlotDef>& defs, const std::vector<OpSlot>& slots) {
    std::vector<std::string> out;
    for (auto& d : defs)
        for (auto& s : slots)
            if (s.parameter == d.name) out.insert(out.end(), s.arguments.begin(), s.arguments.end());
    return out;
}

DLGRAPH_INLINE void validate(const ProgramDesc& p) {
    // Names are looked up through an index per block, so that validation is
    // linear in the program's size (a 40,000-op chain loads in well under a
    // second).
    std::vector<VarIndex> index;
    index.reserve(p.blocks.size());
    for (auto& blk : p.blocks) index.emplace_back(blk);
    auto find = [&](int b, std::string_view name) -> const VarDesc* {
        for (; b >= 0; b = p.blocks[static_cast<std::size_t>(b)].parent_idx)
            if (auto* v = index[static_cast<std::size_t>(b)].find(name)) return v;
        return nullptr;
    };
    std::vector<VarMeta> ins, outs;
    std::vector<const VarMeta*> in_ptrs;
    std::vector<VarMeta*> out_ptrs;
    std::vector<const VarDesc*> out_vars;
    for (std::size_t bi = 0; bi < p.blocks.size(); ++bi) {
        auto& blk = p.blocks[bi];
        for (auto& v : blk.vars)
            if (v.type == VarType::LOD_TENSOR) detail::check_declared_size(v);
        for (std::size_t oi = 0; oi < blk.ops.size(); ++oi) {
            auto& op = blk.ops[oi];
            std::string where = op_path(static_cast<int>(bi), static_cast<int>(oi));
            const OpDef& def = lookup_op(op.type, where + ".type");
            detail::check_slots(def.inputs, op.inputs, op, "inputs", where);
            detail::check_slots(def.outputs, op.outputs, op, "outputs", where);
            auto attrs = normalize_attrs(def, op, where);

            // Every argument declared, as a variable of the kind its slot
            // takes; then static inference on declared dtypes and dims.
            ins.clear();
            outs.clear();
            out_vars.clear();
            auto collect = [&](const std::vector<SlotDef>& defs, const std::vector<OpSlot>& slots, const char* kind,
                               std::vector<VarMeta>& metas, std::vector<const VarDesc*>* vars) {
                for (auto& d : defs)
                    for (auto& s : slots) {
                        if (s.parameter != d.name) continue;
                        for (auto& a : s.arguments) {
                            const VarDesc* v = find(static_cast<int>(bi), a);
                            const std::string at = where + "." + kind + "." + s.parameter;
                            if (!v)
                                throw graph_error("dlgraph.graph.undeclared",
                                                  at + ": variable '" + a + "' is not declared");
                            detail::check_var_kind(def, d, *v, at);
                            metas.push_back({v->data_type, Shape(v->dims)});
                            if (vars) vars->push_back(v);
                        }
                    }
            };
            collect(def.inputs, op.inputs, "inputs", ins, nullptr);
            collect(def.outputs, op.outputs, "outputs", outs, &out_vars);
            in_ptrs.clear();
            out_ptrs.clear();
            for (auto& m : ins) in_ptrs.push_back(&m);
            for (auto& m : outs) out_ptrs.push_back(&m);
            std::string label = op.type + " (" + where + ")";
            infer_op(def, op, attrs, in_ptrs, out_ptrs, label);
            for (std::size_t k = 0; k < out_vars.size(); ++k) {
                const VarDesc* v = out_vars[k];
                if (v->type != VarType::LOD_TENSOR) continue;  // lists (fetch) have no tensor meta
                if (v->data_type != outs[k].dtype)
                    throw type_error("dlgraph.type.declared", where + ": " + op.type + " writes " +
                                                                  to_string(outs[k].dtype) + " to '" + v->name +
                                                                  "', which is declared " + to_string(v->data_type));
                if (!v->dims.empty() && !dims_compatible(Shape(v->dims), outs[k].shape))
                    throw shape_error("dlgraph.shape.declared", where + ": " + op.type + " writes shape " +
                                                                    to_string(outs[k].shape) + " to '" + v->name +
                                                                    "', which is declared " +
                                                                    to_string(Shape(v->dims)));
            }
        }
    }
}

DLGRAPH_INLINE ProgramDesc load_program(std::string_view text, const LoadOptions& opts) {
    ProgramDesc p;
    from_json(parse_json_text(text), p);
    if (opts.lenient) {
        std::set<std::string> dropped;
        for (std::size_t bi = 0; bi < p.blocks.size(); ++bi)
            for (std::size_t oi = 0; oi < p.blocks[bi].ops.size(); ++oi) {
                OpDesc& op = p.blocks[bi].ops[oi];
                const OpDef& def = lookup_op(op.type, op_path(static_cast<int>(bi), static_cast<int>(oi)) + ".type");
                std::erase_if(op.attrs, [&](const Attribute& a) {
                    const bool framework = std::find(std::begin(paddle_framework_attrs), std::end(paddle_framework_attrs),
                                                     a.name) != std::end(paddle_framework_attrs);
                    if (!framework || def.attr_index(a.name) >= 0) return false;
                    dropped.insert(a.name);
                    return true;
                });
            }
        if (opts.ignored) opts.ignored->assign(dropped.begin(), dropped.end());
    }
    validate(p);
    return p;
}

DLGRAPH_INLINE std::string save_program(const ProgramDesc& p, int indent) {
    json j = p;
    return j.dump(indent);
}

DLGRAPH_INLINE std::string read_text_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw io_error("dlgraph.io.open", "'" + path + "' is a directory, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw io_error("dlgraph.io.open", "cannot open '" + path + "' for reading");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw io_error("dlgraph.io.read", "cannot read '" + path + "'");
    return ss.str();
}

DLGRAPH_INLINE ProgramDesc load_program_file(const std::string& path, const LoadOptions& opts) {
    std::string text = read_text_file(path);
    try {
        return load_program(text, opts);
    } catch (const format_error& e) {
        detail::rethrow_prefixed(e, path);
    } catch (const graph_error& e) {
        detail::rethrow_prefixed(e, path);
    } catch (const type_error& e) {
        detail::rethrow_prefixed(e, path);
    } catch (const shape_error& e) {
        detail::rethrow_prefixed(e, path);
    } catch (const resource_error& e) {
        detail::rethrow_prefixed(e, path);
    }
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
