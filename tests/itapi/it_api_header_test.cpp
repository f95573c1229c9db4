// Compile test of api/itapi/include/it_api.h from C++20 with the IT-API v2.1 bindings selected: the header is usable
// from C++ (C linkage, no C-only constructs), the unversioned names map to the v2.1 entry points, and the types,
// enumerator values and signatures are those of the Open Group IT-API v2.1 header.
#define ITAPI_ENABLE_V21_BINDINGS
#include <it_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace {

// ---- binding selection ------------------------------------------------------------------------------------------
#ifdef ITAPI_ENABLE_V10_BINDINGS
#error "ITAPI_ENABLE_V21_BINDINGS must switch the v1.0 bindings off"
#endif

// it_lmr_create is it_lmr_create21, it_rmr_create is it_rmr_create20, it_rmr_bind is it_rmr_link.
static_assert(std::is_same_v<decltype(&it_lmr_create), decltype(&it_lmr_create21)>);
static_assert(std::is_same_v<decltype(&it_rmr_create), decltype(&it_rmr_create20)>);
static_assert(std::is_same_v<decltype(&it_rmr_bind), decltype(&it_rmr_link)>);
// Under v2.x bindings it_rmr_param_t names the link state "linked".
static_assert(std::is_same_v<decltype(it_rmr_param_t::linked), it_boolean_t>);

// ---- enumerator values ------------------------------------------------------------------------------------------
static_assert(IT_SUCCESS == 0);
static_assert(IT_ERR_ABORT == 1);
static_assert(IT_ERR_INVALID_HANDLE == 41);
static_assert(IT_ERR_INVALID_PDATA_LENGTH == 54);
static_assert(IT_ERR_OP_NOT_SUPPORTED == 82);
static_assert(IT_ERR_QUEUE_EMPTY == 87);
static_assert(IT_ERR_RESOURCES == 89);
static_assert(IT_ERR_TIMEOUT_EXPIRED == 104);
static_assert(IT_ERR_WAITER_LIMIT == 106);
static_assert(IT_PRIV_LOCAL == 0x3 && IT_PRIV_REMOTE == 0xc && IT_PRIV_ALL == 0x1f);
static_assert(IT_COMPLETION_FLAG == 0x1 && IT_NOTIFY_FLAG == 0x2 && IT_SOLICITED_WAIT_FLAG == 0x4);
static_assert(IT_BARRIER_FENCE_FLAG == 0x8 && IT_UNLINK_FENCE_FLAG == 0x10 && IT_COALESCE_WR_FLAG == 0x40);
static_assert(IT_DTO_ERR_FLUSHED == 4 && IT_DTO_ERR_LOCAL_MM_OPERATION == 12);
static_assert(IT_IWARP_TCP_TRANSPORT == 4 && IT_IANA_LR_PORT == 0x8);
static_assert(IT_DTO_SEND_CMPL_EVENT == 0x00001 && IT_LMR_LINK_CMPL_EVENT == 0x00009);
static_assert(IT_RMR_BIND_CMPL_EVENT == IT_RMR_LINK_CMPL_EVENT);
static_assert(IT_CM_REQ_CONN_REQUEST_EVENT == 0x01001 && IT_CM_REQ_UD_SERVICE_REQUEST_EVENT == 0x01002);
static_assert(IT_CM_MSG_CONN_ACCEPT_ARRIVAL_EVENT == 0x02001 && IT_CM_MSG_CONN_ESTABLISHED_EVENT == 0x02002);
static_assert(IT_CM_MSG_CONN_DISCONNECT_EVENT == 0x02003 && IT_CM_MSG_CONN_BROKEN_EVENT == 0x02006);
static_assert(IT_ASYNC_AFF_SEVD_ENQUEUE_FAILURE == 0x04001 && IT_ASYNC_AFF_EP_L_LLP_ERROR == 0x04024);
static_assert(IT_ASYNC_AFF_SRQ_LOW_WATERMARK == 0x04100);
static_assert(IT_ASYNC_UNAFF_SPIGOT_ONLINE == 0x08002 && IT_ASYNC_UNAFF_SEVD_ENQUEUE_FAILURE == 0x08004);
static_assert(IT_SOFTWARE_EVENT == 0x10001 && IT_AEVD_NOTIFICATION_EVENT == 0x20001);
static_assert((IT_ASYNC_AFF_EP_FAILURE & IT_EVENT_STREAM_MASK) == IT_ASYNC_AFF_EVENT_STREAM);
static_assert(IT_EP_STATE_CONNECTED == 4 && IT_EP_STATE_UD_OPERATIONAL == 1);
static_assert(IT_EP_PARAM_MAX_ORD == 0x8000 && IT_EVD_PARAM_FD == 0x80 && IT_LMR_PARAM_ADDR_MODE == 0x800);
static_assert(IT_RMR_PARAM_BOUND == IT_RMR_PARAM_LINKED);

// ---- sizes and types --------------------------------------------------------------------------------------------
static_assert(IT_MAX_PRIV_DATA == 512);
static_assert(sizeof(it_connection_event_t::private_data) == IT_MAX_PRIV_DATA);
static_assert(sizeof(it_interface_t::name) == IT_INTERFACE_NAME_SIZE);
static_assert(std::is_same_v<it_dto_cookie_t, std::uint64_t>);
static_assert(std::is_same_v<it_rmr_context_t, std::uint64_t>);
static_assert(std::is_same_v<it_rdma_addr_t, std::uint64_t>);
static_assert(std::is_same_v<it_length_t, std::uint64_t>);
static_assert(std::is_same_v<it_handle_t, void *>);
static_assert(IT_TIMEOUT_INFINITE == UINT64_MAX);
static_assert(IT_HARD_HI_WATERMARK_DISABLE == SIZE_MAX);
static_assert(std::is_standard_layout_v<it_event_t> && std::is_trivially_copyable_v<it_event_t>);
static_assert(offsetof(it_dto_cmpl_event_t, evd) == offsetof(it_any_event_t, evd));
static_assert(std::is_same_v<decltype(it_path_t::remote.iwarp), it_iwarp_net_endpoint_t>);
// v1.0 member names are macros for the v2.x ones.
static_assert(std::is_same_v<decltype(it_rc_only_attributes_t::rdma_read_inflight_incoming), std::uint32_t>);
static_assert(std::is_same_v<decltype(it_ia_info_t::ird_support), it_boolean_t>);

// ---- signatures -------------------------------------------------------------------------------------------------
template <typename Expected, typename Actual>
constexpr bool same_fn(Actual *) { return std::is_same_v<Expected, Actual>; }

static_assert(same_fn<void(it_interface_t *, size_t *, size_t *)>(&it_interface_list));
static_assert(same_fn<it_status_t(const char *, uint32_t, uint32_t, it_ia_handle_t *)>(&it_ia_create));
static_assert(same_fn<it_status_t(it_ia_handle_t, it_ia_info_t **)>(&it_ia_query));
static_assert(same_fn<void(it_ia_info_t *)>(&it_ia_info_free));
static_assert(same_fn<it_status_t(it_handle_t, it_context_t *)>(&it_get_consumer_context));
static_assert(same_fn<it_status_t(it_handle_t, it_context_t)>(&it_set_consumer_context));
static_assert(same_fn<it_status_t(it_handle_t, it_handle_type_enum_t *)>(&it_get_handle_type));
static_assert(same_fn<it_status_t(it_ia_handle_t, size_t, const it_net_addr_t *, size_t *, size_t *, it_path_t *)>(
    &it_get_pathinfo));
static_assert(same_fn<uint64_t(uint64_t)>(&it_hton64) && same_fn<uint64_t(uint64_t)>(&it_ntoh64));
static_assert(same_fn<it_rdma_addr_t(void *)>(&it_make_rdma_addr));
static_assert(same_fn<it_status_t(it_pz_handle_t, const it_path_t *, it_ah_flags_t, it_addr_handle_t *)>(
    &it_address_handle_create));
static_assert(same_fn<it_status_t(it_ia_handle_t, it_pz_handle_t *)>(&it_pz_create));
static_assert(same_fn<it_status_t(it_ia_handle_t, it_event_type_t, it_evd_flags_t, size_t, size_t, it_evd_handle_t,
                                  it_evd_handle_t *, int *)>(&it_evd_create));
static_assert(same_fn<it_status_t(it_evd_handle_t, it_event_t *)>(&it_evd_dequeue));
static_assert(same_fn<it_status_t(it_evd_handle_t, uint64_t, it_event_t *, size_t *)>(&it_evd_wait));
static_assert(same_fn<it_status_t(it_evd_handle_t, const void *)>(&it_evd_post_se));
static_assert(same_fn<it_status_t(it_evd_handle_t, it_evd_callback_rtn_t, void *)>(&it_evd_callback_attach));
static_assert(same_fn<it_status_t(it_pz_handle_t, it_evd_handle_t, it_evd_handle_t, it_evd_handle_t,
                                  it_ep_rc_creation_flags_t, const it_ep_attributes_t *, it_ep_handle_t *)>(
    &it_ep_rc_create));
static_assert(same_fn<it_status_t(it_pz_handle_t, it_evd_handle_t, it_evd_handle_t, const it_ep_attributes_t *,
                                  size_t, it_ep_handle_t *)>(&it_ep_ud_create));
static_assert(same_fn<it_status_t(it_ep_handle_t, it_ep_param_mask_t, const it_ep_attributes_t *)>(&it_ep_modify));
static_assert(same_fn<it_status_t(it_ia_handle_t, size_t, it_evd_handle_t, it_listen_flags_t, it_conn_qual_t *,
                                  it_listen_handle_t *)>(&it_listen_create));
static_assert(same_fn<it_status_t(it_ep_handle_t, const it_path_t *, const it_conn_attributes_t *,
                                  const it_conn_qual_t *, it_cn_est_flags_t, const unsigned char *, size_t)>(
    &it_ep_connect));
static_assert(same_fn<it_status_t(it_ep_handle_t, it_cn_est_identifier_t, const unsigned char *, size_t)>(
    &it_ep_accept));
static_assert(same_fn<it_status_t(it_cn_est_identifier_t, const unsigned char *, size_t)>(&it_reject));
static_assert(same_fn<it_status_t(it_ep_handle_t, const unsigned char *, size_t)>(&it_ep_disconnect));
static_assert(same_fn<it_status_t(const it_conn_qual_t *, size_t, it_cn_est_identifier_t)>(&it_handoff));
static_assert(same_fn<it_status_t(int, it_ep_handle_t, it_sc_flags_t, const unsigned char *, size_t)>(
    &it_socket_convert));
static_assert(same_fn<it_status_t(it_ud_svc_req_identifier_t, it_ud_svc_req_status_t, it_remote_ep_info_t,
                                  const unsigned char *, size_t)>(&it_ud_service_reply));
static_assert(same_fn<it_status_t(it_pz_handle_t, size_t, size_t, it_srq_handle_t *)>(&it_srq_create));
static_assert(same_fn<it_status_t(it_pz_handle_t, void *, it_iobl_t *, it_length_t, it_addr_mode_t, it_mem_priv_t,
                                  it_lmr_flag_t, uint32_t, it_lmr_handle_t *, it_rmr_context_t *)>(&it_lmr_create));
static_assert(same_fn<it_status_t(it_pz_handle_t, void *, it_length_t, it_mem_priv_t, it_lmr_flag_t, uint32_t,
                                  it_lmr_handle_t *, it_rmr_context_t *)>(&it_lmr_create10));
static_assert(same_fn<it_status_t(it_pz_handle_t, void *, it_length_t, it_addr_mode_t, it_mem_priv_t, it_lmr_flag_t,
                                  uint32_t, it_lmr_handle_t *, it_rmr_context_t *)>(&it_lmr_create20));
static_assert(same_fn<it_status_t(it_lmr_handle_t, const void *, const it_iobl_t *, it_length_t, it_addr_mode_t,
                                  it_mem_priv_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t,
                                  it_rmr_context_t *)>(&it_lmr_link));
static_assert(same_fn<it_status_t(const it_lmr_triplet_t *, size_t)>(&it_lmr_sync_rdma_read));
static_assert(same_fn<it_status_t(it_pz_handle_t, it_rmr_type_t, it_rmr_handle_t *)>(&it_rmr_create));
static_assert(same_fn<it_status_t(it_rmr_handle_t, it_lmr_handle_t, void *, it_length_t, it_addr_mode_t,
                                  it_mem_priv_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t,
                                  it_rmr_context_t *)>(&it_rmr_bind));
static_assert(same_fn<it_status_t(it_rmr_handle_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t)>(
    &it_rmr_unbind));
static_assert(same_fn<it_status_t(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t,
                                  it_dto_flags_t)>(&it_post_send));
static_assert(same_fn<it_status_t(it_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t,
                                  it_dto_flags_t)>(&it_post_recv));
static_assert(same_fn<it_status_t(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t,
                                  it_rdma_addr_t, it_rmr_context_t)>(&it_post_rdma_write));
static_assert(same_fn<it_status_t(it_ep_handle_t, const it_rmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t,
                                  it_rdma_addr_t, it_rmr_context_t)>(&it_post_rdma_read_to_rmr));
static_assert(same_fn<it_status_t(it_ep_handle_t, it_atomic_op_t, uint64_t, uint64_t, const it_lmr_triplet_t *,
                                  it_dto_cookie_t, it_dto_flags_t, it_rdma_addr_t, it_rmr_context_t)>(
    &it_post_atomic));

// A C++ consumer fills the structures the way a C one does.
int use_types()
{
    it_event_t event{};
    event.event_number = IT_CM_REQ_CONN_REQUEST_EVENT;
    event.conn_req.private_data_present = IT_TRUE;
    event.conn_req.private_data[IT_MAX_PRIV_DATA - 1] = 0xff;

    it_conn_qual_t qual{};
    qual.type = IT_IANA_PORT;
    qual.conn_qual.port = htons(4791);

    it_path_t path{};
    path.remote.iwarp.ip_vers = IT_IP_VERS_IPV6;
    path.remote.iwarp.raddr.ipv6 = in6addr_loopback;

    it_ep_attributes_t attr{};
    attr.srv.rc.rdma_read_inflight_incoming = 4;  // v1.0 name of rdma_read_ird
    attr.srv.rc.rdma_read_ord = 4;

    it_rmr_param_t rmr{};
    rmr.linked = IT_FALSE;

    it_ep_handle_t ep = static_cast<it_ep_handle_t>(IT_NULL_HANDLE);
    it_dto_flags_t flags = static_cast<it_dto_flags_t>(IT_COMPLETION_FLAG | IT_NOTIFY_FLAG);

    return (ep == IT_NULL_HANDLE && flags == 0x3 && event.any.event_number == IT_CM_REQ_CONN_REQUEST_EVENT &&
            event.conn_req.private_data[IT_MAX_PRIV_DATA - 1] == 0xff &&
            path.remote.iwarp.ip_vers == IT_IP_VERS_IPV6 && qual.type == IT_IANA_PORT &&
            attr.srv.rc.rdma_read_ird == 4 && rmr.linked == IT_FALSE)
               ? 0
               : 1;
}

}  // namespace

int main()
{
    return use_types();
}
