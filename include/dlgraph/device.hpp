// Device policies are empty tag types chosen as a template argument
// (Session<cpu>, later Session<cuda>). A policy names where memory lives and
// which kernels run; the planner asks a policy whether it supports an op and
// dtype before placing the op there.
#pragma once

#include <string_view>

namespace dlgraph {

enum class DeviceKind : int { CPU = 0, CUDA = 1 };
inline constexpr int num_device_kinds = 2;
inline constexpr std::string_view device_names[num_device_kinds] = {"cpu", "cuda"};

struct cpu {
    static constexpr DeviceKind kind = DeviceKind::CPU;
    static constexpr std::string_view name = "cpu";
};

template <class D>
concept device_policy = requires {
    { D::kind } -> std::convertible_to<DeviceKind>;
};

}  // namespace dlgraph
