// A consumer that only includes the umbrella header.
#include <dlgraph/dlgraph.hpp>

#include <cstdio>

int main() {
    dlgraph::Program p;
    auto a = p.variable<float>("a", 1.0f);
    auto b = p.variable<float>("b", 2.0f);
    auto c = a * b;
    dlgraph::Session<dlgraph::cpu> s(p);
    float v1 = s.eval(c)(0);
    float v2 = s.eval(c, {{a, 3.0}})(0);
    std::printf("c = %g, with a = 3: %g\n", v1, v2);
    return v1 == 2.0f && v2 == 6.0f ? 0 : 1;
}
