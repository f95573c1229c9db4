/**
 * @file it_api_openrdma.h
 * @brief OpenRDMA's extensions to IT-API v2.1: the reason behind a failed call, in words, and the path a
 *        connected Endpoint's data takes.
 *
 * An IT-API status says what kind of failure happened; the layers below (the access layer, the kAL) know why: the
 * kAL daemon is not running, a configuration file has a syntax error at line 3, a port is in use. Every call that
 * fails for such a reason also logs it at warning level (OPENRDMA_LOG=warn, the default), and a program can ask
 * for it here to put it into its own message. Not part of the Open Group header: include it beside <it_api.h>.
 */
#ifndef OPENRDMA_IT_API_OPENRDMA_H
#define OPENRDMA_IT_API_OPENRDMA_H

#include <it_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Why the calling thread's last IT-API call that failed with a known reason failed.
 * @param call When not NULL, receives the name of that call ("it_ia_create"): compare it with the call that just
 *             failed, since a call that fails without a known reason leaves the record of an earlier one.
 * @return The reason ("krdmad is not running at /run/krdma/krdma.sock (...): start it ..."), or "" (and "" in
 *         @p call) when no call of this thread failed with one. Valid until this thread's next IT-API call.
 */
const char *openrdma_it_last_error(const char **call);

/**
 * @brief The path the data of Endpoint @p ep moves on: "same-host" when both ends are consumers of one kAL on this
 *        host and move their bytes through shared memory (docs/performance.md), "wire" when they go over TCP, ""
 *        when @p ep is not a connected Endpoint of this process. The program need not care: both give the same
 *        results; this is for tools and logs that report what they measured.
 */
const char *openrdma_it_ep_path(it_ep_handle_t ep);

#ifdef __cplusplus
}
#endif

#endif /* OPENRDMA_IT_API_OPENRDMA_H */
