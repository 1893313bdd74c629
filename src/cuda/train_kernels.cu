// The CUDA kernels of the training ops beyond kernels.cu's: the losses of
// kernels/loss.hpp (bce_loss, sigmoid_cross_entropy_with_logits,
// huber_loss, smooth_l1_loss, kldiv_loss and their gradients), layer_norm
// and its gradient (kernels/norm.hpp), and the optimizers adagrad, rmsprop
// and lamb (kernels/optimizers.hpp). Each computes the kernel core's
// formula in the same order per element; sums over many elements are taken
// in double (where the CPU sums in T, the results differ in the last bits).
// Declared in include/dlgraph/cuda/launch.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common.cuh"
#include "dlgraph/cuda/launch.hpp"

namespace dlgraph::cuda_kernels {

namespace {

// The scratch of sum_all: the partials, then the results (one double each).
double* partials_of(void* scratch) { return static_cast<double*>(scratch); }
double* result_of(void* scratch, int k) { return static_cast<double*>(scratch) + sum_blocks + k; }

struct as_double {
    __device__ double operator()(double v) const { return v; }
};

// ---- bce_loss ---------------------------------------------------------------------------------

template <class T> __global__ void bce_loss_kernel(i64 n, const T* x, const T* label, T* out, device_fault* f) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T v = x[i];
        if (!(v >= T(0) && v <= T(1))) atomicMin(&f->first_row, static_cast<unsigned long long>(i));
        out[i] = (label[i] - T(1)) * max(log(T(1) - v), T(-100)) - label[i] * max(log(v), T(-100));
    }
}
// After bce_loss_kernel: the fault of the lowest x outside [0, 1], with the CPU's facts.
template <class T> __global__ void prob_fault_kernel(i64 n, const T* x, device_fault* f) {
    const unsigned long long i = f->first_row;
    if (i != ~0ull && f->code == 0)
        raise_fault(f, k::fault_code::prob_out_of_range, static_cast<i64>(i), n,
                    __double_as_longlong(static_cast<double>(x[i])));
}
template <class T> __global__ void bce_loss_grad_kernel(i64 n, const T* x, const T* label, const T* dout, T* dx) {
    for (i64 i = first_index(); i < n; i += stride_all())
        dx[i] = dout[i] * ((x[i] - label[i]) / max((T(1) - x[i]) * x[i], T(1e-12)));
}

// ---- sigmoid_cross_entropy_with_logits ----------------------------------------------------------

template <class T> struct kept_label {
    const T* label;
    T ignore;
    __device__ double operator()(i64 i) const { return label[i] != ignore ? 1.0 : 0.0; }
};
// 1 / the count of kept labels (1 when none is kept or without normalize).
template <class T> __device__ T normalize_scale(const double* kept) {
    const i64 c = kept ? static_cast<i64>(*kept) : 1;
    return c > 0 ? T(1) / static_cast<T>(c) : T(1);
}
template <class T>
__global__ void sigmoid_ce_kernel(i64 n, const T* x, const T* label, T ignore, const double* kept, T* out) {
    const T scale = normalize_scale<T>(kept);
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T v = x[i];
        const T loss = max(v, T(0)) - v * label[i] + log1p(exp(-fabs(v)));
        out[i] = label[i] == ignore ? T(0) : kept ? loss * scale : loss;
    }
}
template <class T>
__global__ void sigmoid_ce_grad_kernel(i64 n, const T* x, const T* label, const T* dout, T ignore, const double* kept,
                                       T* dx) {
    const T scale = normalize_scale<T>(kept);
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T g = (T(1) / (T(1) + exp(-x[i])) - label[i]) * dout[i];
        dx[i] = label[i] == ignore ? T(0) : kept ? g * scale : g;
    }
}
// The count of kept labels into scratch (normalize), or null.
template <class T>
const double* count_kept(bool normalize, i64 n, const T* label, T ignore, void* scratch, stream_t s) {
    if (!normalize) return nullptr;
    double* kept = result_of(scratch, 0);
    sum_all(n, kept_label<T>{label, ignore}, partials_of(scratch), kept, as_double{}, s);
    return kept;
}

// ---- huber_loss, smooth_l1_loss -----------------------------------------------------------------

template <class T> __global__ void huber_kernel(i64 n, const T* x, const T* y, T delta, T* residual, T* out) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T r = y[i] - x[i], a = fabs(r);
        residual[i] = r;
        out[i] = a <= delta ? T(0.5) * r * r : delta * (a - T(0.5) * delta);
    }
}
template <class T> __global__ void huber_grad_kernel(i64 n, const T* residual, const T* dout, T delta, T* dx, T* dy) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T r = residual[i];
        const T g = (fabs(r) <= delta ? r : r > T(0) ? delta : -delta) * dout[i];
        if (dx) dx[i] = -g;
        if (dy) dy[i] = g;
    }
}

// One block per row: the element losses summed (in double) into out[row].
template <class T>
__global__ void smooth_l1_kernel(i64 rows, i64 cols, const T* x, const T* y, const T* inside, const T* outside,
                                 T sigma2, T* diff, T* out) {
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        double sum = 0;
        for (i64 c = threadIdx.x; c < cols; c += blockDim.x) {
            const i64 i = r * cols + c;
            const T d = inside ? (x[i] - y[i]) * inside[i] : x[i] - y[i];
            const T a = fabs(d);
            const T l = a < T(1) / sigma2 ? T(0.5) * d * d * sigma2 : a - T(0.5) / sigma2;
            diff[i] = d;
            sum += static_cast<double>(outside ? l * outside[i] : l);
        }
        sum = block_fold(sum, add_double{});
        if (threadIdx.x == 0) out[r] = static_cast<T>(sum);
    }
}
template <class T>
__global__ void smooth_l1_grad_kernel(i64 n, i64 cols, const T* inside, const T* outside, const T* diff, const T* dout,
                                      T sigma2, T* dx, T* dy) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T d = diff[i];
        T g = fabs(d) < T(1) / sigma2 ? sigma2 * d : d > T(0) ? T(1) : d < T(0) ? T(-1) : T(0);
        if (outside) g *= outside[i];
        if (inside) g *= inside[i];
        g *= dout[i / cols];
        if (dx) dx[i] = g;
        if (dy) dy[i] = -g;
    }
}

// ---- kldiv_loss ---------------------------------------------------------------------------------

// kernels::kl_reduction's values.
enum : int { kl_none = 0, kl_sum = 1, kl_mean = 2, kl_batchmean = 3 };
template <class T> __device__ T kl_term(T x, T t) { return t > T(0) ? t * (log(t) - x) : T(0); }
template <class T> struct kl_load {
    const T *x, *t;
    __device__ double operator()(i64 i) const { return static_cast<double>(kl_term(x[i], t[i])); }
};
// The sum made the loss: divided by n (mean) or the batch (batchmean); 0 for a divisor of 0.
template <class T> struct kl_finish {
    int red;
    i64 n, batch;
    __device__ T operator()(double sum) const {
        const i64 div = red == kl_mean ? n : red == kl_batchmean ? batch : 1;
        return div > 0 ? static_cast<T>(sum / static_cast<double>(div)) : T(0);
    }
};
template <class T> __global__ void kl_none_kernel(i64 n, const T* x, const T* t, T* loss) {
    for (i64 i = first_index(); i < n; i += stride_all()) loss[i] = kl_term(x[i], t[i]);
}
template <class T> __global__ void kl_grad_kernel(i64 n, i64 batch, int red, const T* t, const T* dloss, T* dx) {
    const T div = red == kl_mean ? static_cast<T>(n > 0 ? n : 1) : red == kl_batchmean ? static_cast<T>(batch > 0 ? batch : 1) : T(1);
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T g = red == kl_none ? dloss[i] : dloss[0] / div;
        dx[i] = t[i] > T(0) ? -t[i] * g : T(0);
    }
}

// ---- layer_norm ---------------------------------------------------------------------------------

// One block per row: its mean and biased variance in double (two passes), then y.
template <class T>
__global__ void layer_norm_kernel(i64 rows, i64 n, const T* x, const T* scale, const T* bias, double eps, T* y, T* mean,
                                  T* var) {
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * n;
        double s = 0;
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(xr[i]);
        s = block_fold(s, add_double{});
        const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
        double q = 0;
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            const double d = static_cast<double>(xr[i]) - m;
            q += d * d;
        }
        q = block_fold(q, add_double{});
        const double v = n > 0 ? q / static_cast<double>(n) : 0.0;
        const T mt = static_cast<T>(m), rstd = static_cast<T>(1.0 / sqrt(v + eps));
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            const T h = (xr[i] - mt) * rstd;
            y[r * n + i] = (scale ? h * scale[i] : h) + (bias ? bias[i] : T(0));
        }
        if (threadIdx.x == 0) {
            if (mean) mean[r] = mt;
            if (var) var[r] = static_cast<T>(v);
        }
    }
}
// dx, one block per row (kernels::layer_norm_dx_row).
template <class T>
__global__ void layer_norm_dx_kernel(i64 rows, i64 n, const T* x, const T* dy, const T* scale, const T* mean,
                                     const T* var, double eps, T* dx) {
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * n;
        const T* dr = dy + r * n;
        const double m = static_cast<double>(mean[r]);
        double sg = 0, sgx = 0;
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            const double g = static_cast<double>(dr[i]) * (scale ? static_cast<double>(scale[i]) : 1.0);
            sg += g;
            sgx += g * (static_cast<double>(xr[i]) - m);
        }
        sg = block_fold(sg, add_double{});
        sgx = block_fold(sgx, add_double{});
        const double rstd = 1.0 / sqrt(static_cast<double>(var[r]) + eps), nd = static_cast<double>(n);
        const T rt = static_cast<T>(rstd), mean_g = static_cast<T>(sg / nd);
        const T c = static_cast<T>(rstd * rstd * sgx / nd);
        for (i64 i = threadIdx.x; i < n; i += blockDim.x) {
            const T gi = scale ? dr[i] * scale[i] : dr[i];
            dx[r * n + i] = rt * (gi - mean_g - (xr[i] - mean[r]) * c);
        }
    }
}
// Scale@GRAD and Bias@GRAD in double (kernels::layer_norm_param_grads):
// the rows in `runs` fixed runs (blockIdx.y), a thread per column and run
// adding its rows in order. With one run it writes the gradients; else
// the runs' sums go to `part` (2 * runs * n doubles), which
// layer_norm_param_finish adds in run order. The runs depend on the shapes
// alone, so the bits do not change from call to call.
template <class T>
__global__ void layer_norm_param_kernel(i64 rows, i64 n, i64 runs, const T* x, const T* dy, const T* mean, const T* var,
                                        double eps, T* dscale, T* dbias, double* part) {
    const i64 run = blockIdx.y, r0 = rows * run / runs, r1 = rows * (run + 1) / runs;
    for (i64 j = first_index(); j < n; j += stride_all()) {
        double ds = 0, db = 0;
        for (i64 r = r0; r < r1; ++r) {
            const double d = static_cast<double>(dy[r * n + j]);
            const double rstd = 1.0 / sqrt(static_cast<double>(var[r]) + eps);
            ds += d * ((static_cast<double>(x[r * n + j]) - static_cast<double>(mean[r])) * rstd);
            db += d;
        }
        if (runs > 1) {
            part[run * n + j] = ds;
            part[(runs + run) * n + j] = db;
            continue;
        }
        if (dscale) dscale[j] = static_cast<T>(ds);
        if (dbias) dbias[j] = static_cast<T>(db);
    }
}
template <class T> __global__ void layer_norm_param_finish(i64 n, i64 runs, const double* part, T* dscale, T* dbias) {
    for (i64 j = first_index(); j < n; j += stride_all()) {
        double ds = 0, db = 0;
        for (i64 run = 0; run < runs; ++run) {
            ds += part[run * n + j];
            db += part[(runs + run) * n + j];
        }
        if (dscale) dscale[j] = static_cast<T>(ds);
        if (dbias) dbias[j] = static_cast<T>(db);
    }
}
// Runs of at least 64 rows, at most 256, and partials that fit the scratch.
i64 param_runs(i64 rows, i64 n, std::size_t scratch_bytes) {
    const i64 fit = static_cast<i64>(scratch_bytes / (2 * sizeof(double) * static_cast<std::size_t>(n)));
    const i64 runs = std::min({rows / 64, i64(256), fit});
    return runs < 1 ? 1 : runs;
}

// ---- optimizers ---------------------------------------------------------------------------------

template <class T>
__global__ void adagrad_kernel(i64 n, const T* p, const T* g, const T* m, const T* lr_p, T eps, T* po, T* mo) {
    const T lr = *lr_p;
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T gi = g[i], mi = m[i] + gi * gi;
        mo[i] = mi;
        po[i] = p[i] - lr * gi / (sqrt(mi) + eps);
    }
}
template <class T>
__global__ void rmsprop_kernel(i64 n, const T* p, const T* g, const T* ms, const T* mom, const T* mg, const T* lr_p, T eps,
                               T decay, T momentum, bool centered, T* po, T* mso, T* momo, T* mgo) {
    const T lr = *lr_p;
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T gi = g[i];
        const T msi = decay * ms[i] + (T(1) - decay) * gi * gi;
        T den;
        if (centered) {
            const T mgi = decay * mg[i] + (T(1) - decay) * gi;
            mgo[i] = mgi;
            den = sqrt(msi - mgi * mgi + eps);
        } else {
            den = sqrt(msi + eps);
        }
        const T mo = momentum * mom[i] + lr * gi / den;
        mso[i] = msi;
        momo[i] = mo;
        po[i] = p[i] - mo;
    }
}

// LAMB: the moments first, then the norms of p and r (sum_all), then the update.
template <class T>
__global__ void lamb_moments_kernel(i64 n, const T* g, const T* m1, const T* m2, T b1, T b2, T* m1o, T* m2o) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T gi = g[i];
        m1o[i] = b1 * m1[i] + (T(1) - b1) * gi;
        m2o[i] = b2 * m2[i] + (T(1) - b2) * gi * gi;
    }
}
// r of element i from the new moments (kernels::lamb's formula).
template <class T> struct lamb_r {
    const T *p, *a, *b, *b1p, *b2p;
    T eps, wd;
    __device__ T operator()(i64 i) const {
        return (a[i] / (T(1) - *b1p)) / (sqrt(b[i] / (T(1) - *b2p)) + eps) + wd * p[i];
    }
};
template <class T> struct square_of_r {
    lamb_r<T> r;
    __device__ double operator()(i64 i) const {
        const double v = static_cast<double>(r(i));
        return v * v;
    }
};
template <class T> struct square_of {
    const T* p;
    __device__ double operator()(i64 i) const {
        const double v = static_cast<double>(p[i]);
        return v * v;
    }
};
template <class T> __global__ void lamb_update_kernel(i64 n, lamb_r<T> r, const T* lr_p, const double* norms, T* po) {
    const double pn = norms[0], rn = norms[1];
    const T trust = pn > 0 && rn > 0 ? static_cast<T>(sqrt(pn) / sqrt(rn)) : T(1);
    const T lr = *lr_p;
    for (i64 i = first_index(); i < n; i += stride_all()) po[i] = r.p[i] - lr * trust * r(i);
}
// After the update (which reads the powers): the powers may be updated in place.
template <class T> __global__ void pow_kernel(const T* b1p, const T* b2p, T b1, T b2, T* b1po, T* b2po) {
    const T a = *b1p * b1, b = *b2p * b2;
    *b1po = a;
    *b2po = b;
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

template <class T> void bce_loss(i64 n, const T* x, const T* label, T* out, device_fault* f, stream_t s) {
    if (n == 0) return;
    bce_loss_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, label, out, f);
    prob_fault_kernel<<<1, 1, 0, s>>>(n, x, f);
}
template <class T> void bce_loss_grad(i64 n, const T* x, const T* label, const T* dout, T* dx, stream_t s) {
    if (n > 0) bce_loss_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, label, dout, dx);
}
template <class T>
void sigmoid_ce(i64 n, const T* x, const T* label, i64 ignore, bool normalize, T* out, void* scratch, stream_t s) {
    if (n == 0) return;
    const T ig = static_cast<T>(ignore);
    const double* kept = count_kept(normalize, n, label, ig, scratch, s);
    sigmoid_ce_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, label, ig, kept, out);
}
template <class T>
void sigmoid_ce_grad(i64 n, const T* x, const T* label, const T* dout, i64 ignore, bool normalize, T* dx, void* scratch,
                     stream_t s) {
    if (n == 0) return;
    const T ig = static_cast<T>(ignore);
    const double* kept = count_kept(normalize, n, label, ig, scratch, s);
    sigmoid_ce_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, label, dout, ig, kept, dx);
}
template <class T> void huber_loss(i64 n, const T* x, const T* y, T delta, T* residual, T* out, stream_t s) {
    if (n > 0) huber_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, y, delta, residual, out);
}
template <class T> void huber_loss_grad(i64 n, const T* residual, const T* dout, T delta, T* dx, T* dy, stream_t s) {
    if (n > 0) huber_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, residual, dout, delta, dx, dy);
}
template <class T>
void smooth_l1_loss(i64 rows, i64 cols, const T* x, const T* y, const T* inside, const T* outside, T sigma2, T* diff,
                    T* out, stream_t s) {
    if (rows > 0)
        smooth_l1_kernel<<<grid_items(rows), block_threads, 0, s>>>(rows, cols, x, y, inside, outside, sigma2, diff, out);
}
template <class T>
void smooth_l1_loss_grad(i64 rows, i64 cols, const T* inside, const T* outside, const T* diff, const T* dout, T sigma2,
                         T* dx, T* dy, stream_t s) {
    const i64 n = rows * cols;
    if (n > 0)
        smooth_l1_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, cols, inside, outside, diff, dout, sigma2, dx, dy);
}
template <class T>
void kldiv_loss(i64 n, i64 batch, int reduction, const T* x, const T* target, T* loss, void* scratch, stream_t s) {
    if (reduction == kl_none) {
        if (n > 0) kl_none_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, target, loss);
        return;
    }
    sum_all(n, kl_load<T>{x, target}, partials_of(scratch), loss, kl_finish<T>{reduction, n, batch}, s);
}
template <class T>
void kldiv_loss_grad(i64 n, i64 batch, int reduction, const T* target, const T* dloss, T* dx, stream_t s) {
    if (n > 0) kl_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, batch, reduction, target, dloss, dx);
}
template <class T>
void layer_norm(i64 rows, i64 n, const T* x, const T* scale, const T* bias, double eps, T* y, T* mean, T* var,
                stream_t s) {
    if (rows > 0) layer_norm_kernel<<<grid_items(rows), block_threads, 0, s>>>(rows, n, x, scale, bias, eps, y, mean, var);
}
template <class T>
void layer_norm_grad(i64 rows, i64 n, const T* x, const T* dy, const T* scale, const T* mean, const T* var, double eps,
                     T* dx, T* dscale, T* dbias, void* scratch, std::size_t scratch_bytes, stream_t s) {
    if (dx && rows > 0 && n > 0)
        layer_norm_dx_kernel<<<grid_items(rows), block_threads, 0, s>>>(rows, n, x, dy, scale, mean, var, eps, dx);
    if ((!dscale && !dbias) || n == 0) return;
    const i64 runs = param_runs(rows, n, scratch_bytes);
    double* part = static_cast<double*>(scratch);
    const dim3 grid(grid_for(n), static_cast<unsigned>(runs));
    layer_norm_param_kernel<<<grid, block_threads, 0, s>>>(rows, n, runs, x, dy, mean, var, eps, dscale, dbias, part);
    if (runs > 1) layer_norm_param_finish<<<grid_for(n), block_threads, 0, s>>>(n, runs, part, dscale, dbias);
}
template <class T> void adagrad(i64 n, const T* p, const T* g, const T* m, const T* lr, T eps, T* po, T* mo, stream_t s) {
    if (n > 0) adagrad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, p, g, m, lr, eps, po, mo);
}
template <class T>
void rmsprop(i64 n, const T* p, const T* g, const T* ms, const T* mom, const T* mg, const T* lr, T eps, T decay,
             T momentum, bool centered, T* po, T* mso, T* momo, T* mgo, stream_t s) {
    if (n > 0)
        rmsprop_kernel<<<grid_for(n), block_threads, 0, s>>>(n, p, g, ms, mom, mg, lr, eps, decay, momentum, centered, po,
                                                             mso, momo, mgo);
}
template <class T>
void lamb(i64 n, const T* p, const T* g, const T* m1, const T* m2, const T* lr, T b1, T b2, T eps, T wd, const T* b1p,
          const T* b2p, T* po, T* m1o, T* m2o, T* b1po, T* b2po, void* scratch, stream_t s) {
    if (n > 0) {
        lamb_moments_kernel<<<grid_for(n), block_threads, 0, s>>>(n, g, m1, m2, b1, b2, m1o, m2o);
        const lamb_r<T> r{p, m1o, m2o, b1p, b2p, eps, wd};
        sum_all(n, square_of<T>{p}, partials_of(scratch), result_of(scratch, 0), as_double{}, s);
        sum_all(n, square_of_r<T>{r}, partials_of(scratch), result_of(scratch, 1), as_double{}, s);
        lamb_update_kernel<<<grid_for(n), block_threads, 0, s>>>(n, r, lr, result_of(scratch, 0), po);
    }
    pow_kernel<<<1, 1, 0, s>>>(b1p, b2p, b1, b2, b1po, b2po);
}

#define DLGRAPH_CUDA_TRAIN(T)                                                                                          \
    template void bce_loss<T>(i64, const T*, const T*, T*, device_fault*, stream_t);                                  \
    template void bce_loss_grad<T>(i64, const T*, const T*, const T*, T*, stream_t);                                  \
    template void sigmoid_ce<T>(i64, const T*, const T*, i64, bool, T*, void*, stream_t);                             \
    template void sigmoid_ce_grad<T>(i64, const T*, const T*, const T*, i64, bool, T*, void*, stream_t);              \
    template void huber_loss<T>(i64, const T*, const T*, T, T*, T*, stream_t);                                        \
    template void huber_loss_grad<T>(i64, const T*, const T*, T, T*, T*, stream_t);                                   \
    template void smooth_l1_loss<T>(i64, i64, const T*, const T*, const T*, const T*, T, T*, T*, stream_t);           \
    template void smooth_l1_loss_grad<T>(i64, i64, const T*, const T*, const T*, const T*, T, T*, T*, stream_t);      \
    template void kldiv_loss<T>(i64, i64, int, const T*, const T*, T*, void*, stream_t);                              \
    template void kldiv_loss_grad<T>(i64, i64, int, const T*, const T*, T*, stream_t);                                \
    template void layer_norm<T>(i64, i64, const T*, const T*, const T*, double, T*, T*, T*, stream_t);                \
    template void layer_norm_grad<T>(i64, i64, const T*, const T*, const T*, const T*, const T*, double, T*, T*, T*,  \
                                     void*, std::size_t, stream_t);                                                    \
    template void adagrad<T>(i64, const T*, const T*, const T*, const T*, T, T*, T*, stream_t);                       \
    template void rmsprop<T>(i64, const T*, const T*, const T*, const T*, const T*, const T*, T, T, T, bool, T*, T*,  \
                             T*, T*, stream_t);                                                                        \
    template void lamb<T>(i64, const T*, const T*, const T*, const T*, const T*, T, T, T, T, const T*, const T*, T*,  \
                          T*, T*, T*, T*, void*, stream_t);
DLGRAPH_CUDA_TRAIN(float)
DLGRAPH_CUDA_TRAIN(double)

}  // namespace dlgraph::cuda_kernels
