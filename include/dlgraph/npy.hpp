// NumPy .npy files: read format versions 1.0, 2.0 and 3.0; write 1.0 (2.0
// when the header would not fit). C order only; little-endian dtypes
// '<f2' FP16, '<f4' FP32, '<f8' FP64, '<i2' INT16, '<i4' INT32, '<i8' INT64
// and '|b1' BOOL ('=' native order is read as little-endian, '>' is
// refused). A 0-d array (shape ()) is a rank-0 Tensor; empty arrays (a 0
// dim) round-trip. Every error is an io_error whose message names the file,
// and a file whose data is shorter or longer than its header says is an
// error, never a short or over-long read. Writes are atomic: PATH.tmp is
// written and then renamed over PATH.
//
// Also here: the file-name escaping that tools use to store one variable per
// file (escape_file_name / unescape_file_name).
#pragma once

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "dlgraph/config.hpp"
#include "dlgraph/tensor.hpp"

namespace dlgraph {

// ---- file names ------------------------------------------------------------

// A variable name as a file name: bytes outside [A-Za-z0-9._-] become "%XX"
// (two uppercase hex digits per UTF-8 byte), so "fc_0.w@GRAD" becomes
// "fc_0.w%40GRAD". Distinct names give distinct file names.
DLGRAPH_INLINE std::string escape_file_name(std::string_view name);

// The inverse of escape_file_name ("%xx" in either case is accepted); a '%'
// without two hex digits after it is an io_error (dlgraph.io.file_name).
DLGRAPH_INLINE std::string unescape_file_name(std::string_view file);

// ---- .npy ------------------------------------------------------------------

namespace detail {

inline constexpr char npy_magic[] = "\x93NUMPY";
inline constexpr std::size_t npy_magic_len = 6;

// What a .npy header says.
struct npy_header {
    DataType dtype = DataType::FP32;
    Shape shape;
    std::size_t header_bytes = 0;  // magic, version, length and dict: where the data starts
    std::size_t data_bytes = 0;    // what the shape and dtype need
};

[[noreturn]] inline void npy_fail(const std::string& id, const std::string& what, const std::string& msg) {
    throw io_error(id, "'" + what + "': " + msg);
}

DLGRAPH_INLINE std::string npy_descr(DataType t);

DLGRAPH_INLINE DataType npy_dtype_from_descr(const std::string& d, const std::string& what);

// A cursor over the header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class npy_dict_parser {
public:
    npy_dict_parser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

    void parse(std::string& descr, bool& fortran, Shape& shape) {
        bool have_descr = false, have_fortran = false, have_shape = false;
        ws();
        expect('{');
        for (;;) {
            ws();
            if (peek() == '}') {
                ++i_;
                break;
            }
            std::string key = string_literal();
            ws();
            expect(':');
            ws();
            if (key == "descr") {
                if (have_descr) fail("key 'descr' appears twice");
                if (peek() != '\'' && peek() != '"')
                    npy_fail("dlgraph.io.npy_dtype", what_,
                             "structured dtypes are not supported (descr must be a type string such as '<f4')");
                descr = string_literal();
                have_descr = true;
            } else if (key == "fortran_order") {
                if (have_fortran) fail("key 'fortran_order' appears twice");
                fortran = boolean();
                have_fortran = true;
            } else if (key == "shape") {
                if (have_shape) fail("key 'shape' appears twice");
                shape = tuple();
                have_shape = true;
            } else {
                fail("unexpected key '" + key + "'");
            }
            ws();
            if (peek() == ',') {
                ++i_;
                continue;
            }
            ws();
            expect('}');
            break;
        }
        ws();
        if (i_ != s_.size()) fail("unexpected text after the dictionary");
        if (!have_descr) fail("the header has no 'descr'");
        if (!have_fortran) fail("the header has no 'fortran_order'");
        if (!have_shape) fail("the header has no 'shape'");
    }

private:
    [[noreturn]] void fail(const std::string& msg) const {
        npy_fail("dlgraph.io.npy_header", what_, "malformed header: " + msg + " in \"" + printable() + "\"");
    }
    std::string printable() const {
        std::string out;
        for (char c : s_.substr(0, 200)) {
            auto u = static_cast<unsigned char>(c);
            out += (u >= 0x20 && u < 0x7f && c != '"') ? c : '?';
        }
        if (s_.size() > 200) out += "...";
        return out;
    }
    char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
    void ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    }
    void expect(char c) {
        if (peek() != c) fail(std::string("expected '") + c + "' at offset " + std::to_string(i_));
        ++i_;
    }
    std::string string_literal() {
        char q = peek();
        if (q != '\'' && q != '"') fail("expected a quoted string at offset " + std::to_string(i_));
        ++i_;
        std::string out;
        while (i_ < s_.size() && s_[i_] != q) {
            if (s_[i_] == '\\') fail("escapes in strings are not supported");
            out += s_[i_++];
        }
        expect(q);
        return out;
    }
    bool word(std::string_view w) {
        if (s_.substr(i_, w.size()) == w) {
            i_ += w.size();
            return true;
        }
        return false;
    }
    bool boolean() {
        if (word("True")) return true;
        if (word("False")) return false;
        fail("fortran_order must be True or False");
    }
    Shape tuple() {
        expect('(');
        std::vector<std::int64_t> dims;
        for (;;) {
            ws();
            if (peek() == ')') {
                ++i_;
                break;
            }
            if (peek() < '0' || peek() > '9') fail("expected a dimension at offset " + std::to_string(i_));
            std::uint64_t v = 0;
            while (peek() >= '0' && peek() <= '9') {
                v = v * 10 + static_cast<std::uint64_t>(peek() - '0');
                if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) fail("dimension too large");
                ++i_;
            }
            if (peek() == 'L') ++i_;  // Python 2 long literals: (3L, 4L)
            dims.push_back(static_cast<std::int64_t>(v));
            ws();
            if (peek() == ',') {
                ++i_;
                continue;
            }
            ws();
            expect(')');
            break;
        }
        if (dims.size() > static_cast<std::size_t>(max_rank))
            npy_fail("dlgraph.io.npy_header", what_,
                     "rank " + std::to_string(dims.size()) + " is not supported (at most " + std::to_string(max_rank) +
                         ")");
        return Shape(dims);
    }

    std::string_view s_;
    std::size_t i_ = 0;
    const std::string& what_;
};

DLGRAPH_INLINE std::uint32_t read_le(const unsigned char* p, int n);

// How long the header is, from the first 12 bytes (or fewer, if that is all
// there is): throws on a bad magic, an unknown version or a short prefix.
// Returns the total header size (where the data starts); sets `major`.
DLGRAPH_INLINE std::size_t npy_preamble(std::string_view prefix, const std::string& what, int& major);

// Parses a complete header (`head` holds at least header_bytes bytes).
DLGRAPH_INLINE npy_header npy_parse_header(std::string_view head, const std::string& what);

DLGRAPH_INLINE void npy_check_size(const npy_header& h, std::uint64_t total, const std::string& what);

// Little-endian file data <-> host order, in place.
DLGRAPH_INLINE void npy_swap_if_big_endian(void* data, std::size_t count, std::size_t size);

// Makes freshly read bytes valid for the tensor's dtype (bool must be 0 or 1).
DLGRAPH_INLINE void npy_fix_data(Tensor& t);

DLGRAPH_INLINE std::string npy_header_text(const Tensor& t);

DLGRAPH_INLINE void check_writable(const Tensor& t, const std::string& what);

// Writes `bytes` (in pieces) to PATH.tmp, then renames it to PATH. On any
// failure the temporary file is removed and PATH is left as it was.
DLGRAPH_INLINE void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces);
DLGRAPH_INLINE void write_file_atomic(const std::string& path, std::initializer_list<std::string_view> pieces);

DLGRAPH_INLINE std::string_view tensor_bytes(const Tensor& t);

}  // namespace detail

// Parses .npy bytes; `what` names the source in messages (a file name).
DLGRAPH_INLINE Tensor parse_npy(std::string_view bytes, const std::string& what);

// The .npy bytes of `t` (format 1.0, or 2.0 for a very long header).
DLGRAPH_INLINE std::string to_npy_bytes(const Tensor& t);

// Reads a .npy file. The data goes straight into the tensor (no second copy).
DLGRAPH_INLINE Tensor read_npy(const std::string& path);

// Writes `t` to `path` atomically (PATH.tmp, then a rename).
DLGRAPH_INLINE void write_npy(const std::string& path, const Tensor& t);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph {

DLGRAPH_INLINE std::string escape_file_name(std::string_view name) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(name.size());
    for (char ch : name) {
        auto c = static_cast<unsigned char>(ch);
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                     c == '_' || c == '-';
        if (plain) {
            out += ch;
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

DLGRAPH_INLINE std::string unescape_file_name(std::string_view file) {
    auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    std::string out;
    out.reserve(file.size());
    for (std::size_t i = 0; i < file.size(); ++i) {
        if (file[i] != '%') {
            out += file[i];
            continue;
        }
        int hi = i + 1 < file.size() ? digit(file[i + 1]) : -1;
        int lo = i + 2 < file.size() ? digit(file[i + 2]) : -1;
        if (hi < 0 || lo < 0)
            throw io_error("dlgraph.io.file_name", "'" + std::string(file) + "': '%' at position " + std::to_string(i) +
                                                       " is not followed by two hex digits");
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

}  // namespace dlgraph

namespace dlgraph::detail {

DLGRAPH_INLINE std::string npy_descr(DataType t) {
    switch (t) {
        case DataType::BOOL: return "|b1";
        case DataType::INT16: return "<i2";
        case DataType::INT32: return "<i4";
        case DataType::INT64: return "<i8";
        case DataType::FP16: return "<f2";
        case DataType::FP32: return "<f4";
        case DataType::FP64: return "<f8";
    }
    return "?";
}

DLGRAPH_INLINE DataType npy_dtype_from_descr(const std::string& d, const std::string& what) {
    static constexpr const char* supported = "'<f2', '<f4', '<f8', '<i2', '<i4', '<i8', '|b1'";
    if (d.size() == 3) {
        const char order = d[0];
        const std::string_view code(d.data() + 1, 2);
        if (order == '>' && code != "b1" && code != "i1" && code != "u1")
            npy_fail("dlgraph.io.npy_dtype", what,
                     "dtype '" + d + "' is big-endian; dlgraph reads little-endian data only (save it from NumPy as "
                     "arr.astype(arr.dtype.newbyteorder('<')))");
        if (order == '<' || order == '=' || order == '|' || order == '>') {
            // One-byte types have no byte order: NumPy writes '|', others are harmless.
            if (code == "b1") return DataType::BOOL;
            if (order != '|') {
                if (code == "f2") return DataType::FP16;
                if (code == "f4") return DataType::FP32;
                if (code == "f8") return DataType::FP64;
                if (code == "i2") return DataType::INT16;
                if (code == "i4") return DataType::INT32;
                if (code == "i8") return DataType::INT64;
            }
        }
    }
    npy_fail("dlgraph.io.npy_dtype", what,
             "dtype '" + d + "' is not supported (supported: " + supported + ", little-endian, C order)");
}

DLGRAPH_INLINE std::uint32_t read_le(const unsigned char* p, int n) {
    std::uint32_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
    return v;
}

DLGRAPH_INLINE std::size_t npy_preamble(std::string_view prefix, const std::string& what, int& major) {
    if (prefix.size() < npy_magic_len || std::memcmp(prefix.data(), npy_magic, npy_magic_len) != 0) {
        if (prefix.size() < npy_magic_len && std::memcmp(prefix.data(), npy_magic, prefix.size()) == 0)
            npy_fail("dlgraph.io.npy_truncated", what,
                     "file is truncated: " + std::to_string(prefix.size()) + " bytes, shorter than the .npy magic");
        npy_fail("dlgraph.io.npy_magic", what, "not a .npy file (it does not start with \"\\x93NUMPY\")");
    }
    if (prefix.size() < npy_magic_len + 2)
        npy_fail("dlgraph.io.npy_truncated", what, "file is truncated inside the .npy version");
    auto* u = reinterpret_cast<const unsigned char*>(prefix.data());
    major = u[6];
    const int minor = u[7];
    if (!((major == 1 || major == 2 || major == 3) && minor == 0))
        npy_fail("dlgraph.io.npy_version", what,
                 ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                     " is not supported (dlgraph reads 1.0, 2.0 and 3.0)");
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    if (prefix.size() < 8 + len_bytes)
        npy_fail("dlgraph.io.npy_truncated", what, "file is truncated inside the .npy header length");
    return 8 + len_bytes + read_le(u + 8, static_cast<int>(len_bytes));
}

DLGRAPH_INLINE npy_header npy_parse_header(std::string_view head, const std::string& what) {
    int major = 0;
    npy_header h;
    h.header_bytes = npy_preamble(head, what, major);
    const std::size_t dict_at = major == 1 ? 10 : 12;
    if (head.size() < h.header_bytes)
        npy_fail("dlgraph.io.npy_truncated", what,
                 "file is truncated: the header needs " + std::to_string(h.header_bytes) + " bytes, the file has " +
                     std::to_string(head.size()));
    std::string_view dict = head.substr(dict_at, h.header_bytes - dict_at);
    if (dict.empty() || dict.back() != '\n')
        npy_fail("dlgraph.io.npy_header", what, "malformed header: it does not end with a newline");
    for (char c : dict)
        if (major < 3 && static_cast<unsigned char>(c) >= 0x80)
            npy_fail("dlgraph.io.npy_header", what, "malformed header: it is not ASCII");
    std::string descr;
    bool fortran = false;
    npy_dict_parser(dict, what).parse(descr, fortran, h.shape);
    h.dtype = npy_dtype_from_descr(descr, what);
    if (fortran)
        npy_fail("dlgraph.io.npy_fortran", what,
                 "the array is stored in Fortran order; dlgraph reads C order only (save "
                 "np.ascontiguousarray(arr) instead)");
    // Element count and bytes, without overflow. Zero dims count as one in
    // the bound, so that no partial product of the dims (which ops compute)
    // can overflow either: (2^32, 2^32, 0) is refused like check_shape_size
    // refuses it.
    std::uint64_t n = 1;
    bool zero = false;
    const std::uint64_t limit = max_shape_bytes / dtype_size(h.dtype);
    for (auto d : h.shape) {
        zero = zero || d == 0;
        if (d == 0) continue;
        if (static_cast<std::uint64_t>(d) > limit / n)
            npy_fail("dlgraph.io.npy_header", what, "shape " + to_string(h.shape) + " is too large");
        n *= static_cast<std::uint64_t>(d);
    }
    const std::uint64_t bytes = zero ? 0 : n * dtype_size(h.dtype);
    h.data_bytes = static_cast<std::size_t>(bytes);
    return h;
}

DLGRAPH_INLINE void npy_check_size(const npy_header& h, std::uint64_t total, const std::string& what) {
    const std::uint64_t want = static_cast<std::uint64_t>(h.header_bytes) + h.data_bytes;
    if (total < want)
        npy_fail("dlgraph.io.npy_truncated", what,
                 "file is truncated: shape " + to_string(h.shape) + " of " + to_string(h.dtype) + " needs " +
                     std::to_string(h.data_bytes) + " data bytes, the file has " +
                     std::to_string(total - h.header_bytes));
    if (total > want)
        npy_fail("dlgraph.io.npy_trailing", what,
                 std::to_string(total - want) + " bytes follow the data that shape " + to_string(h.shape) + " of " +
                     to_string(h.dtype) + " needs (" + std::to_string(h.data_bytes) + " bytes)");
}

DLGRAPH_INLINE void npy_swap_if_big_endian(void* data, std::size_t count, std::size_t size) {
    if constexpr (std::endian::native == std::endian::big) {
        auto* p = static_cast<unsigned char*>(data);
        for (std::size_t i = 0; i < count; ++i, p += size)
            for (std::size_t a = 0, b = size - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
    } else {
        (void)data, (void)count, (void)size;
    }
}

DLGRAPH_INLINE void npy_fix_data(Tensor& t) {
    if (t.dtype() == DataType::BOOL) {
        auto* p = static_cast<unsigned char*>(t.raw());
        for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] != 0;
    } else {
        npy_swap_if_big_endian(t.raw(), static_cast<std::size_t>(t.numel()), dtype_size(t.dtype()));
    }
}

DLGRAPH_INLINE std::string npy_header_text(const Tensor& t) {
    std::string shape = "(";
    for (int i = 0; i < t.rank(); ++i) {
        if (i) shape += ", ";
        shape += std::to_string(t.shape()[i]);
    }
    if (t.rank() == 1) shape += ",";
    shape += ")";
    std::string dict = "{'descr': '" + npy_descr(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
    // Version 1.0 when the padded header fits in 16 bits; NumPy pads to 64.
    for (int major = 1; major <= 2; ++major) {
        const std::size_t pre = major == 1 ? 10 : 12;
        std::size_t total = pre + dict.size() + 1;
        total = (total + 63) / 64 * 64;
        const std::size_t hlen = total - pre;
        if (major == 1 && hlen > 0xffff) continue;
        std::string out(npy_magic, npy_magic_len);
        out += static_cast<char>(major);
        out += '\0';
        for (std::size_t k = 0; k < pre - 8; ++k) out += static_cast<char>((hlen >> (8 * k)) & 0xff);
        out += dict;
        out.append(hlen - dict.size() - 1, ' ');
        out += '\n';
        return out;
    }
    return {};  // unreachable: version 2.0 takes 4 GiB headers
}

DLGRAPH_INLINE void check_writable(const Tensor& t, const std::string& what) {
    if (!t.initialized())
        throw value_error("dlgraph.value.unset", "cannot write '" + what + "': the tensor holds no value");
}

DLGRAPH_INLINE void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces) {
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f)
        throw io_error("dlgraph.io.open", "cannot open '" + tmp + "' for writing: " + std::strerror(errno));
    bool ok = true;
    for (auto p : pieces)
        if (!p.empty() && std::fwrite(p.data(), 1, p.size(), f) != p.size()) ok = false;
    ok = std::fflush(f) == 0 && ok;
#if defined(__unix__) || defined(__APPLE__)
    ok = ok && ::fsync(fileno(f)) == 0;
#endif
    const int err = errno;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) {
        std::remove(tmp.c_str());
        throw io_error("dlgraph.io.write", "cannot write '" + path + "': " + std::strerror(err));
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw io_error("dlgraph.io.write", "cannot write '" + path + "': rename from '" + tmp +
                                               "' failed: " + ec.message());
    }
}

DLGRAPH_INLINE void write_file_atomic(const std::string& path, std::initializer_list<std::string_view> pieces) {
    write_file_atomic(path, std::span<const std::string_view>(pieces.begin(), pieces.size()));
}

DLGRAPH_INLINE std::string_view tensor_bytes(const Tensor& t) {
    if (t.bytes() == 0) return {};
    return {static_cast<const char*>(t.raw()), t.bytes()};
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE Tensor parse_npy(std::string_view bytes, const std::string& what) {
    detail::npy_header h = detail::npy_parse_header(bytes, what);
    detail::npy_check_size(h, bytes.size(), what);
    Tensor t(h.dtype, h.shape);
    if (h.data_bytes) std::memcpy(t.raw(), bytes.data() + h.header_bytes, h.data_bytes);
    detail::npy_fix_data(t);
    return t;
}

DLGRAPH_INLINE std::string to_npy_bytes(const Tensor& t) {
    detail::check_writable(t, "<memory>");
    std::string out = detail::npy_header_text(t);
    const std::size_t at = out.size();
    out.append(detail::tensor_bytes(t));
    if constexpr (std::endian::native == std::endian::big)
        detail::npy_swap_if_big_endian(out.data() + at, static_cast<std::size_t>(t.numel()), dtype_size(t.dtype()));
    return out;
}

DLGRAPH_INLINE Tensor read_npy(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw io_error("dlgraph.io.open", "cannot open '" + path + "' for reading: it is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw io_error("dlgraph.io.open", "cannot open '" + path + "' for reading");
    in.seekg(0, std::ios::end);
    const auto end = in.tellg();
    in.seekg(0, std::ios::beg);
    if (end < 0 || !in)
        throw io_error("dlgraph.io.read", "cannot read '" + path + "': its size is unknown (not a regular file?)");
    const auto total = static_cast<std::uint64_t>(end);
    auto read = [&](char* dst, std::size_t n) {
        if (n && !in.read(dst, static_cast<std::streamsize>(n)))
            throw io_error("dlgraph.io.read", "cannot read '" + path + "' (it changed while being read?)");
    };
    // The fixed part first, then the whole header.
    std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(total, 12)), '\0');
    read(head.data(), head.size());
    int major = 0;
    const std::size_t header_bytes = detail::npy_preamble(head, path, major);
    if (total < header_bytes)
        detail::npy_fail("dlgraph.io.npy_truncated", path,
                         "file is truncated: the header needs " + std::to_string(header_bytes) +
                             " bytes, the file has " + std::to_string(total));
    const std::size_t have = head.size();
    head.resize(header_bytes);
    if (header_bytes > have) read(head.data() + have, header_bytes - have);
    detail::npy_header h = detail::npy_parse_header(head, path);
    detail::npy_check_size(h, total, path);
    if (have > header_bytes) in.seekg(static_cast<std::streamoff>(header_bytes), std::ios::beg);
    Tensor t(h.dtype, h.shape);
    read(static_cast<char*>(t.raw()), h.data_bytes);
    detail::npy_fix_data(t);
    return t;
}

DLGRAPH_INLINE void write_npy(const std::string& path, const Tensor& t) {
    detail::check_writable(t, path);
    const std::string header = detail::npy_header_text(t);
    if constexpr (std::endian::native == std::endian::big) {
        std::string data(detail::tensor_bytes(t));
        detail::npy_swap_if_big_endian(data.data(), static_cast<std::size_t>(t.numel()), dtype_size(t.dtype()));
        detail::write_file_atomic(path, {header, data});
    } else {
        detail::write_file_atomic(path, {header, detail::tensor_bytes(t)});
    }
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
