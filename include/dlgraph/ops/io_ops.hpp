// Ops that move tensors between a program and files (PaddlePaddle's names),
// their definitions:
//   save          X -> FILE.npy                   attrs file_path, overwrite
//   load          FILE.npy -> Out                 attr  file_path
//   save_combine  X[...] -> FILE.npz              attrs file_path, overwrite
//   load_combine  FILE.npz -> Out[...]            attr  file_path
// They run on the host only (cpu/io_ops.hpp has their kernels, npz.hpp the
// archive format).
//
// load and load_combine check the file against the variable they write:
// dtype and shape must equal the declared ones (the declared dims must be
// fully known, since shapes are inferred before any file is read); every
// error names the file and the variable. load_combine checks every entry
// before it writes any output, so a failure leaves all outputs as they were.
#pragma once

#include <string>

#include "dlgraph/op.hpp"

namespace dlgraph::ops {

inline void check_file_path(const InferContext& c, int attr) {
    if (c.attr(attr).s.empty())
        throw format_error("dlgraph.format.attr", std::string(c.label()) + ": attribute file_path must not be empty");
}

enum { io_file_path = 0, io_overwrite = 1 };  // the attributes, in each def's order

inline void save_infer(const InferContext& c) { check_file_path(c, io_file_path); }
inline OpDef save_def() {
    OpDef d{"save", {{"X"}}, {},
            {{"file_path", Attribute::make_string("file_path", ""), true},
             {"overwrite", Attribute::make_bool("overwrite", true)}},
            &save_infer};
    d.may_fail = true;  // files
    d.doc = "writes X to the .npy file `file_path`";
    return d;
}

// Out keeps its declared meta: the file is read only when the op runs.
inline void load_infer(const InferContext& c) {
    check_file_path(c, io_file_path);
    const VarMeta& m = c.out_meta(0);
    if (!m.shape.known())
        c.fail("dlgraph.shape.load", "Out is declared " + to_string(m.shape) +
                                         "; load needs fully known dims (shapes are inferred before the file is read)");
    c.set(0, m.dtype, m.shape);
}
inline OpDef load_def() {
    // No input and no dtype attribute: the kernel follows Out's dtype (it is
    // the same byte copy under every dtype).
    OpDef d{"load", {}, {{"Out"}}, {{"file_path", Attribute::make_string("file_path", ""), true}}, &load_infer, -1, -1};
    d.may_fail = true;  // files
    d.doc = "Out = the tensor in the .npy file `file_path` (its dtype and shape must be Out's)";
    return d;
}

inline void save_combine_infer(const InferContext& c) { check_file_path(c, io_file_path); }
inline OpDef save_combine_def() {
    OpDef d{"save_combine", {{"X", true}}, {},
            {{"file_path", Attribute::make_string("file_path", ""), true},
             {"overwrite", Attribute::make_bool("overwrite", true)}},
            &save_combine_infer};
    d.may_fail = true;  // files
    d.doc = "writes every X to the .npz archive `file_path` (entries <name>.npy)";
    return d;
}

inline void load_combine_infer(const InferContext& c) {
    check_file_path(c, io_file_path);
    for (int k = 0; k < c.out_count(0); ++k) {
        const VarMeta& m = c.out_meta(0, k);
        if (!m.shape.known())
            c.fail("dlgraph.shape.load", "Out[" + std::to_string(k) + "] is declared " + to_string(m.shape) +
                                             "; load_combine needs fully known dims (shapes are inferred before the "
                                             "file is read)");
        c.set(0, k, m.dtype, m.shape);
    }
}
inline OpDef load_combine_def() {
    // As for load: the kernel follows the first output's dtype.
    OpDef d{"load_combine", {}, {{"Out", true}}, {{"file_path", Attribute::make_string("file_path", ""), true}},
            &load_combine_infer, -1, -1};
    d.may_fail = true;  // files
    d.doc = "Out[...] = the entries <name>.npy of the .npz archive `file_path`";
    return d;
}

}  // namespace dlgraph::ops
