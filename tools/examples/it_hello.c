/*
 * it_hello: the smallest complete IT-API program, a client and a server in one file. The client connects, Sends a
 * greeting and waits for the answer; the server accepts one connection, prints what it received and Sends an
 * answer back; both then disconnect. Build it against an installed OpenRDMA with
 *
 *     cc -o it_hello it_hello.c $(pkg-config --cflags --libs itapi)
 *
 * and run `it_hello -s` on one host and `it_hello -c SERVER_ADDRESS` on another (or both here, with an RNIC on
 * 127.0.0.1). The interface is the RNIC krdmad serves at the given address (-i ADDRESS_OR_NAME), by default the
 * first one listed.
 */
#define _POSIX_C_SOURCE 200809L /* getopt, inet_pton */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <it_api.h>

enum { kSize = 256, kWaitUs = 10 * 1000 * 1000 };

struct hello {
    it_ia_handle_t ia;
    it_pz_handle_t pz;
    it_evd_handle_t dto, cm, req;
    it_ep_handle_t ep;
    it_lmr_handle_t lmr;
    char buf[2 * kSize]; /* receive slot, then send slot */
};

static int check(it_status_t st, const char *call) {
    if (st == IT_SUCCESS) return 1;
    fprintf(stderr, "it_hello: %s failed: IT-API status %d\n", call, (int)st);
    return 0;
}

/* Waits for the next event of @p evd (10 s at most); 1 when it is of type @p want. */
static int expect(it_evd_handle_t evd, it_event_type_t want, it_event_t *ev, const char *what) {
    size_t more = 0;
    if (!check(it_evd_wait(evd, kWaitUs, ev, &more), what)) return 0;
    if (ev->event_number != want) {
        fprintf(stderr, "it_hello: %s: event %#x instead of %#x\n", what, (unsigned)ev->event_number, (unsigned)want);
        return 0;
    }
    if (want == IT_DTO_SEND_CMPL_EVENT || want == IT_DTO_RC_RECV_CMPL_EVENT) {
        if (ev->dto_cmpl.dto_status != IT_DTO_SUCCESS) {
            fprintf(stderr, "it_hello: %s: completion status %d\n", what, (int)ev->dto_cmpl.dto_status);
            return 0;
        }
    }
    return 1;
}

static it_lmr_triplet_t slot(struct hello *h, int send, size_t length) {
    it_lmr_triplet_t t;
    t.lmr = h->lmr;
    t.addr.abs = h->buf + (send ? kSize : 0);
    t.length = length;
    return t;
}

/* The interface, its protection zone, event streams, registered buffer and one endpoint with a receive posted. */
static int open_all(struct hello *h, const char *interface) {
    it_interface_t list[8];
    size_t count = 8, total = 0;
    if (interface == NULL) {
        it_interface_list(list, &count, &total);
        if (count == 0) {
            fprintf(stderr, "it_hello: no IT-API interface (is krdmad running with an RNIC?)\n");
            return 0;
        }
        interface = list[0].name;
    }
    const it_evd_flags_t none = (it_evd_flags_t)0;
    it_ep_attributes_t a;
    memset(&a, 0, sizeof a);
    a.max_dto_payload_size = kSize;
    a.max_request_dtos = 4;
    a.max_recv_dtos = 4;
    a.max_send_segments = 1;
    a.max_recv_segments = 1;
    a.srv.rc.max_rdma_read_segments = 1;
    a.srv.rc.soft_hi_watermark = IT_HARD_HI_WATERMARK_DISABLE;
    a.srv.rc.hard_hi_watermark = IT_HARD_HI_WATERMARK_DISABLE;
    it_lmr_triplet_t r = {0};
    return check(it_ia_create(interface, 2, 1, &h->ia), "it_ia_create") && check(it_pz_create(h->ia, &h->pz), "it_pz_create") &&
           check(it_evd_create(h->ia, IT_DTO_EVENT_STREAM, none, 16, 1, NULL, &h->dto, NULL), "it_evd_create(DTO)") &&
           check(it_evd_create(h->ia, IT_CM_MSG_EVENT_STREAM, none, 16, 1, NULL, &h->cm, NULL), "it_evd_create(CM)") &&
           check(it_lmr_create21(h->pz, h->buf, NULL, sizeof h->buf, IT_ADDR_MODE_ABSOLUTE, IT_PRIV_LOCAL,
                                 IT_LMR_FLAG_NONE, 0, &h->lmr, NULL),
                 "it_lmr_create") &&
           check(it_ep_rc_create(h->pz, h->dto, h->dto, h->cm, IT_EP_NO_FLAG, &a, &h->ep), "it_ep_rc_create") &&
           (r = slot(h, 0, kSize), check(it_post_recv(h->ep, &r, 1, 1, IT_COMPLETION_FLAG), "it_post_recv"));
}

/* Sends @p text and waits for its completion. */
static int say(struct hello *h, const char *text) {
    const size_t n = strlen(text) + 1;
    memcpy(h->buf + kSize, text, n);
    it_lmr_triplet_t s = slot(h, 1, n);
    it_event_t ev;
    return check(it_post_send(h->ep, &s, 1, 2, IT_COMPLETION_FLAG), "it_post_send") &&
           expect(h->dto, IT_DTO_SEND_CMPL_EVENT, &ev, "the Send's completion");
}

static int server(struct hello *h, uint16_t port) {
    it_conn_qual_t q;
    memset(&q, 0, sizeof q);
    q.type = IT_IANA_PORT;
    q.conn_qual.port = htons(port);
    it_listen_handle_t listen;
    it_event_t ev;
    if (!check(it_evd_create(h->ia, IT_CM_REQ_EVENT_STREAM, (it_evd_flags_t)0, 4, 1, NULL, &h->req, NULL),
               "it_evd_create(request)") ||
        !check(it_listen_create(h->ia, 0, h->req, IT_LISTEN_CONN_QUAL_INPUT, &q, &listen), "it_listen_create")) {
        return 0;
    }
    printf("it_hello: listening on port %u\n", (unsigned)port);
    fflush(stdout);
    size_t more = 0;
    if (!check(it_evd_wait(h->req, IT_TIMEOUT_INFINITE, &ev, &more), "it_evd_wait(request)") ||
        !check(it_ep_accept(h->ep, ev.conn_req.cn_est_id, NULL, 0), "it_ep_accept") ||
        !expect(h->cm, IT_CM_MSG_CONN_ESTABLISHED_EVENT, &ev, "the connection") ||
        !expect(h->dto, IT_DTO_RC_RECV_CMPL_EVENT, &ev, "the client's greeting")) {
        return 0;
    }
    printf("it_hello: the client says \"%s\"\n", h->buf);
    if (!say(h, "hello from the server")) return 0;
    /* The client disconnects once it has the answer. */
    return expect(h->cm, IT_CM_MSG_CONN_DISCONNECT_EVENT, &ev, "the client's disconnect");
}

static int client(struct hello *h, const char *address, uint16_t port) {
    it_net_addr_t to;
    memset(&to, 0, sizeof to);
    to.addr_type = IT_IPV4;
    if (inet_pton(AF_INET, address, &to.addr.ipv4) != 1) {
        fprintf(stderr, "it_hello: %s is not an IPv4 address\n", address);
        return 0;
    }
    it_path_t path;
    size_t paths = 1, total = 0;
    it_conn_qual_t q;
    memset(&q, 0, sizeof q);
    q.type = IT_IANA_PORT;
    q.conn_qual.port = htons(port);
    it_event_t ev;
    if (!check(it_get_pathinfo(h->ia, 0, &to, &paths, &total, &path), "it_get_pathinfo") ||
        !check(it_ep_connect(h->ep, &path, NULL, &q, IT_CONNECT_FLAG_TWO_WAY, NULL, 0), "it_ep_connect") ||
        !expect(h->cm, IT_CM_MSG_CONN_ESTABLISHED_EVENT, &ev, "the connection") ||
        !say(h, "hello from the client") || !expect(h->dto, IT_DTO_RC_RECV_CMPL_EVENT, &ev, "the server's answer")) {
        return 0;
    }
    printf("it_hello: the server says \"%s\"\n", h->buf);
    return check(it_ep_disconnect(h->ep, NULL, 0), "it_ep_disconnect") &&
           expect(h->cm, IT_CM_MSG_CONN_DISCONNECT_EVENT, &ev, "the disconnect");
}

int main(int argc, char **argv) {
    const char *server_address = NULL, *interface = NULL;
    int serve = 0, opt;
    uint16_t port = 7790;
    while ((opt = getopt(argc, argv, "sc:p:i:")) != -1) {
        switch (opt) {
            case 's': serve = 1; break;
            case 'c': server_address = optarg; break;
            case 'p': port = (uint16_t)atoi(optarg); break;
            case 'i': interface = optarg; break;
            default: break;
        }
    }
    if (serve == (server_address != NULL)) {
        fprintf(stderr, "usage: it_hello -s [-p PORT] [-i INTERFACE] | -c SERVER_ADDRESS [-p PORT] [-i INTERFACE]\n");
        return 2;
    }
    static struct hello h;
    int ok = open_all(&h, interface) && (serve ? server(&h, port) : client(&h, server_address, port));
    if (h.ia != NULL) (void)it_ia_free(h.ia); /* frees everything created on it */
    return ok ? 0 : 1;
}
