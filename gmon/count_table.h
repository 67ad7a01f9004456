// An open-addressing hash table from a 64-bit key to a 64-bit count: the aggregate's core.
// Insert-or-add is the only write; there is no erase. Deliberately small and branch-light,
// because every decoded record goes through it.
#pragma once

#include <cstdint>
#include <vector>

namespace rackprof::gmon {

class CountTable {
  public:
    CountTable() { rehash(64); }

    void add(std::uint64_t key, std::uint64_t n) {
        if (key == kEmpty) {
            empty_key_count_ += n;
            return;
        }
        std::size_t i = slot_of(key);
        while (true) {
            Slot& s = slots_[i];
            if (s.key == key) {
                s.count += n;
                return;
            }
            if (s.key == kEmpty) {
                s.key = key;
                s.count = n;
                if (++size_ * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
                return;
            }
            i = (i + 1) & mask_;
        }
    }

    std::uint64_t get(std::uint64_t key) const {
        if (key == kEmpty) return empty_key_count_;
        for (std::size_t i = slot_of(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return slots_[i].count;
            if (slots_[i].key == kEmpty) return 0;
        }
    }

    // Room for `keys` distinct keys without growing (a sum whose size is known up front).
    void reserve(std::size_t keys) {
        std::size_t capacity = slots_.size();
        while (keys * 4 > capacity * 3) capacity *= 2;
        if (capacity != slots_.size()) rehash(capacity);
    }

    // Number of distinct keys.
    std::size_t size() const { return size_ + (empty_key_count_ ? 1 : 0); }

    template <typename F>
    void for_each(F&& f) const {
        for (const Slot& s : slots_) {
            if (s.key != kEmpty) f(s.key, s.count);
        }
        if (empty_key_count_) f(kEmpty, empty_key_count_);
    }

    // The low bits index the table, and a product's low bits depend only on its factors' low
    // bits: both halves of a key (an arc's caller and callee) are folded down first, and the
    // product's high half back, or every arc into one callee would share a slot.
    static std::size_t hash(std::uint64_t key) {
        const std::uint64_t h = (key ^ (key >> 31)) * 0x9E3779B97F4A7C15ull;
        return static_cast<std::size_t>(h ^ (h >> 32));
    }

  private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
    struct Slot {
        std::uint64_t key = kEmpty;
        std::uint64_t count = 0;
    };

    std::size_t slot_of(std::uint64_t key) const { return hash(key) & mask_; }

    void rehash(std::size_t capacity) {
        std::vector<Slot> old;
        old.swap(slots_);
        slots_.assign(capacity, Slot{});
        mask_ = capacity - 1;
        size_ = 0;
        for (const Slot& s : old) {
            if (s.key != kEmpty) add(s.key, s.count);
        }
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    std::size_t size_ = 0;
    std::uint64_t empty_key_count_ = 0;  // the one key value that marks empty slots
};

}  // namespace rackprof::gmon
