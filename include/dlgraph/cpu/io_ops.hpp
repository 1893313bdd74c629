// The CPU kernels of the file ops (ops/io_ops.hpp). These are host
// operations, not kernel-core math: they open files and may throw, and the
// planner never places them on a device.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dlgraph/npy.hpp"
#include "dlgraph/npz.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/io_ops.hpp"

namespace dlgraph::cpu_ops {

namespace io_detail {

// ---- files -------------------------------------------------------------------

// Creates the directory that will hold `path`, if it is missing.
inline void make_parent_dir(const std::string& path, const std::string& who) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (parent.empty()) return;
    std::error_code ec;
    if (std::filesystem::is_directory(parent, ec)) return;
    std::filesystem::create_directories(parent, ec);
    if (ec || !std::filesystem::is_directory(parent))
        throw io_error("dlgraph.io.mkdir", who + ": cannot create directory '" + parent.string() + "' for '" + path +
                                               "'" + (ec ? ": " + ec.message() : std::string()));
}

// Refuses to replace an existing file unless `overwrite`.
inline void check_overwrite(const std::string& path, bool overwrite, const std::string& who) {
    std::error_code ec;
    if (!overwrite && std::filesystem::exists(path, ec))
        throw io_error("dlgraph.io.exists", who + ": '" + path + "' exists and the op's overwrite attribute is false");
}


}  // namespace io_detail

// The kernels copy bytes and do not depend on the dtype: one function goes
// under every dtype of the CPU table.
inline KernelTable io_kernels(KernelFn f) {
    KernelTable t{};
    t.fill(f);
    return t;
}

// Throws unless tensor `t` read from `file` fits variable `var` (whose
// storage `out` the plan sized from its declaration).
inline void check_loaded(const std::string& who, const std::string& file, const std::string& var, const Tensor& t,
                         const Tensor& out) {
    const std::string facts = who + ": '" + file + "' holds " + to_string(t.dtype()) + " " + to_string(t.shape()) +
                              " but variable '" + var + "' is " + to_string(out.dtype()) + " " + to_string(out.shape());
    if (t.dtype() != out.dtype()) throw type_error("dlgraph.type.load", facts);
    if (!(t.shape() == out.shape())) throw shape_error("dlgraph.shape.load", facts);
}

struct save_op {
    enum { file_path = 0, overwrite = 1 };
    static void run(const KernelContext& c) {
        const std::string& path = c.attr(file_path).s;
        const std::string& name = c.in_var(0).name();
        const Tensor& x = c.in(0);
        if (!x.initialized()) throw value_error("dlgraph.value.unset", "save: variable '" + name + "' holds no value");
        io_detail::check_overwrite(path, c.attr(overwrite).b, "save of '" + name + "'");
        io_detail::make_parent_dir(path, "save of '" + name + "'");
        write_npy(path, x);
    }
};

struct load_op {
    enum { file_path = 0 };
    static void run(const KernelContext& c) {
        const std::string& path = c.attr(file_path).s;
        Tensor& out = c.out(0);
        Tensor t = read_npy(path);
        check_loaded("load", path, c.out_var(0).name(), t, out);
        if (t.bytes()) std::memcpy(out.raw(), t.raw(), t.bytes());
    }
};

struct save_combine_op {
    enum { file_path = 0, overwrite = 1 };
    static void run(const KernelContext& c) {
        const std::string& path = c.attr(file_path).s;
        std::vector<std::pair<std::string, const Tensor*>> entries;
        for (int k = 0; k < c.in_count(0); ++k) {
            const std::string& name = c.in_var(0, k).name();
            if (!c.in(0, k).initialized())
                throw value_error("dlgraph.value.unset", "save_combine: variable '" + name + "' holds no value");
            entries.emplace_back(name, &c.in(0, k));
        }
        io_detail::check_overwrite(path, c.attr(overwrite).b, "save_combine");
        io_detail::make_parent_dir(path, "save_combine");
        write_npz(path, entries);
    }
};

struct load_combine_op {
    enum { file_path = 0 };
    // Reads and checks every entry first; writes the outputs only when all fit.
    static void run(const KernelContext& c) {
        dlgraph::detail::npz_archive a(c.attr(file_path).s);
        std::vector<Tensor> loaded;
        loaded.reserve(static_cast<std::size_t>(c.out_count(0)));
        for (int k = 0; k < c.out_count(0); ++k) {
            const std::string& name = c.out_var(0, k).name();
            const auto* e = a.find(name + ".npy");
            if (!e) {
                std::string have;
                for (auto& x : a.entries()) have += (have.empty() ? "" : ", ") + x.name;
                throw io_error("dlgraph.io.npz_missing", "load_combine: '" + a.path() + "' has no entry '" + name +
                                                             ".npy' for variable '" + name +
                                                             "' (it has: " + (have.empty() ? "none" : have) + ")");
            }
            loaded.push_back(a.read_tensor(*e));
            check_loaded("load_combine", a.path() + ":" + e->name, name, loaded.back(), c.out(0, k));
        }
        for (int k = 0; k < c.out_count(0); ++k) {
            const Tensor& t = loaded[static_cast<std::size_t>(k)];
            if (t.bytes()) std::memcpy(c.out(0, k).raw(), t.raw(), t.bytes());
        }
    }
};

inline void save_kernels(OpDef& d) { d.kernels = io_kernels(&save_op::run); }
inline void load_kernels(OpDef& d) { d.kernels = io_kernels(&load_op::run); }
inline void save_combine_kernels(OpDef& d) { d.kernels = io_kernels(&save_combine_op::run); }
inline void load_combine_kernels(OpDef& d) { d.kernels = io_kernels(&load_combine_op::run); }

}  // namespace dlgraph::cpu_ops
