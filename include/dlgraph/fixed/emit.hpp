// The fixed-model emitter: a program, its fetched targets, the shapes of its
// feeds and the values of its weights become one C++ header (what `dlgraph
// emit` writes). The header holds the weights as constexpr arrays, the
// arena's size as a constant, and `run()`: a flat sequence of calls into
// the kernel core (fixed/runtime.hpp) with constant extents and constant
// offsets into the arena, planned by the same planner and memory plan as
// Session<cpu>. Everything that can fail is checked here, so the model
// itself cannot fail: it has no error path, no heap and no exceptions.
//
// Supported: the inference ops with kernels in the core (element-wise,
// scale, assign, mul, matmul, matmul_v2, softmax, mean, reduce_sum/mean/max/min/prod, reshape,
// transpose, concat, split, cast, sum) in FP32 and FP64 (integer dtypes
// where the CPU has them). softmax_with_cross_entropy whose Loss no fetched
// target needs is emitted as the softmax it computes (the label is then not
// needed). Any other op is refused by name.
#pragma once

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "dlgraph/checkpoint.hpp"
#include "dlgraph/dlgraph.hpp"
#include "dlgraph/kernels/conv.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/matmul.hpp"
#include "dlgraph/kernels/quant.hpp"
#include "dlgraph/ops/conv.hpp"
#include "dlgraph/ops/matmul.hpp"
#include "dlgraph/ops/norm.hpp"
#include "dlgraph/ops/reduce.hpp"

namespace dlgraph::fixed {

struct EmitFeed {
    std::string name;
    Shape shape;
};

struct EmitOptions {
    std::string name = "model";  // the namespace of the model (a C++ identifier)
    std::string source;          // where the program came from, for the header's comment
    std::uint64_t arena_budget = 0;  // bytes; when set, a larger arena is a compile error
    // INT8 products (--weights int8): every FP32 product of an activation
    // [m, k] and a 2-D weight [k, n] (`mul`, `matmul` without transposes)
    // with the weight quantized per output channel and the activation per
    // tensor, both symmetric, accumulated in int32 (kernels/quant.hpp). The
    // activations' scales come from `calibration` (a batch for every feed,
    // run through Session<cpu>); the report compares the INT8 model with the
    // FP32 one on `evaluation` (the calibration batch when empty), with
    // `labels` (one class per row of the first fetch) when given.
    bool int8 = false;
    std::map<std::string, Tensor> calibration, evaluation;
    Tensor labels;
};

// How the INT8 model compares with the FP32 one on the evaluation batch
// (the first fetch, its last dim the classes).
struct Int8Report {
    int products = 0;            // products computed in INT8
    int float_products = 0;      // products left in floating point (not of the form above)
    std::int64_t rows = 0;       // rows evaluated
    std::int64_t same_class = 0; // rows whose largest output is at the same index
    double max_abs_diff = 0;     // over every output
    std::int64_t correct_fp32 = -1, correct_int8 = -1;  // with labels
};

struct EmittedModel {
    std::string header;
    std::size_t planned_arena_bytes = 0;  // the arena less the products' workspace (added at compile time)
    std::size_t session_arena_bytes = 0;  // what Session<cpu> plans for the same targets and shapes
    std::size_t lower_bound = 0;          // the most bytes live at once
    std::size_t weight_bytes = 0;
    int steps = 0;
    std::vector<std::string> gemm_workspaces;  // per product, the expression of its workspace bytes
    std::size_t quant_bytes = 0;                 // the INT8 inputs' buffer (after the planned values; kernels::s8_wide)
    Int8Report int8;                             // with EmitOptions::int8
    // What the model computes, computed on the host for a batch of every
    // feed (any number of rows): Session<cpu>, and for INT8 products the
    // model's kernels. The model gives these bits on the same machine.
    std::function<std::vector<Tensor>(const std::map<std::string, Tensor>& batch)> reference;
};

// Returns the weight (a persistable variable) `name`; throws if it has none.
using ParamSource = std::function<Tensor(const std::string& name)>;

namespace emit_detail {

inline std::string cpp_type(DataType t) {
    switch (t) {
        case DataType::FP32: return "float";
        case DataType::FP64: return "double";
        case DataType::INT32: return "std::int32_t";
        case DataType::INT64: return "std::int64_t";
        case DataType::INT16: return "std::int16_t";
        case DataType::BOOL: return "bool";
        default: return "";
    }
}

// A double as an exact C++ literal (hexadecimal), or the expression of an
// infinity or NaN.
inline std::string double_literal(double v) {
    if (std::isnan(v)) {  // sign and payload kept
        char buf[64];
        std::snprintf(buf, sizeof buf, "std::bit_cast<double>(std::uint64_t(0x%" PRIx64 "u))", std::bit_cast<std::uint64_t>(v));
        return buf;
    }
    if (std::isinf(v)) return v > 0 ? "std::numeric_limits<double>::infinity()" : "-std::numeric_limits<double>::infinity()";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);
    return buf;
}

template <class T> std::string literal(T v) {
    char buf[64];
    if constexpr (std::is_same_v<T, float>) {
        if (std::isnan(v)) {
            std::snprintf(buf, sizeof buf, "std::bit_cast<float>(std::uint32_t(0x%" PRIx32 "u))", std::bit_cast<std::uint32_t>(v));
            return buf;
        }
        if (std::isinf(v)) return v > 0 ? "std::numeric_limits<float>::infinity()" : "-std::numeric_limits<float>::infinity()";
        std::snprintf(buf, sizeof buf, "%af", static_cast<double>(v));
    } else if constexpr (std::is_same_v<T, double>) {
        return double_literal(v);
    } else if constexpr (std::is_same_v<T, bool>) {
        return v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
        if (v == std::numeric_limits<std::int64_t>::min()) return "(-9223372036854775807LL - 1)";
        std::snprintf(buf, sizeof buf, "%" PRId64 "LL", v);
    } else {
        std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<std::int64_t>(v));
    }
    return buf;
}

inline std::string ints_text(const std::int64_t* p, int n) {
    std::string s = "{";
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(p[i]);
    if (n == 0) s += "0";  // arrays of at least one element
    return s + "}";
}
inline std::string bools_text(const bool* p, int n) {
    std::string s = "{";
    for (int i = 0; i < n; ++i) s += std::string(i ? ", " : "") + (p[i] ? "true" : "false");
    if (n == 0) s += "false";
    return s + "}";
}

// Text for a C++ string literal's inside: quotes, backslashes and bytes
// outside printable ASCII escaped (octal).
inline std::string escaped(const std::string& s) {
    std::string e;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            e += '\\';
            e += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\%03o", c);
            e += buf;
        } else {
            e += static_cast<char>(c);
        }
    }
    return e;
}
// Text for a // comment: no control characters (a newline would end it).
inline std::string comment_text(const std::string& s) {
    std::string e;
    for (unsigned char c : s) e += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
    return e;
}

inline bool is_keyword(const std::string& s) {
    static const std::set<std::string> k{
        "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
        "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
        "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
        "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
        "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
        "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
        "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
        "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
        "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
        // macros common enough to meet
        "linux", "unix", "i386", "NULL", "EOF", "assert", "errno", "stdin", "stdout", "stderr"};
    return k.count(s) > 0;
}

// A variable name as a C++ identifier: other characters become '_', a
// leading digit or underscore gets a prefix, a keyword a suffix.
inline std::string identifier(const std::string& name) {
    std::string s;
    for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '_') s = "v" + s;
    while (s.find("__") != std::string::npos) s.replace(s.find("__"), 2, "_");
    if (is_keyword(s)) s += s.back() == '_' ? "v" : "_v";
    return s;
}

// `id`, or id_2, id_3, ... (never a double underscore), not yet in `used`;
// marks it used.
inline std::string unused_name(std::set<std::string>& used, const std::string& id) {
    std::string n = id;
    const std::string base = id.back() == '_' ? id : id + "_";
    for (int k = 2; used.count(n); ++k) n = base + std::to_string(k);
    used.insert(n);
    return n;
}

inline bool valid_namespace(const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return !is_keyword(s) && s[0] != '_' && s.find("__") == std::string::npos && s != "std" && s != "dlgraph";
}

// softmax_with_cross_entropy ops whose Loss the fetched targets do not
// need become the softmax they compute (same core function, same bits), so
// an inference program needs no label. What the targets need is found
// walking the ops backwards from them: an op whose outputs are needed needs
// its inputs (a rewritten op only its Logits).
inline ProgramDesc for_inference(ProgramDesc program, std::span<const std::string> fetches) {
    BlockDesc& blk = program.blocks.at(0);
    std::set<std::string> needed(fetches.begin(), fetches.end());
    for (std::size_t i = blk.ops.size(); i-- > 0;) {
        OpDesc& op = blk.ops[i];
        bool used = false;
        for (const OpSlot& s : op.outputs)
            for (const std::string& a : s.arguments) used = used || needed.count(a) > 0;
        if (!used) continue;
        const OpSlot* loss = op.output("Loss");
        const OpSlot* sm = op.output("Softmax");
        const OpSlot* logits = op.input("Logits");
        if (op.type == "softmax_with_cross_entropy" && loss && sm && logits && loss->arguments.size() == 1 &&
            !needed.count(loss->arguments[0])) {
            OpDesc soft;
            soft.type = "softmax";
            soft.set_input("X", logits->arguments);
            soft.set_output("Out", sm->arguments);
            soft.set_attr(Attribute::make_int("axis", -1));
            op = std::move(soft);
        }
        for (const OpSlot& s : op.inputs) needed.insert(s.arguments.begin(), s.arguments.end());
    }
    return program;
}

// ---- INT8 products ---------------------------------------------------------------------------

// A product emitted in INT8: z [rows of x, n] = x [.., k] * w [k, n].
struct quant_product {
    int step = -1;
    int x = -1, z = -1;              // values
    std::string x_name, z_name;
    std::size_t weight = 0;          // index into the plan's scope_reads
    int x_col_dims = 1;              // x is [prod(dims[0, x_col_dims)), k]
    std::int64_t m = 0, n = 0, k = 0;
    double alpha = 1;
    float x_inv_scale = 0;           // what the model multiplies x by before rounding
    std::vector<std::int8_t> wq;     // [n, k]: channel j's weights contiguous
    std::vector<float> scale;        // [n]: x's scale * channel j's * alpha
    std::string wq_id, scale_id;     // their arrays in the header
};

// The steps that become INT8 products: FP32 `mul`, and `matmul` of a rank-2
// activation without transposes, whose second operand is a 2-D weight.
// `float_products` counts the other products.
inline std::vector<quant_product> quant_products(const ExecutionPlan& p, const std::vector<Tensor>& weights,
                                                 int& float_products) {
    std::vector<quant_product> r;
    float_products = 0;
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        const PlannedStep& st = p.steps[s];
        const std::string type(st.def->type);
        if (type != "mul" && type != "matmul" && type != "matmul_v2") continue;
        const int x = st.ins[st.in_off[0]], y = st.ins[st.in_off[1]], z = st.outs[st.out_off[0]];
        const auto w = std::find(p.scope_reads.begin(), p.scope_reads.end(), y);
        const Shape& xs = p.metas[static_cast<std::size_t>(x)].shape;
        bool ok = p.kernel_dtypes[s] == DataType::FP32 && w != p.scope_reads.end();
        quant_product q;
        if (ok) {
            q.weight = static_cast<std::size_t>(w - p.scope_reads.begin());
            const Shape& ws = weights[q.weight].shape();
            if (type == "mul") {
                q.x_col_dims = static_cast<int>(st.attrs[0].i);
                ok = ws.rank() == 2 && st.attrs[1].i == 1;
            } else {
                const auto f = type == "matmul" ? ops::matmul_flags::of<false>(st.attrs.data(), xs.rank(), ws.rank())
                                                : ops::matmul_flags::of<true>(st.attrs.data(), xs.rank(), ws.rank());
                ok = ws.rank() == 2 && xs.rank() == 2 && !f.tx && !f.ty;
                q.alpha = f.alpha;
            }
            q.m = ops::dim_product(xs, 0, q.x_col_dims);
            q.k = ws[0];
            q.n = ws[1];
            ok = ok && q.k <= kernels::s8_max_depth && q.m * q.k > 0 && q.n > 0;
        }
        if (!ok) {
            ++float_products;
            continue;
        }
        q.step = static_cast<int>(s);
        q.x = x;
        q.z = z;
        q.x_name = p.values[static_cast<std::size_t>(x)].name;
        q.z_name = p.values[static_cast<std::size_t>(z)].name;
        r.push_back(std::move(q));
    }
    return r;
}

// The largest |value| of an FP32 tensor; throws on a NaN or an infinity.
inline double largest_magnitude(const Tensor& t, const std::string& what) {
    double mx = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) {
        const double v = t.data<float>()[i];
        if (!std::isfinite(v))
            throw value_error("dlgraph.emit.calibrate", what + " holds " + std::to_string(v) + " on the calibration data");
        mx = std::max(mx, std::abs(v));
    }
    return mx;
}

// Channel j of w [k, n], quantized: scale max|w[., j]| / 127 (1 for an all-zero channel).
inline void quantize_weight(quant_product& q, const Tensor& w, const std::string& name) {
    const float* d = w.data<float>();
    q.wq.assign(static_cast<std::size_t>(q.n * q.k), 0);
    q.scale.assign(static_cast<std::size_t>(q.n), 0);
    const double x_scale = 1.0 / static_cast<double>(q.x_inv_scale);
    for (std::int64_t j = 0; j < q.n; ++j) {
        double mx = 0;
        for (std::int64_t p = 0; p < q.k; ++p) {
            const double v = d[p * q.n + j];
            if (!std::isfinite(v))
                throw value_error("dlgraph.emit.param", "weight '" + name + "' holds " + std::to_string(v));
            mx = std::max(mx, std::abs(v));
        }
        const double ws = mx > 0 ? mx / kernels::s8_max : 1.0;
        for (std::int64_t p = 0; p < q.k; ++p)
            q.wq[static_cast<std::size_t>(j * q.k + p)] =
                static_cast<std::int8_t>(std::lround(std::clamp(d[p * q.n + j] / ws, -127.0, 127.0)));
        q.scale[static_cast<std::size_t>(j)] = static_cast<float>(x_scale * ws * q.alpha);
    }
}

// Sets the plan's weights in a session's scope.
inline void set_weights(Session<cpu>& s, const ExecutionPlan& p, const std::vector<Tensor>& weights) {
    for (std::size_t i = 0; i < p.scope_reads.size(); ++i)
        s.scope().var(p.values[static_cast<std::size_t>(p.scope_reads[i])].name).get_mutable<Tensor>() = weights[i];
}

// A batch of every feed, cut into the shapes the model is emitted for:
// chunk c holds rows [c * b, (c + 1) * b) of each feed, b its dim 0 (the
// program may declare those shapes, so the Session runs exactly them).
inline std::vector<std::vector<Feed>> chunks_of(const std::map<std::string, Tensor>& batch,
                                                std::span<const EmitFeed> feeds, const std::string& what) {
    for (auto& entry : batch) {
        const std::string& name = entry.first;  // a plain reference: clang 14 cannot capture a structured binding
        if (std::none_of(feeds.begin(), feeds.end(), [&](const EmitFeed& f) { return f.name == name; }))
            throw feed_error("dlgraph.emit.calibrate", what + " names '" + name + "', which is not a feed");
    }
    std::int64_t count = -1;
    std::vector<const Tensor*> ts;
    for (const EmitFeed& f : feeds) {
        const auto it = batch.find(f.name);
        if (it == batch.end()) throw feed_error("dlgraph.emit.calibrate", what + " has no batch for feed '" + f.name + "'");
        const Tensor& t = it->second;
        const Shape& fs = f.shape;
        const Shape& s = t.shape();
        bool fits = fs.rank() > 0 && s.rank() == fs.rank() && fs[0] > 0 && s[0] % fs[0] == 0 && s[0] > 0;
        for (int d = 1; fits && d < s.rank(); ++d) fits = s[d] == fs[d];
        if (!fits)
            throw shape_error("dlgraph.emit.calibrate", what + ": feed '" + f.name + "' is " + to_string(s) +
                                                             ", not rows of the emitted " + to_string(fs) +
                                                             " (a whole number of them)");
        const std::int64_t n = s[0] / fs[0];
        if (count >= 0 && n != count)
            throw shape_error("dlgraph.emit.calibrate", what + ": the feeds hold different numbers of rows");
        count = n;
        ts.push_back(&t);
    }
    std::vector<std::vector<Feed>> r(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
    for (std::size_t c = 0; c < r.size(); ++c)
        for (std::size_t i = 0; i < feeds.size(); ++i) {
            Tensor part(ts[i]->dtype(), feeds[i].shape);
            std::memcpy(part.raw(), static_cast<const std::byte*>(ts[i]->raw()) + c * part.bytes(), part.bytes());
            r[c].emplace_back(feeds[i].name, std::move(part));
        }
    return r;
}

// The model's fetches on a batch, computed on the host as the emitted
// model computes them: the Session runs everything but the INT8 products,
// whose results are fed to it, computed with the model's kernels.
inline std::vector<Tensor> host_outputs(Session<cpu>& s, std::span<const quant_product> qs, std::vector<Feed> feeds,
                                        std::span<const std::string> fetches) {
    std::vector<Tensor> results;  // kept alive while fed
    results.reserve(qs.size());
    for (const quant_product& q : qs) {
        const Tensor x = s.eval(std::vector<TargetRef>{TargetRef(q.x_name)}, feeds)[0];
        const std::int64_t rows = ops::dim_product(x.shape(), 0, q.x_col_dims);
        std::vector<std::int64_t> zd(x.shape().begin(), x.shape().begin() + q.x_col_dims);
        zd.push_back(q.n);
        Tensor z(DataType::FP32, Shape(zd));
        std::vector<kernels::s8_wide> xq(static_cast<std::size_t>(x.numel()));
        kernels::quantize_s8(x.data<float>(), x.numel(), q.x_inv_scale, xq.data());
        kernels::gemm_s8(rows, q.n, q.k, xq.data(), q.wq.data(), q.scale.data(), z.data<float>());
        results.push_back(std::move(z));
        feeds.emplace_back(q.z_name, results.back());
    }
    return s.eval(std::vector<TargetRef>(fetches.begin(), fetches.end()), feeds);
}

// The fetches of every chunk, one after another along dim 0 (a fetch of
// rank 0 or with as many rows in every chunk).
inline std::vector<Tensor> rows_together(const std::vector<std::vector<Tensor>>& parts) {
    if (parts.size() == 1) return parts[0];
    std::vector<Tensor> r;
    for (std::size_t i = 0; !parts.empty() && i < parts[0].size(); ++i) {
        const Tensor& first = parts[0][i];
        std::vector<std::int64_t> d(first.shape().begin(), first.shape().end());
        if (d.empty()) d.push_back(1);
        d[0] *= static_cast<std::int64_t>(parts.size());
        Tensor t(first.dtype(), Shape(d));
        for (std::size_t c = 0; c < parts.size(); ++c)
            std::memcpy(static_cast<std::byte*>(t.raw()) + c * first.bytes(), parts[c][i].raw(), first.bytes());
        r.push_back(std::move(t));
    }
    return r;
}

// Calibrates and quantizes the products, and compares the INT8 model with
// the FP32 one (EmitOptions::int8).
inline Int8Report quantize_products(const ProgramDesc& program, const ExecutionPlan& p,
                                    const std::vector<Tensor>& weights, std::span<const EmitFeed> feeds,
                                    std::span<const std::string> fetches, const EmitOptions& opts,
                                    std::vector<quant_product>& qs) {
    Int8Report rep;
    qs = quant_products(p, weights, rep.float_products);
    rep.products = static_cast<int>(qs.size());
    if (qs.empty()) return rep;
    if (opts.calibration.empty())
        throw feed_error("dlgraph.emit.calibrate",
                         "INT8 weights need calibration data (--calibrate NAME=FILE.npy): a batch of every feed");
    Session<cpu> s(program);
    set_weights(s, p, weights);
    std::vector<TargetRef> xs;
    for (const quant_product& q : qs) xs.emplace_back(q.x_name);
    std::vector<double> mx(qs.size(), 0.0);
    for (const std::vector<Feed>& chunk : chunks_of(opts.calibration, feeds, "the calibration data")) {
        const std::vector<Tensor> xv = s.eval(xs, chunk);
        for (std::size_t i = 0; i < qs.size(); ++i)
            mx[i] = std::max(mx[i], largest_magnitude(xv[i], "'" + qs[i].x_name + "' (the input of " +
                                                                 p.steps[static_cast<std::size_t>(qs[i].step)].label + ")"));
    }
    for (std::size_t i = 0; i < qs.size(); ++i) {
        quant_product& q = qs[i];
        if (mx[i] == 0)
            throw value_error("dlgraph.emit.calibrate", "'" + q.x_name + "' is 0 everywhere on the calibration data: "
                                                        "no scale for it");
        q.x_inv_scale = static_cast<float>(kernels::s8_max / mx[i]);
        quantize_weight(q, weights[q.weight], p.values[static_cast<std::size_t>(p.scope_reads[q.weight])].name);
    }
    // The comparison, on the first fetch.
    const bool labelled = opts.labels.initialized();
    if (labelled && opts.labels.dtype() != DataType::INT64 && opts.labels.dtype() != DataType::INT32)
        throw type_error("dlgraph.emit.calibrate", "the labels are " + to_string(opts.labels.dtype()) +
                                                       ", not INT64 or INT32 classes");
    if (labelled) rep.correct_fp32 = rep.correct_int8 = 0;
    const auto& data = opts.evaluation.empty() ? opts.calibration : opts.evaluation;
    for (const std::vector<Feed>& chunk : chunks_of(data, feeds, opts.evaluation.empty() ? "the calibration data"
                                                                                         : "the evaluation data")) {
        const Tensor want = s.eval(std::vector<TargetRef>(fetches.begin(), fetches.begin() + 1), chunk)[0];
        const Tensor got = host_outputs(s, qs, chunk, fetches.subspan(0, 1))[0];
        if (want.dtype() != DataType::FP32 || want.shape().rank() == 0 || want.numel() == 0)
            throw type_error("dlgraph.emit.calibrate", "the first fetch '" + fetches[0] + "' is not FP32 rows of classes");
        const std::int64_t classes = want.shape()[want.shape().rank() - 1], rows = want.numel() / classes;
        for (std::int64_t r = 0; r < rows; ++r, ++rep.rows) {
            const float* a = want.data<float>() + r * classes;
            const float* b = got.data<float>() + r * classes;
            for (std::int64_t c = 0; c < classes; ++c)
                rep.max_abs_diff = std::max(rep.max_abs_diff, std::abs(static_cast<double>(a[c]) - b[c]));
            const std::int64_t ca = std::max_element(a, a + classes) - a, cb = std::max_element(b, b + classes) - b;
            rep.same_class += ca == cb;
            if (!labelled || rep.rows >= opts.labels.numel()) continue;  // a count mismatch is reported below
            const std::int64_t label = opts.labels.dtype() == DataType::INT64 ? opts.labels.data<std::int64_t>()[rep.rows]
                                                                             : opts.labels.data<std::int32_t>()[rep.rows];
            rep.correct_fp32 += ca == label;
            rep.correct_int8 += cb == label;
        }
    }
    if (labelled && rep.rows != opts.labels.numel())
        throw shape_error("dlgraph.emit.calibrate", "there are " + std::to_string(opts.labels.numel()) +
                                                        " labels for " + std::to_string(rep.rows) + " rows of '" +
                                                        fetches[0] + "'");
    return rep;
}

class emitter {
public:
    emitter(const ExecutionPlan& p, const std::vector<Tensor>& weights, const std::vector<std::string>& weight_ids,
            const std::vector<std::string>& feed_params, const std::vector<std::string>& fetch_params,
            std::set<std::string>& used)
        : p_(p), weights_(weights), weight_ids_(weight_ids), feed_params_(feed_params), fetch_params_(fetch_params),
          used_(used) {}

    // The C++ expression of value v's data, as T*.
    std::string ptr(int v) const {
        const PlannedValue& pv = p_.values[static_cast<std::size_t>(v)];
        for (std::size_t t = 0; t < p_.target_values.size(); ++t)
            if (p_.target_values[t] == v && pv.written) return fetch_params_[t];
        if (pv.kind == ValueKind::feed) {
            for (std::size_t f = 0; f < p_.feed_values.size(); ++f)
                if (p_.feed_values[f] == v) return feed_params_[f];
        }
        if (pv.kind == ValueKind::persistable) {
            const auto w = std::find(p_.scope_reads.begin(), p_.scope_reads.end(), v);
            return "w::" + weight_ids_[static_cast<std::size_t>(w - p_.scope_reads.begin())];
        }
        const auto off = p_.memory.value_offset[static_cast<std::size_t>(v)];
        return "reinterpret_cast<" + cpp_type(meta(v).dtype) + "*>(a + " + std::to_string(off) + ")";
    }
    // Whether two values share storage (the planner put one over the other).
    bool same_storage(int a, int b) const { return a == b || (in_arena(a) && in_arena(b) && offset(a) == offset(b)); }

    const VarMeta& meta(int v) const { return p_.metas[static_cast<std::size_t>(v)]; }
    std::int64_t numel(int v) const { return meta(v).shape.numel(); }
    int in(const PlannedStep& st, int slot, int k = 0) const {
        return st.ins[st.in_off[static_cast<std::size_t>(slot)] + static_cast<std::size_t>(k)];
    }
    int in_count(const PlannedStep& st, int slot) const {
        return static_cast<int>(st.in_off[static_cast<std::size_t>(slot) + 1] - st.in_off[static_cast<std::size_t>(slot)]);
    }
    int out(const PlannedStep& st, int slot, int k = 0) const {
        return st.outs[st.out_off[static_cast<std::size_t>(slot)] + static_cast<std::size_t>(k)];
    }
    int out_count(const PlannedStep& st, int slot) const {
        return static_cast<int>(st.out_off[static_cast<std::size_t>(slot) + 1] - st.out_off[static_cast<std::size_t>(slot)]);
    }

    // Emits step s; returns false when its op has no fixed-model kernel.
    bool step(int s, std::ostream& o);
    // The products to emit in INT8 (EmitOptions::int8).
    std::span<const quant_product> quant;
    std::vector<std::string> workspaces;  // per product: its workspace bytes (an expression)
    int next_constant = 0;

private:
    bool in_arena(int v) const { return p_.memory.value_slot[static_cast<std::size_t>(v)] == 0 && !is_target(v); }
    bool is_target(int v) const {
        return std::find(p_.target_values.begin(), p_.target_values.end(), v) != p_.target_values.end();
    }
    std::size_t offset(int v) const { return p_.memory.value_offset[static_cast<std::size_t>(v)]; }
    // A name for a constant of a step, unlike any parameter's.
    std::string constant_name(const char* what) {
        return unused_name(used_, std::string(what) + std::to_string(next_constant++));
    }
    void gemm(std::ostream& o, const std::string& T, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
              const std::string& alpha, const std::string& a, std::int64_t lda, const std::string& b, std::int64_t ldb,
              const std::string& c, std::int64_t ldc) {
        const std::string ws = "dlgraph::fixed::gemm_workspace_bytes<" + T + ">(" + (tb ? "true" : "false") + ", " +
                               std::to_string(m) + ", " + std::to_string(n) + ", " + std::to_string(k) + ")";
        workspaces.push_back(ws);
        o << "    dlgraph::fixed::gemm<" << T << ">(" << (ta ? "true" : "false") << ", " << (tb ? "true" : "false") << ", "
          << m << ", " << n << ", " << k << ", " << alpha << ", " << a << ", " << lda << ", " << b << ", " << ldb << ", "
          << c << ", " << ldc << ", ws, " << ws << ");\n";
    }
    // A window's geometry as a named constant of the step; returns its name.
    std::string window_constant(std::ostream& o, const kernels::window2d& g) {
        const std::string name = constant_name("window");
        o << "    static constexpr dlgraph::kernels::window2d " << name << "{.c = " << g.c << ", .h = " << g.h
          << ", .w = " << g.w << ", .kh = " << g.kh << ", .kw = " << g.kw << ", .oh = " << g.oh << ", .ow = " << g.ow
          << ", .sh = " << g.sh << ", .sw = " << g.sw << ", .pt = " << g.pt << ", .pl = " << g.pl << ", .pb = " << g.pb
          << ", .pr = " << g.pr << ", .dh = " << g.dh << ", .dw = " << g.dw << "};\n";
        return name;
    }
    void copy(std::ostream& o, int from, int to) {
        if (same_storage(from, to) || numel(to) == 0) return;
        o << "    dlgraph::kernels::copy_elements(" << ptr(from) << ", " << numel(to) << ", " << ptr(to) << ");\n";
    }

    const ExecutionPlan& p_;
    const std::vector<Tensor>& weights_;
    const std::vector<std::string>& weight_ids_;
    const std::vector<std::string>& feed_params_;
    const std::vector<std::string>& fetch_params_;
    std::set<std::string>& used_;
};

inline const char* binary_functor(const std::string& type) {
    if (type == "elementwise_add") return "add_fn";
    if (type == "elementwise_sub") return "sub_fn";
    if (type == "elementwise_mul") return "mul_fn";
    if (type == "elementwise_div") return "div_fn";
    if (type == "elementwise_max") return "max_fn";
    if (type == "elementwise_min") return "min_fn";
    if (type == "elementwise_pow") return "pow_fn";
    return nullptr;
}
// The functor of unary op `type` of element type T (kernels/elementwise.hpp),
// its attributes written in, or "" for another op.
inline std::string unary_functor(const std::string& type, const std::string& T, const std::vector<Attribute>& attrs) {
    static const char* plain[] = {"relu",  "sigmoid",    "tanh",  "exp",  "log",   "sqrt",  "abs",  "square",
                                  "softsign", "sin", "cos", "reciprocal", "rsqrt", "floor", "ceil", "round", "sign"};
    // Functors Fn<T>{attribute 0, ...}: every attribute FLOAT.
    static const char* with_attrs[] = {"leaky_relu", "elu",   "relu6", "hard_sigmoid", "hard_swish",
                                       "softplus",   "swish", "clip",  "pow"};
    for (const char* n : plain)
        if (type == n) return std::string("dlgraph::kernels::") + n + "_fn{}";
    if (type == "gelu") return attrs.at(0).b ? "dlgraph::kernels::gelu_tanh_fn{}" : "dlgraph::kernels::gelu_fn{}";
    for (const char* n : with_attrs) {
        if (type != n) continue;
        const std::string fn = type == "pow" ? "pow_factor" : n;  // pow_fn is elementwise_pow's
        std::string f = "dlgraph::kernels::" + fn + "_fn<" + T + ">{";
        for (std::size_t k = 0; k < attrs.size(); ++k)
            f += (k ? ", " : "") + std::string("dlgraph::kernels::convert<") + T + ">(" + double_literal(attrs[k].f) + ")";
        return f + "}";
    }
    return "";
}

inline bool emitter::step(int s, std::ostream& o) {
    const PlannedStep& st = p_.steps[static_cast<std::size_t>(s)];
    const std::string type(st.def->type);
    const DataType dt = p_.kernel_dtypes[static_cast<std::size_t>(s)];
    const std::string T = cpp_type(dt);
    const bool fp = dt == DataType::FP32 || dt == DataType::FP64;
    auto attr = [&](int k) -> const Attribute& { return st.attrs[static_cast<std::size_t>(k)]; };
    for (const quant_product& q : quant) {
        if (q.step != s) continue;
        // x quantized into the arena's INT8 buffer, then the INT8 product.
        const std::string xq = "reinterpret_cast<dlgraph::kernels::s8_wide*>(a + quant_offset)";
        o << "    // " << comment_text(st.label) << " (INT8)\n";
        o << "    dlgraph::kernels::quantize_s8(" << ptr(q.x) << ", " << q.m * q.k << ", " << literal(q.x_inv_scale)
          << ", " << xq << ");\n";
        o << "    dlgraph::kernels::gemm_s8(" << q.m << ", " << q.n << ", " << q.k << ", " << xq << ", w::" << q.wq_id
          << ", w::" << q.scale_id << ", " << ptr(q.z) << ");\n";
        return true;
    }
    o << "    // " << comment_text(st.label) << "\n";

    if (const char* f = binary_functor(type)) {
        if (!fp && dt != DataType::INT32 && dt != DataType::INT64) return false;
        if (!fp && type == "elementwise_pow") return false;
        const int x = in(st, 0), y = in(st, 1), z = out(st, 0);
        const std::int64_t n = numel(z), xn = numel(x), yn = numel(y);
        if (!fp && type == "elementwise_div" && n > 0) {
            // The model has no error path: an integer divisor must be a
            // weight, checked here to hold no zero.
            const PlannedValue& pv = p_.values[static_cast<std::size_t>(y)];
            const auto w = std::find(p_.scope_reads.begin(), p_.scope_reads.end(), y);
            if (pv.kind != ValueKind::persistable || w == p_.scope_reads.end())
                throw graph_error("dlgraph.emit.div", st.label + ": an integer division by '" + pv.name +
                                                          "', known only at run time: a fixed model cannot report a "
                                                          "division by zero (divide by a weight, or in floating point)");
            const Tensor& t = weights_[static_cast<std::size_t>(w - p_.scope_reads.begin())];
            bool zero = false;
            visit_dtype(t.dtype(), [&]<class U>(type_tag<U>) {
                if constexpr (std::is_integral_v<U>)
                    for (std::int64_t i = 0; i < t.numel(); ++i) zero = zero || t.data<U>()[i] == U(0);
            });
            if (zero)
                throw graph_error("dlgraph.emit.div", st.label + ": the divisor '" + pv.name + "' holds a zero");
        }
        if (n == 0) return true;
        const std::string fn = std::string("dlgraph::kernels::") + f + "{}";
        if (xn == n && yn == n)
            o << "    dlgraph::kernels::binary_loop_serial(" << n << ", " << ptr(x) << ", 1, " << ptr(y) << ", 1, "
              << ptr(z) << ", " << fn << ");\n";
        else if (yn == 1 && xn == n)
            o << "    dlgraph::kernels::binary_loop_serial(" << n << ", " << ptr(x) << ", 1, " << ptr(y) << ", 0, "
              << ptr(z) << ", " << fn << ");\n";
        else if (xn == 1 && yn == n)
            o << "    dlgraph::kernels::binary_loop_serial(" << n << ", " << ptr(x) << ", 0, " << ptr(y) << ", 1, "
              << ptr(z) << ", " << fn << ");\n";
        else {
            const Shape &xs = meta(x).shape, &ys = meta(y).shape, &zs = meta(z).shape;
            const kernels::broadcast_geometry g =
                kernels::broadcast_walk_of(xs.begin(), xs.rank(), ys.begin(), ys.rank(), attr(0).i, zs.begin(), zs.rank());
            const std::string gname = constant_name("walk");
            o << "    static constexpr dlgraph::kernels::broadcast_geometry " << gname << "{.rank = " << g.rank
              << ", .zs = " << ints_text(g.zs, kernels::max_rank) << ", .xst = " << ints_text(g.xst, kernels::max_rank)
              << ", .yst = " << ints_text(g.yst, kernels::max_rank) << ", .inner = " << g.inner
              << ", .first_outer = " << g.first_outer << ", .sx = " << g.sx << ", .sy = " << g.sy << "};\n";
            o << "    dlgraph::fixed::broadcast(" << ptr(x) << ", " << ptr(y) << ", " << ptr(z) << ", " << n << ", "
              << gname << ", " << fn << ");\n";
        }
        return true;
    }
    if (const std::string f = unary_functor(type, T, st.attrs); !f.empty()) {
        const bool ints_ok = type == "abs" || type == "square";
        if (!fp && !(ints_ok && (dt == DataType::INT32 || dt == DataType::INT64))) return false;
        const int x = in(st, 0), z = out(st, 0);
        if (numel(z) > 0)
            o << "    dlgraph::kernels::unary_loop_serial(" << numel(z) << ", " << ptr(x) << ", " << ptr(z) << ", " << f
              << ");\n";
        return true;
    }
    if (type == "scale") {
        if (T.empty() || dt == DataType::BOOL || dt == DataType::INT16) return false;
        const int x = in(st, 0), z = out(st, 0);
        if (numel(z) == 0) return true;
        o << "    dlgraph::kernels::unary_loop_serial(" << numel(z) << ", " << ptr(x) << ", " << ptr(z)
          << ", dlgraph::kernels::scale_fn<" << T << ", " << (attr(2).b ? "true" : "false") << ">{dlgraph::kernels::convert<"
          << T << ">(" << double_literal(attr(0).f) << "), dlgraph::kernels::convert<" << T << ">("
          << double_literal(attr(1).f) << ")});\n";
        return true;
    }
    if (type == "assign" || type == "reshape") {
        if (T.empty()) return false;
        copy(o, in(st, 0), out(st, 0));
        return true;
    }
    if (type == "mul") {
        if (!fp) return false;
        const int x = in(st, 0), y = in(st, 1), z = out(st, 0);
        const Shape &xs = meta(x).shape, &ys = meta(y).shape;
        const int xi = static_cast<int>(attr(0).i), yi = static_cast<int>(attr(1).i);
        const std::int64_t M = ops::dim_product(xs, 0, xi), K = ops::dim_product(xs, xi, xs.rank()),
                           N = ops::dim_product(ys, yi, ys.rank());
        gemm(o, T, false, false, M, N, K, T + "(1)", ptr(x), K, ptr(y), N, ptr(z), N);
        return true;
    }
    if (type == "matmul" || type == "matmul_v2") {
        if (!fp) return false;
        const int x = in(st, 0), y = in(st, 1), z = out(st, 0);
        const Shape &xs = meta(x).shape, &ys = meta(y).shape;
        const auto f = type == "matmul" ? ops::matmul_flags::of<false>(st.attrs.data(), xs.rank(), ys.rank())
                                        : ops::matmul_flags::of<true>(st.attrs.data(), xs.rank(), ys.rank());
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), f.tx, f.ty);
        const kernels::matmul_batches bt(xs.begin(), xs.rank(), ys.begin(), ys.rank(), v.m * v.k, v.k * v.n);
        const std::string al = "static_cast<" + T + ">(" + double_literal(f.alpha) + ")";
        if (bt.nb == 0 || v.m * v.n == 0) return true;
        if (bt.one_product(v.ta)) {
            gemm(o, T, false, v.tb, bt.nb * v.m, v.n, v.k, al, ptr(x), v.lda, ptr(y), v.ldb, ptr(z), v.n);
            return true;
        }
        bt.for_each([&](std::int64_t b, std::int64_t ox, std::int64_t oy, bool, bool) {
            gemm(o, T, v.ta, v.tb, v.m, v.n, v.k, al, ptr(x) + " + " + std::to_string(ox), v.lda,
                 ptr(y) + " + " + std::to_string(oy), v.ldb, ptr(z) + " + " + std::to_string(b * v.m * v.n), v.n);
        });
        return true;
    }
    if (type == "softmax") {
        if (!fp) return false;
        const int x = in(st, 0), z = out(st, 0);
        const Shape& xs = meta(x).shape;
        if (xs.numel() == 0) return true;
        const std::int64_t axis = attr(0).i;
        const int a = static_cast<int>(axis < 0 ? axis + xs.rank() : axis);
        o << "    dlgraph::kernels::softmax(" << ptr(x) << ", " << ptr(z) << ", " << ops::dim_product(xs, 0, a) << ", "
          << xs[a] << ", " << ops::dim_product(xs, a + 1, xs.rank()) << ");\n";
        return true;
    }
    if (type == "mean") {
        if (!fp) return false;
        o << "    *" << ptr(out(st, 0)) << " = dlgraph::kernels::mean_all(" << ptr(in(st, 0)) << ", "
          << numel(in(st, 0)) << ");\n";
        return true;
    }
    if (type == "reduce_sum" || type == "reduce_mean" || type == "reduce_max" || type == "reduce_min" ||
        type == "reduce_prod") {
        if (!fp && (type == "reduce_mean" || (dt != DataType::INT32 && dt != DataType::INT64))) return false;
        const int x = in(st, 0);
        const Shape& xs = meta(x).shape;
        bool red[max_rank] = {};
        std::int64_t bad = 0;
        bool dup = false;
        ops::reduced_dims(st.attrs.data(), xs.rank(), red, bad, dup);
        const std::string d = constant_name("dims"), r = constant_name("reduced");
        o << "    static constexpr std::int64_t " << d << "[] = " << ints_text(xs.begin(), xs.rank()) << ";\n";
        o << "    static constexpr bool " << r << "[] = " << bools_text(red, xs.rank()) << ";\n";
        o << "    dlgraph::kernels::" << type << "(" << ptr(x) << ", " << d << ", " << xs.rank() << ", " << r << ", "
          << ptr(out(st, 0)) << ");\n";
        return true;
    }
    if (type == "transpose") {
        if (T.empty()) return false;
        const int x = in(st, 0);
        const Shape& xs = meta(x).shape;
        if (xs.numel() == 0) return true;
        const std::string d = constant_name("dims"), pm = constant_name("perm");
        o << "    static constexpr std::int64_t " << d << "[] = " << ints_text(xs.begin(), xs.rank()) << ";\n";
        o << "    static constexpr std::int64_t " << pm << "[] = "
          << ints_text(attr(0).ints.data(), static_cast<int>(attr(0).ints.size())) << ";\n";
        o << "    dlgraph::kernels::transpose(" << ptr(x) << ", " << d << ", " << xs.rank() << ", " << pm << ", "
          << ptr(out(st, 0)) << ");\n";
        return true;
    }
    if (type == "concat" || type == "split") {
        if (T.empty()) return false;
        const bool cat = type == "concat";
        const int whole = cat ? out(st, 0) : in(st, 0);
        const int n = cat ? in_count(st, 0) : out_count(st, 0);
        const Shape& ws = meta(whole).shape;
        if (ws.numel() == 0) return true;
        const std::int64_t axis = attr(cat ? 0 : 2).i;
        const int a = static_cast<int>(axis < 0 ? axis + ws.rank() : axis);
        const std::int64_t outer = ops::dim_product(ws, 0, a), inner = ops::dim_product(ws, a + 1, ws.rank());
        std::int64_t at = 0;
        for (int k0 = 0; k0 < n; k0 += 32) {  // as cpu_ops::parts_per_call
            const int m = std::min(n - k0, 32);
            std::string parts = "{", dims = "{";
            std::int64_t width = 0;
            for (int j = 0; j < m; ++j) {
                const int v = cat ? in(st, 0, k0 + j) : out(st, 0, k0 + j);
                parts += (j ? ", " : "") + ptr(v);
                dims += (j ? ", " : "") + std::to_string(meta(v).shape[a]);
                width += meta(v).shape[a];
            }
            const std::string pn = constant_name("parts"), dn = constant_name("dims");
            o << "    " << (cat ? "const " : "") << T << "* const " << pn << "[] = " << parts << "};\n";
            o << "    static constexpr std::int64_t " << dn << "[] = " << dims << "};\n";
            if (cat)
                o << "    dlgraph::kernels::concat(" << outer << ", " << inner << ", " << m << ", " << pn << ", " << dn
                  << ", " << ptr(whole) << " + " << at * inner << ", " << ws[a] * inner << ");\n";
            else
                o << "    dlgraph::kernels::split(" << outer << ", " << inner << ", " << m << ", " << ptr(whole) << " + "
                  << at * inner << ", " << ws[a] * inner << ", " << pn << ", " << dn << ");\n";
            at += width;
        }
        return true;
    }
    if (type == "conv2d" || type == "depthwise_conv2d") {
        if (!fp || ops::conv2d_op::nhwc(st.attrs.data())) return false;  // NHWC: not emitted yet
        const int x = in(st, 0), f = in(st, 1), y = out(st, 0);
        const Shape &xs = meta(x).shape, &fs = meta(f).shape;
        const auto [ha, wa] = ops::conv2d_op::axes(st.attrs.data(), xs, fs);
        const std::int64_t groups = attr(ops::conv2d_op::groups).i;
        const kernels::window2d g = ops::window_of(xs[1] / groups, ha, wa);
        const std::int64_t mg = fs[0] / groups;
        if (numel(y) == 0) return true;
        const std::string ws = "dlgraph::fixed::conv2d_workspace_bytes<" + T + ">(" + (g.identity() ? "true" : "false") +
                               ", " + std::to_string(mg) + ", " + std::to_string(g.col_rows()) + ", " +
                               std::to_string(g.col_cols()) + ")";
        workspaces.push_back(ws);
        const std::string win = window_constant(o, g);
        o << "    dlgraph::fixed::conv2d<" << T << ">(" << win << ", " << xs[0] << ", " << groups << ", " << mg << ", "
          << ptr(x) << ", " << ptr(f) << ", " << ptr(y) << ", ws, " << ws << ");\n";
        return true;
    }
    if (type == "pool2d") {
        if (!fp || ops::pool2d_op::nhwc(st.attrs.data())) return false;
        const int x = in(st, 0), y = out(st, 0);
        const Shape& xs = meta(x).shape;
        const auto [ha, wa] = ops::pool2d_op::axes(st.attrs.data(), xs);
        if (numel(y) == 0) return true;
        const std::string win = window_constant(o, ops::window_of(1, ha, wa));
        auto flag = [&](int k) { return attr(k).b ? "true" : "false"; };
        o << "    dlgraph::fixed::pool2d(" << win << ", " << xs[0] * xs[1] << ", "
          << (attr(ops::pool2d_op::pooling_type).s == "max" ? "true" : "false") << ", " << flag(ops::pool2d_op::adaptive)
          << ", " << flag(ops::pool2d_op::exclusive) << ", " << ptr(x) << ", " << ptr(y) << ");\n";
        return true;
    }
    if (type == "batch_norm") {
        // Inference only: the moving statistics normalize, nothing is
        // updated, and only Y is written.
        using bn = ops::batch_norm_op;
        if (!fp || !bn::global_stats(st.attrs.data()) || in_count(st, bn::MomentumTensor)) return false;
        if (st.attrs[bn::data_layout].s == "NHWC") return false;
        for (int slot : {bn::MeanOut, bn::VarianceOut, bn::SavedMean, bn::SavedVariance, bn::ReserveSpace})
            if (out_count(st, slot)) return false;
        const int x = in(st, bn::X), y = out(st, bn::Y);
        const Shape& xs = meta(x).shape;
        if (xs.numel() == 0) return true;
        o << "    dlgraph::fixed::batch_norm_inference(" << ptr(x) << ", " << ptr(y) << ", " << xs[0] << ", " << xs[1]
          << ", " << ops::dim_product(xs, 2, xs.rank()) << ", " << ptr(in(st, bn::Scale)) << ", "
          << ptr(in(st, bn::Bias)) << ", " << ptr(in(st, bn::Mean)) << ", " << ptr(in(st, bn::Variance)) << ", "
          << double_literal(attr(bn::epsilon).f) << ");\n";
        return true;
    }
    if (type == "flatten_contiguous_range") {
        if (T.empty()) return false;
        copy(o, in(st, 0), out(st, 0));  // XShape holds nothing
        return true;
    }
    if (type == "cast") {
        const int x = in(st, 0), z = out(st, 0);
        const std::string U = cpp_type(meta(z).dtype);
        if (T.empty() || U.empty() || dt == DataType::FP16) return false;
        if (numel(z) > 0)
            o << "    dlgraph::kernels::cast(" << ptr(x) << ", " << numel(z) << ", " << ptr(z) << ");\n";
        return true;
    }
    if (type == "sum") {
        if (!fp && dt != DataType::INT32 && dt != DataType::INT64) return false;
        const int z = out(st, 0), count = in_count(st, 0);
        const std::int64_t n = numel(z);
        int alias = -1;
        for (int k = 0; k < count; ++k)
            if (same_storage(in(st, 0, k), z)) alias = k;
        if (n == 0 || (alias >= 0 && count == 1)) return true;
        if (alias < 0 && count == 1) {
            copy(o, in(st, 0, 0), z);
            return true;
        }
        bool accumulate = alias >= 0;
        std::string parts = "{";
        int m = 0;
        auto flush = [&] {
            const std::string pn = constant_name("parts");
            o << "    const " << T << "* const " << pn << "[] = " << parts << "};\n";
            o << "    dlgraph::kernels::sum(" << n << ", " << m << ", " << pn << ", " << ptr(z) << ", "
              << (accumulate ? "true" : "false") << ");\n";
            accumulate = true;
            parts = "{";
            m = 0;
        };
        for (int k = 0; k < count; ++k) {
            if (k == alias) continue;
            parts += (m ? ", " : "") + ptr(in(st, 0, k));
            if (++m == 32) flush();
        }
        if (m > 0) flush();
        return true;
    }
    return false;
}

// The most bytes the arena's values (intermediates, not targets) hold at
// once over the steps: a value is live from the step that writes it to the
// last that reads it; values written in place over another (same offset)
// count once.
inline std::size_t arena_lower_bound(const ExecutionPlan& p) {
    std::size_t best = 0;
    for (int s = 0; s < static_cast<int>(p.steps.size()); ++s) {
        std::set<std::size_t> offsets;
        std::size_t live = 0;
        for (std::size_t v = 0; v < p.values.size(); ++v) {
            const PlannedValue& pv = p.values[v];
            if (p.memory.value_slot[v] != 0 || pv.target || pv.first_step > s || std::max(pv.last_step, pv.first_step) < s)
                continue;
            if (offsets.insert(p.memory.value_offset[v]).second) live += meta_bytes(p.metas[v]);
        }
        best = std::max(best, live);
    }
    return best;
}

}  // namespace emit_detail

// The header of a fixed model for `fetches` of `program` with `feeds` of
// these shapes; `params` gives the weights the targets need.
inline EmittedModel emit(const ProgramDesc& program_in, std::span<const EmitFeed> feeds,
                         std::span<const std::string> fetches, const ParamSource& params, const EmitOptions& opts) {
    using namespace emit_detail;
    if (!valid_namespace(opts.name))
        throw format_error("dlgraph.emit.name", "'" + opts.name + "' is not a C++ identifier for the model's namespace");
    if (fetches.empty()) throw graph_error("dlgraph.emit.fetch", "a fixed model needs at least one fetched variable");
    for (std::size_t i = 0; i < fetches.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            if (fetches[i] == fetches[j])
                throw graph_error("dlgraph.emit.fetch", "'" + fetches[i] + "' is fetched twice");
    const ProgramDesc program = for_inference(program_in, fetches);
    const BlockDesc& blk = program.blocks.at(0);

    std::vector<TargetRef> targets(fetches.begin(), fetches.end());
    std::vector<std::string> fed;
    std::vector<VarMeta> fed_metas;
    for (const EmitFeed& f : feeds) {
        const VarDesc* vd = blk.find_var(f.name);
        if (!vd) throw feed_error("dlgraph.feed.unknown", "feed '" + f.name + "' names no variable of the program");
        check_shape_size(f.shape, dtype_size(vd->data_type), max_shape_bytes, "feed '" + f.name + "'");
        if (!vd->dims.empty() && !dims_compatible(Shape(vd->dims), f.shape))
            throw shape_error("dlgraph.shape.feed", "feed '" + f.name + "' of shape " + to_string(f.shape) +
                                                        " does not fit its declaration " + to_string(Shape(vd->dims)));
        fed.push_back(f.name);
        fed_metas.push_back({vd->data_type, f.shape});
    }
    ExecutionPlan p = make_plan(program, targets, fed, nullptr);
    std::vector<Tensor> weights;
    std::vector<VarMeta> metas(p.values.size());
    std::vector<bool> known(p.values.size(), false);
    for (std::size_t i = 0; i < p.feed_values.size(); ++i)
        if (const int v = p.feed_values[i]; v >= 0) {
            metas[static_cast<std::size_t>(v)] = fed_metas[i];
            known[static_cast<std::size_t>(v)] = true;
        }
    for (int v : p.scope_reads) {
        const std::string& name = p.values[static_cast<std::size_t>(v)].name;
        Tensor t = params(name);
        if (const VarDesc* vd = blk.find_var(name)) {
            const std::string why = detail::checkpoint_mismatch(*vd, t, "weight '" + name + "'");
            if (!why.empty()) throw type_error("dlgraph.emit.param", why);
        }
        metas[static_cast<std::size_t>(v)] = {t.dtype(), t.shape()};
        known[static_cast<std::size_t>(v)] = true;
        weights.push_back(std::move(t));
    }
    PlanOptions popts;
    popts.fuse = false;
    popts.prepack = false;
    shape_plan(p, std::move(metas), std::move(known), nullptr, popts, nullptr);

    // Parameters of run(): feeds and fetches, as identifiers.
    // Names run() and the namespace declare themselves.
    std::set<std::string> used{"a", "ws", "arena", "w", "run", "run_erased", "model", "arena_bytes", "planned_bytes",
                               "workspace_bytes", "workspace_offset", "lower_bound_bytes", "session_arena_bytes",
                               "weight_bytes", "quant_bytes", "quant_offset", "feed_count", "fetch_count", "feed_names", "fetch_names", "feed_sizes",
                               "fetch_sizes", "std", "dlgraph", opts.name};
    auto unique_ident = [&](const std::string& name) { return unused_name(used, identifier(name)); };
    std::vector<std::string> feed_params, fetch_params;
    for (const EmitFeed& f : feeds) feed_params.push_back(unique_ident(f.name));
    for (const std::string& f : fetches) fetch_params.push_back(unique_ident(f));
    auto elements = [&](int v) { return p.metas[static_cast<std::size_t>(v)].shape.numel(); };
    for (std::size_t i = 0; i < feeds.size(); ++i) {
        if (cpp_type(fed_metas[i].dtype).empty())
            throw type_error("dlgraph.emit.dtype", "feed '" + feeds[i].name + "' is " + to_string(fed_metas[i].dtype) +
                                                       ", which a fixed model does not take");
        if (feeds[i].shape.numel() == 0)
            throw shape_error("dlgraph.emit.empty", "feed '" + feeds[i].name + "' has no elements");
    }
    for (std::size_t i = 0; i < fetches.size(); ++i) {
        const int v = p.target_values[i];
        if (v < 0) throw graph_error("dlgraph.emit.fetch", "'" + fetches[i] + "' is not a variable");
        if (elements(v) == 0) throw shape_error("dlgraph.emit.empty", "fetched '" + fetches[i] + "' has no elements");
        if (cpp_type(p.metas[static_cast<std::size_t>(v)].dtype).empty())
            throw type_error("dlgraph.emit.dtype", "fetched '" + fetches[i] + "' is " +
                                                       to_string(p.metas[static_cast<std::size_t>(v)].dtype) +
                                                       ", which a fixed model does not return");
    }
    for (const PlannedStep& st : p.steps)
        for (int v : st.outs)
            if (p.values[static_cast<std::size_t>(v)].kind != ValueKind::intermediate)
                throw graph_error("dlgraph.emit.writes", st.label + " writes '" + p.values[static_cast<std::size_t>(v)].name +
                                                              "': a fixed model's weights and inputs are constant "
                                                              "(training ops do not belong in it)");

    std::vector<std::string> weight_ids;
    std::set<std::string> weight_used;
    for (int v : p.scope_reads) {
        weight_ids.push_back(unused_name(weight_used, identifier(p.values[static_cast<std::size_t>(v)].name)));
    }
    // INT8 products; a weight only they read is held in INT8 alone.
    std::vector<quant_product> quant;
    Int8Report int8_report;
    if (opts.int8) int8_report = quantize_products(program, p, weights, feeds, fetches, opts, quant);
    std::vector<bool> float_weight(weights.size(), quant.empty());
    for (std::size_t s = 0; s < p.steps.size() && !quant.empty(); ++s) {
        const bool quantized = std::any_of(quant.begin(), quant.end(), [&](auto& q) { return q.step == int(s); });
        for (int v : p.steps[s].ins)
            if (const auto w = std::find(p.scope_reads.begin(), p.scope_reads.end(), v);
                w != p.scope_reads.end() && !quantized)
                float_weight[static_cast<std::size_t>(w - p.scope_reads.begin())] = true;
    }
    for (int v : p.target_values)
        if (const auto w = std::find(p.scope_reads.begin(), p.scope_reads.end(), v); w != p.scope_reads.end())
            float_weight[static_cast<std::size_t>(w - p.scope_reads.begin())] = true;
    std::size_t quant_bytes = 0;
    for (quant_product& q : quant) {
        q.wq_id = unused_name(weight_used, weight_ids[q.weight] + "_q");
        q.scale_id = unused_name(weight_used, weight_ids[q.weight] + "_scale");
        quant_bytes = std::max(quant_bytes, static_cast<std::size_t>(q.m * q.k) * sizeof(kernels::s8_wide));
    }
    emitter em(p, weights, weight_ids, feed_params, fetch_params, used);
    em.quant = quant;
    std::ostringstream body;
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        if (s > 0) body << "    dlgraph::fixed::step_boundary();\n";
        if (!em.step(static_cast<int>(s), body))
            throw graph_error("dlgraph.emit.op", p.steps[s].label + ": no fixed-model kernel for " +
                                                     to_string(p.kernel_dtypes[s]) +
                                                     " (fixed models take the inference ops of docs/design.md)");
    }
    // Fetched values that no step writes (a feed or a weight) are copied.
    if (!p.steps.empty()) body << "    dlgraph::fixed::step_boundary();\n";
    for (std::size_t i = 0; i < fetches.size(); ++i) {
        const int v = p.target_values[i];
        if (!p.values[static_cast<std::size_t>(v)].written)
            body << "    dlgraph::kernels::copy_elements(" << em.ptr(v) << ", " << elements(v) << ", " << fetch_params[i]
                 << ");\n";
    }

    EmittedModel r;
    r.planned_arena_bytes = p.memory.slot_bytes.empty() ? 0 : p.memory.slot_bytes[0];
    r.session_arena_bytes = p.memory.host().arena_bytes;
    r.lower_bound = arena_lower_bound(p);
    r.steps = static_cast<int>(p.steps.size());
    r.gemm_workspaces = em.workspaces;
    r.quant_bytes = quant_bytes;
    r.int8 = int8_report;
    struct reference_state {
        explicit reference_state(const ProgramDesc& program) : session(program) {}
        Session<cpu> session;
        std::vector<quant_product> quant;
        std::vector<EmitFeed> feeds;
        std::vector<std::string> fetches;
    };
    auto state = std::make_shared<reference_state>(program);
    set_weights(state->session, p, weights);
    state->quant = quant;
    state->feeds.assign(feeds.begin(), feeds.end());
    state->fetches.assign(fetches.begin(), fetches.end());
    r.reference = [state](const std::map<std::string, Tensor>& batch) {
        std::vector<std::vector<Tensor>> parts;
        for (const std::vector<Feed>& chunk : chunks_of(batch, state->feeds, "the batch"))
            parts.push_back(host_outputs(state->session, state->quant, chunk, state->fetches));
        return rows_together(parts);
    };

    std::ostringstream h;
    h << "// A fixed model written by dlgraph emit" << (opts.source.empty() ? "" : " from " + comment_text(opts.source))
      << ". Do not edit: emit it again.\n"
         "// Build it with -ffp-contract=off (as dlgraph's CMake target does) for the\n"
         "// rounding of Session<cpu>; the arena must be 64-byte aligned.\n//\n// run(";
    for (std::size_t i = 0; i < feeds.size(); ++i) h << (i ? ", " : "") << comment_text(feeds[i].name) << to_string(feeds[i].shape);
    h << ") -> ";
    for (std::size_t i = 0; i < fetches.size(); ++i)
        h << (i ? ", " : "") << comment_text(fetches[i]) << to_string(p.metas[static_cast<std::size_t>(p.target_values[i])].shape);
    h << "\n// " << p.steps.size() << " steps; arena: " << r.planned_arena_bytes
      << " bytes planned (liveness lower bound " << r.lower_bound << ") + the products' workspace; Session<cpu> plans "
      << r.session_arena_bytes << " bytes for the same targets.\n";
    h << "#pragma once\n\n#include <algorithm>\n#include <cstddef>\n#include <cstdint>\n#include <limits>\n#include <span>\n\n"
         "#include <dlgraph/fixed/runtime.hpp>\n\nnamespace "
      << opts.name << " {\n\n";
    // Weights.
    h << "namespace w {\n";
    for (std::size_t i = 0; i < p.scope_reads.size(); ++i) {
        if (!float_weight[i]) continue;
        const Tensor& t = weights[i];
        const std::string& name = p.values[static_cast<std::size_t>(p.scope_reads[i])].name;
        const std::string T = cpp_type(t.dtype());
        if (T.empty())
            throw type_error("dlgraph.emit.dtype",
                             "weight '" + name + "' is " + to_string(t.dtype()) + ", which a fixed model does not hold");
        r.weight_bytes += t.bytes();
        h << "// " << comment_text(name) << " " << to_string(t.shape()) << "\n";
        h << "alignas(64) inline constexpr " << T << " " << weight_ids[i] << "[" << std::max<std::int64_t>(t.numel(), 1)
          << "] = {";
        visit_dtype(t.dtype(), [&]<class U>(type_tag<U>) {
            if constexpr (std::is_same_v<U, float> || std::is_same_v<U, double> || std::is_same_v<U, std::int32_t> ||
                          std::is_same_v<U, std::int64_t> || std::is_same_v<U, std::int16_t> || std::is_same_v<U, bool>) {
                const U* d = t.data<U>();
                for (std::int64_t k = 0; k < t.numel(); ++k) h << (k % 8 ? " " : "\n    ") << literal(d[k]) << ",";
            }
        });
        h << "\n};\n";
    }
    for (const quant_product& q : quant) {
        const std::string& name = p.values[static_cast<std::size_t>(p.scope_reads[q.weight])].name;
        r.weight_bytes += q.wq.size() + sizeof(float) * q.scale.size();
        h << "// " << comment_text(name) << " in INT8, [" << q.n << ", " << q.k
          << "] (each output channel's weights contiguous), and per channel the scale of its products\n";
        h << "alignas(64) inline constexpr std::int8_t " << q.wq_id << "[" << q.wq.size() << "] = {";
        for (std::size_t k = 0; k < q.wq.size(); ++k) h << (k % 16 ? " " : "\n    ") << int(q.wq[k]) << ",";
        h << "\n};\n";
        h << "alignas(64) inline constexpr float " << q.scale_id << "[" << q.scale.size() << "] = {";
        for (std::size_t k = 0; k < q.scale.size(); ++k) h << (k % 8 ? " " : "\n    ") << literal(q.scale[k]) << ",";
        h << "\n};\n";
    }
    h << "}  // namespace w\n\n";

    // Sizes.
    h << "// Bytes of the products' workspace (0 where every product has few rows): the\n"
         "// compiler computes it for the target's vectors.\n"
         "inline constexpr std::size_t workspace_bytes = std::max<std::size_t>({std::size_t(0)";
    for (const std::string& ws : em.workspaces) h << ",\n    " << ws;
    h << "});\n";
    h << "inline constexpr std::size_t planned_bytes = " << r.planned_arena_bytes << ";\n";
    h << "inline constexpr std::size_t lower_bound_bytes = " << r.lower_bound << ";\n";
    h << "inline constexpr std::size_t session_arena_bytes = " << r.session_arena_bytes << ";\n";
    if (quant.empty())
        h << "// The arena run() takes, 64-byte aligned (alignas(64)): the planned values,\n"
             "// then the workspace at the next 64-byte boundary.\n"
             "inline constexpr std::size_t workspace_offset = (planned_bytes + 63) / 64 * 64;\n"
             "inline constexpr std::size_t arena_bytes = workspace_bytes ? workspace_offset + workspace_bytes : planned_bytes;\n";
    else
        h << "// The arena run() takes, 64-byte aligned (alignas(64)): the planned values,\n"
             "// the INT8 products' quantized inputs, then the workspace, each at a 64-byte boundary.\n"
             "inline constexpr std::size_t quant_bytes = " << quant_bytes << ";\n"
             "inline constexpr std::size_t quant_offset = (planned_bytes + 63) / 64 * 64;\n"
             "inline constexpr std::size_t workspace_offset = (quant_offset + quant_bytes + 63) / 64 * 64;\n"
             "inline constexpr std::size_t arena_bytes =\n"
             "    workspace_bytes ? workspace_offset + workspace_bytes : quant_offset + quant_bytes;\n";
    h << "inline constexpr std::size_t weight_bytes = " << r.weight_bytes << ";\n";
    if (opts.arena_budget)
        h << "static_assert(dlgraph::fixed::arena_within_budget<arena_bytes, " << opts.arena_budget << ">::value);\n";
    h << "\n";
    // Feeds and fetches, for code that drives any model.
    h << "inline constexpr int feed_count = " << feeds.size() << ", fetch_count = " << fetches.size() << ";\n";
    auto names = [&](auto& list) {
        std::string s = "{";
        for (std::size_t i = 0; i < list.size(); ++i) {
            std::string n;
            if constexpr (std::is_same_v<std::decay_t<decltype(list[i])>, EmitFeed>) n = list[i].name;
            else n = list[i];
            s += (i ? ", \"" : "\"") + escaped(n) + "\"";
        }
        return s + "}";
    };
    h << "inline constexpr const char* feed_names[] = " << (feeds.empty() ? "{nullptr}" : names(feeds)) << ";\n";
    h << "inline constexpr const char* fetch_names[] = " << names(fetches) << ";\n";
    std::string fs = "{", ts = "{";
    for (std::size_t i = 0; i < feeds.size(); ++i) fs += (i ? ", " : "") + std::to_string(feeds[i].shape.numel());
    if (feeds.empty()) fs += "0";
    for (std::size_t i = 0; i < fetches.size(); ++i) ts += (i ? ", " : "") + std::to_string(elements(p.target_values[i]));
    h << "inline constexpr std::int64_t feed_sizes[] = " << fs << "}, fetch_sizes[] = " << ts << "};\n\n";

    // run().
    std::string sig;
    for (std::size_t i = 0; i < feeds.size(); ++i) {
        const int v = p.feed_values[i];
        const DataType dt = v >= 0 ? p.metas[static_cast<std::size_t>(v)].dtype : fed_metas[i].dtype;
        sig += "const " + cpp_type(dt) + " (&" + feed_params[i] + ")[" + std::to_string(feeds[i].shape.numel()) + "], ";
    }
    for (std::size_t i = 0; i < fetches.size(); ++i) {
        const int v = p.target_values[i];
        sig += cpp_type(p.metas[static_cast<std::size_t>(v)].dtype) + " (&" + fetch_params[i] + ")[" +
               std::to_string(elements(v)) + "], ";
    }
    h << "inline void run(" << sig << "std::span<std::byte, arena_bytes> arena) noexcept {\n";
    h << "    [[maybe_unused]] std::byte* const a = arena.data();\n";
    h << "    [[maybe_unused]] std::byte* const ws = workspace_bytes ? a + workspace_offset : nullptr;\n";
    for (std::size_t i = 0; i < feeds.size(); ++i) h << "    (void)" << feed_params[i] << ";\n";
    h << body.str() << "}\n\n";

    // A type-erased entry and a model that owns its arena.
    h << "// run() on pointers: feeds and fetches in the order of feed_names and fetch_names.\n";
    h << "inline void run_erased(const void* const* feeds, void* const* fetches, std::byte* arena) noexcept {\n"
         "    (void)feeds;\n    run(";
    for (std::size_t i = 0; i < feeds.size(); ++i) {
        const int v = p.feed_values[i];
        const DataType dt = v >= 0 ? p.metas[static_cast<std::size_t>(v)].dtype : fed_metas[i].dtype;
        h << "*static_cast<const " << cpp_type(dt) << "(*)[" << feeds[i].shape.numel() << "]>(feeds[" << i << "]), ";
    }
    for (std::size_t i = 0; i < fetches.size(); ++i) {
        const int v = p.target_values[i];
        h << "*static_cast<" << cpp_type(p.metas[static_cast<std::size_t>(v)].dtype) << "(*)[" << elements(v)
          << "]>(fetches[" << i << "]), ";
    }
    h << "std::span<std::byte, arena_bytes>(arena, arena_bytes));\n}\n\n";
    h << "// The model with an arena of its own (e.g. a static object: the arena is then in .bss).\n"
         "struct model {\n    alignas(64) std::byte arena[arena_bytes ? arena_bytes : 1];\n";
    std::string args;
    for (std::size_t i = 0; i < feeds.size() + fetches.size(); ++i) args += (i < feeds.size() ? feed_params[i] : fetch_params[i - feeds.size()]) + ", ";
    h << "    void operator()(" << sig.substr(0, sig.size() - 2) << ") noexcept {\n        " << "::" << opts.name << "::run(" << args
      << "std::span<std::byte, arena_bytes>(arena, arena_bytes));\n    }\n};\n\n";
    h << "}  // namespace " << opts.name << "\n";
    r.header = h.str();
    return r;
}

}  // namespace dlgraph::fixed
