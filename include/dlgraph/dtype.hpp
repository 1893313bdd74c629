// Data types, numbered as in PaddlePaddle's framework.proto, and the mapping
// between them and C++ element types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "dlgraph/error.hpp"

namespace dlgraph {

enum class DataType : int { BOOL = 0, INT16 = 1, INT32 = 2, INT64 = 3, FP16 = 4, FP32 = 5, FP64 = 6 };
inline constexpr int num_dtypes = 7;

// IEEE half as stored bits; dlgraph stores and moves FP16 but computes in
// FP32/FP64 (no FP16 kernels yet).
struct float16 { std::uint16_t bits; };

inline constexpr std::string_view dtype_names[num_dtypes] = {"BOOL", "INT16", "INT32", "INT64",
                                                            "FP16", "FP32",  "FP64"};
inline constexpr std::size_t dtype_sizes[num_dtypes] = {1, 2, 4, 8, 2, 4, 8};

inline bool valid_dtype(int v) noexcept { return v >= 0 && v < num_dtypes; }
inline std::string_view dtype_name(DataType t) noexcept { return dtype_names[static_cast<int>(t)]; }
inline std::size_t dtype_size(DataType t) noexcept { return dtype_sizes[static_cast<int>(t)]; }
inline std::string to_string(DataType t) { return std::string(dtype_name(t)); }

inline DataType dtype_from_name(std::string_view name) {
    for (int i = 0; i < num_dtypes; ++i)
        if (dtype_names[i] == name) return static_cast<DataType>(i);
    throw type_error("dlgraph.type.unknown", "unknown data type '" + std::string(name) + "'");
}
inline DataType dtype_from_int(std::int64_t v) {
    if (v < 0 || v >= num_dtypes)
        throw type_error("dlgraph.type.unknown", "unknown data type number " + std::to_string(v));
    return static_cast<DataType>(v);
}

template <class T> struct dtype_of_t;
template <> struct dtype_of_t<bool> { static constexpr DataType value = DataType::BOOL; };
template <> struct dtype_of_t<std::int16_t> { static constexpr DataType value = DataType::INT16; };
template <> struct dtype_of_t<std::int32_t> { static constexpr DataType value = DataType::INT32; };
template <> struct dtype_of_t<std::int64_t> { static constexpr DataType value = DataType::INT64; };
template <> struct dtype_of_t<float16> { static constexpr DataType value = DataType::FP16; };
template <> struct dtype_of_t<float> { static constexpr DataType value = DataType::FP32; };
template <> struct dtype_of_t<double> { static constexpr DataType value = DataType::FP64; };

// The element types dlgraph knows; Var<T>, Tensor::data<T>() etc. accept these.
template <class T>
concept element_type = requires { dtype_of_t<std::remove_cv_t<T>>::value; };

template <element_type T> inline constexpr DataType dtype_of = dtype_of_t<std::remove_cv_t<T>>::value;

template <class T> struct type_tag { using type = T; };

// Calls f(type_tag<T>{}) with T the C++ type of `t`.
template <class F> decltype(auto) visit_dtype(DataType t, F&& f) {
    switch (t) {
        case DataType::BOOL: return f(type_tag<bool>{});
        case DataType::INT16: return f(type_tag<std::int16_t>{});
        case DataType::INT32: return f(type_tag<std::int32_t>{});
        case DataType::INT64: return f(type_tag<std::int64_t>{});
        case DataType::FP16: return f(type_tag<float16>{});
        case DataType::FP32: return f(type_tag<float>{});
        case DataType::FP64: return f(type_tag<double>{});
    }
    throw type_error("dlgraph.type.unknown", "unknown data type number " + std::to_string(static_cast<int>(t)));
}

}  // namespace dlgraph
