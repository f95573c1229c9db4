// SPDX-License-Identifier: GPL-2.0
/*
 * The kAL's TCP peer detection for the sockets layer: a sockops program on the host's cgroup v2 root that, for the
 * sockets a process marked in the peer_marks map (before connect or listen), puts an experimental TCP option
 * (kind 254, RFC 6994 ExID 0x4f52, "OR") in the SYN and the SYN-ACK, and records in the map whether the peer's
 * handshake carried it. Sockets nobody marked cost one map lookup per callback and get nothing else: a peer
 * without the layer receives no byte and no option it did not ask for.
 *
 * Built with clang -target bpf and embedded in the kAL (peer_marks.cpp loads it).
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#define SOL_TCP 6
#define TCP_SAVE_SYN 27  /* the listener keeps the SYN, so that its child can read the client's option */
#define TCPHDR_SYN 0x02

/* One socket's mark; the layout is krdma::PeerMark's (krdma/include/krdma/peer_marks.hpp). */
struct peer_mark {
    __u8 marked; /* set by the process: this end runs the layer */
    __u8 peer;   /* set here once established: 1 the peer's handshake carried the option, 2 it did not */
    __u8 role;   /* set here once established: 1 this end connected, 2 it was accepted */
    __u8 reserved[5];
};

struct {
    __uint(type, BPF_MAP_TYPE_SK_STORAGE);
    /* An accepted child inherits its listener's mark. */
    __uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
    __type(key, int);
    __type(value, struct peer_mark);
} peer_marks SEC(".maps");

SEC("sockops")
int openrdma_peer_marks(struct bpf_sock_ops *skops) {
    const int flags = BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG | BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG;
    __u8 option[4] = {254, 4, 0x4f, 0x52};
    /* The option callbacks come only for sockets whose flags were set below (marked ones); a SYN-ACK's comes for
     * the listener's request, which has no storage of its own: no map look-up there. A syncookie SYN-ACK carries no
     * option: the listener keeps no SYN then, so its child could not tell what the client said, and the two ends
     * must never disagree (the client would convert alone). */
    if ((skops->op == BPF_SOCK_OPS_HDR_OPT_LEN_CB || skops->op == BPF_SOCK_OPS_WRITE_HDR_OPT_CB) &&
        (skops->args[0] & BPF_WRITE_HDR_TCP_SYNACK_COOKIE) != 0) {
        return 1;
    }
    if (skops->op == BPF_SOCK_OPS_HDR_OPT_LEN_CB) {
        if (skops->skb_tcp_flags & TCPHDR_SYN) bpf_reserve_hdr_opt(skops, sizeof option, 0);
        return 1;
    }
    if (skops->op == BPF_SOCK_OPS_WRITE_HDR_OPT_CB) {
        if (skops->skb_tcp_flags & TCPHDR_SYN) bpf_store_hdr_opt(skops, option, sizeof option, 0);
        return 1;
    }
    struct bpf_sock *sk = skops->sk;
    if (sk == 0) return 1;
    struct peer_mark *m = bpf_sk_storage_get(&peer_marks, sk, 0, 0);
    if (m == 0 || m->marked == 0) return 1;
    switch (skops->op) {
    case BPF_SOCK_OPS_TCP_LISTEN_CB: {
        int one = 1;
        bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof one);
        bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | flags);
        break;
    }
    case BPF_SOCK_OPS_TCP_CONNECT_CB:
        bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | flags);
        break;
    case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
        /* The SYN-ACK: did the server's handshake carry the option? Decided: no more option callbacks, so the
         * connection's later packets cost nothing here. */
        m->peer = bpf_load_hdr_opt(skops, option, sizeof option, 0) > 0 ? 1 : 2;
        m->role = 1;
        bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~flags);
        break;
    case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
        /* The client's SYN, saved by the listener (TCP_SAVE_SYN); the child stops the callbacks as above. */
        m->peer = bpf_load_hdr_opt(skops, option, sizeof option, BPF_LOAD_HDR_OPT_TCP_SYN) > 0 ? 1 : 2;
        m->role = 2;
        bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags & ~flags);
        break;
    default:
        break;
    }
    return 1;
}

char _license[] SEC("license") = "GPL";
