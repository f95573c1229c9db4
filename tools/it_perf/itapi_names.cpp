/** @file itapi_names.cpp @brief Names of IT-API status codes, events and DTO statuses. */
#include "itapi_names.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "it_api_openrdma.h"

namespace it_tools {

std::string status_name(it_status_t status) {
    switch (status) {  // a value from the library: anything unknown gets a number
        case IT_SUCCESS: return "IT_SUCCESS";
        case IT_ERR_ABORT: return "IT_ERR_ABORT";
        case IT_ERR_ACCESS: return "IT_ERR_ACCESS";
        case IT_ERR_ADDRESS: return "IT_ERR_ADDRESS";
        case IT_ERR_AEVD_NOT_ALLOWED: return "IT_ERR_AEVD_NOT_ALLOWED";
        case IT_ERR_ASYNC_AFF_EVD_EXISTS: return "IT_ERR_ASYNC_AFF_EVD_EXISTS";
        case IT_ERR_ASYNC_UNAFF_EVD_EXISTS: return "IT_ERR_ASYNC_UNAFF_EVD_EXISTS";
        case IT_ERR_CALLBACK_EXISTS: return "IT_ERR_CALLBACK_EXISTS";
        case IT_ERR_CANNOT_RESET: return "IT_ERR_CANNOT_RESET";
        case IT_ERR_CONN_QUAL_BUSY: return "IT_ERR_CONN_QUAL_BUSY";
        case IT_ERR_EP_BUSY: return "IT_ERR_EP_BUSY";
        case IT_ERR_EP_TIMEWAIT: return "IT_ERR_EP_TIMEWAIT";
        case IT_ERR_EVD_BUSY: return "IT_ERR_EVD_BUSY";
        case IT_ERR_EVD_WAIT: return "IT_ERR_EVD_WAIT";
        case IT_ERR_EVD_QUEUE_FULL: return "IT_ERR_EVD_QUEUE_FULL";
        case IT_ERR_FAULT: return "IT_ERR_FAULT";
        case IT_ERR_HARD_HI_WATERMARK: return "IT_ERR_HARD_HI_WATERMARK";
        case IT_ERR_IA_CATASTROPHE: return "IT_ERR_IA_CATASTROPHE";
        case IT_ERR_INTERRUPT: return "IT_ERR_INTERRUPT";
        case IT_ERR_INVALID_ADDR_MODE: return "IT_ERR_INVALID_ADDR_MODE";
        case IT_ERR_INVALID_ADDRESS: return "IT_ERR_INVALID_ADDRESS";
        case IT_ERR_INVALID_AEVD: return "IT_ERR_INVALID_AEVD";
        case IT_ERR_INVALID_AH: return "IT_ERR_INVALID_AH";
        case IT_ERR_INVALID_ATIMEOUT: return "IT_ERR_INVALID_ATIMEOUT";
        case IT_ERR_INVALID_ATOMIC_OP: return "IT_ERR_INVALID_ATOMIC_OP";
        case IT_ERR_INVALID_CM_RETRY: return "IT_ERR_INVALID_CM_RETRY";
        case IT_ERR_INVALID_CN_EST_FLAGS: return "IT_ERR_INVALID_CN_EST_FLAGS";
        case IT_ERR_INVALID_CN_EST_ID: return "IT_ERR_INVALID_CN_EST_ID";
        case IT_ERR_INVALID_CONN_EVD: return "IT_ERR_INVALID_CONN_EVD";
        case IT_ERR_INVALID_CONN_QUAL: return "IT_ERR_INVALID_CONN_QUAL";
        case IT_ERR_INVALID_CONVERSION: return "IT_ERR_INVALID_CONVERSION";
        case IT_ERR_INVALID_DTO_FLAGS: return "IT_ERR_INVALID_DTO_FLAGS";
        case IT_ERR_INVALID_EP: return "IT_ERR_INVALID_EP";
        case IT_ERR_INVALID_EP_ATTR: return "IT_ERR_INVALID_EP_ATTR";
        case IT_ERR_INVALID_EP_KEY: return "IT_ERR_INVALID_EP_KEY";
        case IT_ERR_INVALID_EP_STATE: return "IT_ERR_INVALID_EP_STATE";
        case IT_ERR_INVALID_EP_TYPE: return "IT_ERR_INVALID_EP_TYPE";
        case IT_ERR_INVALID_EVD: return "IT_ERR_INVALID_EVD";
        case IT_ERR_INVALID_EVD_STATE: return "IT_ERR_INVALID_EVD_STATE";
        case IT_ERR_INVALID_EVD_TYPE: return "IT_ERR_INVALID_EVD_TYPE";
        case IT_ERR_INVALID_FLAGS: return "IT_ERR_INVALID_FLAGS";
        case IT_ERR_INVALID_HANDLE: return "IT_ERR_INVALID_HANDLE";
        case IT_ERR_INVALID_IA: return "IT_ERR_INVALID_IA";
        case IT_ERR_INVALID_IOBL: return "IT_ERR_INVALID_IOBL";
        case IT_ERR_INVALID_LENGTH: return "IT_ERR_INVALID_LENGTH";
        case IT_ERR_INVALID_LISTEN: return "IT_ERR_INVALID_LISTEN";
        case IT_ERR_INVALID_LMR: return "IT_ERR_INVALID_LMR";
        case IT_ERR_INVALID_LTIMEOUT: return "IT_ERR_INVALID_LTIMEOUT";
        case IT_ERR_INVALID_MAJOR_VERSION: return "IT_ERR_INVALID_MAJOR_VERSION";
        case IT_ERR_INVALID_MASK: return "IT_ERR_INVALID_MASK";
        case IT_ERR_INVALID_MINOR_VERSION: return "IT_ERR_INVALID_MINOR_VERSION";
        case IT_ERR_INVALID_NAME: return "IT_ERR_INVALID_NAME";
        case IT_ERR_INVALID_NETADDR: return "IT_ERR_INVALID_NETADDR";
        case IT_ERR_INVALID_NUM_SEGMENTS: return "IT_ERR_INVALID_NUM_SEGMENTS";
        case IT_ERR_INVALID_PDATA_LENGTH: return "IT_ERR_INVALID_PDATA_LENGTH";
        case IT_ERR_INVALID_PRIVS: return "IT_ERR_INVALID_PRIVS";
        case IT_ERR_INVALID_PZ: return "IT_ERR_INVALID_PZ";
        case IT_ERR_INVALID_QUEUE_SIZE: return "IT_ERR_INVALID_QUEUE_SIZE";
        case IT_ERR_INVALID_RECV_DTO: return "IT_ERR_INVALID_RECV_DTO";
        case IT_ERR_INVALID_RECV_EVD: return "IT_ERR_INVALID_RECV_EVD";
        case IT_ERR_INVALID_RECV_EVD_STATE: return "IT_ERR_INVALID_RECV_EVD_STATE";
        case IT_ERR_INVALID_REQ_EVD: return "IT_ERR_INVALID_REQ_EVD";
        case IT_ERR_INVALID_REQ_EVD_STATE: return "IT_ERR_INVALID_REQ_EVD_STATE";
        case IT_ERR_INVALID_RETRY: return "IT_ERR_INVALID_RETRY";
        case IT_ERR_INVALID_RMR: return "IT_ERR_INVALID_RMR";
        case IT_ERR_INVALID_RNR_RETRY: return "IT_ERR_INVALID_RNR_RETRY";
        case IT_ERR_INVALID_RMR_TYPE: return "IT_ERR_INVALID_RMR_TYPE";
        case IT_ERR_INVALID_RTIMEOUT: return "IT_ERR_INVALID_RTIMEOUT";
        case IT_ERR_INVALID_SOFT_EVD: return "IT_ERR_INVALID_SOFT_EVD";
        case IT_ERR_INVALID_SOURCE_PATH: return "IT_ERR_INVALID_SOURCE_PATH";
        case IT_ERR_INVALID_SPIGOT: return "IT_ERR_INVALID_SPIGOT";
        case IT_ERR_INVALID_SRQ: return "IT_ERR_INVALID_SRQ";
        case IT_ERR_INVALID_SRQ_SIZE: return "IT_ERR_INVALID_SRQ_SIZE";
        case IT_ERR_INVALID_THRESHOLD: return "IT_ERR_INVALID_THRESHOLD";
        case IT_ERR_INVALID_UD_STATUS: return "IT_ERR_INVALID_UD_STATUS";
        case IT_ERR_INVALID_UD_SVC: return "IT_ERR_INVALID_UD_SVC";
        case IT_ERR_INVALID_UD_SVC_REQ_ID: return "IT_ERR_INVALID_UD_SVC_REQ_ID";
        case IT_ERR_INVALID_WATERMARK: return "IT_ERR_INVALID_WATERMARK";
        case IT_ERR_LMR_BUSY: return "IT_ERR_LMR_BUSY";
        case IT_ERR_MISMATCH_FD: return "IT_ERR_MISMATCH_FD";
        case IT_ERR_NO_CONTEXT: return "IT_ERR_NO_CONTEXT";
        case IT_ERR_NO_PERMISSION: return "IT_ERR_NO_PERMISSION";
        case IT_ERR_OP_NOT_SUPPORTED: return "IT_ERR_OP_NOT_SUPPORTED";
        case IT_ERR_PAYLOAD_SIZE: return "IT_ERR_PAYLOAD_SIZE";
        case IT_ERR_PDATA_NOT_SUPPORTED: return "IT_ERR_PDATA_NOT_SUPPORTED";
        case IT_ERR_PRIV_OPS_UNAVAILABLE: return "IT_ERR_PRIV_OPS_UNAVAILABLE";
        case IT_ERR_PZ_BUSY: return "IT_ERR_PZ_BUSY";
        case IT_ERR_QUEUE_EMPTY: return "IT_ERR_QUEUE_EMPTY";
        case IT_ERR_RANGE: return "IT_ERR_RANGE";
        case IT_ERR_RESOURCES: return "IT_ERR_RESOURCES";
        case IT_ERR_RESOURCE_IRD: return "IT_ERR_RESOURCE_IRD";
        case IT_ERR_RESOURCE_LMR_LENGTH: return "IT_ERR_RESOURCE_LMR_LENGTH";
        case IT_ERR_RESOURCE_ORD: return "IT_ERR_RESOURCE_ORD";
        case IT_ERR_RESOURCE_QUEUE_SIZE: return "IT_ERR_RESOURCE_QUEUE_SIZE";
        case IT_ERR_RESOURCE_RECV_DTO: return "IT_ERR_RESOURCE_RECV_DTO";
        case IT_ERR_RESOURCE_REQ_DTO: return "IT_ERR_RESOURCE_REQ_DTO";
        case IT_ERR_RESOURCE_RRSEG: return "IT_ERR_RESOURCE_RRSEG";
        case IT_ERR_RESOURCE_RSEG: return "IT_ERR_RESOURCE_RSEG";
        case IT_ERR_RESOURCE_RWSEG: return "IT_ERR_RESOURCE_RWSEG";
        case IT_ERR_RESOURCE_SSEG: return "IT_ERR_RESOURCE_SSEG";
        case IT_ERR_SOFT_HI_WATERMARK: return "IT_ERR_SOFT_HI_WATERMARK";
        case IT_ERR_SRQ_BUSY: return "IT_ERR_SRQ_BUSY";
        case IT_ERR_SRQ_LOW_WATERMARK: return "IT_ERR_SRQ_LOW_WATERMARK";
        case IT_ERR_SRQ_NOT_SUPPORTED: return "IT_ERR_SRQ_NOT_SUPPORTED";
        case IT_ERR_TIMEOUT_EXPIRED: return "IT_ERR_TIMEOUT_EXPIRED";
        case IT_ERR_TOO_MANY_POSTS: return "IT_ERR_TOO_MANY_POSTS";
        case IT_ERR_WAITER_LIMIT: return "IT_ERR_WAITER_LIMIT";
        default: break;
    }
    return "it_status_t " + std::to_string(static_cast<int>(status));
}

std::string event_name(it_event_type_t event) {
    switch (event) {
        case IT_DTO_SEND_CMPL_EVENT: return "IT_DTO_SEND_CMPL_EVENT";
        case IT_DTO_RC_RECV_CMPL_EVENT: return "IT_DTO_RC_RECV_CMPL_EVENT";
        case IT_DTO_RDMA_WRITE_CMPL_EVENT: return "IT_DTO_RDMA_WRITE_CMPL_EVENT";
        case IT_DTO_RDMA_READ_CMPL_EVENT: return "IT_DTO_RDMA_READ_CMPL_EVENT";
        case IT_CM_REQ_CONN_REQUEST_EVENT: return "IT_CM_REQ_CONN_REQUEST_EVENT";
        case IT_CM_MSG_CONN_ACCEPT_ARRIVAL_EVENT: return "IT_CM_MSG_CONN_ACCEPT_ARRIVAL_EVENT";
        case IT_CM_MSG_CONN_ESTABLISHED_EVENT: return "IT_CM_MSG_CONN_ESTABLISHED_EVENT";
        case IT_CM_MSG_CONN_DISCONNECT_EVENT: return "IT_CM_MSG_CONN_DISCONNECT_EVENT";
        case IT_CM_MSG_CONN_PEER_REJECT_EVENT: return "IT_CM_MSG_CONN_PEER_REJECT_EVENT";
        case IT_CM_MSG_CONN_NONPEER_REJECT_EVENT: return "IT_CM_MSG_CONN_NONPEER_REJECT_EVENT";
        case IT_CM_MSG_CONN_BROKEN_EVENT: return "IT_CM_MSG_CONN_BROKEN_EVENT";
        case IT_ASYNC_AFF_EP_FAILURE: return "IT_ASYNC_AFF_EP_FAILURE";
        default: break;
    }
    char b[32];
    std::snprintf(b, sizeof b, "event %#x", static_cast<unsigned>(event));
    return b;
}

std::string dto_status_name(it_dto_status_t status) {
    switch (status) {
        case IT_DTO_SUCCESS: return "IT_DTO_SUCCESS";
        case IT_DTO_ERR_LOCAL_LENGTH: return "IT_DTO_ERR_LOCAL_LENGTH";
        case IT_DTO_ERR_LOCAL_EP: return "IT_DTO_ERR_LOCAL_EP";
        case IT_DTO_ERR_LOCAL_PROTECTION: return "IT_DTO_ERR_LOCAL_PROTECTION";
        case IT_DTO_ERR_FLUSHED: return "IT_DTO_ERR_FLUSHED";
        case IT_RMR_OPERATION_FAILED: return "IT_RMR_OPERATION_FAILED";
        case IT_DTO_ERR_BAD_RESPONSE: return "IT_DTO_ERR_BAD_RESPONSE";
        case IT_DTO_ERR_REMOTE_ACCESS: return "IT_DTO_ERR_REMOTE_ACCESS";
        case IT_DTO_ERR_REMOTE_RESPONDER: return "IT_DTO_ERR_REMOTE_RESPONDER";
        case IT_DTO_ERR_TRANSPORT: return "IT_DTO_ERR_TRANSPORT";
        case IT_DTO_ERR_RECEIVER_NOT_READY: return "IT_DTO_ERR_RECEIVER_NOT_READY";
        case IT_DTO_ERR_PARTIAL_PACKET: return "IT_DTO_ERR_PARTIAL_PACKET";
        case IT_DTO_ERR_LOCAL_MM_OPERATION: return "IT_DTO_ERR_LOCAL_MM_OPERATION";
        default: break;
    }
    return "it_dto_status_t " + std::to_string(static_cast<int>(status));
}

std::string failure_reason(const char *call) {
    const char *failed_call = nullptr;
    const char *reason = openrdma_it_last_error(&failed_call);
    // The record is of the last call that failed with a reason: only this call's counts.
    if (reason == nullptr || failed_call == nullptr || std::strcmp(failed_call, call) != 0) return {};
    return reason;
}

namespace {

// The error the library's reason names at its end ("... (EAFNOSUPPORT)"), so that the tool's error is what happened
// rather than a generic EIO; EIO when it names none.
int code_of_reason(const std::string &why) {
    const size_t open = why.rfind("(E");
    if (open == std::string::npos || why.back() != ')') return EIO;
    const std::string_view name(why.data() + open + 1, why.size() - open - 2);
    for (int code = 1; code < 256; ++code) {
        if (rdma::errno_name(code) == name) return code;
    }
    return EIO;
}

}  // namespace

rdma::Error call_error(const char *call, const std::string &args, it_status_t status) {
    const std::string why = failure_reason(call);
    return rdma::Error(code_of_reason(why), std::string(call) + "(" + args + ") failed: " + status_name(status) + " (" +
                                std::to_string(static_cast<int>(status)) + ")" + (why.empty() ? "" : ": " + why));
}

std::string default_interface(const it_interface_t *list, size_t count, it_net_addr_type_t type) {
    if (count == 0) return {};
    for (size_t i = 0; i < count; ++i) {
        it_ia_handle_t ia = nullptr;
        if (it_ia_create(list[i].name, 2, 1, &ia) != IT_SUCCESS) continue;
        it_ia_info_t *info = nullptr;
        bool match = false;
        if (it_ia_query(ia, &info) == IT_SUCCESS) {
            for (size_t s = 0; s < info->num_spigots && !match; ++s) {
                const it_spigot_info_t &sp = info->spigot_info[s];
                for (size_t a = 0; a < sp.num_net_addr && !match; ++a) match = sp.net_addr[a].addr_type == type;
            }
            (void)it_ia_info_free(info);
        }
        (void)it_ia_free(ia);
        if (match) return list[i].name;
    }
    return list[0].name;
}

}  // namespace it_tools
