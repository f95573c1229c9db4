/*
 * Compile test of api/itapi/include/it_api.h as C (C99 and C11, all warnings): the header must be self-contained,
 * its enumerators must carry the Open Group IT-API v2.1 values, and every prototype must have the standard
 * signature. Each function's address is taken into a pointer of the exact standard type, so a signature that drifts
 * from the standard fails to compile. Built with the default (v1.0) bindings; the C++ test covers v2.1 bindings.
 */
#include <it_api.h>

#include <stddef.h>

#define IT_TEST_ASSERT(expr) _Static_assert(expr, #expr)

/* ---- status codes -------------------------------------------------------------------------------------------- */
IT_TEST_ASSERT(IT_SUCCESS == 0);
IT_TEST_ASSERT(IT_ERR_ABORT == 1);
IT_TEST_ASSERT(IT_ERR_ASYNC_AFF_EVD_EXISTS == 5);
IT_TEST_ASSERT(IT_ERR_EP_BUSY == 10);
IT_TEST_ASSERT(IT_ERR_FAULT == 15);
IT_TEST_ASSERT(IT_ERR_INVALID_ADDRESS == 20);
IT_TEST_ASSERT(IT_ERR_INVALID_CONVERSION == 30);
IT_TEST_ASSERT(IT_ERR_INVALID_FLAGS == 40);
IT_TEST_ASSERT(IT_ERR_INVALID_HANDLE == 41);
IT_TEST_ASSERT(IT_ERR_INVALID_MINOR_VERSION == 50);
IT_TEST_ASSERT(IT_ERR_INVALID_RECV_EVD_STATE == 60);
IT_TEST_ASSERT(IT_ERR_INVALID_SPIGOT == 70);
IT_TEST_ASSERT(IT_ERR_NO_CONTEXT == 80);
IT_TEST_ASSERT(IT_ERR_OP_NOT_SUPPORTED == 82);
IT_TEST_ASSERT(IT_ERR_RESOURCES == 89);
IT_TEST_ASSERT(IT_ERR_SOFT_HI_WATERMARK == 100);
IT_TEST_ASSERT(IT_ERR_TIMEOUT_EXPIRED == 104);
IT_TEST_ASSERT(IT_ERR_WAITER_LIMIT == 106);

/* ---- memory privileges, flags, DTO status -------------------------------------------------------------------- */
IT_TEST_ASSERT(IT_PRIV_NONE == 0x00 && IT_PRIV_LOCAL_READ == 0x01 && IT_PRIV_LOCAL_WRITE == 0x02);
IT_TEST_ASSERT(IT_PRIV_LOCAL == 0x03 && IT_PRIV_DEFAULT == IT_PRIV_LOCAL);
IT_TEST_ASSERT(IT_PRIV_REMOTE_READ == 0x04 && IT_PRIV_REMOTE_WRITE == 0x08 && IT_PRIV_REMOTE == 0x0c);
IT_TEST_ASSERT(IT_PRIV_ATOMIC == 0x10 && IT_PRIV_ALL == 0x1f);
IT_TEST_ASSERT(IT_LMR_FLAG_NONE == 0x1 && IT_LMR_FLAG_NON_SHAREABLE == 0x8);
IT_TEST_ASSERT(IT_RMR_TYPE_DEFAULT == 0 && IT_RMR_TYPE_NARROW == 1 && IT_RMR_TYPE_WIDE == 2);
IT_TEST_ASSERT(IT_ADDR_MODE_ABSOLUTE == 0 && IT_ADDR_MODE_RELATIVE == 1);
IT_TEST_ASSERT(IT_COMPLETION_FLAG == 0x01 && IT_NOTIFY_FLAG == 0x02 && IT_SOLICITED_WAIT_FLAG == 0x04);
IT_TEST_ASSERT(IT_BARRIER_FENCE_FLAG == 0x08 && IT_UNLINK_FENCE_FLAG == 0x10);
IT_TEST_ASSERT(IT_UNLINK_LOCAL_SINK == 0x20 && IT_COALESCE_WR_FLAG == 0x40);
IT_TEST_ASSERT(IT_DTO_SUCCESS == 0 && IT_DTO_ERR_FLUSHED == 4 && IT_RMR_OPERATION_FAILED == 5);
IT_TEST_ASSERT(IT_DTO_ERR_RECEIVER_NOT_READY == 10 && IT_DTO_ERR_LOCAL_MM_OPERATION == 12);
IT_TEST_ASSERT(IT_HANDLE_TYPE_ADDR == 0 && IT_HANDLE_TYPE_SRQ == 9);
IT_TEST_ASSERT(IT_FALSE == 0 && IT_TRUE == 1);

/* ---- addresses, transports, qualifiers ----------------------------------------------------------------------- */
IT_TEST_ASSERT(IT_IANA_PORT == 0x1 && IT_IB_SERVICEID == 0x2 && IT_VIA_DISCRIMINATOR == 0x4 && IT_IANA_LR_PORT == 0x8);
IT_TEST_ASSERT(IT_IPV4 == 1 && IT_IPV6 == 2 && IT_IB_GID == 3 && IT_VIA_HOSTADDR == 4);
IT_TEST_ASSERT(IT_IB_TRANSPORT == 1 && IT_IWARP_TCP_TRANSPORT == 4 && IT_VENDOR_TRANSPORT == 1000);
IT_TEST_ASSERT(IT_RC_SERVICE == 1 && IT_UD_SERVICE == 2);
IT_TEST_ASSERT(IT_IP_VERS_IPV4 == 1 && IT_IP_VERS_IPV6 == 2);
IT_TEST_ASSERT(IT_IOBL_PAGE_LIST == 1 && IT_IOBL_BLOCK_LIST == 2 && IT_IOBL_VE_PAGE_LIST == 4);

/* ---- event numbers ------------------------------------------------------------------------------------------- */
IT_TEST_ASSERT(IT_EVENT_STREAM_MASK == 0xff000);
IT_TEST_ASSERT(IT_DTO_EVENT_STREAM == 0x00000 && IT_DTO_SEND_CMPL_EVENT == 0x00001);
IT_TEST_ASSERT(IT_DTO_RC_RECV_CMPL_EVENT == 0x00002 && IT_DTO_UD_RECV_CMPL_EVENT == 0x00003);
IT_TEST_ASSERT(IT_DTO_RDMA_WRITE_CMPL_EVENT == 0x00004 && IT_DTO_RDMA_READ_CMPL_EVENT == 0x00005);
IT_TEST_ASSERT(IT_RMR_BIND_CMPL_EVENT == 0x00006 && IT_RMR_LINK_CMPL_EVENT == 0x00006);
IT_TEST_ASSERT(IT_DTO_FETCH_ADD_CMPL_EVENT == 0x00007 && IT_DTO_CMP_SWAP_CMPL_EVENT == 0x00008);
IT_TEST_ASSERT(IT_LMR_LINK_CMPL_EVENT == 0x00009);
IT_TEST_ASSERT(IT_CM_REQ_EVENT_STREAM == 0x01000 && IT_CM_REQ_CONN_REQUEST_EVENT == 0x01001);
IT_TEST_ASSERT(IT_CM_REQ_UD_SERVICE_REQUEST_EVENT == 0x01002);
IT_TEST_ASSERT(IT_CM_MSG_EVENT_STREAM == 0x02000 && IT_CM_MSG_CONN_ACCEPT_ARRIVAL_EVENT == 0x02001);
IT_TEST_ASSERT(IT_CM_MSG_CONN_ESTABLISHED_EVENT == 0x02002 && IT_CM_MSG_CONN_DISCONNECT_EVENT == 0x02003);
IT_TEST_ASSERT(IT_CM_MSG_CONN_PEER_REJECT_EVENT == 0x02004 && IT_CM_MSG_CONN_NONPEER_REJECT_EVENT == 0x02005);
IT_TEST_ASSERT(IT_CM_MSG_CONN_BROKEN_EVENT == 0x02006 && IT_CM_MSG_UD_SERVICE_REPLY_EVENT == 0x02007);
IT_TEST_ASSERT(IT_ASYNC_AFF_EVENT_STREAM == 0x04000 && IT_ASYNC_AFF_SEVD_ENQUEUE_FAILURE == 0x04001);
IT_TEST_ASSERT(IT_ASYNC_AFF_EP_FAILURE == 0x04002 && IT_ASYNC_AFF_EP_REQ_DROPPED == 0x04005);
IT_TEST_ASSERT(IT_ASYNC_AFF_EP_LOCAL_ACCESS_VIOLATION == 0x04020 && IT_ASYNC_AFF_EP_L_LLP_ERROR == 0x04024);
IT_TEST_ASSERT(IT_ASYNC_AFF_EP_R_ERROR == 0x04040 && IT_ASYNC_AFF_EP_R_RECV_LENGTH_ERROR == 0x04043);
IT_TEST_ASSERT(IT_ASYNC_AFF_EP_SOFT_HI_WATERMARK == 0x04060 && IT_ASYNC_AFF_EP_SRQ_ERROR == 0x04061);
IT_TEST_ASSERT(IT_ASYNC_AFF_SRQ_LOW_WATERMARK == 0x04100);
IT_TEST_ASSERT(IT_ASYNC_UNAFF_EVENT_STREAM == 0x08000 && IT_ASYNC_UNAFF_SPIGOT_ONLINE == 0x08002);
IT_TEST_ASSERT(IT_ASYNC_UNAFF_SPIGOT_OFFLINE == 0x08003 && IT_ASYNC_UNAFF_SEVD_ENQUEUE_FAILURE == 0x08004);
IT_TEST_ASSERT(IT_SOFTWARE_EVENT_STREAM == 0x10000 && IT_SOFTWARE_EVENT == 0x10001);
IT_TEST_ASSERT(IT_AEVD_NOTIFICATION_EVENT_STREAM == 0x20000 && IT_AEVD_NOTIFICATION_EVENT == 0x20001);
IT_TEST_ASSERT((IT_CM_MSG_CONN_BROKEN_EVENT & IT_EVENT_STREAM_MASK) == IT_CM_MSG_EVENT_STREAM);

/* ---- states, parameter masks, misc flags --------------------------------------------------------------------- */
IT_TEST_ASSERT(IT_EP_STATE_UNCONNECTED == 0 && IT_EP_STATE_CONNECTED == 4);
IT_TEST_ASSERT(IT_EP_STATE_PASSIVE_WAIT_RDMA_TRANS_REQ == 6);
IT_TEST_ASSERT(IT_EP_STATE_UD_NONOPERATIONAL == 0 && IT_EP_STATE_UD_OPERATIONAL == 1);
IT_TEST_ASSERT(IT_CN_REJ_OTHER == 0 && IT_CN_REJ_BAD_CONN_PARMS == 6);
IT_TEST_ASSERT(IT_UD_SVC_EP_INFO_VALID == 0 && IT_UD_REQ_REDIRECTED == 4);
IT_TEST_ASSERT(IT_EP_PARAM_ALL == 0x1 && IT_EP_PARAM_MAX_IRD == 0x4000 && IT_EP_PARAM_PRIV_OPS_ENABLE == 0x08000000);
IT_TEST_ASSERT(IT_EVD_PARAM_ALL == 0x1 && IT_EVD_PARAM_CALLBACK == 0x800);
IT_TEST_ASSERT(IT_LMR_PARAM_ALL == 0x1 && IT_LMR_PARAM_IOBL_TYPE == 0x4000);
IT_TEST_ASSERT(IT_RMR_PARAM_LINKED == 0x8 && IT_RMR_PARAM_BOUND == IT_RMR_PARAM_LINKED);
IT_TEST_ASSERT(IT_RMR_PARAM_ADDR_MODE == 0x400);
IT_TEST_ASSERT(IT_SRQ_PARAM_LOW_WATERMARK == 0x20 && IT_UD_PARAM_PRIV_DATA_LENGTH == 0x80);
IT_TEST_ASSERT(IT_LISTEN_PARAM_CONN_QUAL == 0x10 && IT_ADDR_PARAM_PATH == 0x8 && IT_PZ_PARAM_IA == 0x2);
IT_TEST_ASSERT(IT_EVD_DEQUEUE_NOTIFICATIONS == 0x1 && IT_EVD_CREATE_FD == 0x2 && IT_EVD_OVERFLOW_AUTO_RESET == 0x10);
IT_TEST_ASSERT(IT_CONNECT_FLAG_TWO_WAY == 1 && IT_CONNECT_FLAG_THREE_WAY == 2 && IT_CONNECT_SUPPRESS_IRD_ORD == 4);
IT_TEST_ASSERT(IT_LISTEN_NO_FLAG == 0 && IT_LISTEN_CONN_QUAL_INPUT == 1 && IT_LISTEN_SUPPRESS_IRD_ORD == 2);
IT_TEST_ASSERT(IT_EP_NO_FLAG == 0 && IT_EP_REUSEADDR == 1 && IT_EP_SRQ == 2);
IT_TEST_ASSERT(IT_SC_DEFAULT == 0 && IT_SC_NO_REQ_REP == 1);
IT_TEST_ASSERT(IT_AH_PATH_COMPLETE == 1 && IT_UD_IB_GRH_PRESENT == 1 && IT_DG_TYPE_IB_UD == 0);
IT_TEST_ASSERT(IT_COMPARE_AND_SWAP == 0 && IT_FETCH_AND_ADD == 1);
IT_TEST_ASSERT(IT_THRESHOLD_DISABLE == 0);

/* ---- sizes and types ----------------------------------------------------------------------------------------- */
IT_TEST_ASSERT(IT_MAX_PRIV_DATA == 512);
IT_TEST_ASSERT(sizeof(((it_connection_event_t *)0)->private_data) == IT_MAX_PRIV_DATA);
IT_TEST_ASSERT(sizeof(((it_conn_request_event_t *)0)->private_data) == IT_MAX_PRIV_DATA);
IT_TEST_ASSERT(sizeof(((it_ud_svc_req_param_t *)0)->private_data) == IT_MAX_PRIV_DATA);
IT_TEST_ASSERT(sizeof(((it_interface_t *)0)->name) == IT_INTERFACE_NAME_SIZE);
IT_TEST_ASSERT(sizeof(it_dto_cookie_t) == 8 && sizeof(it_rmr_context_t) == 8 && sizeof(it_rdma_addr_t) == 8);
IT_TEST_ASSERT(sizeof(it_length_t) == 8);
IT_TEST_ASSERT(IT_TIMEOUT_INFINITE == UINT64_MAX);
IT_TEST_ASSERT(IT_HARD_HI_WATERMARK_DISABLE == SIZE_MAX);
IT_TEST_ASSERT(offsetof(it_any_event_t, event_number) == 0);
IT_TEST_ASSERT(offsetof(it_dto_cmpl_event_t, evd) == offsetof(it_any_event_t, evd));
IT_TEST_ASSERT(offsetof(it_connection_event_t, evd) == offsetof(it_any_event_t, evd));

/* Legacy (v1.0) member names still reach the v2.x members. */
static uint32_t legacy_member_names(const it_rc_only_attributes_t *rc, const it_ia_info_t *info)
{
    return rc->rdma_read_inflight_incoming + rc->rdma_read_inflight_outgoing + (uint32_t)info->ird_support +
           (uint32_t)info->ord_support;
}

/* A consumer-side use of the main types, as a v2.1 program would write it. */
static int use_types(void)
{
    it_event_t event;
    it_conn_qual_t qual;
    it_path_t path;
    it_lmr_triplet_t seg;
    it_rmr_param_t rmr;
    it_ep_attributes_t attr;
    it_evd_callback_rtn_t cb = NULL;
    it_handle_t h = IT_NULL_HANDLE;
    it_ep_handle_t ep = (it_ep_handle_t)IT_NULL_HANDLE;

    event.event_number = IT_CM_MSG_CONN_ESTABLISHED_EVENT;
    event.conn.private_data_present = IT_FALSE;
    qual.type = IT_IANA_PORT;
    qual.conn_qual.port = htons(4791);
    path.spigot_id = 0;
    path.remote.iwarp.ip_vers = IT_IP_VERS_IPV4;
    path.remote.iwarp.laddr.ipv4.s_addr = htonl(INADDR_LOOPBACK);
    path.remote.iwarp.raddr.ipv4.s_addr = htonl(INADDR_LOOPBACK);
    path.remote.ib.path_mtu = 4;
    seg.lmr = NULL;
    seg.addr.abs = NULL;
    seg.length = 0;
    rmr.bound = IT_FALSE; /* v1.0 bindings by default */
    attr.srv.rc.rdma_read_ird = 4;
    attr.srv.rc.rdma_read_ord = 4;
    attr.srv.rc.hard_hi_watermark = IT_HARD_HI_WATERMARK_DISABLE;
    (void)cb;
    (void)h;
    (void)ep;
    return (int)(event.event_number & IT_EVENT_STREAM_MASK) + (int)qual.type + (int)path.spigot_id +
           (int)seg.length + (int)rmr.bound + (int)legacy_member_names(&attr.srv.rc, &(it_ia_info_t){0});
}

/* Every prototype, taken into a pointer of the standard type. */
static int check_signatures(void)
{
    void (*p_interface_list)(it_interface_t *, size_t *, size_t *) = &it_interface_list;
    it_status_t (*p_ia_create)(const char *, uint32_t, uint32_t, it_ia_handle_t *) = &it_ia_create;
    it_status_t (*p_ia_free)(it_ia_handle_t) = &it_ia_free;
    it_status_t (*p_ia_query)(it_ia_handle_t, it_ia_info_t **) = &it_ia_query;
    void (*p_ia_info_free)(it_ia_info_t *) = &it_ia_info_free;
    it_status_t (*p_get_handle_type)(it_handle_t, it_handle_type_enum_t *) = &it_get_handle_type;
    it_status_t (*p_get_ctx)(it_handle_t, it_context_t *) = &it_get_consumer_context;
    it_status_t (*p_set_ctx)(it_handle_t, it_context_t) = &it_set_consumer_context;
    it_status_t (*p_get_pathinfo)(it_ia_handle_t, size_t, const it_net_addr_t *, size_t *, size_t *, it_path_t *) =
        &it_get_pathinfo;
    it_status_t (*p_convert)(const it_net_addr_t *, it_net_addr_type_t, it_net_addr_t *) = &it_convert_net_addr;
    it_rdma_addr_t (*p_abs)(void *) = &it_make_rdma_addr_absolute;
    it_rdma_addr_t (*p_rel)(it_length_t) = &it_make_rdma_addr_relative;
    it_rdma_addr_t (*p_mkaddr)(void *) = &it_make_rdma_addr; /* v1.0 name */
    uint64_t (*p_hton64)(uint64_t) = &it_hton64;
    uint64_t (*p_ntoh64)(uint64_t) = &it_ntoh64;
    it_status_t (*p_ah_create)(it_pz_handle_t, const it_path_t *, it_ah_flags_t, it_addr_handle_t *) =
        &it_address_handle_create;
    it_status_t (*p_ah_free)(it_addr_handle_t) = &it_address_handle_free;
    it_status_t (*p_ah_modify)(it_addr_handle_t, it_addr_param_mask_t, const it_addr_param_t *) =
        &it_address_handle_modify;
    it_status_t (*p_ah_query)(it_addr_handle_t, it_addr_param_mask_t, it_addr_param_t *) = &it_address_handle_query;
    it_status_t (*p_pz_create)(it_ia_handle_t, it_pz_handle_t *) = &it_pz_create;
    it_status_t (*p_pz_free)(it_pz_handle_t) = &it_pz_free;
    it_status_t (*p_pz_query)(it_pz_handle_t, it_pz_param_mask_t, it_pz_param_t *) = &it_pz_query;
    it_status_t (*p_evd_create)(it_ia_handle_t, it_event_type_t, it_evd_flags_t, size_t, size_t, it_evd_handle_t,
                                it_evd_handle_t *, int *) = &it_evd_create;
    it_status_t (*p_evd_free)(it_evd_handle_t) = &it_evd_free;
    it_status_t (*p_evd_modify)(it_evd_handle_t, it_evd_param_mask_t, const it_evd_param_t *) = &it_evd_modify;
    it_status_t (*p_evd_query)(it_evd_handle_t, it_evd_param_mask_t, it_evd_param_t *) = &it_evd_query;
    it_status_t (*p_evd_dequeue)(it_evd_handle_t, it_event_t *) = &it_evd_dequeue;
    it_status_t (*p_evd_wait)(it_evd_handle_t, uint64_t, it_event_t *, size_t *) = &it_evd_wait;
    it_status_t (*p_evd_post_se)(it_evd_handle_t, const void *) = &it_evd_post_se;
    it_status_t (*p_cb_attach)(it_evd_handle_t, it_evd_callback_rtn_t, void *) = &it_evd_callback_attach;
    it_status_t (*p_cb_detach)(it_evd_handle_t) = &it_evd_callback_detach;
    it_status_t (*p_ep_rc_create)(it_pz_handle_t, it_evd_handle_t, it_evd_handle_t, it_evd_handle_t,
                                  it_ep_rc_creation_flags_t, const it_ep_attributes_t *, it_ep_handle_t *) =
        &it_ep_rc_create;
    it_status_t (*p_ep_ud_create)(it_pz_handle_t, it_evd_handle_t, it_evd_handle_t, const it_ep_attributes_t *,
                                  size_t, it_ep_handle_t *) = &it_ep_ud_create;
    it_status_t (*p_ep_free)(it_ep_handle_t) = &it_ep_free;
    it_status_t (*p_ep_modify)(it_ep_handle_t, it_ep_param_mask_t, const it_ep_attributes_t *) = &it_ep_modify;
    it_status_t (*p_ep_query)(it_ep_handle_t, it_ep_param_mask_t, it_ep_param_t *) = &it_ep_query;
    it_status_t (*p_ep_reset)(it_ep_handle_t) = &it_ep_reset;
    it_status_t (*p_listen_create)(it_ia_handle_t, size_t, it_evd_handle_t, it_listen_flags_t, it_conn_qual_t *,
                                   it_listen_handle_t *) = &it_listen_create;
    it_status_t (*p_listen_free)(it_listen_handle_t) = &it_listen_free;
    it_status_t (*p_listen_query)(it_listen_handle_t, it_listen_param_mask_t, it_listen_param_t *) = &it_listen_query;
    it_status_t (*p_connect)(it_ep_handle_t, const it_path_t *, const it_conn_attributes_t *, const it_conn_qual_t *,
                             it_cn_est_flags_t, const unsigned char *, size_t) = &it_ep_connect;
    it_status_t (*p_accept)(it_ep_handle_t, it_cn_est_identifier_t, const unsigned char *, size_t) = &it_ep_accept;
    it_status_t (*p_reject)(it_cn_est_identifier_t, const unsigned char *, size_t) = &it_reject;
    it_status_t (*p_disconnect)(it_ep_handle_t, const unsigned char *, size_t) = &it_ep_disconnect;
    it_status_t (*p_handoff)(const it_conn_qual_t *, size_t, it_cn_est_identifier_t) = &it_handoff;
    it_status_t (*p_socket_convert)(int, it_ep_handle_t, it_sc_flags_t, const unsigned char *, size_t) =
        &it_socket_convert;
    it_status_t (*p_ud_req_create)(const it_conn_qual_t *, it_evd_handle_t, const it_path_t *, const unsigned char *,
                                   size_t, it_ud_svc_req_handle_t *) = &it_ud_service_request_handle_create;
    it_status_t (*p_ud_req_free)(it_ud_svc_req_handle_t) = &it_ud_service_request_handle_free;
    it_status_t (*p_ud_req_query)(it_ud_svc_req_handle_t, it_ud_svc_req_param_mask_t, it_ud_svc_req_param_t *) =
        &it_ud_service_request_handle_query;
    it_status_t (*p_ud_request)(it_ud_svc_req_handle_t) = &it_ud_service_request;
    it_status_t (*p_ud_reply)(it_ud_svc_req_identifier_t, it_ud_svc_req_status_t, it_remote_ep_info_t,
                              const unsigned char *, size_t) = &it_ud_service_reply;
    it_status_t (*p_srq_create)(it_pz_handle_t, size_t, size_t, it_srq_handle_t *) = &it_srq_create;
    it_status_t (*p_srq_free)(it_srq_handle_t) = &it_srq_free;
    it_status_t (*p_srq_modify)(it_srq_handle_t, it_srq_param_mask_t, const it_srq_param_t *) = &it_srq_modify;
    it_status_t (*p_srq_query)(it_srq_handle_t, it_srq_param_mask_t, it_srq_param_t *) = &it_srq_query;
    it_status_t (*p_lmr_create10)(it_pz_handle_t, void *, it_length_t, it_mem_priv_t, it_lmr_flag_t, uint32_t,
                                  it_lmr_handle_t *, it_rmr_context_t *) = &it_lmr_create10;
    it_status_t (*p_lmr_create)(it_pz_handle_t, void *, it_length_t, it_mem_priv_t, it_lmr_flag_t, uint32_t,
                                it_lmr_handle_t *, it_rmr_context_t *) = &it_lmr_create; /* v1.0 binding */
    it_status_t (*p_lmr_create20)(it_pz_handle_t, void *, it_length_t, it_addr_mode_t, it_mem_priv_t, it_lmr_flag_t,
                                  uint32_t, it_lmr_handle_t *, it_rmr_context_t *) = &it_lmr_create20;
    it_status_t (*p_lmr_create21)(it_pz_handle_t, void *, it_iobl_t *, it_length_t, it_addr_mode_t, it_mem_priv_t,
                                  it_lmr_flag_t, uint32_t, it_lmr_handle_t *, it_rmr_context_t *) = &it_lmr_create21;
    it_status_t (*p_lmr_unlinked)(it_pz_handle_t, size_t, it_lmr_flag_t, uint32_t, it_lmr_handle_t *) =
        &it_lmr_create_unlinked;
    it_status_t (*p_lmr_free)(it_lmr_handle_t) = &it_lmr_free;
    it_status_t (*p_lmr_modify)(it_lmr_handle_t, it_lmr_param_mask_t, const it_lmr_param_t *) = &it_lmr_modify;
    it_status_t (*p_lmr_query)(it_lmr_handle_t, it_lmr_param_mask_t, it_lmr_param_t *) = &it_lmr_query;
    it_status_t (*p_lmr_link)(it_lmr_handle_t, const void *, const it_iobl_t *, it_length_t, it_addr_mode_t,
                              it_mem_priv_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t, it_rmr_context_t *) =
        &it_lmr_link;
    it_status_t (*p_lmr_unlink)(it_lmr_handle_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t) = &it_lmr_unlink;
    it_status_t (*p_flush)(const it_lmr_triplet_t *, size_t) = &it_lmr_flush_to_mem;
    it_status_t (*p_refresh)(const it_lmr_triplet_t *, size_t) = &it_lmr_refresh_from_mem;
    it_status_t (*p_sync_rd)(const it_lmr_triplet_t *, size_t) = &it_lmr_sync_rdma_read;   /* v1.0 name */
    it_status_t (*p_sync_wr)(const it_lmr_triplet_t *, size_t) = &it_lmr_sync_rdma_write;  /* v1.0 name */
    it_status_t (*p_mem_map)(it_ia_handle_t, void *, uint64_t, size_t, it_io_addr_t *, size_t *) = &it_mem_map;
    it_status_t (*p_mem_unmap)(it_ia_handle_t, it_io_addr_t, size_t) = &it_mem_unmap;
    it_status_t (*p_rmr_create10)(it_pz_handle_t, it_rmr_handle_t *) = &it_rmr_create10;
    it_status_t (*p_rmr_create)(it_pz_handle_t, it_rmr_handle_t *) = &it_rmr_create; /* v1.0 binding */
    it_status_t (*p_rmr_create20)(it_pz_handle_t, it_rmr_type_t, it_rmr_handle_t *) = &it_rmr_create20;
    it_status_t (*p_rmr_free)(it_rmr_handle_t) = &it_rmr_free;
    it_status_t (*p_rmr_query)(it_rmr_handle_t, it_rmr_param_mask_t, it_rmr_param_t *) = &it_rmr_query;
    it_status_t (*p_rmr_bind10)(it_rmr_handle_t, it_lmr_handle_t, void *, it_length_t, it_mem_priv_t, it_ep_handle_t,
                                it_dto_cookie_t, it_dto_flags_t, it_rmr_context_t *) = &it_rmr_bind10;
    it_status_t (*p_rmr_bind)(it_rmr_handle_t, it_lmr_handle_t, void *, it_length_t, it_mem_priv_t, it_ep_handle_t,
                              it_dto_cookie_t, it_dto_flags_t, it_rmr_context_t *) = &it_rmr_bind; /* v1.0 */
    it_status_t (*p_rmr_link)(it_rmr_handle_t, it_lmr_handle_t, void *, it_length_t, it_addr_mode_t, it_mem_priv_t,
                              it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t, it_rmr_context_t *) = &it_rmr_link;
    it_status_t (*p_rmr_unlink)(it_rmr_handle_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t) = &it_rmr_unlink;
    it_status_t (*p_rmr_unbind)(it_rmr_handle_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t) = &it_rmr_unbind;
    it_status_t (*p_send)(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t) =
        &it_post_send;
    it_status_t (*p_send_unlink)(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t,
                                 it_rmr_context_t) = &it_post_send_and_unlink;
    it_status_t (*p_sendto)(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t,
                            const it_dg_remote_ep_addr_t *) = &it_post_sendto;
    it_status_t (*p_recv)(it_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t) =
        &it_post_recv;
    it_status_t (*p_recvfrom)(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t) =
        &it_post_recvfrom;
    it_status_t (*p_rdma_read)(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t,
                               it_rdma_addr_t, it_rmr_context_t) = &it_post_rdma_read;
    it_status_t (*p_rdma_read_rmr)(it_ep_handle_t, const it_rmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t,
                                   it_rdma_addr_t, it_rmr_context_t) = &it_post_rdma_read_to_rmr;
    it_status_t (*p_rdma_write)(it_ep_handle_t, const it_lmr_triplet_t *, size_t, it_dto_cookie_t, it_dto_flags_t,
                                it_rdma_addr_t, it_rmr_context_t) = &it_post_rdma_write;
    it_status_t (*p_atomic)(it_ep_handle_t, it_atomic_op_t, uint64_t, uint64_t, const it_lmr_triplet_t *,
                            it_dto_cookie_t, it_dto_flags_t, it_rdma_addr_t, it_rmr_context_t) = &it_post_atomic;

    /* Every pointer is non-null; summing the checks uses them all without calling any (nothing is linked). */
    const void *volatile sink[] = {
        (const void *)&p_interface_list, (const void *)&p_ia_create, (const void *)&p_ia_free,
        (const void *)&p_ia_query, (const void *)&p_ia_info_free, (const void *)&p_get_handle_type,
        (const void *)&p_get_ctx, (const void *)&p_set_ctx, (const void *)&p_get_pathinfo,
        (const void *)&p_convert, (const void *)&p_abs, (const void *)&p_rel, (const void *)&p_mkaddr,
        (const void *)&p_hton64, (const void *)&p_ntoh64, (const void *)&p_ah_create, (const void *)&p_ah_free,
        (const void *)&p_ah_modify, (const void *)&p_ah_query, (const void *)&p_pz_create, (const void *)&p_pz_free,
        (const void *)&p_pz_query, (const void *)&p_evd_create, (const void *)&p_evd_free,
        (const void *)&p_evd_modify, (const void *)&p_evd_query, (const void *)&p_evd_dequeue,
        (const void *)&p_evd_wait, (const void *)&p_evd_post_se, (const void *)&p_cb_attach,
        (const void *)&p_cb_detach, (const void *)&p_ep_rc_create, (const void *)&p_ep_ud_create,
        (const void *)&p_ep_free, (const void *)&p_ep_modify, (const void *)&p_ep_query, (const void *)&p_ep_reset,
        (const void *)&p_listen_create, (const void *)&p_listen_free, (const void *)&p_listen_query,
        (const void *)&p_connect, (const void *)&p_accept, (const void *)&p_reject, (const void *)&p_disconnect,
        (const void *)&p_handoff, (const void *)&p_socket_convert, (const void *)&p_ud_req_create,
        (const void *)&p_ud_req_free, (const void *)&p_ud_req_query, (const void *)&p_ud_request,
        (const void *)&p_ud_reply, (const void *)&p_srq_create, (const void *)&p_srq_free,
        (const void *)&p_srq_modify, (const void *)&p_srq_query, (const void *)&p_lmr_create10,
        (const void *)&p_lmr_create, (const void *)&p_lmr_create20, (const void *)&p_lmr_create21,
        (const void *)&p_lmr_unlinked, (const void *)&p_lmr_free, (const void *)&p_lmr_modify,
        (const void *)&p_lmr_query, (const void *)&p_lmr_link, (const void *)&p_lmr_unlink, (const void *)&p_flush,
        (const void *)&p_refresh, (const void *)&p_sync_rd, (const void *)&p_sync_wr, (const void *)&p_mem_map,
        (const void *)&p_mem_unmap, (const void *)&p_rmr_create10, (const void *)&p_rmr_create,
        (const void *)&p_rmr_create20, (const void *)&p_rmr_free, (const void *)&p_rmr_query,
        (const void *)&p_rmr_bind10, (const void *)&p_rmr_bind, (const void *)&p_rmr_link,
        (const void *)&p_rmr_unlink, (const void *)&p_rmr_unbind, (const void *)&p_send, (const void *)&p_send_unlink,
        (const void *)&p_sendto, (const void *)&p_recv, (const void *)&p_recvfrom, (const void *)&p_rdma_read,
        (const void *)&p_rdma_read_rmr, (const void *)&p_rdma_write, (const void *)&p_atomic,
    };
    return (int)(sizeof sink / sizeof sink[0]);
}

int main(void)
{
    /* Nothing is called through the pointers: only the compiler's type checks matter. */
    volatile int used = check_signatures() + use_types();
    (void)used;
    return 0;
}
