// Interop between dlgraph tensors and xtensor containers: views of
// contiguous xarrays/xtensors as Tensors (no copy), and copies out as
// xt::xarray<T> (concrete values, never views into a scope).
#pragma once

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include "dlgraph/tensor.hpp"

namespace dlgraph {

// A read-only Tensor view of a row-major xtensor container (found by ADL
// from Feed, so containers can be fed directly).
template <class C>
    requires requires(const C& c) {
        c.data();
        c.shape();
        requires element_type<typename C::value_type>;
    }
Tensor tensor_view_of(const C& c) {
    if (c.layout() != xt::layout_type::row_major)
        throw shape_error("dlgraph.shape.layout", "only row-major xtensor containers can be used as tensors");
    Shape s(c.shape().begin(), c.shape().end());
    return Tensor::borrow(dtype_of<typename C::value_type>, s, c.data());
}

// A Tensor holding a copy of `c`.
template <class C> Tensor to_tensor(const C& c) {
    Tensor t;
    t.copy_from(tensor_view_of(c));
    return t;
}

// A copy of `t` as an xarray (from the device, if it is there); the dtype
// must be T.
template <element_type T> xt::xarray<T> to_xarray(const Tensor& t) {
    if (t.place() != Place::host) {
        Tensor h;
        h.copy_from(t);
        return to_xarray<T>(h);
    }
    const T* p = t.data<T>();
    std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
    xt::xarray<T> out(shape);
    std::copy(p, p + t.numel(), out.data());
    return out;
}

}  // namespace dlgraph
