/*
 * A minimal provider module in plain C, compiled several times with different TEST_* definitions to produce the
 * good and the broken modules the loader tests need (see tests/rnicpi/CMakeLists.txt):
 *   TEST_MODE            RI_MODE_PRIVILEGED or RI_MODE_NONPRIVILEGED
 *   TEST_NAME            provider name
 *   TEST_ABI_VERSION     ABI version word to claim (default RI_ABI_VERSION)
 *   TEST_OMIT_POLL_CQ    leave the mandatory poll_cq NULL
 *   TEST_NO_ENTRY        export no entry symbol
 *   TEST_ENTRY_FAILS     entry function returns RI_ENOMEM
 *   TEST_UVP_LIBRARY     kVP: the uVP file name to name
 *   TEST_NO_ATTACH       kVP: leave the mandatory attach/detach NULL
 * Objects are plain counters: the loader tests check the contract, not RDMA behaviour.
 */
#include <stdlib.h>
#include <string.h>

#include "rnicpi/rnicpi.h"

#ifndef TEST_ABI_VERSION
#define TEST_ABI_VERSION RI_ABI_VERSION
#endif

static const ri_host_ops_t *host_ops;

/* Every object is one malloc'ed int, so leaks show up under ASan. */
#define NEW_HANDLE(type, out) (((out) = (type)calloc(1, sizeof(int))) != NULL ? RI_OK : RI_ENOMEM)

static ri_status_t open_rnic(const ri_rnic_open_params_t *p, ri_rnic_t *rnic) {
    if (p == NULL || rnic == NULL) return RI_EINVAL;
    if (host_ops != NULL && host_ops->log != NULL) host_ops->log(RI_LOG_DEBUG, TEST_NAME, "open_rnic");
    return NEW_HANDLE(ri_rnic_t, *rnic);
}
static ri_status_t close_rnic(ri_rnic_t rnic) { free(rnic); return RI_OK; }
static ri_status_t query_rnic(ri_rnic_t rnic, ri_rnic_attr_t *attr) {
    (void)rnic;
    memset(attr, 0, sizeof *attr);
    strcpy(attr->name, TEST_NAME "0");
    attr->max_qp = 1;
    return RI_OK;
}
static ri_status_t set_aeh(ri_rnic_t rnic, ri_aeh_fn fn, void *ctx, uint32_t *id) {
    (void)rnic; (void)fn; (void)ctx;
    *id = 1;
    return RI_OK;
}
static ri_status_t set_ceh(ri_rnic_t rnic, ri_ceh_fn fn, void *ctx, uint32_t *id) {
    (void)rnic; (void)fn; (void)ctx;
    *id = 2;
    return RI_OK;
}
static ri_status_t alloc_pd(ri_rnic_t rnic, ri_pd_t *pd) { (void)rnic; return NEW_HANDLE(ri_pd_t, *pd); }
static ri_status_t dealloc_pd(ri_pd_t pd) { free(pd); return RI_OK; }
static ri_status_t create_cq(ri_rnic_t rnic, ri_cq_attr_t *attr, ri_cq_t *cq) {
    (void)rnic; (void)attr;
    return NEW_HANDLE(ri_cq_t, *cq);
}
static ri_status_t destroy_cq(ri_cq_t cq) { free(cq); return RI_OK; }
#ifndef TEST_OMIT_POLL_CQ
static ri_status_t poll_cq(ri_cq_t cq, uint32_t max, ri_wc_t *wc, uint32_t *polled) {
    (void)cq; (void)max; (void)wc;
    *polled = 0;
    return RI_OK;
}
#endif
static ri_status_t request_cq_notify(ri_cq_t cq, uint32_t type) { (void)cq; (void)type; return RI_OK; }
static ri_status_t create_qp(ri_pd_t pd, ri_cq_t scq, ri_cq_t rcq, ri_srq_t srq, ri_qp_init_attr_t *attr,
                             ri_qp_t *qp) {
    (void)pd; (void)scq; (void)rcq; (void)srq; (void)attr;
    return NEW_HANDLE(ri_qp_t, *qp);
}
static ri_status_t query_qp(ri_qp_t qp, ri_qp_attr_t *attr) { (void)qp; memset(attr, 0, sizeof *attr); return RI_OK; }
static ri_status_t modify_qp(ri_qp_t qp, const ri_qp_attr_t *attr, uint32_t mask) {
    (void)qp; (void)attr; (void)mask;
    return RI_OK;
}
static ri_status_t destroy_qp(ri_qp_t qp) { free(qp); return RI_OK; }
static ri_status_t post_send(ri_qp_t qp, const ri_send_wr_t *wr, uint32_t n, uint32_t *posted) {
    (void)qp; (void)wr;
    *posted = n;
    return RI_OK;
}
static ri_status_t post_recv(ri_qp_t qp, const ri_recv_wr_t *wr, uint32_t n, uint32_t *posted) {
    (void)qp; (void)wr;
    *posted = n;
    return RI_OK;
}
static ri_status_t register_mr(ri_pd_t pd, const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys) {
    (void)pd; (void)reg;
    keys->lkey = keys->rkey = 0x100;
    return NEW_HANDLE(ri_mr_t, *mr);
}
static ri_status_t deregister_mr(ri_mr_t mr) { free(mr); return RI_OK; }

static const ri_verbs_ops_t verbs = {
    .size = sizeof(ri_verbs_ops_t),
    .abi_version = TEST_ABI_VERSION,
    .open_rnic = open_rnic,
    .close_rnic = close_rnic,
    .query_rnic = query_rnic,
    .set_aeh = set_aeh,
    .set_ceh = set_ceh,
    .alloc_pd = alloc_pd,
    .dealloc_pd = dealloc_pd,
    .create_cq = create_cq,
    .destroy_cq = destroy_cq,
#ifndef TEST_OMIT_POLL_CQ
    .poll_cq = poll_cq,
#endif
    .request_cq_notify = request_cq_notify,
    .create_qp = create_qp,
    .query_qp = query_qp,
    .modify_qp = modify_qp,
    .destroy_qp = destroy_qp,
    .post_send = post_send,
    .post_recv = post_recv,
    .register_mr = register_mr,
    .deregister_mr = deregister_mr,
};

#ifndef TEST_NO_ATTACH
static ri_status_t attach(const ri_attach_params_t *params, ri_instance_t *instance) {
    (void)params;
    return NEW_HANDLE(ri_instance_t, *instance);
}
static ri_status_t detach(ri_instance_t instance) { free(instance); return RI_OK; }
#endif
/* Logs so a test can see that the host called fini before unloading. */
static void fini(void) {
    if (host_ops != NULL && host_ops->log != NULL) host_ops->log(RI_LOG_INFO, TEST_NAME, "fini");
}

static const ri_module_t module = {
    .size = sizeof(ri_module_t),
    .abi_version = TEST_ABI_VERSION,
    .mode = TEST_MODE,
    .flags = RI_MODULE_SOFTWARE,
    .name = TEST_NAME,
    .vendor = "OpenRDMA tests",
    .version = "1.0-test",
#ifdef TEST_UVP_LIBRARY
    .uvp_library = TEST_UVP_LIBRARY,
#endif
    .verbs = &verbs,
#ifndef TEST_NO_ATTACH
    .attach = attach,
    .detach = detach,
#endif
    .fini = fini,
};

#ifndef TEST_NO_ENTRY
__attribute__((visibility("default"))) ri_status_t ri_module_entry(const ri_host_ops_t *host,
                                                                   const ri_module_t **out) {
#ifdef TEST_ENTRY_FAILS
    (void)host;
    *out = &module; /* must be ignored: the status says the module failed */
    return RI_ENOMEM;
#else
    host_ops = host;
    *out = &module;
    return RI_OK;
#endif
}
#else
__attribute__((visibility("default"))) int not_an_rnicpi_module(void) { return (int)module.size; }
#endif

