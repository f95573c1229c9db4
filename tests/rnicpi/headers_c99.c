/* Compiles the RNIC-PI headers as strict C99 with all warnings: a C-only vendor must be able to use them. */
#include "rnicpi/rnicpi.h"

/* One definition keeps the translation unit non-empty under -Wpedantic. */
const uint32_t rnicpi_headers_c99_abi = RI_ABI_VERSION;
