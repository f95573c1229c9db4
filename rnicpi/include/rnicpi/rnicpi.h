/**
 * @file rnicpi.h
 * @brief The RNIC Programming Interface: everything a provider or a host includes.
 */
#ifndef RNICPI_RNICPI_H
#define RNICPI_RNICPI_H

#include "rnicpi/ri_channel.h"
#include "rnicpi/ri_host.h"
#include "rnicpi/ri_module.h"
#include "rnicpi/ri_syscall.h"
#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

#endif /* RNICPI_RNICPI_H */
