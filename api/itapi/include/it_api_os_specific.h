/**
 * @file it_api_os_specific.h
 * @brief Platform part of OpenRDMA's IT-API v2.1 header: system includes and the implementation-chosen sizes that
 *        the Open Group leaves to each platform.
 *
 * Included by it_api.h; a consumer never needs to include it directly. Plain C99, usable from C++.
 */
#ifndef OPENRDMA_IT_API_OS_SPECIFIC_H
#define OPENRDMA_IT_API_OS_SPECIFIC_H

#include <stddef.h>      /* size_t, NULL */
#include <stdint.h>      /* uint8_t ... uint64_t */
#include <sys/types.h>   /* ssize_t, off_t */
#include <netinet/in.h>  /* struct in_addr, struct in6_addr */

/* ---------------------------------------------------------------------------------------------------------------
 * Implementation-chosen sizes and defaults
 * ------------------------------------------------------------------------------------------------------------- */

/** @brief An absent address argument (e.g. the addr of it_lmr_create21 when an IOBL is given). */
#define IT_NO_ADDR NULL

/** @brief Size of it_interface_t::name, including the terminating NUL. */
#define IT_INTERFACE_NAME_SIZE 128

/*
 * Default scatter/gather depths a consumer may size its arrays with. They are hints, not limits: the limits of an
 * Endpoint are the it_ep_attributes_t values it was created with (see it_ep_query). 8 is what OpenRDMA's software
 * RNIC supports per work request, so a consumer that uses these defaults works on every OpenRDMA provider.
 */
/** @brief Default gather depth of a Send. */
#define IT_MAX_SEND_SEGMENTS 8
/** @brief Default scatter depth of an RDMA Read. */
#define IT_MAX_RDMA_READ_SEGMENTS 8
/** @brief Default gather depth of an RDMA Write. */
#define IT_MAX_RDMA_WRITE_SEGMENTS 8
/** @brief Default scatter depth of a Receive. */
#define IT_MAX_RECV_SEGMENTS 8

/** @brief Default RDMA Read initiator depth (ORD) a consumer may ask for. */
#define IT_RDMA_INITIATOR_DEPTH 32
/** @brief Default RDMA Read responder resources (IRD) a consumer may ask for. */
#define IT_RDMA_RESPONDER_RESOURCES 16
/** @brief Misspelled name of ::IT_RDMA_RESPONDER_RESOURCES, kept for programs written against older headers. */
#define IT_RDMA_RESPONDER_RESOUCES IT_RDMA_RESPONDER_RESOURCES

#endif /* OPENRDMA_IT_API_OS_SPECIFIC_H */
