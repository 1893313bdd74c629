// A consumer of the installed dlgraph::mpi: every rank's x summed by a
// c_allreduce_sum op (one process when run alone: MPI's singleton).
#include <dlgraph/dlgraph.hpp>
#include <dlgraph/mpi.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    using namespace dlgraph;
    mpi::Environment env(argc, argv);
    auto comm = mpi::world();
    Program p;
    auto x = p.input<float>("x", {2});
    auto y = c_allreduce_sum(x);
    SessionOptions o;
    o.comms = {comm};
    Session<cpu> s(p, o);
    const float r = static_cast<float>(comm->rank()), n = static_cast<float>(comm->size());
    Tensor t(DataType::FP32, Shape{2});
    t.data<float>()[0] = 1.0f;
    t.data<float>()[1] = r;
    const Tensor out = s.eval({y}, {{x, t}})[0];
    const float want1 = n * (n - 1) / 2;  // 0 + 1 + ... + (n - 1)
    std::printf("rank %d of %d: sum of x = [%g, %g]\n", comm->rank(), comm->size(), out.data<float>()[0],
                out.data<float>()[1]);
    return out.data<float>()[0] == n && out.data<float>()[1] == want1 ? 0 : 1;
}
