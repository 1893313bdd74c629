// The CPU kernels of the window ops (ops/conv.hpp). A convolution is a GEMM
// per image and group over the image's column matrix (kernels::im2col, a
// chunk of output rows at a time, in a thread's workspace that grows once
// and is kept), skipped for a 1x1 window with stride 1 and no padding, and
// never written where the kernel core reads it from the image (stride 1,
// SAME width: kernels/conv_gemm.hpp); its gradients are the two other
// products, the input's through col2im. Pooling runs the kernel core on
// each channel of each image, the channels split over the thread pool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "dlgraph/cpu/gemm.hpp"
#include "dlgraph/cpu/shape_ops.hpp"
#include "dlgraph/kernels/conv.hpp"
#include "dlgraph/kernels/conv_gemm.hpp"
#include "dlgraph/kernels/shape.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/conv.hpp"
#include "dlgraph/thread_pool.hpp"

namespace dlgraph::cpu_ops {

// A thread's column matrix, grown on demand and kept (not the GEMM's
// packing workspace: the product that reads the columns packs into that).
template <class T> inline gemm_detail::workspace<T>& column_workspace() {
    static thread_local gemm_detail::workspace<T> ws;
    return ws;
}

// The products of a convolution: per image and group, Output_g [mg, ohw] =
// Filter_g [mg, kk] x col [kk, ohw], kk = channels per group * kh * kw.
// The column matrix is made a chunk of output rows at a time (chunk_rows
// of them, its columns at most column_chunk_bytes), so that it stays in
// the cache between written and read: 64 -> 64 channels on 56x56 spent
// a third of its time reading a 7 MiB column matrix back. A product over
// a chunk's columns computes each output as the whole product does (K is
// kk either way), so chunks change no bit of the output; the gradients
// add over chunks in an order fixed by the shapes.
inline constexpr std::int64_t column_chunk_bytes = std::int64_t(512) << 10;

struct conv_products {
    kernels::window2d win;  // one group's channels of one image
    std::int64_t images = 0, groups = 1, mg = 0, kk = 0, ohw = 0;
    std::int64_t in_image = 0, out_image = 0;  // elements of one image of Input and Output

    conv_products(const Attribute* a, const Shape& x, const Shape& f) {
        const auto [h, w] = ops::conv2d_op::axes(a, x, f);
        groups = a[ops::conv2d_op::groups].i;
        win = ops::window_of(x[1] / groups, h, w);
        images = x[0];
        mg = f[0] / groups;
        kk = win.col_rows();
        ohw = win.col_cols();
        in_image = x[1] * x[2] * x[3];
        out_image = f[0] * ohw;
    }
    std::int64_t in_group() const { return win.c * win.h * win.w; }
    // With stride 1 and the output as wide as the input, Input@GRAD is
    // itself such a convolution: of Output@GRAD (mg channels, oh x ow) with
    // the filters flipped and their two channel axes swapped (adjoint_filters),
    // paddings (k - 1) * d - p, to an output of h x w. These are its
    // products (Output@GRAD as the input, Input@GRAD as the output).
    bool has_adjoint() const { return win.sh == 1 && win.sw == 1 && win.ow == win.w && !win.identity(); }
    conv_products adjoint() const {
        conv_products q = *this;
        kernels::window2d& a = q.win;
        a.c = mg, a.h = win.oh, a.w = win.ow, a.oh = win.h, a.ow = win.w;
        a.pt = (win.kh - 1) * win.dh - win.pt, a.pb = (win.kh - 1) * win.dh - win.pb;
        a.pl = (win.kw - 1) * win.dw - win.pl, a.pr = (win.kw - 1) * win.dw - win.pr;
        q.mg = win.c, q.kk = a.col_rows(), q.ohw = a.col_cols();
        q.in_image = out_image, q.out_image = in_image;
        return q;
    }
    // Output rows per chunk: all of them for a 1x1 window, which reads the
    // image as it is.
    template <class T> std::int64_t chunk_rows() const {
        if (win.identity()) return std::max<std::int64_t>(win.oh, 1);
        const std::int64_t row_bytes = std::max<std::int64_t>(kk * win.ow * std::int64_t(sizeof(T)), 1);
        return std::clamp<std::int64_t>(column_chunk_bytes / row_bytes, 1, std::max<std::int64_t>(win.oh, 1));
    }
    // Calls f(chunk, y0) for each chunk of output rows [y0, y0 + chunk.oh).
    template <class T, class F> void for_each_chunk(F f) const {
        const std::int64_t rows = chunk_rows<T>();
        for (std::int64_t y0 = 0; y0 < win.oh; y0 += rows)
            f(kernels::output_rows(win, y0, std::min(win.oh, y0 + rows)), y0);
    }
    // Group g of image n.
    template <class T> T* image(T* x, std::int64_t n, std::int64_t g) const { return x + n * in_image + g * in_group(); }
    // The columns of `chunk` (output rows from y0) of image n's group g, and
    // their leading dimension: the image itself for a 1x1 window, else
    // im2col into ws.
    template <class T>
    std::pair<const T*, std::int64_t> columns(const T* x, std::int64_t n, std::int64_t g,
                                              const kernels::window2d& chunk, std::int64_t y0, T* ws) const {
        if (win.identity()) return {image(x, n, g) + y0 * win.ow, ohw};
        kernels::im2col(chunk, image(x, n, g), ws);
        return {ws, chunk.col_cols()};
    }
    // Group g's filters [mg, kk]; image n's group g of the output [mg, ohw].
    template <class T> T* filter(T* f, std::int64_t g) const { return f + g * mg * kk; }
    template <class T> T* output(T* y, std::int64_t n, std::int64_t g) const { return y + n * out_image + g * mg * ohw; }
    // The running thread's column workspace, for one chunk.
    template <class T> T* workspace() const {
        return win.identity() ? nullptr : column_workspace<T>().get(kk * win.ow * chunk_rows<T>());
    }
};

// The filters as the products read them: op(Filter_g) is Filter_g
// (mg x kk), or with `transposed` its transpose (kk x mg, for
// Input@GRAD). Where the products pack their A at all (gemm_prepack_pays),
// every group's is packed once, for the products of all the images, in
// the calling thread's workspace (the same bits: the products pack it
// alike).
template <class T> inline gemm_detail::workspace<T>& packed_filter_workspace() {
    static thread_local gemm_detail::workspace<T> ws;
    return ws;
}
template <class T> struct conv_filters {
    const conv_products& p;
    const T* f;
    bool transposed;
    std::int64_t rows, depth;  // of op(Filter_g)
    const T* packed = nullptr;
    std::int64_t packed_group = 0;  // elements of a group's packed filters

    conv_filters(const conv_products& products, const T* filter, bool trans)
        : p(products), f(filter), transposed(trans), rows(trans ? p.kk : p.mg), depth(trans ? p.mg : p.kk) {
        if (p.images == 0 || !gemm_prepack_pays(rows)) return;
        packed_group = kernels::gemm_packed_a_size<T>(rows, depth);
        T* const out = packed_filter_workspace<T>().get(p.groups * packed_group);
        for (std::int64_t g = 0; g < p.groups; ++g)
            kernels::gemm_pack_a(transposed, rows, depth, p.filter(f, g), p.kk, out + g * packed_group);
        packed = out;
    }
    // C [rows, n] (ldc) = op(Filter_g) x B [depth, n] (ldb).
    void product(std::int64_t g, std::int64_t n, const T* b, std::int64_t ldb, T* c, std::int64_t ldc) const {
        if (packed) gemm_prepacked_a<T>(rows, false, n, depth, T(1), packed + g * packed_group, b, ldb, false, c, ldc);
        else gemm<T>(transposed, false, rows, n, depth, T(1), p.filter(f, g), p.kk, b, ldb, false, c, ldc);
    }
};

// Where the shifted product ends in a tile at most a vector wide
// (kernels::conv_shifted_has_edge), every group's transposed filters, packed
// once per op as that tile reads them, in the calling thread's workspace.
template <class T> inline gemm_detail::workspace<T>& packed_edge_workspace() {
    static thread_local gemm_detail::workspace<T> ws;
    return ws;
}
template <class T> struct shifted_edge_filters {
    const T* packed = nullptr;
    std::int64_t packed_group = 0;
    shifted_edge_filters(const conv_products& p, const T* f) {
        if (p.images == 0 || !kernels::conv_shifted_has_edge<T>(p.win)) return;
        packed_group = kernels::gemm_packed_b_size<T>(p.kk, p.mg);
        T* const out = packed_edge_workspace<T>().get(p.groups * packed_group);
        for (std::int64_t g = 0; g < p.groups; ++g)
            kernels::gemm_pack_b(true, p.kk, p.mg, p.filter(f, g), p.kk, out + g * packed_group);
        packed = out;
    }
};
// The running thread's workspace for kernels::conv_shifted_product.
template <class T> T* shifted_workspace(const kernels::window2d& g) {
    static thread_local gemm_detail::workspace<T> ws;
    return ws.get(kernels::conv_shifted_workspace_size<T>(g));
}

// The adjoint's filters (conv_products::adjoint), every group's
// [channels, mg * kh * kw]: entry (c, (m, t)) is Filter[m][c][taps - 1 - t],
// in the calling thread's workspace.
template <class T> const T* adjoint_filters(const conv_products& p, const T* f) {
    static thread_local gemm_detail::workspace<T> ws;
    const std::int64_t taps = p.win.kh * p.win.kw, cg = p.win.c, per_group = cg * p.mg * taps;
    T* const out = ws.get(std::max<std::int64_t>(p.groups * per_group, 1));
    for (std::int64_t g = 0; g < p.groups; ++g)
        for (std::int64_t m = 0; m < p.mg; ++m) {
            const T* const fm = p.filter(f, g) + m * p.kk;
            for (std::int64_t c = 0; c < cg; ++c)
                for (std::int64_t t = 0; t < taps; ++t)
                    out[g * per_group + c * p.mg * taps + m * taps + t] = fm[c * taps + taps - 1 - t];
        }
    return out;
}

// The forward product of image n's group g read from the image itself
// (kernels::conv_shifted_product), its columns split over the threads as
// gemm_prepacked_a splits them; `tables` for p.win.
template <class T>
void shifted_product(const conv_products& p, const conv_filters<T>& filters, const shifted_edge_filters<T>& edge,
                     const kernels::conv_shifted_tables& tables, const T* x, T* y, std::int64_t n, std::int64_t g) {
    gemm_detail::for_each_strip(p.ohw, kernels::gemm_nr<T>, p.mg, p.ohw, p.kk, [&](std::int64_t c0, std::int64_t c1) {
        kernels::conv_shifted_product<T>(p.win, p.mg, filters.packed + g * filters.packed_group, tables, p.image(x, n, g),
                                         p.output(y, n, g), p.ohw, c0, c1, shifted_workspace<T>(p.win),
                                         edge.packed ? edge.packed + g * edge.packed_group : nullptr);
    });
}
// Where the forward takes it: the filters packed, a window the kernel core
// serves, and a group of the image of at most shifted_image_bytes. Its
// tiles read the image kh * kw times over, mostly across cache lines, so
// it must stay in the cache: 32 -> 64 channels on 14x14 (25 KiB an image)
// ran 3-6% faster than im2col and the packed GEMM, 64 -> 64 on 56x56
// (784 KiB) 2-5% slower, with or without software prefetches (the two
// paths alternated in one process, one thread); since each tile's panel
// is packed from the image (kernels::conv_shifted_product), 12.6 ms
// against 12.6 for that convolution at batch 8, the same. The tables are built once
// per op, in the calling thread's workspace, and read by every thread.
inline constexpr std::int64_t shifted_image_bytes = std::int64_t(128) << 10;
template <class T> bool shifted_product_serves(const conv_products& p) {
    return gemm_prepack_pays(p.mg) && kernels::conv_shifted_serves<T>(p.win) &&
           p.in_group() * std::int64_t(sizeof(T)) <= shifted_image_bytes;
}
template <class T> bool takes_shifted_product(const conv_products& p, const conv_filters<T>& filters) {
    return filters.packed && shifted_product_serves<T>(p);
}
// Where the shifted product would serve and the column matrix has at most
// kernels::conv_direct_max_k rows: the direct product (the same bits). The
// demo's conv1 (one channel, 3x3, 32 filters, 28x28, batch 64) took
// 0.58-1.4 ms on one thread with the shifted product, 0.39-0.48 ms with
// this, on a core shared with other work (bench/README.md, 2026-12-03).
template <class T> bool takes_direct_product(const conv_products& p) {
    return kernels::conv_direct_serves<T>(p.win) && shifted_product_serves<T>(p);
}
// Every group's filters as kernels::conv_direct_product reads them, in the
// calling thread's workspace.
template <class T> struct direct_filters {
    const T* packed = nullptr;
    std::int64_t per_group = 0;
    direct_filters(const conv_products& p, const T* f) {
        static thread_local gemm_detail::workspace<T> ws;
        per_group = kernels::conv_direct_filters_size<T>(p.mg, p.win);
        T* const out = ws.get(std::max<std::int64_t>(p.groups * per_group, 1));
        for (std::int64_t g = 0; g < p.groups; ++g)
            kernels::conv_direct_pack_filters(p.mg, p.win, p.filter(f, g), out + g * per_group);
        packed = out;
    }
};
// Where the forward takes the product with the filters as vectors
// (kernels::conv_rows_product, the same bits): FP32, stride 1, the filters
// a multiple of 16 (no lanes computed for nothing) and a product the
// packed GEMM would take. 32 -> 64 channels on 14x14 at batch 64 ran at
// 99-101 GFLOP/s this way against 92-95 with the shifted product, 64 -> 64
// on 56x56 at 104 against 94 with im2col (one thread, bench/README.md,
// 2026-12-03); 48 -> 40 channels, where 8 of the last block's 16 lanes
// would be padding, at 91 against 95.
template <class T> bool takes_rows_product(const conv_products& p) {
    return gemm_prepack_pays(p.mg) && kernels::conv_rows_serves<T>(p.win) && p.mg % 16 == 0;
}
// What every thread reads: each group's filters as the product reads them,
// the offsets of col^T's rows and the band they are for, in the calling
// thread's workspace.
template <class T> struct rows_filters {
    const T* packed = nullptr;
    std::int64_t per_group = 0, band = 1;
    const std::int64_t* offsets = nullptr;
    rows_filters(const conv_products& p, const T* f) {
        static thread_local gemm_detail::workspace<T> ws;
        static thread_local gemm_detail::workspace<std::int64_t> offset_ws;
        per_group = kernels::conv_rows_filters_size<T>(p.mg, p.win);
        T* const out = ws.get(std::max<std::int64_t>(p.groups * per_group, 1));
        for (std::int64_t g = 0; g < p.groups; ++g)
            kernels::conv_rows_pack_filters(p.mg, p.win, p.filter(f, g), out + g * per_group);
        packed = out;
        band = kernels::conv_rows_band<T>(p.win);
        std::int64_t* const o = offset_ws.get(std::max<std::int64_t>(kernels::conv_rows_offsets_size<T>(p.win), 1));
        kernels::conv_rows_offsets_make<T>(p.win, band, o);
        offsets = o;
    }
    // The running thread's workspace.
    T* workspace(const conv_products& p) const {
        static thread_local gemm_detail::workspace<T> ws;
        return ws.get(kernels::conv_rows_workspace_size<T>(p.win, p.mg, band));
    }
};
template <class T> kernels::conv_shifted_tables shifted_tables(const kernels::window2d& g) {
    static thread_local gemm_detail::workspace<std::int64_t> offsets;
    static thread_local gemm_detail::workspace<std::uint16_t> masks;
    return kernels::conv_shifted_tables_make<T>(g, offsets.get(kernels::conv_shifted_offsets_size<T>(g)),
                                                masks.get(kernels::conv_shifted_masks_size<T>(g)));
}

// ---- NHWC (data_format): the NCHW kernels between two transposes ----------------------------

// Workspace k (0-3) of the running thread, for tensors transposed between
// NHWC and NCHW; grown on demand and kept (outside the plan's arena: an
// NHWC step keeps up to four tensors' worth per thread that ran one).
template <class T> T* layout_workspace(int k, std::int64_t n) {
    static thread_local gemm_detail::workspace<T> ws[4];
    return ws[k].get(std::max<std::int64_t>(n, 1));
}
// An NHWC tensor as the NCHW one `nchw` (its shape), in workspace k.
template <class T> const T* nhwc_to_nchw(const T* x, const Shape& nchw, int k) {
    T* y = layout_workspace<T>(k, nchw.numel());
    const std::int64_t dims[] = {nchw[0], nchw[2], nchw[3], nchw[1]}, perm[] = {0, 3, 1, 2};
    kernels::transpose(x, dims, 4, perm, y);
    return y;
}
template <class T> void nchw_to_nhwc(const T* x, const Shape& nchw, T* y) {
    const std::int64_t dims[] = {nchw[0], nchw[1], nchw[2], nchw[3]}, perm[] = {0, 2, 3, 1};
    kernels::transpose(x, dims, 4, perm, y);
}
// Output tensor `t` of NCHW shape `nchw`: written in place (NCHW), or in
// workspace k and transposed into t by finish() (NHWC).
template <class T> struct nchw_output {
    Tensor& t;
    Shape nchw;
    bool nhwc;
    T* data;
    nchw_output(Tensor& out, const Shape& s, bool cl, int k)
        : t(out), nchw(s), nhwc(cl), data(cl ? layout_workspace<T>(k, s.numel()) : out.data<T>()) {}
    void finish() const {
        if (nhwc) nchw_to_nhwc(data, nchw, t.data<T>());
    }
};

// Runs f(n) for every image: split over the pool when there are images
// enough for every thread, else one at a time (the GEMMs inside split).
// Images are independent, so the result does not depend on the split.
template <class F> void for_each_image(std::int64_t images, F f) {
    if (images >= parallelism()) parallel_for(static_cast<int>(images), [&](int n) { f(n); });
    else
        for (std::int64_t n = 0; n < images; ++n) f(n);
}

// NHWC: Input transposed into workspace 0, Output computed in workspace 1.
// The products of a convolution, NCHW: y = conv(x, f) as p describes it,
// read from the image itself where the kernel core can (takes_direct_product,
// takes_rows_product, takes_shifted_product, the first that serves), else
// through the column matrix; the bits are the same either way.
template <class T> void conv_forward(const conv_products& p, const T* f, const T* x, T* y) {
    if (takes_direct_product<T>(p)) {
        const auto tables = shifted_tables<T>(p.win);
        const direct_filters<T> filters(p, f);
        for_each_image(p.images, [&](std::int64_t n) {
            for (std::int64_t g = 0; g < p.groups; ++g)
                gemm_detail::for_each_strip(p.ohw, kernels::gemm_nr<T>, p.mg, p.ohw, p.kk, [&](std::int64_t c0, std::int64_t c1) {
                    kernels::conv_direct_product<T>(p.win, p.mg, filters.packed + g * filters.per_group, tables,
                                                    p.image(x, n, g), p.output(y, n, g), p.ohw, c0, c1);
                });
        });
        return;
    }
    if (takes_rows_product<T>(p)) {  // its output rows split over the threads where the images are few
        const rows_filters<T> filters(p, f);
        for_each_image(p.images, [&](std::int64_t n) {
            for (std::int64_t g = 0; g < p.groups; ++g)
                gemm_detail::for_each_strip(p.win.oh, 1, p.mg, p.ohw, p.kk, [&](std::int64_t y0, std::int64_t y1) {
                    kernels::conv_rows_product<T>(p.win, p.mg, filters.packed + g * filters.per_group, filters.offsets,
                                                  filters.band, p.image(x, n, g), p.output(y, n, g), p.ohw, y0, y1,
                                                  filters.workspace(p));
                });
        });
        return;
    }
    const conv_filters<T> filters(p, f, false);
    if (takes_shifted_product(p, filters)) {
        const auto tables = shifted_tables<T>(p.win);
        const shifted_edge_filters<T> edge(p, f);
        for_each_image(p.images, [&](std::int64_t n) {
            for (std::int64_t g = 0; g < p.groups; ++g) shifted_product(p, filters, edge, tables, x, y, n, g);
        });
        return;
    }
    for_each_image(p.images, [&](std::int64_t n) {
        T* const ws = p.workspace<T>();  // the running thread's
        for (std::int64_t g = 0; g < p.groups; ++g)
            p.for_each_chunk<T>([&](const kernels::window2d& chunk, std::int64_t y0) {
                const auto [col, ld] = p.columns(x, n, g, chunk, y0, ws);
                filters.product(g, chunk.col_cols(), col, ld, p.output(y, n, g) + y0 * chunk.ow, p.ohw);
            });
    });
}

struct conv2d_op : ops::conv2d_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const bool cl = nhwc(c.attrs);
        const Shape xs = ops::as_nchw(c.in(Input).shape(), cl);
        const conv_products p(c.attrs, xs, c.in(Filter).shape());
        const T* x = cl ? nhwc_to_nchw(c.in(Input).data<T>(), xs, 0) : c.in(Input).data<T>();
        const nchw_output<T> out(c.out(0), ops::as_nchw(c.out(0).shape(), cl), cl, 1);
        conv_forward(p, c.in(Filter).data<T>(), x, out.data);
        out.finish();
    }
};

// Filter@GRAD sums a product over the images: it is summed in `parts`
// fixed runs of images, each into its own partial (the first into
// Filter@GRAD itself), and the partials added in order. The runs depend on
// the shapes alone, so the bits do not depend on the thread count; the
// partials take at most partial_bytes.
inline constexpr std::int64_t partial_bytes = std::int64_t(8) << 20;
template <class T> std::int64_t filter_grad_parts(std::int64_t images, std::int64_t filter_numel) {
    const std::int64_t fit = partial_bytes / std::max<std::int64_t>(1, filter_numel * std::int64_t(sizeof(T)));
    return std::max<std::int64_t>(1, std::min({images, std::int64_t(8), fit + 1}));
}
template <class T> inline gemm_detail::workspace<T>& partials_workspace() {
    static thread_local gemm_detail::workspace<T> ws;
    return ws;
}

// Where Filter@GRAD's product takes col^T packed from the image
// (kernels::conv_packed_columns: no column matrix, the same bits), for a
// chunk of p's window: the product would pack it (gemm_prepack_pays) and
// the kernel core packs it so. In the running thread's workspace.
template <class T> bool packs_columns(const conv_products& p, const kernels::window2d& chunk) {
    return !p.win.identity() && gemm_prepack_pays(p.mg) && kernels::conv_packs_columns<T>(chunk);
}
template <class T> inline gemm_detail::workspace<T>& packed_columns_workspace() {
    static thread_local gemm_detail::workspace<T> ws;
    return ws;
}

// Input@GRAD as the convolution of Output@GRAD (dy, NCHW) with the
// adjoint's filters (conv_forward of p.adjoint()), where that convolution
// is one the kernel core reads from its image (stride 1, a SAME width, 8 or
// more channels per group, at most shifted_image_bytes of Output@GRAD per
// group): no column matrix, no col2im. The choice does not depend on
// whether this build has the shifted product, so that a build without
// (DLGRAPH_NO_SIMD) takes the same products through im2col and gives the
// same bits. Those are other bits than col2im's: each element is one chain
// of multiply-adds over (m, tap), not the sum of a chain per tap. False
// where not taken (nothing written).
template <class T>
bool input_grad_by_adjoint(const conv_products& p, const T* f, const T* dy, Tensor& dinput, const Shape& xs, bool cl) {
    if (!p.has_adjoint() || p.images == 0) return false;
    const conv_products q = p.adjoint();
    if (!gemm_prepack_pays(q.mg) || q.in_group() * std::int64_t(sizeof(T)) > shifted_image_bytes) return false;
    const nchw_output<T> out(dinput, xs, cl, 3);
    conv_forward(q, adjoint_filters(p, f), dy, out.data);
    out.finish();
    return true;
}

// Input@GRAD_g = col2im(Filter_g^T x Output@GRAD_g), or the adjoint's
// product (input_grad_by_adjoint); Filter@GRAD_g = sum over images of
// Output@GRAD_g x col^T.
// NHWC: Input and Output@GRAD transposed into workspaces 0 and 2,
// Input@GRAD computed in workspace 3.
struct conv2d_grad_op : ops::conv2d_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const bool cl = ops::conv2d_op::nhwc(c.attrs);
        const Shape xs = ops::as_nchw(c.in(Input).shape(), cl);
        const conv_products p(c.attrs, xs, c.in(Filter).shape());
        // (Input is read only by Filter@GRAD's product.)
        const T* xd = !cl ? c.in(Input).data<T>()
                      : c.out_count(DFilter) ? nhwc_to_nchw(c.in(Input).data<T>(), xs, 0) : nullptr;
        const T* dy = cl ? nhwc_to_nchw(c.in(DOutput).data<T>(), ops::as_nchw(c.in(DOutput).shape(), cl), 2)
                         : c.in(DOutput).data<T>();
        const T* f = c.in(Filter).data<T>();
        if (c.out_count(DInput) && !input_grad_by_adjoint(p, f, dy, c.out(DInput), xs, cl)) {
            const nchw_output<T> out(c.out(DInput), xs, cl, 3);
            T* dx = out.data;
            const conv_filters<T> filters(p, f, true);
            for_each_image(p.images, [&](std::int64_t n) {
                T* const ws = p.workspace<T>();
                if (!p.win.identity()) std::fill(dx + n * p.in_image, dx + (n + 1) * p.in_image, T(0));
                for (std::int64_t g = 0; g < p.groups; ++g) {
                    T* image = p.image(dx, n, g);
                    const T* dyg = p.output(dy, n, g);
                    p.for_each_chunk<T>([&](const kernels::window2d& chunk, std::int64_t y0) {
                        const std::int64_t cols = chunk.col_cols();
                        if (p.win.identity()) return filters.product(g, cols, dyg, p.ohw, image, p.ohw);
                        filters.product(g, cols, dyg + y0 * chunk.ow, p.ohw, ws, cols);
                        kernels::col2im_add(chunk, ws, image);
                    });
                }
            });
            out.finish();
        }
        if (c.out_count(DFilter)) {
            const std::int64_t fn = c.in(Filter).numel();
            T* df = c.out(DFilter).data<T>();
            const std::int64_t images = p.win.oh > 0 ? p.images : 0;  // the images that add to it
            if (images == 0) std::fill(df, df + fn, T(0));
            const std::int64_t parts = filter_grad_parts<T>(images, fn);
            T* const partials = parts > 1 ? partials_workspace<T>().get((parts - 1) * fn) : nullptr;
            parallel_for(static_cast<int>(parts), [&](int k) {
                T* const ws = p.workspace<T>();
                T* const out = k == 0 ? df : partials + (k - 1) * fn;
                for (std::int64_t n0 = images * k / parts, n = n0, e = images * (k + 1) / parts; n < e; ++n)
                    for (std::int64_t g = 0; g < p.groups; ++g)
                        p.for_each_chunk<T>([&](const kernels::window2d& chunk, std::int64_t y0) {
                            const T* const dyg = p.output(dy, n, g) + y0 * chunk.ow;
                            const std::int64_t cols = chunk.col_cols();
                            if (packs_columns<T>(p, chunk)) {  // col^T packed from the image: no column matrix
                                T* const packed = packed_columns_workspace<T>().get(
                                    kernels::gemm_packed_b_size<T>(cols, p.kk));
                                kernels::conv_packed_columns<T>(chunk, p.image(xd, n, g), packed);
                                return gemm_prepacked<T>(false, p.mg, p.kk, cols, T(1), dyg, p.ohw, packed,
                                                         n > n0 || y0 > 0, p.filter(out, g), p.kk);
                            }
                            const auto [col, ld] = p.columns(xd, n, g, chunk, y0, ws);
                            gemm<T>(false, true, p.mg, p.kk, cols, T(1), dyg, p.ohw, col, ld, n > n0 || y0 > 0,
                                    p.filter(out, g), p.kk);
                        });
            });
            for (std::int64_t k = 1; k < parts; ++k) {
                const T* part = partials + (k - 1) * fn;
                for (std::int64_t i = 0; i < fn; ++i) df[i] += part[i];
            }
        }
    }
};

// ---- pool2d ----------------------------------------------------------------------------------

// Runs f(plane) for every channel of every image, split over the pool.
template <class F> void for_each_plane(std::int64_t planes, std::int64_t plane_work, F f) {
    if (planes <= 0) return;
    const std::int64_t work = planes * plane_work;
    const int tasks = static_cast<int>(std::clamp<std::int64_t>(work / (1 << 15), 1, std::min<std::int64_t>(planes, 64)));
    parallel_for(tasks, [&](int t) {
        for (std::int64_t i = planes * t / tasks, e = planes * (t + 1) / tasks; i < e; ++i) f(i);
    });
}

// NHWC: X transposed into workspace 0, Out computed in workspace 1.
struct pool2d_op : ops::pool2d_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const bool cl = nhwc(c.attrs);
        const Shape xs = ops::as_nchw(c.in(X).shape(), cl);
        const auto [h, w] = axes(c.attrs, xs);
        const kernels::window2d g = ops::window_of(1, h, w);
        const bool is_max = c.attr(pooling_type).s == "max", adapt = c.attr(adaptive).b, excl = c.attr(exclusive).b;
        const T* xp = cl ? nhwc_to_nchw(c.in(X).data<T>(), xs, 0) : c.in(X).data<T>();
        const nchw_output<T> out(c.out(0), ops::as_nchw(c.out(0).shape(), cl), cl, 1);
        T* y = out.data;
        const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
        for_each_plane(xs[0] * xs[1], out_plane * g.kh * g.kw, [&](std::int64_t i) {
            if (is_max) kernels::max_pool2d(g, adapt, xp + i * in_plane, y + i * out_plane);
            else kernels::avg_pool2d(g, adapt, excl, xp + i * in_plane, y + i * out_plane);
        });
        out.finish();
    }
};

// NHWC: X, Out and Out@GRAD transposed into workspaces 0, 1 and 2, X@GRAD
// computed in workspace 3.
struct pool2d_grad_op : ops::pool2d_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const bool cl = ops::pool2d_op::nhwc(c.attrs);
        const Shape xs = ops::as_nchw(c.in(X).shape(), cl), ys = ops::as_nchw(c.in(Out).shape(), cl);
        const auto [h, w] = ops::pool2d_op::axes(c.attrs, xs);
        const kernels::window2d g = ops::window_of(1, h, w);
        const bool is_max = c.attr(ops::pool2d_op::pooling_type).s == "max";
        const bool adapt = c.attr(ops::pool2d_op::adaptive).b, excl = c.attr(ops::pool2d_op::exclusive).b;
        // (X and Out are read only by max pooling's gradient.)
        const T* xp = !cl ? c.in(X).data<T>() : is_max ? nhwc_to_nchw(c.in(X).data<T>(), xs, 0) : nullptr;
        const T* yp = !cl ? c.in(Out).data<T>() : is_max ? nhwc_to_nchw(c.in(Out).data<T>(), ys, 1) : nullptr;
        const T* dy = cl ? nhwc_to_nchw(c.in(DOut).data<T>(), ys, 2) : c.in(DOut).data<T>();
        const nchw_output<T> out(c.out(0), xs, cl, 3);
        T* dx = out.data;
        const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
        for_each_plane(xs[0] * xs[1], out_plane * g.kh * g.kw, [&](std::int64_t i) {
            T* d = dx + i * in_plane;
            std::fill(d, d + in_plane, T(0));
            if (is_max) kernels::max_pool2d_grad(g, adapt, xp + i * in_plane, yp + i * out_plane, dy + i * out_plane, d);
            else kernels::avg_pool2d_grad(g, adapt, excl, dy + i * out_plane, d);
        });
        out.finish();
    }
};

// ---- flatten_contiguous_range --------------------------------------------------------------------

struct flatten_contiguous_range_op : ops::flatten_contiguous_range_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::copy_elements(c.in(X).data<T>(), c.in(X).numel(), c.out(Out).data<T>());
    }
};
struct flatten_contiguous_range_grad_op : ops::flatten_contiguous_range_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::copy_elements(c.in(DOut).data<T>(), c.in(DOut).numel(), c.out(0).data<T>());
    }
};

// ---- the kernel tables ---------------------------------------------------------------

inline void conv2d_kernels(OpDef& d) { d.kernels = cpu_kernels<conv2d_op, float, double>(); }
inline void depthwise_conv2d_kernels(OpDef& d) { d.kernels = cpu_kernels<conv2d_op, float, double>(); }
inline void conv2d_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<conv2d_grad_op, float, double>(); }
inline void depthwise_conv2d_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<conv2d_grad_op, float, double>(); }
inline void pool2d_kernels(OpDef& d) { d.kernels = cpu_kernels<pool2d_op, float, double>(); }
inline void pool2d_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<pool2d_grad_op, float, double>(); }
inline void flatten_contiguous_range_kernels(OpDef& d) { d.kernels = copy_kernels<flatten_contiguous_range_op>(); }
inline void flatten_contiguous_range_grad_kernels(OpDef& d) {
    d.kernels = copy_kernels<flatten_contiguous_range_grad_op>();
}

}  // namespace dlgraph::cpu_ops
