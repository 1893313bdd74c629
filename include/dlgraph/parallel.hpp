// Helpers for programs that run on several processes (comm.hpp): the
// collective ops themselves are in ops/collective.hpp, data-parallel
// training is an option of the optimizers (optimizer.hpp, data_parallel).
#pragma once

#include <string>

#include "dlgraph/comm.hpp"
#include "dlgraph/session.hpp"

namespace dlgraph {

// Gives every persistable tensor of the session's program (parameters,
// optimizer state, the learning rate) rank `root`'s value: first each rank
// initializes those without a value (initialize_persistables), then they
// are broadcast in the program's declaration order. Every rank of `comm`
// calls it with the same program, so all start identical, whatever their
// initializers' seeds. Returns the number of tensors broadcast. A
// communicator of host memory broadcasts a host copy (the session puts it
// back on its device); one of device memory (NCCL's) a copy in the
// session's device memory, which then comes back to the scope.
template <class Session> int broadcast_persistables(Session& s, Communicator& comm, int root = 0) {
    s.initialize_persistables();
    DeviceContext* device = s.device();
    const bool on_device = comm.memory() != "cpu";
    if (on_device && (!device || device->name() != comm.memory()))
        throw comm_error("dlgraph.comm.memory", "broadcast_persistables: " + comm.describe() + " moves " +
                                                    std::string(comm.memory()) + " memory, but the session runs on " +
                                                    std::string(device ? device->name() : "cpu"));
    int n = 0;
    for (const VarDesc& vd : s.program().blocks[0].vars) {
        if (!vd.persistable || vd.type != VarType::LOD_TENSOR) continue;
        Variable* v = s.scope().find_local(vd.name);
        if (!v || !v->initialized() || !v->template is<Tensor>()) continue;
        Tensor& t = v->template get_mutable<Tensor>();
        if (t.place() != Place::host) {
            Tensor h;
            h.copy_from(t);
            t = std::move(h);
        }
        if (on_device && t.bytes() > 0) {
            const std::shared_ptr<Buffer> staged = device->allocate(t.bytes());
            device->to_device(staged->data(), t.raw(), t.bytes());
            device->synchronize();
            comm.broadcast(staged->data(), t.numel(), t.dtype(), root, "broadcast_persistables");
            device->to_host(t.raw(), staged->data(), t.bytes());
            device->synchronize();
        } else {
            comm.broadcast(t.raw(), t.numel(), t.dtype(), root, "broadcast_persistables");
        }
        ++n;
    }
    return n;
}

}  // namespace dlgraph
