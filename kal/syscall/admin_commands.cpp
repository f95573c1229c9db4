// System call management: RNIC and module listing for uALs and rdmactl, and the administrator's commands.
#include "admin_commands.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "admin";

template <size_t N>
void copy_text(char (&dst)[N], const std::string &src) {
    size_t n = std::min(src.size(), N - 1);
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

// The text of a fixed request field, or nothing when the client left it without a NUL.
template <size_t N>
std::optional<std::string> text_of(const char (&field)[N]) {
    const void *end = std::memchr(field, '\0', N);
    if (end == nullptr) return std::nullopt;
    return std::string(field, static_cast<const char *>(end));
}

template <typename T>
void reply_with(Reply &rep, const T &a) {
    std::memcpy(rep.payload.data(), &a, sizeof a);
}

void fill(krdma_rnic_info &out, const RnicInfo &r) {
    copy_text(out.name, r.name);
    copy_text(out.provider, r.provider);
    copy_text(out.vendor, r.vendor);
    copy_text(out.netdev, r.netdev);
    copy_text(out.address, r.address);
    copy_text(out.uvp_library, r.uvp_library);
    out.opens = r.opens;
    out.state = KRDMA_RNIC_ATTACHED;
    for (size_t t = 0; t < kRnicObjectTypes; ++t) out.objects[t] = r.objects[t];
}

void fill(krdma_module_info &out, const ModuleInfo &m) {
    copy_text(out.provider, m.provider);
    copy_text(out.vendor, m.vendor);
    copy_text(out.version, m.version);
    copy_text(out.path, m.path);
    copy_text(out.uvp_library, m.uvp_library);
    out.abi_version = m.abi_version;
    out.rnics = m.rnics;
}

// A buffer size for the reentrant passwd/group lookups.
size_t lookup_buffer_size(int name) {
    long n = ::sysconf(name);
    return n > 0 ? static_cast<size_t>(n) : 16384;
}

// Whether the groups of @p uid's passwd entry (its login group and every group listing it) include @p gid.
bool passwd_groups_include(uid_t uid, gid_t gid) {
    std::vector<char> buf(lookup_buffer_size(_SC_GETPW_R_SIZE_MAX));
    passwd pw{};
    passwd *found = nullptr;
    int rc;
    while ((rc = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found)) == ERANGE && buf.size() < (1u << 20)) {
        buf.resize(buf.size() * 2);
    }
    if (rc != 0 || found == nullptr) return false;  // a uid without a passwd entry has no supplementary groups
    if (pw.pw_gid == gid) return true;
    int count = 32;
    std::vector<gid_t> groups;
    for (int attempt = 0; attempt < 4; ++attempt) {
        groups.resize(static_cast<size_t>(count));
        int n = count;
        if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) >= 0) {
            groups.resize(static_cast<size_t>(n));
            return std::find(groups.begin(), groups.end(), gid) != groups.end();
        }
        count = std::max(n, count * 2);  // n now says how many groups there are
    }
    return false;
}

// Checks that the caller of an administration command may make it; logs a refusal with who was refused and gives
// the caller the reason.
bool admit(const Connection &c, const AdminPolicy &policy, const char *what, Reply &rep) {
    if (may_administer(c.peer(), policy)) return true;
    RDMA_LOG_WARN(kComponent, "refused %s to client %u (pid %d uid %u gid %u): needs root or the admin group", what,
                  c.peer().client_id, static_cast<int>(c.peer().pid), static_cast<unsigned>(c.peer().uid),
                  static_cast<unsigned>(c.peer().gid));
    (void)rep.fail(RI_EPERM, "permission denied: " + std::string(what) +
                                 " needs root or membership in krdmad's admin group (" +
                                 (policy.admin_gid ? "gid " + std::to_string(*policy.admin_gid) : "none is configured") +
                                 "); uid " + std::to_string(c.peer().uid) + " is neither");
    return false;
}

// Refuses a request whose text field @p name (@p size bytes) has no NUL within its bytes.
int unterminated(Reply &rep, const char *name, size_t size) {
    return rep.fail(RI_EINVAL, std::string("the ") + name + " field is not NUL-terminated within its " +
                                   std::to_string(size) + " bytes");
}

// Logs the outcome of an administration command and returns its status for the reply, with the error's message
// as the reason of a failure.
int outcome(const Connection &c, const char *what, const std::string &object, const rdma::Error *error, Reply &rep) {
    const Peer &p = c.peer();
    if (error == nullptr) {
        RDMA_LOG_INFO(kComponent, "%s %s: done for client %u (pid %d uid %u)", what, object.c_str(), p.client_id,
                      static_cast<int>(p.pid), static_cast<unsigned>(p.uid));
        return RI_OK;
    }
    RDMA_LOG_WARN(kComponent, "%s %s for client %u (pid %d uid %u) failed: %s", what, object.c_str(), p.client_id,
                  static_cast<int>(p.pid), static_cast<unsigned>(p.uid), error->to_string().c_str());
    return rep.fail(rdma::from_errno(error->code()), error->message());
}

// A LIST command: entry `index` of what @p entries returns, with the count (ask 0, 1, ... until the count).
template <class Msg, class Entries>
void serve_list(DeviceServer &server, uint32_t cmd, Entries entries) {
    server.on(cmd, [entries](Connection &, const Request &req, Reply &rep) {
        auto q = req.as<Msg>();
        const auto list = entries();
        Msg a{};
        a.index = q.index;
        a.count = static_cast<uint32_t>(list.size());
        if (q.index < list.size()) fill(a.info, list[q.index]);
        reply_with(rep, a);
        return RI_OK;
    });
}

}  // namespace

rdma::Expected<AdminPolicy> resolve_admin_policy(const std::string &group) {
    if (group.empty()) return AdminPolicy{};
    std::vector<char> buf(lookup_buffer_size(_SC_GETGR_R_SIZE_MAX));
    ::group gr{};
    ::group *found = nullptr;
    int rc;
    while ((rc = ::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found)) == ERANGE &&
           buf.size() < (1u << 20)) {
        buf.resize(buf.size() * 2);
    }
    if (rc != 0) return rdma::Error(rc, "cannot look up admin group '" + group + "': " + std::strerror(rc));
    if (found == nullptr) {
        return rdma::Error(RI_ENOENT, "admin group '" + group + "' does not exist on this host");
    }
    return AdminPolicy{gr.gr_gid};
}

bool may_administer(const Peer &peer, const AdminPolicy &policy) {
    if (peer.uid == 0) return true;
    if (!policy.admin_gid) return false;
    return peer.gid == *policy.admin_gid || passwd_groups_include(peer.uid, *policy.admin_gid);
}

void register_admin_commands(DeviceServer &server, AdapterManager &adapters, AdminPolicy policy) {
    serve_list<krdma_list_rnics>(server, KRDMA_CMD_LIST_RNICS, [&adapters] { return adapters.list(); });
    serve_list<krdma_list_modules>(server, KRDMA_CMD_LIST_MODULES, [&adapters] { return adapters.modules(); });

    server.on(KRDMA_CMD_ATTACH_RNIC, [&adapters, policy](Connection &c, const Request &req, Reply &rep) -> int {
        if (!admit(c, policy, "attach", rep)) return RI_EPERM;
        auto q = req.as<krdma_attach_rnic>();
        auto provider = text_of(q.provider);
        auto name = text_of(q.name);
        auto netdev = text_of(q.netdev);
        auto address = text_of(q.address);
        auto options = text_of(q.options);
        if (!provider) return unterminated(rep, "provider", sizeof q.provider);
        if (!name) return unterminated(rep, "name", sizeof q.name);
        if (!netdev) return unterminated(rep, "netdev", sizeof q.netdev);
        if (!address) return unterminated(rep, "address", sizeof q.address);
        if (!options) return unterminated(rep, "options", sizeof q.options);
        auto r = adapters.attach(AttachRequest{*provider, *name, *netdev, *address, *options});
        if (!r) return outcome(c, "attach", *name, &r.error(), rep);
        krdma_attach_rnic a{};
        std::memcpy(&a, &q, sizeof a);
        fill(a.info, *r);
        reply_with(rep, a);
        return outcome(c, "attach", *name + " (" + r->provider + ", " + r->address + ")", nullptr, rep);
    });

    server.on(KRDMA_CMD_DETACH_RNIC, [&adapters, policy](Connection &c, const Request &req, Reply &rep) -> int {
        if (!admit(c, policy, "detach", rep)) return RI_EPERM;
        auto q = req.as<krdma_detach_rnic>();
        auto name = text_of(q.name);
        if (!name) return unterminated(rep, "name", sizeof q.name);
        auto r = adapters.detach(*name);
        return outcome(c, "detach", *name, r ? nullptr : &r.error(), rep);
    });

    // The empty request {} changes nothing and answers the RNIC's state and tunables (RNIC-PI control): open to
    // every caller, as `rdmactl show` is, and not logged; any other request is an administrator's.
    server.on(KRDMA_CMD_CONTROL_RNIC, [&adapters, policy](Connection &c, const Request &req, Reply &rep) -> int {
        auto q = req.as<krdma_control_rnic>();
        auto name = text_of(q.name);
        auto text = text_of(q.text);
        const bool query = text && *text == "{}";
        if (!query && !admit(c, policy, "control", rep)) return RI_EPERM;
        if (!name) return unterminated(rep, "name", sizeof q.name);
        if (!text) return unterminated(rep, "text", sizeof q.text);
        auto r = adapters.control(*name, *text);
        // A query is not logged; a failed one answers as outcome() does.
        auto failed = [&](const rdma::Error &e) {
            return query ? rep.fail(rdma::from_errno(e.code()), e.message())
                         : outcome(c, "control", *name + " " + *text, &e, rep);
        };
        if (!r) return failed(r.error());
        krdma_control_rnic a{};
        if (r->size() >= sizeof a.text) {
            // Cut, it would not parse: the provider's reply must fit (ri_module_t::control).
            const rdma::Error e(RI_EOVERFLOW, "RNIC " + *name + ": the provider's reply of " +
                                                  std::to_string(r->size()) + " bytes does not fit in " +
                                                  std::to_string(sizeof a.text - 1));
            return failed(e);
        }
        std::memcpy(a.name, q.name, sizeof a.name);
        std::memcpy(a.text, r->data(), r->size());
        reply_with(rep, a);
        return query ? 0 : outcome(c, "control", *name + " " + *text, nullptr, rep);
    });

    server.on(KRDMA_CMD_LOAD_MODULE, [&adapters, policy](Connection &c, const Request &req, Reply &rep) -> int {
        if (!admit(c, policy, "load", rep)) return RI_EPERM;
        auto q = req.as<krdma_load_module>();
        auto file = text_of(q.file);
        if (!file) return unterminated(rep, "file", sizeof q.file);
        if (file->empty()) return rep.fail(RI_EINVAL, "no module file named");
        auto r = adapters.load(*file);
        if (!r) return outcome(c, "load", *file, &r.error(), rep);
        const std::string provider = (*r)->name();
        for (const auto &m : adapters.modules()) {
            if (m.provider == provider) fill(q.info, m);
        }
        reply_with(rep, q);
        return outcome(c, "load", *file + " (provider " + provider + ")", nullptr, rep);
    });

    server.on(KRDMA_CMD_UNLOAD_MODULE, [&adapters, policy](Connection &c, const Request &req, Reply &rep) -> int {
        if (!admit(c, policy, "unload", rep)) return RI_EPERM;
        auto q = req.as<krdma_unload_module>();
        auto provider = text_of(q.provider);
        if (!provider) return unterminated(rep, "provider", sizeof q.provider);
        auto r = adapters.unload(*provider);
        return outcome(c, "unload", *provider, r ? nullptr : &r.error(), rep);
    });
}

}  // namespace kal
