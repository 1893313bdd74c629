// Tensor: a dtype, a shape and 64-byte aligned storage, allocated lazily (a
// tensor has no memory until it is first given a known shape). Copies are
// deep: a Tensor handed to a user is a value, never a view into a scope.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "dlgraph/device.hpp"
#include "dlgraph/dtype.hpp"
#include "dlgraph/shape.hpp"

namespace dlgraph {

inline constexpr std::size_t buffer_alignment = 64;
// Blocks from this size on are aligned to 2 MiB and offered to the kernel as
// transparent huge pages: a large arena or weight touched 4 KiB page by page
// pays a page fault thousands of times (and TLB misses after); see
// bench/README.md for what a fault costs.
inline constexpr std::size_t huge_page_bytes = std::size_t(2) << 20;

// One allocation. Shared by the tensors a memory plan binds to it; kept by
// the session between runs (the arena is allocated once per shape). Host
// memory is 64-byte aligned (2 MiB from 2 MiB on); device memory comes from a
// device's allocator, which the buffer keeps alive and gives it back to.
class Buffer {
public:
    explicit Buffer(std::size_t bytes) : bytes_(bytes), align_(bytes >= huge_page_bytes ? huge_page_bytes : buffer_alignment) {
        if (!bytes) return;
        data_ = ::operator new(round_up(bytes, align_), std::align_val_t{align_});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (align_ == huge_page_bytes) ::madvise(data_, round_up(bytes, align_), MADV_HUGEPAGE);  // a hint: failure is fine
#endif
    }
    // `bytes` at `data` of device memory that `owner` (never null) gives back.
    Buffer(void* data, std::size_t bytes, std::shared_ptr<DeviceMemory> owner)
        : data_(data), bytes_(bytes), align_(0), owner_(std::move(owner)) {
        assert(owner_ && "device memory needs its owner");
    }
    ~Buffer() {
        if (owner_) owner_->release(data_, bytes_);
        else if (data_) ::operator delete(data_, std::align_val_t{align_});
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    void* data() const noexcept { return data_; }
    std::size_t bytes() const noexcept { return bytes_; }
    Place place() const noexcept { return owner_ ? Place::device : Place::host; }
    // The device memory's owner; null for host memory.
    DeviceMemory* owner() const noexcept { return owner_.get(); }

private:
    // Whole vectors past the end, so SIMD tails may load (never store) there.
    static std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
    std::size_t align_;
    std::shared_ptr<DeviceMemory> owner_;
};

class Tensor {
public:
    Tensor() = default;
    // Allocates storage for `shape` (which must be known).
    Tensor(DataType dtype, const Shape& shape) { resize(dtype, shape); }
    template <element_type T> static Tensor scalar(T v) {
        Tensor t(dtype_of<T>, Shape{});
        *t.data<T>() = v;
        return t;
    }

    Tensor(const Tensor& o) { copy_from(o); }
    Tensor& operator=(const Tensor& o) {
        if (this != &o) copy_from(o);
        return *this;
    }
    Tensor(Tensor&& o) noexcept { swap(o); }
    Tensor& operator=(Tensor&& o) noexcept {
        Tensor tmp(std::move(o));
        swap(tmp);
        return *this;
    }
    void swap(Tensor& o) noexcept {
        std::swap(dtype_, o.dtype_);
        std::swap(shape_, o.shape_);
        std::swap(buf_, o.buf_);
        std::swap(data_, o.data_);
        std::swap(initialized_, o.initialized_);
    }

    // A tensor that reads `data` without owning it; the caller keeps it alive.
    static Tensor borrow(DataType dtype, const Shape& shape, const void* data) {
        Tensor t;
        t.dtype_ = dtype;
        t.shape_ = shape;
        t.data_ = const_cast<void*>(data);
        t.initialized_ = true;
        return t;
    }

    DataType dtype() const noexcept { return dtype_; }
    const Shape& shape() const noexcept { return shape_; }
    int rank() const noexcept { return shape_.rank(); }
    std::int64_t numel() const noexcept { return initialized_ ? shape_.numel() : 0; }
    std::size_t bytes() const noexcept { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
    // True once the tensor holds a value (has been given a shape and storage).
    bool initialized() const noexcept { return initialized_; }
    // Bytes of storage this tensor owns or shares (0 when borrowed or empty).
    std::size_t capacity() const noexcept { return buf_ ? buf_->bytes() : 0; }
    const std::shared_ptr<Buffer>& buffer() const noexcept { return buf_; }
    // Where the storage is: device memory only when bound to a device
    // buffer by a session; everything else (borrowed, resized) is host.
    Place place() const noexcept { return buf_ ? buf_->place() : Place::host; }

    // Gives the tensor `shape` in host memory, reusing its storage when
    // large enough, owned and on the host; this is the lazy allocation point.
    void resize(DataType dtype, const Shape& shape) {
        if (!shape.known())
            throw shape_error("dlgraph.shape.unknown", "cannot allocate a tensor of unknown shape " + to_string(shape));
        check_shape_size(shape, dtype_size(dtype), max_shape_bytes, "tensor");
        std::size_t need = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
        // A tensor viewing part of a shared buffer (bound at an offset) gets storage of its own.
        if (!buf_ || buf_->bytes() < need || data_ != buf_->data() || buf_->place() != Place::host) {
            buf_ = std::make_shared<Buffer>(need);
        }
        data_ = buf_->data();
        dtype_ = dtype;
        shape_ = shape;
        initialized_ = true;
    }
    // Views `buffer` (shared with other tensors of a memory plan) from byte
    // `offset` on as `shape`.
    void bind(std::shared_ptr<Buffer> buffer, DataType dtype, const Shape& shape, std::size_t offset = 0) {
        buf_ = std::move(buffer);
        data_ = buf_ ? static_cast<char*>(buf_->data()) + offset : nullptr;
        dtype_ = dtype;
        shape_ = shape;
        initialized_ = true;
    }
    // Same storage, new shape with the same element count.
    void reshape(const Shape& shape) { shape_ = shape; }
    void reset() noexcept { *this = Tensor(); }

    // Deep copy into host memory (a copy of a device tensor comes to the
    // host), reusing this tensor's storage when it fits.
    void copy_from(const Tensor& o) {
        if (!o.initialized_) {
            reset();
            return;
        }
        if (buf_ && buf_.use_count() > 1) buf_.reset();  // never write through shared storage
        resize(o.dtype_, o.shape_);
        if (!o.bytes()) return;
        if (o.place() == Place::device) o.buf_->owner()->read(data_, o.data_, o.bytes());
        else std::memcpy(data_, o.data_, o.bytes());
    }

    void* raw() noexcept { return data_; }
    const void* raw() const noexcept { return data_; }

    template <element_type T> T* data() {
        check_dtype<T>();
        return static_cast<T*>(data_);
    }
    template <element_type T> const T* data() const {
        check_dtype<T>();
        return static_cast<const T*>(data_);
    }
    // The elements, read or written on the host (a device tensor must be
    // copied first: copy_from).
    template <element_type T> std::span<const T> values() const {
        check_host();
        return {data<T>(), static_cast<std::size_t>(numel())};
    }
    template <element_type T> std::span<T> values() {
        check_host();
        return {data<T>(), static_cast<std::size_t>(numel())};
    }

    // The value of a one-element tensor (read from the device if it is there).
    template <element_type T> T item() const {
        if (numel() != 1)
            throw shape_error("dlgraph.shape.item", "item() needs a one-element tensor, this one is " + to_string(shape_));
        if (place() == Place::host) return *data<T>();
        T v;
        buf_->owner()->read(&v, data<T>(), sizeof(T));
        return v;
    }

    void check_host() const {
        if (place() != Place::host)
            throw value_error("dlgraph.value.place",
                              "the tensor is in device memory; copy it to the host first (Tensor::copy_from)");
    }

private:
    template <class T> void check_dtype() const {
        if (!initialized_)
            throw value_error("dlgraph.value.unset", "the tensor holds no value");
        if (dtype_of<T> != dtype_)
            throw type_error("dlgraph.type.mismatch",
                             "tensor is " + to_string(dtype_) + " but was read as " + to_string(dtype_of<T>));
    }

    DataType dtype_ = DataType::FP32;
    Shape shape_;
    std::shared_ptr<Buffer> buf_;
    void* data_ = nullptr;
    bool initialized_ = false;
};

// Contiguous row-major strides, in elements.
inline void row_major_strides(const Shape& s, std::int64_t* strides) {
    std::int64_t st = 1;
    for (int i = s.rank() - 1; i >= 0; --i) {
        strides[i] = st;
        st *= s[i];
    }
}

}  // namespace dlgraph
