// A consumer of the installed dlgraph::cuda compiled by g++ alone: it links,
// the kernel table answers without a GPU, and where a GPU is visible a
// Session<cuda> evaluates a product.
#include <dlgraph/cuda/cuda.hpp>
#include <dlgraph/dlgraph.hpp>

#include <cstdio>
#include <string>

int main() {
    using namespace dlgraph;
    if (!cuda_has_kernel(lookup_op("elementwise_mul", "consumer"), DataType::FP32)) {
        std::printf("dlgraph::cuda has no elementwise_mul kernel\n");
        return 1;
    }
    Program p;
    auto a = p.variable<float>("a", 1.0f);
    auto b = p.variable<float>("b", 2.0f);
    auto c = a * b;
    std::string why;
    if (!cuda_available(&why)) {
        std::printf("dlgraph::cuda linked; no GPU here (%s), so no Session<cuda> ran\n", why.c_str());
        return 0;
    }
    Session<cuda> s(p);
    const float v = s.eval(c, {{a, 3.0}})(0);
    std::printf("Session<cuda>: a * b with a = 3: %g\n", v);
    return v == 6.0f ? 0 : 1;
}
