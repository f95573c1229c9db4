/**
 * @file dma.hpp
 * @brief hwstub's DMA engine: moves bytes between the offload engine's buffers and a consumer's registered memory.
 *
 * A hardware RNIC reaches host memory over the bus; the emulated one reaches the consumer's address space with
 * process_vm_readv/process_vm_writev (the kAL has pinned and accounted those pages when the consumer registered
 * them), or with a plain copy when the consumer lives in the engine's own process (the embedded kAL, consumers
 * hosted in krdmad). Every transfer into another process is checked by the kernel: a range the target does not map
 * (a consumer that unmapped a region behind the kAL's back, or died) is a failed transfer, never a fault in the
 * engine. A consumer in the engine's own process is trusted code whose ranges the kAL pinned at registration.
 */
#ifndef HWSTUB_KVP_DMA_HPP
#define HWSTUB_KVP_DMA_HPP

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace hwstub {

/** @brief Most pieces one transfer gathers or scatters (a WQE's SGEs, split at most once each). */
inline constexpr size_t kMaxDmaPieces = 16;

/** @brief A range in the target's address space. */
struct DmaRange {
    uint64_t addr = 0; /**< Address in the target. */
    size_t len = 0;    /**< Bytes. */
};

/** @brief The DMA channel to one consumer process. Cheap to copy; no state between transfers. */
class DmaChannel {
public:
    /** @brief A channel to the process @p pid; the engine's own pid makes transfers plain copies. */
    explicit DmaChannel(pid_t pid) noexcept;
    DmaChannel() = default;

    /**
     * @brief Gathers @p count ranges of the target (in order) into @p dst. True when every byte moved; false with
     *        errno set (EFAULT: a range the target does not map; ESRCH: the target is gone).
     */
    [[nodiscard]] bool read(const DmaRange *ranges, size_t count, uint8_t *dst) const noexcept;
    /**
     * @brief Scatters @p src over @p count ranges of the target, in order. Same results as read(). The last byte
     *        of the transfer becomes visible to the target after every other byte of it (a plain copy, a store
     *        fence, then that byte; into another process, a remote piece of its own in the same
     *        process_vm_writev): a consumer polling the last byte of a buffer for an RDMA Write finds the whole
     *        segment, and the engine writes a message's last segment last.
     */
    [[nodiscard]] bool write(const DmaRange *ranges, size_t count, const uint8_t *src) const noexcept;
    /** @brief One range each way. */
    [[nodiscard]] bool read(uint64_t addr, size_t len, uint8_t *dst) const noexcept {
        const DmaRange r{addr, len};
        return read(&r, 1, dst);
    }
    /** @brief One range each way. */
    [[nodiscard]] bool write(uint64_t addr, size_t len, const uint8_t *src) const noexcept {
        const DmaRange r{addr, len};
        return write(&r, 1, src);
    }
    /** @brief True when the target is the engine's own process (plain copies). */
    [[nodiscard]] bool local() const noexcept { return local_; }
    /** @brief The target's pid. */
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }

private:
    bool transfer(const DmaRange *ranges, size_t count, uint8_t *buf, bool to_target) const noexcept;

    pid_t pid_ = 0;
    bool local_ = true;
};

}  // namespace hwstub

#endif  // HWSTUB_KVP_DMA_HPP
