// Runtime state: a Scope is a hierarchy of named Variables. A child finds its
// parent's variables, never the reverse; a local variable shadows a parent's;
// `find` never creates, `var` creates here. Lookups and creation are safe from
// several threads; a Variable's value is not locked (one writer at a time).
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "dlgraph/tensor.hpp"

namespace dlgraph {

// A scalar value of some dtype (kept widened: integers as int64, floats as double).
struct Scalar {
    DataType dtype = DataType::FP32;
    std::int64_t i = 0;
    double f = 0;
};
using TensorList = std::vector<Tensor>;

// A runtime variable. It holds nothing until first written (lazy allocation:
// a Tensor gets memory when it is given a known shape).
class Variable {
public:
    using value_type = std::variant<std::monostate, Tensor, Scalar, std::string, TensorList>;

    // True once it holds a value (a tensor with storage, a scalar, ...).
    bool initialized() const {
        if (auto* t = std::get_if<Tensor>(&v_)) return t->initialized();
        return !std::holds_alternative<std::monostate>(v_);
    }
    template <class T> bool is() const { return std::holds_alternative<T>(v_); }

    // The value as T; reading an empty variable or another kind is an error.
    template <class T> const T& get() const {
        if (!initialized()) throw value_error("dlgraph.value.unset", "variable '" + name_ + "' holds no value");
        if (auto* p = std::get_if<T>(&v_)) return *p;
        throw type_error("dlgraph.type.variable",
                         "variable '" + name_ + "' holds " + kind() + ", not " + kind_name<T>());
    }
    // The value as T, creating an empty T first if the variable is empty.
    // Counts as a change of the value (see generation).
    template <class T> T& get_mutable() {
        ++generation_;
        if (std::holds_alternative<std::monostate>(v_)) v_ = T{};
        if (auto* p = std::get_if<T>(&v_)) return *p;
        throw type_error("dlgraph.type.variable",
                         "variable '" + name_ + "' holds " + kind() + ", not " + kind_name<T>());
    }
    void clear() {
        ++generation_;
        v_ = std::monostate{};
    }
    // Changes with every get_mutable, clear, touch and every session run
    // that writes the variable: a session keeps what it derives from a
    // persistable (a weight packed for the matrix product) while this stays
    // the same. A value changed through a reference kept from an earlier
    // get_mutable needs a touch().
    std::uint64_t generation() const { return generation_; }
    void touch() { ++generation_; }
    const std::string& name() const { return name_; }
    std::string kind() const {
        switch (v_.index()) {
            case 0: return "nothing";
            case 1: return "a tensor";
            case 2: return "a scalar";
            case 3: return "a string";
            default: return "a tensor list";
        }
    }
    explicit Variable(std::string name) : name_(std::move(name)) {}

private:
    template <class T> static std::string kind_name() {
        if constexpr (std::is_same_v<T, Tensor>) return "a tensor";
        else if constexpr (std::is_same_v<T, Scalar>) return "a scalar";
        else if constexpr (std::is_same_v<T, std::string>) return "a string";
        else return "a tensor list";
    }
    std::string name_;
    value_type v_;
    std::uint64_t generation_ = 0;
};

// Lets the variable map be searched by string_view without a std::string.
struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class Scope {
public:
    Scope() = default;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    const Scope* parent() const { return parent_; }

    // This scope's variable `name`, or its nearest ancestor's; nullptr if none.
    Variable* find(std::string_view name) const {
        for (const Scope* s = this; s; s = s->parent_)
            if (auto* v = s->find_local(name)) return v;
        return nullptr;
    }
    Variable* find_local(std::string_view name) const {
        std::shared_lock lock(mu_);
        auto it = vars_.find(name);
        return it == vars_.end() ? nullptr : it->second.get();
    }
    // The local variable `name`, created (empty) if absent here; shadows any
    // ancestor's variable of that name.
    Variable& var(std::string_view name) {
        std::unique_lock lock(mu_);
        auto it = vars_.find(name);
        if (it == vars_.end()) it = vars_.emplace(std::string(name), std::make_unique<Variable>(std::string(name))).first;
        return *it->second;
    }
    // Removes the local variable `name`; returns whether there was one.
    bool erase(std::string_view name) {
        std::unique_lock lock(mu_);
        auto it = vars_.find(name);
        if (it == vars_.end()) return false;
        vars_.erase(it);
        return true;
    }
    std::vector<std::string> local_names() const {
        std::shared_lock lock(mu_);
        std::vector<std::string> out;
        for (auto& [k, v] : vars_) out.push_back(k);
        std::sort(out.begin(), out.end());
        return out;
    }
    std::size_t size() const {
        std::shared_lock lock(mu_);
        return vars_.size();
    }

    Scope& new_child() {
        std::unique_lock lock(mu_);
        auto& kid = kids_.emplace_back(std::make_unique<Scope>());
        kid->parent_ = this;
        return *kid;
    }
    // Drops a child (and its variables and children); the child must be ours.
    void drop_child(Scope& kid) {
        std::unique_lock lock(mu_);
        kids_.remove_if([&](const std::unique_ptr<Scope>& p) { return p.get() == &kid; });
    }
    void drop_children() {
        std::unique_lock lock(mu_);
        kids_.clear();
    }
    std::size_t child_count() const {
        std::shared_lock lock(mu_);
        return kids_.size();
    }

private:
    Scope* parent_ = nullptr;
    mutable std::shared_mutex mu_;
    std::unordered_map<std::string, std::unique_ptr<Variable>, StringHash, std::equal_to<>> vars_;
    std::list<std::unique_ptr<Scope>> kids_;
};

}  // namespace dlgraph
