/**
 * @file page_buffer.hpp
 * @brief A page-aligned, zeroed buffer: the memory both sides of it_perf move bytes from and into.
 */
#ifndef IT_PERF_PAGE_BUFFER_HPP
#define IT_PERF_PAGE_BUFFER_HPP

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace it_perf {

/**
 * @brief @p size bytes of zeroed memory starting on a page. The RDMA side registers such memory; the TCP baseline
 *        sends from and reads into the same kind, so neither meets a copy alignment the other does not (std::vector's
 *        large allocations start 16 bytes into a page, and on some CPUs the kernel's copy into memory 1 to 31 bytes
 *        past the source's offset in its page is many times slower).
 */
class PageBuffer {
public:
    PageBuffer() = default;
    /** @brief @p bytes of zeroed memory aligned to 4096; empty on failure. */
    static PageBuffer allocate(size_t bytes) {
        PageBuffer b;
        void *p = nullptr;
        if (::posix_memalign(&p, 4096, bytes == 0 ? 1 : bytes) != 0) return b;
        std::memset(p, 0, bytes);
        b.p_.reset(static_cast<uint8_t *>(p));
        b.size_ = bytes;
        return b;
    }
    /** @brief The first byte (null when empty). */
    [[nodiscard]] uint8_t *data() const { return p_.get(); }
    /** @brief Bytes held. */
    [[nodiscard]] size_t size() const { return size_; }

private:
    struct Free {
        void operator()(uint8_t *p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> p_;
    size_t size_ = 0;
};

}  // namespace it_perf

#endif  // IT_PERF_PAGE_BUFFER_HPP
