// memcpy_h2d and memcpy_d2h (PaddlePaddle's names): the copies the planner
// inserts where a value crosses between the host and a session's device
// (planner.hpp, insert_copies). In a plan they run on the device's queue
// (Session binds them to DeviceContext::to_device / to_host); their CPU
// kernels (cpu/memcpy.hpp) copy host memory, so a program that names them
// also runs on the CPU alone.
#pragma once

#include "dlgraph/op.hpp"

namespace dlgraph::ops {

inline void memcpy_infer(const InferContext& c) { c.set(0, c.dtype(0), c.shape(0)); }

inline OpDef memcpy_def(std::string_view type, std::string_view doc) {
    OpDef d{type, {{"X"}}, {{"Out"}}, {}, &memcpy_infer};
    d.doc = doc;
    return d;
}
inline OpDef memcpy_h2d_def() { return memcpy_def("memcpy_h2d", "Out = X, copied from the host to the device"); }
inline OpDef memcpy_d2h_def() { return memcpy_def("memcpy_d2h", "Out = X, copied from the device to the host"); }

}  // namespace dlgraph::ops

