/*
 * RNIC-PI ABI layout: the size, alignment and offset of every field of every ABI struct, for LP64 Linux.
 *
 * These numbers are the ABI. A change to any of them breaks every provider built before it, so it must never be
 * silent: this file stops compiling, and whoever changed the header must either restore the layout or bump
 * RI_ABI_VERSION_MAJOR (or, for fields appended at the end of a sized table, RI_ABI_VERSION_MINOR) and update the
 * numbers here in the same commit. The run-time part checks that the error vocabulary equals the C library's errno.
 */
#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>

#include "rnicpi/rnicpi.h"

#define RDMA_SIZE(type, size, align)                                                  \
    _Static_assert(sizeof(type) == (size), "ABI: sizeof(" #type ") changed");         \
    _Static_assert(alignof(type) == (align), "ABI: alignof(" #type ") changed")
#define RDMA_OFF(type, field, off) \
    _Static_assert(offsetof(type, field) == (off), "ABI: offset of " #type "." #field " changed")

_Static_assert(sizeof(void *) == 8 && sizeof(long) == 8, "the RNIC-PI layout below is for LP64 targets");
_Static_assert(RI_ABI_VERSION == 0x0001000au, "ABI version changed: update the layout below in the same commit");

RDMA_SIZE(ri_channel_ring_t, 128, 8);
RDMA_OFF(ri_channel_ring_t, tail, 0);
RDMA_OFF(ri_channel_ring_t, closed, 8);
RDMA_OFF(ri_channel_ring_t, writer_waiting, 12);
RDMA_OFF(ri_channel_ring_t, head, 64);
RDMA_OFF(ri_channel_ring_t, reader_waiting, 72);
RDMA_OFF(ri_channel_ring_t, reader_pulls, 76);
RDMA_SIZE(ri_channel_header_t, 320, 8);
RDMA_OFF(ri_channel_header_t, ring_size, 8);
RDMA_OFF(ri_channel_header_t, data_offset, 16);
RDMA_OFF(ri_channel_header_t, file_size, 32);
RDMA_OFF(ri_channel_header_t, ring, 64);
RDMA_SIZE(ri_channel_hello_t, 24, 4);
RDMA_OFF(ri_channel_hello_t, ring_log2, 12);
RDMA_OFF(ri_channel_hello_t, flags, RI_CHANNEL_HELLO_V1_SIZE);
RDMA_OFF(ri_channel_hello_t, peer_pid, 20);

RDMA_SIZE(ri_rnic_attr_t, 192, 8);
RDMA_OFF(ri_rnic_attr_t, name, 0);
RDMA_OFF(ri_rnic_attr_t, netdev, 64);
RDMA_OFF(ri_rnic_attr_t, vendor_id, 80);
RDMA_OFF(ri_rnic_attr_t, vendor_part_id, 84);
RDMA_OFF(ri_rnic_attr_t, hw_version, 88);
RDMA_OFF(ri_rnic_attr_t, caps, 92);
RDMA_OFF(ri_rnic_attr_t, fw_version, 96);
RDMA_OFF(ri_rnic_attr_t, max_mr_size, 104);
RDMA_OFF(ri_rnic_attr_t, page_size_cap, 112);
RDMA_OFF(ri_rnic_attr_t, max_qp, 120);
RDMA_OFF(ri_rnic_attr_t, max_qp_wr, 124);
RDMA_OFF(ri_rnic_attr_t, max_sge, 128);
RDMA_OFF(ri_rnic_attr_t, max_sge_rd, 132);
RDMA_OFF(ri_rnic_attr_t, max_inline, 136);
RDMA_OFF(ri_rnic_attr_t, max_cq, 140);
RDMA_OFF(ri_rnic_attr_t, max_cqe, 144);
RDMA_OFF(ri_rnic_attr_t, max_pd, 148);
RDMA_OFF(ri_rnic_attr_t, max_mr, 152);
RDMA_OFF(ri_rnic_attr_t, max_mw, 156);
RDMA_OFF(ri_rnic_attr_t, max_srq, 160);
RDMA_OFF(ri_rnic_attr_t, max_srq_wr, 164);
RDMA_OFF(ri_rnic_attr_t, max_srq_sge, 168);
RDMA_OFF(ri_rnic_attr_t, max_ird, 172);
RDMA_OFF(ri_rnic_attr_t, max_ord, 176);
RDMA_OFF(ri_rnic_attr_t, max_ceh, 180);
RDMA_OFF(ri_rnic_attr_t, max_fast_reg_pages, 184);
RDMA_OFF(ri_rnic_attr_t, max_private_data, 188);
RDMA_SIZE(ri_rnic_open_params_t, 88, 8);
RDMA_OFF(ri_rnic_open_params_t, instance, 0);
RDMA_OFF(ri_rnic_open_params_t, host_ctx, 8);
RDMA_OFF(ri_rnic_open_params_t, instance_name, 16);
RDMA_OFF(ri_rnic_open_params_t, flags, 80);
RDMA_OFF(ri_rnic_open_params_t, owner_pid, 84);
RDMA_SIZE(ri_net_addr_t, 24, 4);
RDMA_OFF(ri_net_addr_t, family, 0);
RDMA_OFF(ri_net_addr_t, reserved, 2);
RDMA_OFF(ri_net_addr_t, scope_id, 4);
RDMA_OFF(ri_net_addr_t, addr, 8);
RDMA_SIZE(ri_attach_params_t, 112, 8);
RDMA_OFF(ri_attach_params_t, name, 0);
RDMA_OFF(ri_attach_params_t, netdev, 64);
RDMA_OFF(ri_attach_params_t, addr, 80);
RDMA_OFF(ri_attach_params_t, options, 104);
RDMA_SIZE(ri_cq_attr_t, 16, 8);
RDMA_OFF(ri_cq_attr_t, cqe, 0);
RDMA_OFF(ri_cq_attr_t, ceh_id, 4);
RDMA_OFF(ri_cq_attr_t, context, 8);
RDMA_SIZE(ri_qp_init_attr_t, 48, 8);
RDMA_OFF(ri_qp_init_attr_t, type, 0);
RDMA_OFF(ri_qp_init_attr_t, flags, 4);
RDMA_OFF(ri_qp_init_attr_t, sq_depth, 8);
RDMA_OFF(ri_qp_init_attr_t, rq_depth, 12);
RDMA_OFF(ri_qp_init_attr_t, sq_sge, 16);
RDMA_OFF(ri_qp_init_attr_t, rq_sge, 20);
RDMA_OFF(ri_qp_init_attr_t, rd_sge, 24);
RDMA_OFF(ri_qp_init_attr_t, max_inline, 28);
RDMA_OFF(ri_qp_init_attr_t, ird, 32);
RDMA_OFF(ri_qp_init_attr_t, ord, 36);
RDMA_OFF(ri_qp_init_attr_t, context, 40);
RDMA_SIZE(ri_llp_params_t, 96, 4);
RDMA_OFF(ri_llp_params_t, fd, 0);
RDMA_OFF(ri_llp_params_t, mpa_revision, 4);
RDMA_OFF(ri_llp_params_t, mpa_flags, 8);
RDMA_OFF(ri_llp_params_t, rtr_type, 12);
RDMA_OFF(ri_llp_params_t, ird, 16);
RDMA_OFF(ri_llp_params_t, ord, 20);
RDMA_OFF(ri_llp_params_t, mss, 24);
RDMA_OFF(ri_llp_params_t, fpdu_max, 28);
RDMA_OFF(ri_llp_params_t, tcp_snd_nxt, 32);
RDMA_OFF(ri_llp_params_t, tcp_rcv_nxt, 36);
RDMA_OFF(ri_llp_params_t, local, 40);
RDMA_OFF(ri_llp_params_t, remote, 64);
RDMA_OFF(ri_llp_params_t, local_port, 88);
RDMA_OFF(ri_llp_params_t, remote_port, 90);
RDMA_OFF(ri_llp_params_t, channel, 92);
RDMA_SIZE(ri_qp_attr_t, 168, 8);
RDMA_OFF(ri_qp_attr_t, state, 0);
RDMA_OFF(ri_qp_attr_t, qp_num, 4);
RDMA_OFF(ri_qp_attr_t, ird, 8);
RDMA_OFF(ri_qp_attr_t, ord, 12);
RDMA_OFF(ri_qp_attr_t, access, 16);
RDMA_OFF(ri_qp_attr_t, term_layer_etype, 20);
RDMA_OFF(ri_qp_attr_t, sq_draining, 21);
RDMA_OFF(ri_qp_attr_t, term_ecode, 22);
RDMA_OFF(ri_qp_attr_t, init, 24);
RDMA_OFF(ri_qp_attr_t, llp, 72);
RDMA_SIZE(ri_srq_attr_t, 24, 8);
RDMA_OFF(ri_srq_attr_t, max_wr, 0);
RDMA_OFF(ri_srq_attr_t, max_sge, 4);
RDMA_OFF(ri_srq_attr_t, limit, 8);
RDMA_OFF(ri_srq_attr_t, reserved, 12);
RDMA_OFF(ri_srq_attr_t, context, 16);
RDMA_SIZE(ri_sge_t, 16, 8);
RDMA_OFF(ri_sge_t, addr, 0);
RDMA_OFF(ri_sge_t, length, 8);
RDMA_OFF(ri_sge_t, lkey, 12);
RDMA_SIZE(ri_mr_reg_t, 32, 8);
RDMA_OFF(ri_mr_reg_t, addr, 0);
RDMA_OFF(ri_mr_reg_t, length, 8);
RDMA_OFF(ri_mr_reg_t, iova, 16);
RDMA_OFF(ri_mr_reg_t, access, 24);
RDMA_OFF(ri_mr_reg_t, reserved, 28);
RDMA_SIZE(ri_phys_mr_reg_t, 48, 8);
RDMA_OFF(ri_phys_mr_reg_t, pages, 0);
RDMA_OFF(ri_phys_mr_reg_t, num_pages, 8);
RDMA_OFF(ri_phys_mr_reg_t, page_shift, 12);
RDMA_OFF(ri_phys_mr_reg_t, first_byte_offset, 16);
RDMA_OFF(ri_phys_mr_reg_t, length, 24);
RDMA_OFF(ri_phys_mr_reg_t, iova, 32);
RDMA_OFF(ri_phys_mr_reg_t, access, 40);
RDMA_OFF(ri_phys_mr_reg_t, reserved, 44);
RDMA_SIZE(ri_mr_keys_t, 8, 4);
RDMA_OFF(ri_mr_keys_t, lkey, 0);
RDMA_OFF(ri_mr_keys_t, rkey, 4);
RDMA_SIZE(ri_mr_attr_t, 48, 8);
RDMA_OFF(ri_mr_attr_t, addr, 0);
RDMA_OFF(ri_mr_attr_t, length, 8);
RDMA_OFF(ri_mr_attr_t, iova, 16);
RDMA_OFF(ri_mr_attr_t, access, 24);
RDMA_OFF(ri_mr_attr_t, state, 28);
RDMA_OFF(ri_mr_attr_t, keys, 32);
RDMA_OFF(ri_mr_attr_t, max_pages, 40);
RDMA_OFF(ri_mr_attr_t, reserved, 44);
RDMA_SIZE(ri_send_wr_t, 80, 8);
RDMA_OFF(ri_send_wr_t, wr_id, 0);
RDMA_OFF(ri_send_wr_t, opcode, 8);
RDMA_OFF(ri_send_wr_t, flags, 12);
RDMA_OFF(ri_send_wr_t, sgl, 16);
RDMA_OFF(ri_send_wr_t, num_sge, 24);
RDMA_OFF(ri_send_wr_t, inv_stag, 28);
RDMA_OFF(ri_send_wr_t, u, 32);
RDMA_OFF(ri_send_wr_t, u.rdma.remote_addr, 32);
RDMA_OFF(ri_send_wr_t, u.rdma.rkey, 40);
RDMA_OFF(ri_send_wr_t, u.rdma.imm_data, 44);
RDMA_OFF(ri_send_wr_t, u.bind.mw, 32);
RDMA_OFF(ri_send_wr_t, u.bind.mr, 40);
RDMA_OFF(ri_send_wr_t, u.bind.addr, 48);
RDMA_OFF(ri_send_wr_t, u.bind.length, 56);
RDMA_OFF(ri_send_wr_t, u.bind.access, 64);
RDMA_OFF(ri_send_wr_t, u.fast_reg.mr, 32);
RDMA_OFF(ri_send_wr_t, u.fast_reg.pages, 40);
RDMA_OFF(ri_send_wr_t, u.fast_reg.num_pages, 48);
RDMA_OFF(ri_send_wr_t, u.fast_reg.page_shift, 52);
RDMA_OFF(ri_send_wr_t, u.fast_reg.iova, 56);
RDMA_OFF(ri_send_wr_t, u.fast_reg.length, 64);
RDMA_OFF(ri_send_wr_t, u.fast_reg.access, 72);
RDMA_OFF(ri_send_wr_t, u.fast_reg.stag, 76);
RDMA_OFF(ri_send_wr_t, u.atomic.remote_addr, 32);
RDMA_OFF(ri_send_wr_t, u.atomic.rkey, 40);
RDMA_OFF(ri_send_wr_t, u.atomic.compare_add, 48);
RDMA_OFF(ri_send_wr_t, u.atomic.swap, 56);
RDMA_SIZE(ri_recv_wr_t, 24, 8);
RDMA_OFF(ri_recv_wr_t, wr_id, 0);
RDMA_OFF(ri_recv_wr_t, sgl, 8);
RDMA_OFF(ri_recv_wr_t, num_sge, 16);
RDMA_OFF(ri_recv_wr_t, reserved, 20);
RDMA_SIZE(ri_wc_t, 48, 8);
RDMA_OFF(ri_wc_t, wr_id, 0);
RDMA_OFF(ri_wc_t, qp_context, 8);
RDMA_OFF(ri_wc_t, status, 16);
RDMA_OFF(ri_wc_t, opcode, 20);
RDMA_OFF(ri_wc_t, byte_len, 24);
RDMA_OFF(ri_wc_t, flags, 28);
RDMA_OFF(ri_wc_t, qp_num, 32);
RDMA_OFF(ri_wc_t, invalidated_stag, 36);
RDMA_OFF(ri_wc_t, vendor_err, 40);
RDMA_OFF(ri_wc_t, imm_data, 44);
RDMA_SIZE(ri_async_event_t, 32, 8);
RDMA_OFF(ri_async_event_t, resource_type, 0);
RDMA_OFF(ri_async_event_t, event_id, 4);
RDMA_OFF(ri_async_event_t, resource_id, 8);
RDMA_OFF(ri_async_event_t, context, 16);
RDMA_OFF(ri_async_event_t, detail, 24);
RDMA_OFF(ri_async_event_t, reserved, 28);
RDMA_SIZE(ri_verbs_ops_t, 304, 8);
RDMA_OFF(ri_verbs_ops_t, size, 0);
RDMA_OFF(ri_verbs_ops_t, abi_version, 4);
RDMA_OFF(ri_verbs_ops_t, open_rnic, 8);
RDMA_OFF(ri_verbs_ops_t, close_rnic, 16);
RDMA_OFF(ri_verbs_ops_t, query_rnic, 24);
RDMA_OFF(ri_verbs_ops_t, set_aeh, 32);
RDMA_OFF(ri_verbs_ops_t, set_ceh, 40);
RDMA_OFF(ri_verbs_ops_t, clear_handler, 48);
RDMA_OFF(ri_verbs_ops_t, alloc_pd, 56);
RDMA_OFF(ri_verbs_ops_t, dealloc_pd, 64);
RDMA_OFF(ri_verbs_ops_t, create_cq, 72);
RDMA_OFF(ri_verbs_ops_t, query_cq, 80);
RDMA_OFF(ri_verbs_ops_t, resize_cq, 88);
RDMA_OFF(ri_verbs_ops_t, destroy_cq, 96);
RDMA_OFF(ri_verbs_ops_t, poll_cq, 104);
RDMA_OFF(ri_verbs_ops_t, request_cq_notify, 112);
RDMA_OFF(ri_verbs_ops_t, create_qp, 120);
RDMA_OFF(ri_verbs_ops_t, query_qp, 128);
RDMA_OFF(ri_verbs_ops_t, modify_qp, 136);
RDMA_OFF(ri_verbs_ops_t, destroy_qp, 144);
RDMA_OFF(ri_verbs_ops_t, post_send, 152);
RDMA_OFF(ri_verbs_ops_t, post_recv, 160);
RDMA_OFF(ri_verbs_ops_t, create_srq, 168);
RDMA_OFF(ri_verbs_ops_t, query_srq, 176);
RDMA_OFF(ri_verbs_ops_t, modify_srq, 184);
RDMA_OFF(ri_verbs_ops_t, destroy_srq, 192);
RDMA_OFF(ri_verbs_ops_t, post_srq_recv, 200);
RDMA_OFF(ri_verbs_ops_t, register_mr, 208);
RDMA_OFF(ri_verbs_ops_t, register_phys_mr, 216);
RDMA_OFF(ri_verbs_ops_t, register_shared_mr, 224);
RDMA_OFF(ri_verbs_ops_t, alloc_stag, 232);
RDMA_OFF(ri_verbs_ops_t, reregister_mr, 240);
RDMA_OFF(ri_verbs_ops_t, query_mr, 248);
RDMA_OFF(ri_verbs_ops_t, deregister_mr, 256);
RDMA_OFF(ri_verbs_ops_t, alloc_mw, 264);
RDMA_OFF(ri_verbs_ops_t, bind_mw, 272);
RDMA_OFF(ri_verbs_ops_t, dealloc_mw, 280);
RDMA_OFF(ri_verbs_ops_t, syscall, 288); /* ABI 1.1 */
RDMA_OFF(ri_verbs_ops_t, query_qp_stats, 296); /* ABI 1.2 */
RDMA_SIZE(ri_qp_stats_t, 64, 8);               /* ABI 1.2 */
RDMA_OFF(ri_qp_stats_t, tx_bytes, 0);
RDMA_OFF(ri_qp_stats_t, crc_errors, 32);
RDMA_OFF(ri_qp_stats_t, terminates_received, 48);
RDMA_SIZE(ri_kvp_syscall_t, 64, 8);      /* ABI 1.1 */
RDMA_OFF(ri_kvp_syscall_t, call, 8);
RDMA_OFF(ri_kvp_syscall_t, object, 16);
RDMA_OFF(ri_kvp_syscall_t, refs, 24);
RDMA_OFF(ri_kvp_syscall_t, created, 56);
RDMA_SIZE(ri_syscall_modify_t, 8, 4);
RDMA_OFF(ri_syscall_modify_t, mask, 0);
RDMA_OFF(ri_syscall_modify_t, reserved, 4);
RDMA_SIZE(ri_syscall_t, 144, 8);
RDMA_OFF(ri_syscall_t, size, 0);
RDMA_OFF(ri_syscall_t, op, 4);
RDMA_OFF(ri_syscall_t, object, 8);
RDMA_OFF(ri_syscall_t, refs, 16);
RDMA_OFF(ri_syscall_t, param, 48);
RDMA_OFF(ri_syscall_t, param_len, 56);
RDMA_OFF(ri_syscall_t, priv_in_len, 60);
RDMA_OFF(ri_syscall_t, priv_in, 64);
RDMA_OFF(ri_syscall_t, priv_out, 72);
RDMA_OFF(ri_syscall_t, priv_out_cap, 80);
RDMA_OFF(ri_syscall_t, priv_out_len, 84);
RDMA_OFF(ri_syscall_t, result, 88);
RDMA_OFF(ri_syscall_t, result_cap, 96);
RDMA_OFF(ri_syscall_t, result_len, 100);
RDMA_OFF(ri_syscall_t, fds_in, 104);
RDMA_OFF(ri_syscall_t, nfds_in, 112);
RDMA_OFF(ri_syscall_t, nfds_out_cap, 116);
RDMA_OFF(ri_syscall_t, fds_out, 120);
RDMA_OFF(ri_syscall_t, nfds_out, 128);
RDMA_OFF(ri_syscall_t, reserved, 132);
RDMA_OFF(ri_syscall_t, handle_out, 136);
RDMA_SIZE(ri_pin_t, 32, 8);
RDMA_OFF(ri_pin_t, pin_id, 0);
RDMA_OFF(ri_pin_t, addr, 8);
RDMA_OFF(ri_pin_t, length, 16);
RDMA_OFF(ri_pin_t, page_size, 24);
RDMA_OFF(ri_pin_t, reserved, 28);
RDMA_SIZE(ri_host_ops_t, 64, 8);
RDMA_OFF(ri_host_ops_t, size, 0);
RDMA_OFF(ri_host_ops_t, abi_version, 4);
RDMA_OFF(ri_host_ops_t, log, 8);
RDMA_OFF(ri_host_ops_t, vm_pin_range, 16);
RDMA_OFF(ri_host_ops_t, vm_unpin_range, 24);
RDMA_OFF(ri_host_ops_t, syscall, 32);
RDMA_OFF(ri_host_ops_t, mem_charge, 40);
RDMA_OFF(ri_host_ops_t, mem_uncharge, 48);
RDMA_OFF(ri_host_ops_t, syscall_post, 56);
RDMA_SIZE(ri_module_t, 88, 8);
RDMA_OFF(ri_module_t, size, 0);
RDMA_OFF(ri_module_t, abi_version, 4);
RDMA_OFF(ri_module_t, mode, 8);
RDMA_OFF(ri_module_t, flags, 12);
RDMA_OFF(ri_module_t, name, 16);
RDMA_OFF(ri_module_t, vendor, 24);
RDMA_OFF(ri_module_t, version, 32);
RDMA_OFF(ri_module_t, uvp_library, 40);
RDMA_OFF(ri_module_t, verbs, 48);
RDMA_OFF(ri_module_t, attach, 56);
RDMA_OFF(ri_module_t, detach, 64);
RDMA_OFF(ri_module_t, fini, 72);
RDMA_OFF(ri_module_t, control, 80);

/* Enumerator values travel between processes and modules: they are ABI too. */
_Static_assert(RI_QPS_IDLE == 0 && RI_QPS_RTS == 1 && RI_QPS_CLOSING == 2 && RI_QPS_TERMINATE == 3 &&
                   RI_QPS_ERROR == 4,
               "ABI: QP state values changed");
_Static_assert(RI_WR_SEND == 0 && RI_WR_RDMA_WRITE == 4 && RI_WR_RDMA_READ == 5 && RI_WR_BIND_MW == 7 &&
                   RI_WR_ATOMIC_CMP_SWAP == 11,
               "ABI: work request opcodes changed");
_Static_assert(RI_WC_RECV == 128 && RI_WC_GENERAL_ERR == 13, "ABI: completion values changed");
_Static_assert(RI_LLP_SAME_HOST == 16 && RI_MPA_RFC7306 == 32 && RI_LLP_FPDU_FIXED == 64, "ABI: LLP flag values changed");
_Static_assert(RI_OPEN_RNIC == 1 && RI_CREATE_QP == 9 && RI_SET_AEH == 25 && RI_QUERY_SRQ == 26 &&
                   RI_QUERY_CQ == 27, "ABI: syscall op codes changed");
_Static_assert(RI_MODE_PRIVILEGED == 1 && RI_MODE_NONPRIVILEGED == 2, "ABI: mode values changed");
_Static_assert(RI_AE_RNIC_LINK_UP == 16 && RI_RES_MR == 5, "ABI: event values changed");

struct errno_pair {
    int ri;
    int libc;
    const char *name;
};

int main(void) {
    static const struct errno_pair pairs[] = {
        {RI_EPERM, EPERM, "EPERM"},         {RI_ENOENT, ENOENT, "ENOENT"},
        {RI_EINTR, EINTR, "EINTR"},         {RI_EIO, EIO, "EIO"},
        {RI_ENOEXEC, ENOEXEC, "ENOEXEC"},   {RI_EBADF, EBADF, "EBADF"},
        {RI_EAGAIN, EAGAIN, "EAGAIN"},      {RI_ENOMEM, ENOMEM, "ENOMEM"},
        {RI_EACCES, EACCES, "EACCES"},      {RI_EFAULT, EFAULT, "EFAULT"},
        {RI_EBUSY, EBUSY, "EBUSY"},         {RI_EEXIST, EEXIST, "EEXIST"},
        {RI_ENODEV, ENODEV, "ENODEV"},      {RI_EINVAL, EINVAL, "EINVAL"},
        {RI_ENOTTY, ENOTTY, "ENOTTY"},      {RI_ENAMETOOLONG, ENAMETOOLONG, "ENAMETOOLONG"},
        {RI_ENOSPC, ENOSPC, "ENOSPC"},      {RI_ERANGE, ERANGE, "ERANGE"},
        {RI_ENOSYS, ENOSYS, "ENOSYS"},      {RI_EPROTO, EPROTO, "EPROTO"},
        {RI_EOVERFLOW, EOVERFLOW, "EOVERFLOW"}, {RI_ELIBBAD, ELIBBAD, "ELIBBAD"},
        {RI_EMSGSIZE, EMSGSIZE, "EMSGSIZE"}, {RI_EOPNOTSUPP, EOPNOTSUPP, "EOPNOTSUPP"},
        {RI_EAFNOSUPPORT, EAFNOSUPPORT, "EAFNOSUPPORT"}, {RI_EADDRINUSE, EADDRINUSE, "EADDRINUSE"},
        {RI_EADDRNOTAVAIL, EADDRNOTAVAIL, "EADDRNOTAVAIL"}, {RI_ENETUNREACH, ENETUNREACH, "ENETUNREACH"},
        {RI_ECONNABORTED, ECONNABORTED, "ECONNABORTED"}, {RI_EISCONN, EISCONN, "EISCONN"},
        {RI_ECONNRESET, ECONNRESET, "ECONNRESET"}, {RI_ENOTCONN, ENOTCONN, "ENOTCONN"},
        {RI_ETIMEDOUT, ETIMEDOUT, "ETIMEDOUT"}, {RI_ECONNREFUSED, ECONNREFUSED, "ECONNREFUSED"},
        {RI_EHOSTUNREACH, EHOSTUNREACH, "EHOSTUNREACH"}, {RI_ECANCELED, ECANCELED, "ECANCELED"},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i) {
        if (pairs[i].ri != pairs[i].libc) {
            fprintf(stderr, "RI_%s is %d but the C library's %s is %d\n", pairs[i].name, pairs[i].ri,
                    pairs[i].name, pairs[i].libc);
            ++failures;
        }
    }
    printf("%d passed, %d failed\n", (int)(sizeof pairs / sizeof pairs[0]) - failures, failures);
    return failures == 0 ? 0 : 1;
}
