/**
 * @file context.hpp
 * @brief The kAL's state for one device connection (or hosted consumer): who it is, its accounts and pins, and the
 *        table of what it created. System call management keeps one per client; memory management's upcalls reach
 *        it as the host_ctx a kVP was given at Open RNIC.
 */
#ifndef KAL_MEMORY_CONTEXT_HPP
#define KAL_MEMORY_CONTEXT_HPP

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "accounts.hpp"
#include "krdma/abi.h"
#include "pin_map.hpp"
#include "resource_table.hpp"
#include "server.hpp"

namespace kal {

/**
 * @brief Appends @p op to @p ops, folded into the last instruction when that one does the same to a range that meets
 *        or overlaps @p op's: every page of both is then in the same state, so one system call in the owner does what
 *        two would (a QP's two rings, a region beside one just released).
 */
inline void add_pin_instruction(std::vector<krdma_pin_op> &ops, const krdma_pin_op &op) {
    if (!ops.empty()) {
        krdma_pin_op &last = ops.back();
        if (last.op == op.op && op.addr <= last.addr + last.length && last.addr <= op.addr + op.length) {
            const uint64_t end = std::max(last.addr + last.length, op.addr + op.length);
            last.addr = std::min(last.addr, op.addr);
            last.length = end - last.addr;
            return;
        }
    }
    ops.push_back(op);
}

/** @brief The kAL's state for one device connection. */
struct Context {
    /**
     * @brief A context for @p who with @p quotas, pinning into @p process_account (the account of @p who's process,
     *        shared by all its connections) and counting refusals in @p all.
     */
    Context(const Peer &who, const Quotas &quotas, Accounts &all, std::shared_ptr<ProcessAccount> process_account)
        : peer(who), accounts(&all), account(std::move(process_account)), pins(account->pins), table(quotas, account->objects) {}
    Peer peer;                               /**< Who the connection is. */
    Accounts *accounts;                      /**< Every process's and user's account. */
    std::shared_ptr<ProcessAccount> account; /**< The account of the connection's process. */
    PinMap &pins;                            /**< Its pins (before the table: the table's objects unpin into it). */
    std::vector<krdma_pin_op> pin_ops;       /**< Lock/unlock instructions of the call being served, in order. */
    /** @brief Adds @p op to pin_ops (add_pin_instruction()). */
    void instruct(const krdma_pin_op &op) { add_pin_instruction(pin_ops, op); }
    std::string pin_refusal;                 /**< Why a pin of the call being served was refused, or empty. */
    ResourceTable table;                     /**< Everything this connection created. */
};

}  // namespace kal

#endif  // KAL_MEMORY_CONTEXT_HPP
