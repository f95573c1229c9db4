/*
 * blk_service: an RDMA block service as a kernel consumer module, written in C against the kDAPL that krdmad
 * exports (<dat2/kdat.h>). It serves one volume - RAM, or a file mapped into krdmad - to uDAPL clients
 * (dapl_blk): a client Sends a request naming a range of the volume and a buffer of its own; the service moves
 * the data with RDMA itself (READ: an RDMA Write into the client's buffer; WRITE: an RDMA Read from it) and Sends
 * the reply. Every event reaches it by upcall (no thread of its own, no waiting), as a kernel service's would.
 *
 * krdmad configuration:
 *   "consumers": [{"module": "blk_service.so",
 *                  "args": {"rnic": "sr0", "port": 7480, "size_mb": 64, "file": "/var/lib/blk.img"}}]
 * "file" is optional (a RAM volume of size_mb otherwise); a file volume has the file's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dat2/kdat.h>

#include "blk_proto.h"
#include "krdma/consumer_module.h"

enum {
    kMaxConnections = 16,
    kMaxIo = 1 << 20, /* largest transfer */
    kDepth = BLK_QUEUE_DEPTH
};

/* A work request's cookie: connection slot, what completed, message slot. */
#define COOKIE(conn, kind, slot) ((((uint64_t)(conn)) << 32) | ((uint64_t)(kind) << 16) | (uint64_t)(slot))
#define COOKIE_CONN(c) ((unsigned)((c) >> 32))
#define COOKIE_KIND(c) ((unsigned)(((c) >> 16) & 0xffff))
#define COOKIE_SLOT(c) ((unsigned)((c)&0xffff))
enum { kRecv = 1, kReply = 2, kPull = 3 /* RDMA Read of a WRITE's data */, kPush = 4 /* RDMA Write of a READ */ };

struct msgs {
    struct blk_request req[kDepth];
    struct blk_reply rep[kDepth];
};

struct conn {
    DAT_EP_HANDLE ep; /* NULL: the slot is free */
    int established;
};

struct blk {
    const krdma_consumer_env_t *env;
    char rnic[64];
    uint16_t port;
    uint64_t size;
    int fd; /* file volume, else -1 */
    uint8_t *volume;
    pthread_mutex_t mutex; /* guards conns (upcalls of different EVDs run on different threads) */
    struct conn conns[kMaxConnections];
    struct msgs *msgs; /* kMaxConnections of them, one LMR */
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async_evd, cr_evd, conn_evd, dto_evd;
    DAT_PZ_HANDLE pz;
    DAT_PSP_HANDLE psp;
    DAT_LMR_HANDLE volume_lmr, msgs_lmr;
    DAT_LMR_CONTEXT volume_lkey, msgs_lkey;
    unsigned long served;
};

#define LOG(b, level, ...) (b)->env->log((b)->env, (level), __VA_ARGS__)

static const char *why(DAT_RETURN r) {
    static __thread char text[160];
    const char *major = "", *minor = "";
    dat_strerror(r, &major, &minor);
    snprintf(text, sizeof text, "%s %s (0x%x)", major, minor, (unsigned)r);
    return text;
}

static int ok(struct blk *b, DAT_RETURN r, const char *call) {
    if (r == DAT_SUCCESS) return 1;
    LOG(b, KRDMA_CONSUMER_LOG_ERROR, "%s failed: %s", call, why(r));
    return 0;
}

static DAT_LMR_TRIPLET msg_iov(struct blk *b, void *p, size_t len) {
    DAT_LMR_TRIPLET t;
    t.lmr_context = b->msgs_lkey;
    t.virtual_address = (DAT_VADDR)(uintptr_t)p;
    t.segment_length = (DAT_SEG_LENGTH)len;
    return t;
}

static DAT_RETURN post_recv(struct blk *b, unsigned c, unsigned slot) {
    DAT_LMR_TRIPLET t = msg_iov(b, &b->msgs[c].req[slot], sizeof(struct blk_request));
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = COOKIE(c, kRecv, slot);
    return dat_ep_post_recv(b->conns[c].ep, 1, &t, cookie, DAT_COMPLETION_DEFAULT_FLAG);
}

/* Sends the reply in message slot @p slot of connection @p c, then gives the slot's receive back. */
static void reply(struct blk *b, unsigned c, unsigned slot, uint32_t status) {
    struct blk_reply *r = &b->msgs[c].rep[slot];
    r->magic = BLK_MAGIC;
    r->status = status;
    r->id = b->msgs[c].req[slot].id;
    r->volume_size = b->size;
    r->max_io = kMaxIo;
    r->reserved = 0;
    DAT_LMR_TRIPLET t = msg_iov(b, r, sizeof *r);
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = COOKIE(c, kReply, slot);
    /* The next request may only come after this reply: its receive is posted first. */
    (void)ok(b, post_recv(b, c, slot), "dat_ep_post_recv");
    (void)ok(b, dat_ep_post_send(b->conns[c].ep, 1, &t, cookie, DAT_COMPLETION_SUPPRESS_FLAG), "dat_ep_post_send");
}

/* A request arrived in message slot @p slot of connection @p c. */
static void request(struct blk *b, unsigned c, unsigned slot, DAT_COUNT length) {
    const struct blk_request *q = &b->msgs[c].req[slot];
    if ((size_t)length != sizeof *q || q->magic != BLK_MAGIC) {
        reply(b, c, slot, BLK_EINVAL);
        return;
    }
    if (q->op == BLK_OP_HELLO) {
        reply(b, c, slot, BLK_OK);
        return;
    }
    if ((q->op != BLK_OP_READ && q->op != BLK_OP_WRITE)) {
        reply(b, c, slot, BLK_EINVAL);
        return;
    }
    if (q->length == 0 || q->length > kMaxIo || q->offset > b->size || q->length > b->size - q->offset) {
        reply(b, c, slot, BLK_ERANGE);
        return;
    }
    DAT_LMR_TRIPLET local;
    local.lmr_context = b->volume_lkey;
    local.virtual_address = (DAT_VADDR)(uintptr_t)(b->volume + q->offset);
    local.segment_length = q->length;
    DAT_RMR_TRIPLET remote;
    remote.rmr_context = q->rmr_context;
    remote.virtual_address = q->address;
    remote.segment_length = q->length;
    DAT_DTO_COOKIE cookie;
    if (q->op == BLK_OP_READ) {
        /* The RDMA Write is placed before the reply that follows it on the same connection. */
        cookie.as_64 = COOKIE(c, kPush, slot);
        if (!ok(b, dat_ep_post_rdma_write(b->conns[c].ep, 1, &local, cookie, &remote, DAT_COMPLETION_SUPPRESS_FLAG),
                "dat_ep_post_rdma_write")) {
            reply(b, c, slot, BLK_EIO);
            return;
        }
        reply(b, c, slot, BLK_OK);
    } else {
        /* The reply waits for the RDMA Read's completion: the data must be in the volume first. */
        cookie.as_64 = COOKIE(c, kPull, slot);
        if (!ok(b, dat_ep_post_rdma_read(b->conns[c].ep, 1, &local, cookie, &remote, DAT_COMPLETION_DEFAULT_FLAG),
                "dat_ep_post_rdma_read")) {
            reply(b, c, slot, BLK_EIO);
        }
    }
}

static void dto_upcall(DAT_PVOID data, const DAT_EVENT *ev, DAT_BOOLEAN more) {
    struct blk *b = data;
    (void)more;
    if (ev->event_number != DAT_DTO_COMPLETION_EVENT) return;
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
    const uint64_t cookie = d->user_cookie.as_64;
    const unsigned c = COOKIE_CONN(cookie), slot = COOKIE_SLOT(cookie);
    if (c >= kMaxConnections || slot >= kDepth) return;
    pthread_mutex_lock(&b->mutex);
    if (b->conns[c].ep == NULL || b->conns[c].ep != d->ep_handle) {
        pthread_mutex_unlock(&b->mutex); /* a flushed request of a connection that is gone */
        return;
    }
    if (d->status != DAT_DTO_SUCCESS) {
        if (d->status != DAT_DTO_ERR_FLUSHED) {
            LOG(b, KRDMA_CONSUMER_LOG_WARN, "connection %u: completion status %d", c, (int)d->status);
        }
        pthread_mutex_unlock(&b->mutex);
        return;
    }
    switch (COOKIE_KIND(cookie)) {
        case kRecv: request(b, c, slot, (DAT_COUNT)d->transfered_length); break;
        case kPull:
            ++b->served;
            reply(b, c, slot, BLK_OK);
            break;
        default: break;
    }
    pthread_mutex_unlock(&b->mutex);
}

/* A connection request: an EP of a free slot accepts it, or it is refused. */
static void cr_upcall(DAT_PVOID data, const DAT_EVENT *ev, DAT_BOOLEAN more) {
    struct blk *b = data;
    (void)more;
    if (ev->event_number != DAT_CONNECTION_REQUEST_EVENT) return;
    DAT_CR_HANDLE cr = ev->event_data.cr_arrival_event_data.cr_handle;
    pthread_mutex_lock(&b->mutex);
    unsigned c = 0;
    while (c < kMaxConnections && b->conns[c].ep != NULL) ++c;
    if (c == kMaxConnections) {
        pthread_mutex_unlock(&b->mutex);
        LOG(b, KRDMA_CONSUMER_LOG_WARN, "refusing a connection: %d are served", kMaxConnections);
        (void)dat_cr_reject(cr, 0, NULL);
        return;
    }
    DAT_EP_ATTR attr;
    memset(&attr, 0, sizeof attr);
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_message_size = sizeof(struct blk_request);
    attr.max_rdma_size = kMaxIo;
    attr.max_recv_dtos = kDepth;
    attr.max_request_dtos = 3 * kDepth;
    attr.max_recv_iov = 1;
    attr.max_request_iov = 1;
    attr.max_rdma_read_in = 0;
    attr.max_rdma_read_out = kDepth;
    attr.max_rdma_read_iov = 1;
    attr.max_rdma_write_iov = 1;
    DAT_RETURN r = dat_ep_create(b->ia, b->pz, b->dto_evd, b->dto_evd, b->conn_evd, &attr, &b->conns[c].ep);
    if (!ok(b, r, "dat_ep_create")) {
        b->conns[c].ep = NULL;
        pthread_mutex_unlock(&b->mutex);
        (void)dat_cr_reject(cr, 0, NULL);
        return;
    }
    for (unsigned s = 0; s < kDepth; ++s) (void)ok(b, post_recv(b, c, s), "dat_ep_post_recv");
    b->conns[c].established = 0;
    r = dat_cr_accept(cr, b->conns[c].ep, 0, NULL);
    if (!ok(b, r, "dat_cr_accept")) {
        (void)dat_ep_free(b->conns[c].ep);
        b->conns[c].ep = NULL;
    }
    pthread_mutex_unlock(&b->mutex);
}

/* Connection events: established, or the end of one (its EP is freed at once, whatever the peer did). */
static void conn_upcall(DAT_PVOID data, const DAT_EVENT *ev, DAT_BOOLEAN more) {
    struct blk *b = data;
    (void)more;
    DAT_EP_HANDLE ep = ev->event_data.connect_event_data.ep_handle;
    pthread_mutex_lock(&b->mutex);
    unsigned c = 0;
    while (c < kMaxConnections && b->conns[c].ep != ep) ++c;
    if (c == kMaxConnections || ep == NULL) {
        pthread_mutex_unlock(&b->mutex);
        return;
    }
    if (ev->event_number == DAT_CONNECTION_EVENT_ESTABLISHED) {
        b->conns[c].established = 1;
        LOG(b, KRDMA_CONSUMER_LOG_INFO, "connection %u established", c);
    } else {
        LOG(b, KRDMA_CONSUMER_LOG_INFO, "connection %u ended (event 0x%x)", c, (unsigned)ev->event_number);
        (void)dat_ep_free(ep);
        b->conns[c].ep = NULL;
    }
    pthread_mutex_unlock(&b->mutex);
}

/* The value of "key": "..." or "key": number in the argument object. */
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

static void teardown(struct blk *b) {
    if (b->psp != NULL) (void)dat_psp_free(b->psp);
    for (unsigned c = 0; c < kMaxConnections; ++c) {
        if (b->conns[c].ep != NULL) {
            (void)dat_ep_disconnect(b->conns[c].ep, DAT_CLOSE_ABRUPT_FLAG);
            (void)dat_ep_free(b->conns[c].ep);
            b->conns[c].ep = NULL;
        }
    }
    /* Abrupt close frees whatever is left (EVDs wait for their running upcalls). */
    if (b->ia != NULL) (void)dat_ia_close(b->ia, DAT_CLOSE_ABRUPT_FLAG);
    if (b->volume != NULL) {
        if (b->fd >= 0) {
            munmap(b->volume, b->size);
        } else {
            free(b->volume);
        }
    }
    if (b->fd >= 0) close(b->fd);
    free(b->msgs);
    pthread_mutex_destroy(&b->mutex);
    free(b);
}

static int blk_start(const krdma_consumer_env_t *env, const char *args_json, void **state) {
    struct blk *b = calloc(1, sizeof *b);
    if (b == NULL) return ENOMEM;
    b->env = env;
    b->fd = -1;
    pthread_mutex_init(&b->mutex, NULL);
    char value[256];
    if (!arg(args_json, "rnic", b->rnic, sizeof b->rnic)) snprintf(b->rnic, sizeof b->rnic, "127.0.0.1");
    b->port = arg(args_json, "port", value, sizeof value) ? (uint16_t)atoi(value) : BLK_DEFAULT_PORT;
    b->size = (uint64_t)(arg(args_json, "size_mb", value, sizeof value) ? atoi(value) : 64) << 20;
    if (arg(args_json, "file", value, sizeof value)) {
        struct stat st;
        b->fd = open(value, O_RDWR | O_CLOEXEC);
        if (b->fd < 0 || fstat(b->fd, &st) != 0 || st.st_size <= 0) {
            LOG(b, KRDMA_CONSUMER_LOG_ERROR, "cannot use %s as the volume: %s", value, strerror(errno));
            teardown(b);
            return EINVAL;
        }
        b->size = (uint64_t)st.st_size;
        b->volume = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
        if (b->volume == MAP_FAILED) {
            b->volume = NULL;
            teardown(b);
            return errno;
        }
    } else {
        b->volume = calloc(1, b->size);
    }
    b->msgs = calloc(kMaxConnections, sizeof *b->msgs);
    if (b->volume == NULL || b->msgs == NULL || b->size == 0) {
        teardown(b);
        return ENOMEM;
    }
    char ia_name[96];
    snprintf(ia_name, sizeof ia_name, "openrdma-%s", b->rnic);
    b->async_evd = DAT_HANDLE_NULL;
    const DAT_UPCALL_OBJECT cr_up = {b, cr_upcall}, conn_up = {b, conn_upcall}, dto_up = {b, dto_upcall};
    DAT_REGION_DESCRIPTION region;
    DAT_RMR_CONTEXT rkey;
    DAT_VLEN len;
    DAT_VADDR va;
    int good = ok(b, dat_ia_open(ia_name, 8, &b->async_evd, &b->ia), "dat_ia_open") &&
               ok(b, dat_pz_create(b->ia, &b->pz), "dat_pz_create") &&
               ok(b, dat_evd_kcreate(b->ia, 32, DAT_UPCALL_SINGLE_INSTANCE, &cr_up, DAT_EVD_CR_FLAG, &b->cr_evd),
                  "dat_evd_kcreate(CR)") &&
               ok(b, dat_evd_kcreate(b->ia, 64, DAT_UPCALL_SINGLE_INSTANCE, &conn_up, DAT_EVD_CONNECTION_FLAG,
                                     &b->conn_evd),
                  "dat_evd_kcreate(connection)") &&
               ok(b, dat_evd_kcreate(b->ia, kMaxConnections * 4 * kDepth, DAT_UPCALL_SINGLE_INSTANCE, &dto_up,
                                     DAT_EVD_DTO_FLAG, &b->dto_evd),
                  "dat_evd_kcreate(DTO)");
    if (good) {
        region.for_va = b->volume;
        good = ok(b,
                  dat_lmr_kcreate(b->ia, DAT_MEM_TYPE_VIRTUAL, region, b->size, b->pz,
                                  DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_VA,
                                  DAT_MEM_OPTIMIZE_DONT_CARE, &b->volume_lmr, &b->volume_lkey, &rkey, &len, &va),
                  "dat_lmr_kcreate(volume)");
    }
    if (good) {
        region.for_va = b->msgs;
        good = ok(b,
                  dat_lmr_kcreate(b->ia, DAT_MEM_TYPE_VIRTUAL, region, kMaxConnections * sizeof *b->msgs, b->pz,
                                  DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_VA,
                                  DAT_MEM_OPTIMIZE_DONT_CARE, &b->msgs_lmr, &b->msgs_lkey, &rkey, &len, &va),
                  "dat_lmr_kcreate(messages)");
    }
    if (good) {
        good = ok(b, dat_psp_create(b->ia, b->port, b->cr_evd, DAT_PSP_CONSUMER_FLAG, &b->psp), "dat_psp_create");
    }
    if (!good) {
        teardown(b);
        return EIO;
    }
    LOG(b, KRDMA_CONSUMER_LOG_INFO, "serving a %s volume of %llu bytes on %s port %u", b->fd >= 0 ? "file" : "RAM",
        (unsigned long long)b->size, ia_name, b->port);
    *state = b;
    return 0;
}

static void blk_stop(void *state) {
    struct blk *b = state;
    LOG(b, KRDMA_CONSUMER_LOG_INFO, "stopping after %lu writes", b->served);
    teardown(b);
}

KRDMA_CONSUMER_MODULE_EXPORT const krdma_consumer_module_t krdma_consumer_module_v1 = {
    sizeof(krdma_consumer_module_t),
    KRDMA_CONSUMER_ABI_VERSION,
    "blk_service",
    "RDMA block service over kDAPL (RAM or file volume; client: dapl_blk)",
    blk_start,
    blk_stop,
};
