// Fusion of element-wise chains, at run time. The planner (plan_fusion)
// finds runs of host steps that are element-wise ops (OpDef::fusible) where
// each step consumes the previous one's result and nothing else reads it, e.g.
// `a*b + c` or `relu(matmul(x, w) + b)`'s `+ b, relu`. Such a chain runs as
// one step that walks the output in blocks small enough for L1: every op is
// applied to the block in a scratch buffer, and only the last writes memory,
// so the values in between never leave the cache. The intermediate values
// keep their arena slots but are not written.
//
// An operand of a chain op is the running value, a tensor of the output's
// size, a single element, or a "row": a tensor equal to the output's trailing
// dims (a bias), repeated every `row` elements; blocks are whole rows.
// A broadcast operand that shares memory with the output (an arena slot
// reused) would be overwritten while it is still read: that chain then runs
// its ops one by one, as unfused.
//
// A chain of device steps (DeviceContext::fused_code) is run by the device's
// kernel (DeviceContext::fused_kernel) from the same fused_chain, each
// instruction carrying the device's code for its op instead of a BlockFn.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "dlgraph/op.hpp"
#include "dlgraph/planner.hpp"
#include "dlgraph/tensor.hpp"
#include "dlgraph/thread_pool.hpp"

namespace dlgraph::detail {

struct fused_operand {
    FusedOperand kind = FusedOperand::running;
    const Tensor* t = nullptr;
};

struct fused_chain {
    struct instr {
        BlockFn fn;  // host chains
        fused_operand x, y;
        int code = -1;  // device chains: DeviceContext::fused_code
    };
    std::vector<instr> instrs;
    int first = 0, last = 0;  // the plan steps it covers
    Tensor* out = nullptr;
    std::int64_t n = 0;      // elements of the output
    std::int64_t row = 0;    // period of row operands (0: none)
    std::int64_t block = 0;  // elements per block (a multiple of row)
    std::size_t elem = 0;    // bytes per element
    int max_threads = 1;     // scratch blocks: one per thread
    std::unique_ptr<Buffer> scratch;  // host chains
    std::vector<std::pair<KernelFn, KernelContext>> unfused;  // the chain's steps, for the aliasing fallback
};

// Bytes per block and operand: 3.5 KiB (896 FP32, 448 FP64), rounded to
// whole rows: the best of a sweep of block sizes on bench_session's five-op
// chain (smaller blocks overlap each block's in-cache work with the memory
// streams better; software prefetch only slowed it). bench/README.md has
// the figures.
inline constexpr std::int64_t fused_block_bytes = 3584;
// Elements per thread below which a chain runs on one thread.
inline constexpr std::int64_t fused_per_thread = 1 << 16;

inline const char* operand_at(const fused_operand& o, std::int64_t off, std::size_t elem, const char* scratch) {
    switch (o.kind) {
        case FusedOperand::running: return scratch;
        case FusedOperand::full: return static_cast<const char*>(o.t->raw()) + static_cast<std::size_t>(off) * elem;
        default: return static_cast<const char*>(o.t->raw());
    }
}

inline bool overlaps(const Tensor& a, const Tensor& b) {
    const char* pa = static_cast<const char*>(a.raw());
    const char* pb = static_cast<const char*>(b.raw());
    return pa < pb + b.bytes() && pb < pa + a.bytes();
}

// Blocks [b0, b1) of chain c, with `scratch` one block of this thread's.
// Block b covers [b * block - shift, (b + 1) * block - shift) within [0, n):
// block 0 is `shift` elements short (see block_shift).
inline void run_blocks(const fused_chain& c, std::int64_t b0, std::int64_t b1, std::int64_t shift, char* scratch) {
    char* z = static_cast<char*>(c.out->raw());
    const std::size_t last = c.instrs.size() - 1;
    for (std::int64_t b = b0; b < b1; ++b) {
        const std::int64_t off = std::max<std::int64_t>(b * c.block - shift, 0);
        const std::int64_t len = std::min((b + 1) * c.block - shift, c.n) - off;
        for (std::size_t k = 0; k <= last; ++k) {
            const auto& in = c.instrs[k];
            char* dst = k == last ? z + static_cast<std::size_t>(off) * c.elem : scratch;
            const char* x = operand_at(in.x, off, c.elem, scratch);
            const char* y = operand_at(in.y, off, c.elem, scratch);
            const int sx = in.x.kind != FusedOperand::scalar, sy = in.y.kind != FusedOperand::scalar;
            if (in.x.kind != FusedOperand::row && in.y.kind != FusedOperand::row) {
                in.fn(len, x, sx, y, sy, dst);
                continue;
            }
            // Row by row: the row operand restarts at each row.
            const std::size_t rb = static_cast<std::size_t>(c.row) * c.elem;
            for (std::int64_t r = 0; r < len / c.row; ++r) {
                const std::size_t o = static_cast<std::size_t>(r) * rb;
                in.fn(c.row, in.x.kind == FusedOperand::row ? x : x + o * static_cast<std::size_t>(sx), sx,
                      in.y.kind == FusedOperand::row ? y : y + o * static_cast<std::size_t>(sy), sy, dst + o);
            }
        }
    }
}

// Elements by which the block grid moves back so that the blocks of the
// full-size tensors the chain reads (each read counted) and writes start on
// a 64-byte line, for the address most of them share modulo 64. A vector
// load that straddles two lines costs about twice an aligned one, and arrays
// from malloc (e.g. xtensor's, fed in place) sit 16 bytes past a line while
// dlgraph's own buffers are line-aligned: the inputs win over the output.
// Only where blocks are whole lines and not whole rows.
inline std::int64_t block_shift(const fused_chain& c) {
    if (c.row > 0 || (c.block * static_cast<std::int64_t>(c.elem)) % 64 != 0) return 0;
    int votes[64] = {};
    auto vote = [&](const Tensor& t) { ++votes[reinterpret_cast<std::uintptr_t>(t.raw()) % 64]; };
    vote(*c.out);
    for (auto& in : c.instrs)
        for (const fused_operand* o : {&in.x, &in.y})
            if (o->kind == FusedOperand::full) vote(*o->t);
    const auto m = static_cast<std::size_t>(std::max_element(votes, votes + 64) - votes);
    return m % c.elem == 0 ? static_cast<std::int64_t>(m / c.elem) : 0;
}

// Whether a broadcast operand of chain c shares memory with its output:
// the chain must then run its steps one by one (run_unfused).
inline bool broadcast_overlaps_out(const fused_chain& c) {
    for (auto& in : c.instrs)
        for (const fused_operand* o : {&in.x, &in.y})
            if ((o->kind == FusedOperand::scalar || o->kind == FusedOperand::row) && overlaps(*o->t, *c.out)) return true;
    return false;
}
inline void run_unfused(const fused_chain& c) {
    for (auto& [fn, ctx] : c.unfused) fn(ctx);
}

inline void run_fused(const fused_chain& c) {
    if (broadcast_overlaps_out(c)) return run_unfused(c);
    char* scratch = static_cast<char*>(c.scratch->data());
    const std::int64_t shift = block_shift(c);
    const std::int64_t blocks = (c.n + shift + c.block - 1) / c.block;
    const int tasks = static_cast<int>(
        std::clamp<std::int64_t>(c.n / fused_per_thread, 1, std::min(dlgraph::parallelism(), c.max_threads)));
    if (tasks == 1) return run_blocks(c, 0, blocks, shift, scratch);
    parallel_for(tasks, [&](int t) {
        run_blocks(c, blocks * t / tasks, blocks * (t + 1) / tasks, shift,
                   scratch + static_cast<std::size_t>(t) * static_cast<std::size_t>(c.block) * c.elem);
    });
}

// The runtime chains of a shaped plan (ExecutionPlan::fused, chosen by
// plan_fusion). `steps` are the bound steps (kernels set, tensors bound); a
// chain's first steps become no-ops and its last runs the chain (so every
// external operand is ready by then). `device` runs the chains of device
// steps.
inline std::vector<std::unique_ptr<fused_chain>> bind_chains(const ExecutionPlan& p,
                                                             std::vector<std::pair<KernelFn, KernelContext>>& steps,
                                                             const DeviceContext* device) {
    std::vector<std::unique_ptr<fused_chain>> chains;
    std::vector<KernelFn> runners;
    for (const FusedChainPlan& cp : p.fused) {
        auto chain = std::make_unique<fused_chain>();
        const auto s = static_cast<std::size_t>(cp.first), e = static_cast<std::size_t>(cp.last);
        const VarMeta& om = p.metas[static_cast<std::size_t>(p.steps[s].outs[0])];
        const bool on_device = p.steps[s].place == Place::device;
        for (std::size_t t = s; t <= e; ++t) {
            const PlannedStep& st = p.steps[t];
            fused_chain::instr in{on_device ? nullptr : st.def->fusible.fn(om.dtype), {}, {},
                                  on_device ? device->fused_code(*st.def, om.dtype) : -1};
            for (int k = 0; k < st.def->fusible.arity; ++k) {
                fused_operand& o = k == 0 ? in.x : in.y;
                o.kind = cp.operands[t - s][static_cast<std::size_t>(k)];
                if (o.kind != FusedOperand::running) o.t = &steps[t].second.in(st.def->fusible.slots[static_cast<std::size_t>(k)]);
            }
            chain->instrs.push_back(in);
        }
        chain->row = cp.row;
        chain->first = cp.first;
        chain->last = cp.last;
        chain->out = &steps[e].second.out(0);
        chain->n = om.shape.numel();
        chain->elem = dtype_size(om.dtype);
        const std::int64_t block = fused_block_bytes / static_cast<std::int64_t>(chain->elem);
        chain->block = chain->row > 0 ? std::max<std::int64_t>(1, block / chain->row) * chain->row : block;
        chain->block = std::min(chain->block, std::max<std::int64_t>(chain->n, 1));
        chain->max_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
        if (!on_device)
            chain->scratch = std::make_unique<Buffer>(static_cast<std::size_t>(chain->block) * chain->elem *
                                                      static_cast<std::size_t>(chain->max_threads));
        for (std::size_t t = s; t <= e; ++t) chain->unfused.push_back(steps[t]);
        chains.push_back(std::move(chain));
        KernelFn host_runner = [](const KernelContext& c) { run_fused(*static_cast<const fused_chain*>(c.fused)); };
        runners.push_back(on_device ? device->fused_kernel() : host_runner);
    }
    // Only once every chain exists (their allocations may throw) do the
    // steps change: a chain's first steps become no-ops, its last runs it.
    for (std::size_t i = 0; i < chains.size(); ++i) {
        const auto s = static_cast<std::size_t>(chains[i]->first), e = static_cast<std::size_t>(chains[i]->last);
        for (std::size_t t = s; t < e; ++t) steps[t].first = [](const KernelContext&) {};
        KernelContext ctx = steps[e].second;
        ctx.fused = chains[i].get();
        steps[e] = {runners[i], ctx};
    }
    return chains;
}

}  // namespace dlgraph::detail
