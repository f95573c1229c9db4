/*
 * kernel_echo: a kernel consumer module, written in C against the kernel IT-API that krdmad exports. It listens on
 * an RNIC's port and echoes every message a connected peer Sends back to it, one connection at a time - the shape
 * of a kernel service (a storage target answering requests) in a few hundred lines.
 *
 * krdmad configuration:
 *   "consumers": [{"module": "kernel_echo.so", "args": {"rnic": "sr0", "port": 7471}}]
 * The module needs nothing but <it_api.h> and <krdma/consumer_module.h>; its it_* calls resolve against krdmad.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <it_api.h>
#include <it_api_openrdma.h>

#include "krdma/consumer_module.h"

enum { kMessage = 4096, kDepth = 16 };

struct echo {
    const krdma_consumer_env_t *env;
    char rnic[64];
    uint16_t port;
    atomic_int stop;
    pthread_t thread;
    it_ia_handle_t ia;
    it_pz_handle_t pz;
    it_evd_handle_t aevd, dto, cm, req;
    it_listen_handle_t listen;
    it_ep_handle_t ep;
    it_lmr_handle_t lmr;
    unsigned char *buf; /* kDepth receive slots, then one send slot per receive slot */
};

#define LOG(e, level, ...) (e)->env->log((e)->env, (level), __VA_ARGS__)

/* Small helpers: a status check that logs the failing call. */
static int ok(struct echo *e, it_status_t st, const char *call) {
    if (st == IT_SUCCESS) return 1;
    /* The IT-API's reason, when it has one for this call (OpenRDMA's extension). */
    const char *failed_call = NULL;
    const char *why = openrdma_it_last_error(&failed_call);
    if (why[0] != '\0' && strcmp(failed_call, call) == 0) {
        LOG(e, KRDMA_CONSUMER_LOG_ERROR, "%s failed: IT-API status %d: %s", call, (int)st, why);
    } else {
        LOG(e, KRDMA_CONSUMER_LOG_ERROR, "%s failed: IT-API status %d", call, (int)st);
    }
    return 0;
}

static it_lmr_triplet_t slot(struct echo *e, size_t i, size_t len) {
    it_lmr_triplet_t t;
    t.lmr = e->lmr;
    t.addr.abs = e->buf + i * kMessage;
    t.length = len;
    return t;
}

static it_status_t new_endpoint(struct echo *e) {
    it_ep_attributes_t a;
    memset(&a, 0, sizeof a);
    a.max_dto_payload_size = kMessage;
    a.max_request_dtos = kDepth;
    a.max_recv_dtos = kDepth;
    a.max_send_segments = 1;
    a.max_recv_segments = 1;
    a.srv.rc.rdma_read_enable = IT_FALSE;
    a.srv.rc.rdma_write_enable = IT_FALSE;
    a.srv.rc.max_rdma_read_segments = 1;
    it_status_t st = it_ep_rc_create(e->pz, e->dto, e->dto, e->cm, IT_EP_NO_FLAG, &a, &e->ep);
    for (size_t i = 0; st == IT_SUCCESS && i < kDepth; ++i) {
        it_lmr_triplet_t t = slot(e, i, kMessage);
        st = it_post_recv(e->ep, &t, 1, i, IT_COMPLETION_FLAG);
    }
    return st;
}

/* One event of the AEVD: a request to take (when idle), the connection's events, or a completion. */
static void handle(struct echo *e, const it_event_t *ev) {
    switch (ev->event_number) {
        case IT_CM_REQ_CONN_REQUEST_EVENT:
            if (e->ep != NULL) {
                (void)it_reject(ev->conn_req.cn_est_id, (const unsigned char *)"busy", 4);
            } else if (ok(e, new_endpoint(e), "it_ep_rc_create")) {
                (void)ok(e, it_ep_accept(e->ep, ev->conn_req.cn_est_id, NULL, 0), "it_ep_accept");
            }
            return;
        case IT_CM_MSG_CONN_ESTABLISHED_EVENT: LOG(e, KRDMA_CONSUMER_LOG_INFO, "peer connected"); return;
        case IT_CM_MSG_CONN_DISCONNECT_EVENT:
        case IT_CM_MSG_CONN_BROKEN_EVENT:
        case IT_CM_MSG_CONN_PEER_REJECT_EVENT:
        case IT_CM_MSG_CONN_NONPEER_REJECT_EVENT:
            LOG(e, KRDMA_CONSUMER_LOG_INFO, "connection ended (event %#x)", (unsigned)ev->event_number);
            if (e->ep != NULL) {
                if (ev->event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT) (void)it_ep_disconnect(e->ep, NULL, 0);
                (void)it_ep_free(e->ep);
                e->ep = NULL;
            }
            return;
        case IT_DTO_RC_RECV_CMPL_EVENT: {
            const size_t i = (size_t)ev->dto_cmpl.cookie;
            if (ev->dto_cmpl.dto_status != IT_DTO_SUCCESS || e->ep == NULL || i >= kDepth) return;
            /* Echo from the send slot paired with this receive slot, then give the receive slot back. */
            memcpy(e->buf + (kDepth + i) * kMessage, e->buf + i * kMessage, ev->dto_cmpl.transferred_length);
            it_lmr_triplet_t s = slot(e, kDepth + i, ev->dto_cmpl.transferred_length);
            (void)ok(e, it_post_send(e->ep, &s, 1, kDepth + i, IT_COMPLETION_FLAG), "it_post_send");
            it_lmr_triplet_t r = slot(e, i, kMessage);
            (void)ok(e, it_post_recv(e->ep, &r, 1, i, IT_COMPLETION_FLAG), "it_post_recv");
            return;
        }
        default: return; /* send completions, flushes */
    }
}

static void *serve(void *arg) {
    struct echo *e = arg;
    while (!atomic_load(&e->stop)) {
        it_event_t ev;
        size_t more = 0;
        it_status_t st = it_evd_wait(e->aevd, 100000 /* us: look at the stop flag */, &ev, &more);
        if (st == IT_SUCCESS) handle(e, &ev);
    }
    return NULL;
}

/* The value of "key": "..." or "key": number in the argument object (a small module keeps its own tiny parser). */
static int arg(const char *json, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = json != NULL ? strstr(json, pat) : NULL;
    if (p == NULL) return 0;
    p = strchr(p + strlen(pat), ':');
    if (p == NULL) return 0;
    ++p;
    while (*p == ' ' || *p == '"') ++p;
    size_t n = strcspn(p, "\",} ");
    if (n == 0 || n >= cap) return 0;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

static int echo_start(const krdma_consumer_env_t *env, const char *args_json, void **state) {
    struct echo *e = calloc(1, sizeof *e);
    if (e == NULL) return ENOMEM;
    e->env = env;
    char port[16] = "7471";
    if (!arg(args_json, "rnic", e->rnic, sizeof e->rnic)) strcpy(e->rnic, "sr0");
    (void)arg(args_json, "port", port, sizeof port);
    e->port = (uint16_t)atoi(port);
    e->buf = calloc(2 * kDepth, kMessage);
    it_conn_qual_t q;
    memset(&q, 0, sizeof q);
    q.type = IT_IANA_PORT;
    q.conn_qual.port = htons(e->port);
    const it_evd_flags_t none = (it_evd_flags_t)0;
    if (e->buf == NULL || !ok(e, it_ia_create(e->rnic, 2, 1, &e->ia), "it_ia_create") ||
        !ok(e, it_pz_create(e->ia, &e->pz), "it_pz_create") ||
        !ok(e, it_evd_create(e->ia, IT_AEVD_NOTIFICATION_EVENT_STREAM, none, 0, 0, NULL, &e->aevd, NULL), "AEVD") ||
        !ok(e, it_evd_create(e->ia, IT_DTO_EVENT_STREAM, none, 4 * kDepth, 0, e->aevd, &e->dto, NULL), "DTO SEVD") ||
        !ok(e, it_evd_create(e->ia, IT_CM_MSG_EVENT_STREAM, none, 16, 0, e->aevd, &e->cm, NULL), "CM SEVD") ||
        !ok(e, it_evd_create(e->ia, IT_CM_REQ_EVENT_STREAM, none, 16, 0, e->aevd, &e->req, NULL), "request SEVD") ||
        !ok(e, it_lmr_create21(e->pz, e->buf, NULL, 2 * kDepth * kMessage, IT_ADDR_MODE_ABSOLUTE, IT_PRIV_LOCAL,
                               IT_LMR_FLAG_NONE, 0, &e->lmr, NULL),
            "it_lmr_create") ||
        !ok(e, it_listen_create(e->ia, 0, e->req, IT_LISTEN_CONN_QUAL_INPUT, &q, &e->listen), "it_listen_create")) {
        if (e->ia != NULL) (void)it_ia_free(e->ia);
        free(e->buf);
        free(e);
        return EIO;
    }
    if (pthread_create(&e->thread, NULL, serve, e) != 0) {
        (void)it_ia_free(e->ia);
        free(e->buf);
        free(e);
        return EAGAIN;
    }
    LOG(e, KRDMA_CONSUMER_LOG_INFO, "echoing on %s port %u", e->rnic, (unsigned)e->port);
    *state = e;
    return 0;
}

static void echo_stop(void *state) {
    struct echo *e = state;
    atomic_store(&e->stop, 1);
    pthread_join(e->thread, NULL);
    (void)it_ia_free(e->ia); /* frees the endpoint, listen point, SEVDs, LMR and PZ with it */
    free(e->buf);
    free(e);
}

/** The module's entry symbol. */
KRDMA_CONSUMER_MODULE_EXPORT const krdma_consumer_module_t krdma_consumer_module_v1 = {
    sizeof(krdma_consumer_module_t),
    KRDMA_CONSUMER_ABI_VERSION,
    "kernel-echo",
    "kernel IT-API example: echoes each Send of a connected peer",
    &echo_start,
    &echo_stop,
};
