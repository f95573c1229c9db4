/**
 * @file abi.h
 * @brief The /dev/krdma protocol between the uAL (and tools) and the kAL: message header, command codes, event
 *        records.
 *
 * The device is a Unix-domain SOCK_SEQPACKET endpoint; each message is one packet. Commands are shaped like
 * ioctl() requests: the code is built with _IOWR from <linux/ioctl.h>, so it carries the size of its fixed request
 * struct, which the kAL checks before it looks at anything else. Every request carries a sequence number that its
 * reply repeats; unsolicited event records carry ::KRDMA_MSG_EVENT and sequence number 0. File descriptors travel
 * as SCM_RIGHTS ancillary data; the caller's identity comes from SO_PEERCRED, never from the message.
 */
#ifndef KRDMA_ABI_H
#define KRDMA_ABI_H

#include <linux/ioctl.h>
#include <stdint.h>

#include "rnicpi/ri_verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Major protocol version; HELLO refuses a client with another major version. */
#define KRDMA_ABI_VERSION 1u
/** @brief Minor protocol version: what this header adds to major version 1 (see "Versions" below). */
#define KRDMA_ABI_MINOR 8u
/** @brief The krdma_hello::abi_version word of version @p major.@p minor. */
#define KRDMA_ABI_WORD(major, minor) ((uint32_t)(major) | ((uint32_t)(minor) << 16))
/** @brief The major version in a krdma_hello::abi_version word. */
#define KRDMA_ABI_MAJOR_OF(word) ((uint32_t)(word) & 0xffffu)
/** @brief The minor version in a krdma_hello::abi_version word. */
#define KRDMA_ABI_MINOR_OF(word) ((uint32_t)(word) >> 16)
/** @brief Most bytes of reason text an error reply carries (minor version 1). */
#define KRDMA_MAX_REASON 256u
/** @brief The ioctl "type" byte of every krdma command. */
#define KRDMA_IOC_MAGIC 'R'
/** @brief Largest message, header included, in either direction. */
#define KRDMA_MAX_MESSAGE 4096u
/** @brief Most file descriptors one message may carry. */
#define KRDMA_MAX_FDS 4u
/** @brief Default device path of a host's krdmad. */
#define KRDMA_DEFAULT_DEVICE "/run/krdma/krdma.sock"

/** @brief Flags of krdma_msg_hdr::flags. */
enum krdma_msg_flags {
    KRDMA_MSG_REPLY = 1u << 0, /**< A reply to the request with the same sequence number. */
    KRDMA_MSG_EVENT = 1u << 1, /**< An unsolicited event record. */
    KRDMA_MSG_QUIET = 1u << 2  /**< Request (minor version 3): answer only a failure; a success gets no reply. */
};

/** @brief Header of every message. */
struct krdma_msg_hdr {
    uint32_t cmd;      /**< Command code (_IOWR) or event code. */
    uint32_t seq;      /**< Request sequence number, repeated in the reply; 0 for events. */
    uint32_t length;   /**< Bytes of the whole message, header included. */
    int32_t status;    /**< Reply: 0 or a positive errno value (::ri_errno); a nonzero one may come with a reason
                            (minor version 1, see "Versions"). Request: 0. */
    uint32_t flags;    /**< A set of ::krdma_msg_flags; a request's is 0, or ::KRDMA_MSG_QUIET at minor 3. */
    uint32_t reserved; /**< Zero. */
};

/*
 * ---- Versions ----
 * krdma_hello::abi_version is one word: the major version in its low 16 bits, the minor version in its high 16 bits
 * (KRDMA_ABI_WORD). Version 1.0 knew only the major version: its clients send, and its servers accept and answer,
 * exactly 1, which is the word of 1.0. A minor version only adds to its major version, and the two ends use the
 * lower of their minors: the client sends its own, the server answers with the one in use on that connection.
 *  - A 1.1 server and a 1.0 client: the client sends 1 (minor 0) and gets 1 back; every reply is exactly as 1.0
 *    made it (an error reply is the header alone).
 *  - A 1.0 server and a 1.1 client: the server refuses the word 0x00010001 with EPROTO; the client says HELLO again
 *    with 1 and speaks 1.0 with it (its error replies carry no reason).
 *  - 1.1 on both ends: minor 1.
 * Minor 1 adds the reason of an error reply: a reply with a nonzero status carries, after the header, 0 to
 * KRDMA_MAX_REASON bytes of UTF-8 text saying what was wrong (no NUL; its length is the header's length minus
 * sizeof(struct krdma_msg_hdr)), and never descriptors. The text is for people (tools print it, logs keep it);
 * programs decide by the status. The kAL cuts it on a code-point boundary and replaces invalid bytes and control
 * characters; a client still bounds it and checks it, as anything else from another process.
 * Minor 1 also names objects by the consumer's cookie: the word a 1.0 request had to leave zero in
 * krdma_syscall and krdma_listen carries it, and the word a 1.0 event record left zero in krdma_event and
 * krdma_cm_event repeats it. A 1.0 client sends zero (no cookie) and ignores the echo; a 1.1 access layer that
 * routes its events by cookie needs a 1.1 kAL and says so when it meets a 1.0 one.
 * Minor 2 answers a create op with the new object's number: the reply's krdma_syscall::refs[0] is a QP's number
 * (ri_qp_attr_t::qp_num; 0 for every other object) and the other refs are zero, so a consumer learns its QP number
 * without a QUERY_QP round trip. A 1.1 kAL echoes the request's refs: a client reads refs[0] only at minor 2.
 * Minor 3 adds quiet requests: a request whose header carries KRDMA_MSG_QUIET is served as any other, but only a
 * failure is answered (the error reply, with its sequence number, as usual); a success sends nothing, and a reply
 * struct or descriptors it would have carried are dropped. A client posts such requests without waiting (CONNECT,
 * ACCEPT) and learns of their success from the connection's events; since the kAL serves one connection's requests
 * in order and answers them in order, the reply to any later request means every earlier quiet one succeeded.
 * Below minor 3 the flag is refused (EINVAL) as every nonzero request flag always was.
 * Minor 4 adds PEER_MARKS (the sockets layer's peer detection); an older kAL answers it as an unknown command.
 * Minor 5 fills the five words krdma_llp_counters reserved with the time connection setup spent in each of its
 * steps (tcp_connect_ns ... accept_ns); an older kAL leaves them zero. Nothing else changes.
 * Minor 6 adds krdma_convert::flags (a word older clients leave zero, and an older kAL refuses nonzero) with
 * KRDMA_CONVERT_BYTE_CHANNEL: when the kAL pairs both ends of the connection on this host and both asked, their
 * ESTABLISHED records carry a third descriptor, the end of a second same-host channel that is the consumers' own.
 * Minor 7 adds the doorbell: HELLO's reply carries one descriptor, the client's end of a Unix stream socket pair.
 * After each message on the device connection that nobody waits for (an event record, or the failure reply of a
 * quiet request) the kAL sends one byte on it, never after the reply to a request that waits; the kAL sends with
 * MSG_DONTWAIT, so a doorbell left unread only stops ringing. A client watches the doorbell (and the device
 * socket only for its hang-up) instead of the device socket, so that a call's reply wakes nobody but the caller;
 * it reads the rings before it reads the records. A client whose HELLO reply lost the descriptor (RLIMIT_NOFILE)
 * watches the device socket as before minor 7; so does an older client, which gets no descriptor.
 * Minor 8 adds KRDMA_CONVERT_LINK (with KRDMA_CONVERT_BYTE_CHANNEL): when both ends asked and got byte channels,
 * their ESTABLISHED records carry a fourth descriptor, the two processes' link (krdma_link_hello). An older kAL
 * refuses the flag (EINVAL), as it refuses every flag it does not know.
 */

/** @brief HELLO: version handshake; the reply tells the client who the kAL thinks it is. */
struct krdma_hello {
    uint32_t abi_version;  /**< Request: the client's version word (KRDMA_ABI_WORD). Reply: the version in use. */
    uint32_t max_message;  /**< Reply: ::KRDMA_MAX_MESSAGE of the server. */
    uint32_t pid;          /**< Reply: the caller's pid from SO_PEERCRED. */
    uint32_t uid;          /**< Reply: the caller's uid from SO_PEERCRED. */
    uint32_t gid;          /**< Reply: the caller's gid from SO_PEERCRED. */
    uint32_t client_id;    /**< Reply: this connection's identifier in the kAL (logs, rdmactl). */
};

/** @brief ECHO: a diagnostic round trip; the payload and any descriptors come back unchanged. */
struct krdma_echo {
    uint64_t cookie;     /**< Returned unchanged. */
    uint8_t data[56];    /**< Returned unchanged. */
};

/** @brief States of an RNIC (krdma_rnic_info::state). */
enum krdma_rnic_state {
    KRDMA_RNIC_ATTACHED = 1 /**< Attached and usable. */
};

/** @brief One RNIC as krdmad knows it. */
struct krdma_rnic_info {
    char name[64];          /**< RNIC name. */
    char provider[64];      /**< Provider name. */
    char vendor[64];        /**< Provider vendor. */
    char netdev[16];        /**< Network device. */
    char address[48];       /**< Network address, as text. */
    char uvp_library[256];  /**< The uVP library a uAL loads, or empty. */
    uint32_t opens;         /**< Current opens. */
    uint32_t state;         /**< One of ::krdma_rnic_state. */
    uint32_t objects[9];    /**< Objects consumers hold on it, by type (the order of krdma_client_info::counts). */
    uint32_t reserved;      /**< Zero. */
};

/** @brief LIST_RNICS: one entry of the RNIC list (ask index 0, 1, ... until the reply's count). */
struct krdma_list_rnics {
    uint32_t index;              /**< Request: which entry. */
    uint32_t count;              /**< Reply: how many RNICs there are. */
    struct krdma_rnic_info info; /**< Reply: the entry (when index < count). */
};

/** @brief Most page-locking instructions one SYSCALL reply carries (krdma_syscall::pins). */
#define KRDMA_SYSCALL_MAX_PINS 16u

/** @brief Operations of krdma_pin_op::op. */
enum krdma_pin_ops {
    KRDMA_PIN_LOCK = 1,  /**< Lock the range in memory (mlock): the kAL pinned it. */
    KRDMA_PIN_UNLOCK = 2 /**< Unlock the range (munlock): no registration pins it any more. */
};

/** @brief One instruction of the kAL to the owner process: lock or unlock a page range of its address space. */
struct krdma_pin_op {
    uint64_t addr;     /**< Page-aligned start. */
    uint64_t length;   /**< Page-aligned length. */
    uint32_t op;       /**< One of ::krdma_pin_ops. */
    uint32_t reserved; /**< Zero. */
};

/**
 * @brief SYSCALL: one ri_syscall of a uVP (rnicpi/ri_syscall.h) carried to the kAL, and its reply. Descriptors
 *        travel as SCM_RIGHTS in both directions.
 *
 * Memory is pinned by the kAL's account (memory management) and locked by its owner: a successful reply lists the
 * ranges the call newly pinned or released, in order, and the uAL locks or unlocks them before it returns to the
 * uVP. Ranges beyond ::KRDMA_SYSCALL_MAX_PINS are not reported: a lock instruction always covers the whole pinned
 * range, so only surplus unlocks can be lost, which leaves pages locked (safe) until the process exits.
 */
struct krdma_syscall {
    uint32_t op;             /**< ri_syscall_op. */
    uint32_t param_len;      /**< Bytes used in krdma_syscall::param. */
    uint64_t object;         /**< kAL handle of the object the verb acts on. */
    uint64_t refs[4];        /**< kAL handles of further objects. */
    uint32_t priv_len;       /**< Request: bytes of private data in krdma_syscall::priv. Reply: bytes the kVP returned. */
    uint32_t result_len;     /**< Reply: bytes used in krdma_syscall::result. */
    uint64_t handle_out;     /**< Reply: kAL handle of the object a create verb made. */
    uint32_t npins;          /**< Reply: entries used in krdma_syscall::pins. */
    /**
     * Request: the consumer's cookie for the object a create op makes (0: none; ignored by other ops). The kAL keeps
     * it with the object and repeats it in every event record about the object (krdma_event::cookie,
     * krdma_cm_event::cookie), as rdma-core's user_handle. Reply: unchanged.
     */
    uint32_t cookie;
    uint8_t param[512];      /**< The verb's parameter block. */
    uint8_t priv[1024];      /**< Provider private data, in (request) and out (reply). */
    uint8_t result[512];     /**< Reply: the verb's result block. */
    struct krdma_pin_op pins[KRDMA_SYSCALL_MAX_PINS]; /**< Reply: what the owner must lock or unlock. */
};

/** @brief Resource types counted in krdma_client_info::counts (the kAL's teardown order). */
#define KRDMA_RESOURCE_TYPES 9u

/** @brief One device connection (a consumer process) and what it holds. */
struct krdma_client_info {
    uint32_t client_id;                     /**< The kAL's identifier of the connection. */
    uint32_t pid;                           /**< Process id. */
    uint32_t uid;                           /**< User id. */
    uint32_t total;                         /**< Objects held, all types. */
    uint32_t counts[KRDMA_RESOURCE_TYPES];  /**< Objects by type: endpoint, listener, mw, qp, srq, mr, cq, pd, rnic. */
    uint32_t reserved;                      /**< Zero. */
    uint64_t pinned_bytes;                  /**< Memory pinned for it. */
};

/** @brief LIST_CLIENTS: one entry of the connection list (ask index 0, 1, ... until the reply's count). */
struct krdma_list_clients {
    uint32_t index;                 /**< Request: which entry. */
    uint32_t count;                 /**< Reply: how many connections hold a context. */
    struct krdma_client_info info;  /**< Reply: the entry (when index < count). */
};

/**
 * @brief LIMITS (open to everyone): the kAL's limits on what it does for callers, what is in use (by the caller's
 *        uid too), and how often each limit refused a request since start. Every field is a reply; the request is
 *        all zero.
 */
struct krdma_limits {
    uint64_t max_connections;           /**< Device connections host-wide (root may use 32 more). */
    uint64_t connections_per_user;      /**< Device connections per non-root uid (0: no own limit). */
    uint64_t connections;               /**< Device connections now. */
    uint64_t connections_of_caller;     /**< Device connections of the caller's uid now. */
    uint64_t pin_bytes_total;           /**< Pinned (and charged queue) memory host-wide. */
    uint64_t pin_bytes_per_user;        /**< The same per non-root uid. */
    uint64_t pin_bytes_per_process;     /**< The same per process (lowered to its RLIMIT_MEMLOCK without CAP_IPC_LOCK). */
    uint64_t pinned_total;              /**< Pinned or charged host-wide now. */
    uint64_t pinned_by_caller;          /**< Pinned or charged by the caller's uid now. */
    uint64_t refused_connections_host;  /**< Connections refused over max_connections. */
    uint64_t refused_connections_user;  /**< Connections refused over connections_per_user. */
    uint64_t refused_pins_process;      /**< Pins or charges refused over a process's limit. */
    uint64_t refused_pins_user;         /**< ... over a user's limit. */
    uint64_t refused_pins_host;         /**< ... over the host's limit. */
    uint64_t refused_pins_unmapped;     /**< Pins of memory the process has not mapped. */
    uint64_t refused_privileged_ports;  /**< Listens on a privileged port without CAP_NET_BIND_SERVICE. */
    uint64_t objects_per_process;       /**< Objects of one process over all its connections (all types). */
    uint64_t objects_per_user;          /**< Objects of all processes of one non-root uid (0: no own limit). */
    uint64_t objects_of_caller;         /**< Objects the caller's uid holds now. */
    uint64_t refused_objects_process;   /**< Objects refused over a process's quotas. */
    uint64_t refused_objects_user;      /**< ... over a user's. */
    uint64_t reserved[3];               /**< Zero. */
};

/** @brief HELLO command code. */
#define KRDMA_CMD_HELLO _IOWR(KRDMA_IOC_MAGIC, 0x01, struct krdma_hello)
/** @brief ECHO command code. */
#define KRDMA_CMD_ECHO _IOWR(KRDMA_IOC_MAGIC, 0x02, struct krdma_echo)
/** @brief SYSCALL command code. */
#define KRDMA_CMD_SYSCALL _IOWR(KRDMA_IOC_MAGIC, 0x20, struct krdma_syscall)
/** @brief LIST_CLIENTS command code. */
#define KRDMA_CMD_LIST_CLIENTS _IOWR(KRDMA_IOC_MAGIC, 0x11, struct krdma_list_clients)
/** @brief LIMITS command code. */
#define KRDMA_CMD_LIMITS _IOWR(KRDMA_IOC_MAGIC, 0x12, struct krdma_limits)

/**
 * @brief PEER_MARKS (minor 4): the map of the kAL's TCP peer detection, for the sockets layer. The reply passes the
 *        map's descriptor (SCM_RIGHTS); its values are krdma::PeerMark (krdma/peer_marks.hpp). Open to every caller:
 *        the map reaches only sockets the caller holds descriptors for. RI_EOPNOTSUPP, with the reason, when the
 *        kAL cannot detect (llp.peer_detection is false, no privilege for BPF, no cgroup v2).
 */
struct krdma_peer_marks {
    uint32_t value_size; /**< Reply: bytes of each value in the map (8). */
    uint32_t reserved;   /**< Zero. */
};
/** @brief Command code of PEER_MARKS. */
#define KRDMA_CMD_PEER_MARKS _IOWR(KRDMA_IOC_MAGIC, 0x13, struct krdma_peer_marks)
/** @brief LIST_RNICS command code. */
#define KRDMA_CMD_LIST_RNICS _IOWR(KRDMA_IOC_MAGIC, 0x10, struct krdma_list_rnics)
/*
 * ---- Administration block ----
 * Administration: attach/detach RNICs, load/unload kVP modules (root or krdmad's admin group; others get EPERM),
 * and the kVP and consumer module lists (open to everyone). Codes 0x30-0x3f. Every string is NUL-terminated within
 * its array; the kAL refuses one that is not with EINVAL.
 */

/** @brief ATTACH_RNIC: attaches a new RNIC instance to a network address or netdev of this host. */
struct krdma_attach_rnic {
    char provider[64];            /**< Request: a loaded kVP's provider name. */
    char name[64];                /**< Request: the new RNIC's name, unique on the host. */
    char netdev[16];              /**< Request: network device, or empty when krdma_attach_rnic::address selects it. */
    char address[48];             /**< Request: IPv4 or IPv6 address, or empty to take the netdev's first. */
    char options[1024];           /**< Request: provider options as a JSON object text, or empty. */
    struct krdma_rnic_info info;  /**< Reply: the attached RNIC. */
};

/** @brief DETACH_RNIC: detaches an RNIC; EBUSY while a consumer has it open. */
struct krdma_detach_rnic {
    char name[64];  /**< Request: the RNIC's name. */
};

/** @brief One loaded kVP module as krdmad knows it. */
struct krdma_module_info {
    char provider[64];      /**< Provider name. */
    char vendor[64];        /**< Provider vendor. */
    char version[64];       /**< The provider's own version text. */
    char path[256];         /**< Canonical path of the module file. */
    char uvp_library[256];  /**< The matching uVP library, or empty. */
    uint32_t abi_version;   /**< RNIC-PI ABI version the module was built with. */
    uint32_t rnics;         /**< RNICs of this provider attached now. */
};

/** @brief LOAD_MODULE: loads a kVP module; loading a loaded file again is not an error. */
struct krdma_load_module {
    char file[256];                 /**< Request: a file name in krdmad's provider directory, or a path. */
    struct krdma_module_info info;  /**< Reply: the loaded module. */
};

/** @brief UNLOAD_MODULE: unloads a provider's kVP module; EBUSY while RNICs of it are attached. */
struct krdma_unload_module {
    char provider[64];  /**< Request: the provider name. */
};

/** @brief LIST_MODULES: one entry of the loaded kVP list (ask index 0, 1, ... until the reply's count). */
struct krdma_list_modules {
    uint32_t index;                 /**< Request: which entry. */
    uint32_t count;                 /**< Reply: how many modules are loaded. */
    struct krdma_module_info info;  /**< Reply: the entry (when index < count). */
};

/** @brief Bytes of a CONTROL_RNIC request or reply text, its NUL included. */
#define KRDMA_MAX_CONTROL_TEXT 2048u

/**
 * @brief CONTROL_RNIC: run-time administration of one RNIC through its provider (RNIC-PI 1.4 ri_module_t::control),
 *        such as hwstub's fault injection. EOPNOTSUPP when the provider has none; the provider's status otherwise,
 *        its words in the error reply's reason; EOVERFLOW for a provider's reply longer than the text holds. The
 *        empty request `{}` changes nothing and answers the RNIC's state and tunables; it is open to every caller.
 */
struct krdma_control_rnic {
    char name[64];                      /**< Request: the RNIC's name. */
    char text[KRDMA_MAX_CONTROL_TEXT];  /**< Request: a JSON object text for the provider. Reply: the provider's. */
};

/** @brief ATTACH_RNIC command code (admin). */
#define KRDMA_CMD_ATTACH_RNIC _IOWR(KRDMA_IOC_MAGIC, 0x30, struct krdma_attach_rnic)
/** @brief DETACH_RNIC command code (admin). */
#define KRDMA_CMD_DETACH_RNIC _IOWR(KRDMA_IOC_MAGIC, 0x31, struct krdma_detach_rnic)
/** @brief LOAD_MODULE command code (admin). */
#define KRDMA_CMD_LOAD_MODULE _IOWR(KRDMA_IOC_MAGIC, 0x32, struct krdma_load_module)
/** @brief UNLOAD_MODULE command code (admin). */
#define KRDMA_CMD_UNLOAD_MODULE _IOWR(KRDMA_IOC_MAGIC, 0x33, struct krdma_unload_module)
/** @brief CONTROL_RNIC command code (admin; the empty request `{}` open to every caller). */
#define KRDMA_CMD_CONTROL_RNIC _IOWR(KRDMA_IOC_MAGIC, 0x36, struct krdma_control_rnic)
/** @brief LIST_MODULES command code (open to every caller). */
#define KRDMA_CMD_LIST_MODULES _IOWR(KRDMA_IOC_MAGIC, 0x34, struct krdma_list_modules)

/** @brief States of a configured kernel consumer module (krdma/consumer_module.h). */
enum krdma_consumer_state {
    KRDMA_CONSUMER_DISABLED = 0, /**< "enabled": false in the configuration: not loaded. */
    KRDMA_CONSUMER_FAILED = 1,   /**< Could not be loaded or its start failed: skipped (krdma_consumer_info::error). */
    KRDMA_CONSUMER_RUNNING = 2,  /**< Started; its stop runs when krdmad shuts down. */
    KRDMA_CONSUMER_STOPPED = 3   /**< Stopped and unloaded (krdmad is shutting down). */
};

/** @brief One configured kernel consumer module, in start order. */
struct krdma_consumer_info {
    char name[64];          /**< The module's name, or empty when its file could not be loaded. */
    char description[128];  /**< The module's description, or empty. */
    char path[256];         /**< The module's file, resolved against the provider directory. */
    char error[256];        /**< Why it failed (::KRDMA_CONSUMER_FAILED), else empty. */
    uint32_t state;         /**< ::krdma_consumer_state. */
    uint32_t abi_version;   /**< Consumer-module ABI version the module was built with, or 0. */
    uint32_t required;      /**< 1 when the configuration makes it required. */
    uint32_t reserved;      /**< Zero. */
};

/** @brief LIST_CONSUMERS: one configured kernel consumer module (ask index 0, 1, ... until the reply's count). */
struct krdma_list_consumers {
    uint32_t index;                   /**< Request: which entry. */
    uint32_t count;                   /**< Reply: how many consumer modules are configured. */
    struct krdma_consumer_info info;  /**< Reply: the entry (when index < count). */
};

/** @brief LIST_CONSUMERS command code (open to every caller). */
#define KRDMA_CMD_LIST_CONSUMERS _IOWR(KRDMA_IOC_MAGIC, 0x35, struct krdma_list_consumers)

/* ---- End of the administration block ---- */

/*
 * ---- Connection management block ----
 * LLP and endpoint management (OpenRDMA: the kAL owns connection setup). A consumer listens on an RNIC open's
 * address, connects or accepts with one of its QPs in IDLE, and learns the outcome from KRDMA_EVENT_CM records.
 * When MPA negotiation completes the kAL moves the QP of the kVP to RTS with the negotiated parameters and hands
 * the established TCP socket to the owner with the ESTABLISHED record (SCM_RIGHTS); the uAL gives it to the uVP.
 * Codes 0x40-0x4f.
 */

/** @brief Most private data an MPA frame carries for the consumer (RFC 5044: 512 bytes, RFC 6581 words apart). */
#define KRDMA_MAX_PRIVATE_DATA 512u

/** @brief LISTEN: creates a listen point on the address of an RNIC open (the listen point's connection qualifier
 *         is the TCP port). */
struct krdma_listen {
    uint64_t rnic;      /**< Request: kAL handle of the caller's RNIC open. */
    uint64_t context;   /**< Request: consumer context, repeated in its connection requests. */
    uint16_t port;      /**< Request: TCP port, 0 for one chosen by the host. Reply: the port bound. */
    uint16_t backlog;   /**< Request: pending connections (0: the kAL's default). */
    uint32_t cookie;    /**< Request: the consumer's cookie, repeated in the listen point's CONNECT_REQUEST records. */
    uint64_t handle;    /**< Reply: kAL handle of the listen point. */
};

/** @brief CONNECT: active connection setup for an IDLE QP of the caller (the outcome comes as a CM event). */
struct krdma_connect {
    uint64_t qp;                /**< Request: kAL handle of the QP. */
    uint64_t context;           /**< Request: consumer context, repeated in the QP's connection events. */
    ri_net_addr_t remote;       /**< Request: the peer's address. */
    uint16_t port;              /**< Request: the peer's TCP port. */
    uint16_t private_data_len;  /**< Request: bytes of krdma_connect::private_data. */
    uint32_t timeout_ms;        /**< Request: connection setup deadline (0: the kAL's default). */
    uint8_t private_data[KRDMA_MAX_PRIVATE_DATA]; /**< Request: the MPA request's private data. */
};

/** @brief ACCEPT: accepts a connection request with an IDLE QP of the caller (ESTABLISHED follows as a CM event). */
struct krdma_accept {
    uint64_t request;           /**< Request: the connection request's identifier (CONNECT_REQUEST event). */
    uint64_t qp;                /**< Request: kAL handle of the QP that takes the connection. */
    uint64_t context;           /**< Request: consumer context for the QP's connection events. */
    uint16_t private_data_len;  /**< Request: bytes of krdma_accept::private_data. */
    uint16_t reserved;          /**< Zero. */
    uint32_t reserved2;         /**< Zero. */
    uint8_t private_data[KRDMA_MAX_PRIVATE_DATA]; /**< Request: the MPA reply's private data. */
};

/** @brief REJECT: refuses a connection request (an MPA reply with the reject bit and this private data). */
struct krdma_reject {
    uint64_t request;           /**< Request: the connection request's identifier. */
    uint16_t private_data_len;  /**< Request: bytes of krdma_reject::private_data. */
    uint16_t reserved;          /**< Zero. */
    uint32_t reserved2;         /**< Zero. */
    uint8_t private_data[KRDMA_MAX_PRIVATE_DATA]; /**< Request: the reject reply's private data. */
};

/** @brief DESTROY_LISTEN: closes a listen point; its pending requests are refused. */
struct krdma_destroy_listen {
    uint64_t handle;  /**< Request: kAL handle of the listen point. */
};

/** @brief States of a connection endpoint (krdma_endpoint_info::state). */
enum krdma_ep_state {
    KRDMA_EP_IDLE = 0,          /**< No connection. */
    KRDMA_EP_CONNECTING = 1,    /**< TCP connect or MPA negotiation in progress. */
    KRDMA_EP_CONNECTED = 2,     /**< In RDMA mode. */
    KRDMA_EP_DISCONNECTING = 3, /**< Orderly close in progress (QP in CLOSING). */
    KRDMA_EP_DISCONNECTED = 4,  /**< Closed in order. */
    KRDMA_EP_ERROR = 5          /**< Failed, reset or timed out. */
};

/** @brief Kinds of connection events (krdma_cm_event::type). */
enum krdma_cm_event_type {
    KRDMA_CM_CONNECT_REQUEST = 1, /**< A peer asks to connect to a listen point (krdma_cm_event::request). */
    KRDMA_CM_ESTABLISHED = 2,     /**< The QP is in RDMA mode; the socket comes with the record. */
    KRDMA_CM_REJECTED = 3,        /**< The peer rejected the request (its private data comes with the record). */
    KRDMA_CM_UNREACHABLE = 4,     /**< The peer could not be reached or refused the TCP connection (status). */
    KRDMA_CM_PEER_DISCONNECT = 5, /**< The peer closed the connection in order. */
    KRDMA_CM_BROKEN = 6,          /**< The connection was reset or failed (status), or negotiation failed. */
    KRDMA_CM_TIMEOUT = 7,         /**< Connection setup did not finish in time. */
    KRDMA_CM_DISCONNECTED = 8     /**< The local side's disconnect completed. */
};

/**
 * @brief A connection event record (header cmd ::KRDMA_EVENT_CM). ESTABLISHED carries the connected socket as one
 *        SCM_RIGHTS descriptor; krdma_cm_event::llp describes it (its fd field is -1 in the record).
 */
struct krdma_cm_event {
    uint32_t event;             /**< ::KRDMA_EVENT_CM. */
    uint32_t type;              /**< One of ::krdma_cm_event_type. */
    uint64_t object;            /**< CONNECT_REQUEST: the listen point; else the QP (kAL handles). */
    uint64_t request;           /**< CONNECT_REQUEST: the identifier to ACCEPT or REJECT. */
    uint64_t context;           /**< The listen point's or the QP's consumer context. */
    int32_t status;             /**< 0 or a positive errno value (UNREACHABLE, BROKEN, TIMEOUT). */
    uint32_t term;              /**< BROKEN by negotiation: the Terminate code (layer<<16 | type<<8 | code), else 0. */
    ri_llp_params_t llp;        /**< Addresses, ports and the negotiated (ESTABLISHED) or requested parameters. */
    uint16_t private_data_len;  /**< Bytes of krdma_cm_event::private_data. */
    uint16_t reserved;          /**< Zero. */
    uint32_t cookie;            /**< The cookie of krdma_cm_event::object (the QP's create, or LISTEN's). */
    uint8_t private_data[KRDMA_MAX_PRIVATE_DATA]; /**< The peer's private data (request, reply or reject). */
};

/** @brief One endpoint with a connection (or one being set up) and the TCP statistics of its socket. */
struct krdma_endpoint_info {
    uint32_t client_id;      /**< Owner's device connection. */
    uint32_t qp_num;         /**< QP number. */
    uint64_t qp;             /**< kAL handle of the QP (in the owner's table). */
    char rnic[64];           /**< RNIC name. */
    char local[64];          /**< Local "address:port". */
    char remote[64];         /**< Remote "address:port". */
    uint32_t state;          /**< One of ::krdma_ep_state. */
    uint32_t tcp_state;      /**< TCP state (TCP_ESTABLISHED...), 0 without a socket. */
    ri_llp_params_t llp;     /**< Negotiated parameters (connected endpoints). */
    uint64_t bytes_sent;     /**< TCP bytes acknowledged by the peer (tcpi_bytes_acked). */
    uint64_t bytes_received; /**< TCP bytes received (tcpi_bytes_received). */
    uint64_t segs_out;       /**< TCP segments sent. */
    uint64_t segs_in;        /**< TCP segments received. */
    uint64_t retransmits;    /**< TCP segments retransmitted (tcpi_total_retrans). */
    uint32_t rtt_us;         /**< Smoothed round-trip time. */
    uint32_t snd_cwnd;       /**< Congestion window in segments. */
    ri_qp_stats_t rdma;      /**< The QP's data-path counters (FPDUs, payload bytes, CRC errors, Terminates). */
};

/** @brief krdma_convert::role: which side sends the MPA request. */
enum krdma_convert_role {
    KRDMA_CONVERT_AUTO = 0,      /**< The side whose (address, port) is lower: both ends agree without asking. */
    KRDMA_CONVERT_INITIATOR = 1, /**< This side sends the MPA request. */
    KRDMA_CONVERT_RESPONDER = 2  /**< This side answers the peer's MPA request. */
};

/** @brief krdma_convert::flags (minor 6). */
enum krdma_convert_flags {
    /**
     * The consumer's own byte channel: when the kAL pairs this connection's two ends on this host (::RI_LLP_SAME_HOST)
     * and both ends asked for it, each ESTABLISHED record carries, after the socket and the QP's channel, the end of
     * a second channel (ri_channel.h) that no provider reads: the consumer moves bytes on it itself (the sockets
     * layer's stream, two copies as TCP loopback makes). Its rings are charged as the QP's are. Without the pairing,
     * or when the second channel cannot be made, the record is as without the flag.
     */
    KRDMA_CONVERT_BYTE_CHANNEL = 1u << 0,
    /**
     * (Minor 8, only with ::KRDMA_CONVERT_BYTE_CHANNEL.) When both ends asked for it and got their byte channels,
     * each ESTABLISHED record carries, after the byte channel's end, one end of a link: a Unix SOCK_SEQPACKET socket
     * pair whose two ends the kAL gives only to the two processes that each handed it their own end of this one
     * connection. The first message on each end is a krdma_link_hello, with the same token on both. The kAL vouches
     * for nothing else: what the two processes send on it afterwards (the sockets layer: the byte channels of
     * their next connections, made by themselves) is theirs.
     */
    KRDMA_CONVERT_LINK = 1u << 1
};

/** @brief The first message on each end of a link (::KRDMA_CONVERT_LINK). */
struct krdma_link_hello {
    uint32_t magic;   /**< ::KRDMA_LINK_MAGIC. */
    uint32_t version; /**< 1. */
    uint64_t token;   /**< 64 random bits, the same on both ends: known only to the two processes. */
};
/** @brief krdma_link_hello::magic ("KLNK" little-endian). */
#define KRDMA_LINK_MAGIC 0x4b4e4c4bu

/**
 * @brief CONVERT: an IDLE QP of the caller takes over the caller's connected TCP socket, passed with the request
 *        (SCM_RIGHTS): MPA negotiates on it and it becomes the QP's LLP stream (IT-API it_socket_convert). The
 *        outcome comes as a CM event, as for CONNECT; ESTABLISHED carries the peer's MPA private data on both
 *        sides (the responder saw no connection request). The socket must use the QP's RNIC's address.
 */
struct krdma_convert {
    uint64_t qp;                /**< Request: kAL handle of the QP. */
    uint64_t context;           /**< Request: consumer context, repeated in the QP's connection events. */
    uint32_t role;              /**< Request: one of ::krdma_convert_role. */
    uint32_t timeout_ms;        /**< Request: MPA negotiation deadline (0: the kAL's default). */
    uint16_t private_data_len;  /**< Request: bytes of krdma_convert::private_data. */
    uint16_t flags;             /**< Request: a set of ::krdma_convert_flags (minor 6; zero before). */
    uint32_t reserved2;         /**< Zero. */
    uint8_t private_data[KRDMA_MAX_PRIVATE_DATA]; /**< Request: private data of this side's MPA frame. */
};

/** @brief LIST_ENDPOINTS: one entry of the endpoint list (ask index 0, 1, ... until the reply's count). */
struct krdma_list_endpoints {
    uint32_t index;                     /**< Request: which entry. */
    uint32_t count;                     /**< Reply: how many endpoints there are. */
    struct krdma_endpoint_info info;    /**< Reply: the entry (when index < count). */
};

/** @brief LLP_COUNTERS: LLP management's counters since krdmad started. */
struct krdma_llp_counters {
    uint64_t active_opens;      /**< CONNECTs started. */
    uint64_t passive_opens;     /**< TCP connections accepted on listen points. */
    uint64_t established;       /**< RDMA-mode transitions. */
    uint64_t rejected;          /**< Requests rejected by consumers or by the MPA policy. */
    uint64_t peer_rejected;     /**< Requests of ours the peer rejected. */
    uint64_t failed;            /**< Setups that failed. */
    uint64_t timeouts;          /**< Setups that ran out of time. */
    uint64_t peer_disconnects;  /**< Connections the peer closed in order. */
    uint64_t resets;            /**< Connections reset or broken. */
    uint64_t listen_points;     /**< Listen points now. */
    uint64_t pending_requests;  /**< Connection requests waiting now. */
    /* Minor 5: setup's steps, in nanoseconds summed over the connections that finished each (zero before). */
    uint64_t tcp_connect_ns;    /**< Active: CONNECT served to the TCP connection made. */
    uint64_t mpa_active_ns;     /**< Active: TCP connected to RDMA mode (MPA Request out, the peer's decision, Reply in). */
    uint64_t request_ns;        /**< Passive: TCP accepted to the CONNECT_REQUEST record sent (the MPA Request read). */
    uint64_t decision_ns;       /**< Passive: the request reported to ACCEPT served (the consumer's work). */
    uint64_t accept_ns;         /**< Passive: ACCEPT served to RDMA mode (the MPA Reply sent, the transition). */
};

/** @brief LISTEN command code. */
#define KRDMA_CMD_LISTEN _IOWR(KRDMA_IOC_MAGIC, 0x40, struct krdma_listen)
/** @brief CONNECT command code. */
#define KRDMA_CMD_CONNECT _IOWR(KRDMA_IOC_MAGIC, 0x41, struct krdma_connect)
/** @brief ACCEPT command code. */
#define KRDMA_CMD_ACCEPT _IOWR(KRDMA_IOC_MAGIC, 0x42, struct krdma_accept)
/** @brief REJECT command code. */
#define KRDMA_CMD_REJECT _IOWR(KRDMA_IOC_MAGIC, 0x43, struct krdma_reject)
/** @brief DESTROY_LISTEN command code. */
#define KRDMA_CMD_DESTROY_LISTEN _IOWR(KRDMA_IOC_MAGIC, 0x44, struct krdma_destroy_listen)

/** @brief LIST_ENDPOINTS command code (open to every caller). */
#define KRDMA_CMD_LIST_ENDPOINTS _IOWR(KRDMA_IOC_MAGIC, 0x45, struct krdma_list_endpoints)
/** @brief LLP_COUNTERS command code (open to every caller). */
#define KRDMA_CMD_LLP_COUNTERS _IOWR(KRDMA_IOC_MAGIC, 0x46, struct krdma_llp_counters)
/** @brief CONVERT command code (with one descriptor: the connected socket). */
#define KRDMA_CMD_CONVERT _IOWR(KRDMA_IOC_MAGIC, 0x47, struct krdma_convert)

/* ---- End of the connection management block ---- */

/**
 * @brief An event record sent without a request: the kAL is shutting down, or event management delivers a
 *        provider's asynchronous or completion event to the process that owns the resource.
 */
struct krdma_event {
    uint32_t event;         /**< One of ::krdma_event_code. */
    uint32_t cookie;        /**< The cookie the consumer gave krdma_event::object when it made it (0: none). */
    uint64_t object;        /**< kAL handle of the object the event concerns (RNIC open, CQ), 0 for none. */
    uint64_t detail;        /**< Event-specific detail (ASYNC: the ri_async_event_t detail word). */
    uint64_t context;       /**< ASYNC: consumer context of the resource, from its create attributes. */
    uint64_t resource_id;   /**< ASYNC: QP number, CQ/SRQ identifier or STag; 0 for the RNIC. */
    uint32_t resource_type; /**< ASYNC: one of ri_resource_type. */
    uint32_t event_id;      /**< ASYNC: one of ri_event_id. */
};

/** @brief Event codes (krdma_event::event; also the header's cmd of an event message). */
enum krdma_event_code {
    KRDMA_EVENT_SHUTDOWN = 1,   /**< krdmad is stopping: every resource of this connection is about to be destroyed. */
    KRDMA_EVENT_ASYNC = 2,      /**< A kVP's asynchronous event on a resource of an RNIC open (krdma_event::object). */
    KRDMA_EVENT_COMPLETION = 3, /**< A kVP's completion notification on the CQ krdma_event::object. */
    KRDMA_EVENT_CM = 4,         /**< A connection event: the record is a struct krdma_cm_event. */
    /**
     * The kAL does not serve this connection (a limit of connections per host or per user): the record is the
     * reason as text, the header's status the error (::RI_ENOSPC); the kAL closes the connection after it.
     */
    KRDMA_EVENT_REFUSED = 5
};

#ifdef __cplusplus
}
#endif

#endif /* KRDMA_ABI_H */
