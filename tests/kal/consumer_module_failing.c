/* A kernel consumer module in plain C whose start fails (after saying why), as a target would whose storage is
   missing: krdmad skips it, or gives up when the configuration makes it required. */
#include <errno.h>

#include "krdma/consumer_module.h"

static int failing_start(const krdma_consumer_env_t *env, const char *args_json, void **state) {
    (void)state;
    env->log(env, KRDMA_CONSUMER_LOG_ERROR, "failing consumer refuses to start on %s (args %s)", env->device,
             args_json);
    return ENODEV;
}

static void failing_stop(void *state) { (void)state; }

/** @brief The module's entry symbol. */
KRDMA_CONSUMER_MODULE_EXPORT const krdma_consumer_module_t krdma_consumer_module_v1 = {
    sizeof(krdma_consumer_module_t), KRDMA_CONSUMER_ABI_VERSION, "failing", "a consumer whose start always fails",
    failing_start, failing_stop,
};
