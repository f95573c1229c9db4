// The conformance fixture: a krdmad per test on a private device path, consumers through the uAL, connected pairs.
#include "harness.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "client.hpp"
#include "status_matchers.hpp"

namespace conformance {

std::string cm_name(uint32_t id) {
    switch (static_cast<ual::CmEventId>(id)) {
        case ual::CmEventId::connect_request: return "connect_request";
        case ual::CmEventId::established: return "established";
        case ual::CmEventId::rejected: return "rejected";
        case ual::CmEventId::unreachable: return "unreachable";
        case ual::CmEventId::peer_disconnect: return "peer_disconnect";
        case ual::CmEventId::broken: return "broken";
        case ual::CmEventId::timeout: return "timeout";
        case ual::CmEventId::disconnected: return "disconnected";
    }
    return "event " + std::to_string(id);
}


// ---------------------------------------------------------------------------------------------------------------
// Consumer

std::string Consumer::open(const std::filesystem::path &device, const std::string &rnic) {
    ual::Options o;
    o.device = device;
    auto a = ual::AccessLayer::open(o);
    if (!a) return "open the device: " + a.error().to_string();
    al = *a;
    auto ad = al->open_adapter(rnic);
    if (!ad) return "open RNIC " + rnic + ": " + ad.error().to_string();
    adapter = *ad;
    auto q = adapter->query();
    if (!q) return "Query RNIC: " + q.error().to_string();
    attr = *q;
    requests = *ual::SimpleDispatcher::create(ual::EventStream::cm_request, 256);
    async = *ual::SimpleDispatcher::create(ual::EventStream::affiliated_async, 1024);
    unaffiliated = *ual::SimpleDispatcher::create(ual::EventStream::unaffiliated_async, 64);
    adapter->set_async_dispatchers(async, unaffiliated);
    return "";
}

bool Consumer::seen(uint32_t qp_num, uint32_t id, uint32_t *detail) const {
    for (const auto &e : events) {
        if (e.resource_id == qp_num && e.id == id) {
            if (detail != nullptr) *detail = e.detail;
            return true;
        }
    }
    return false;
}

bool Consumer::await_event(uint32_t qp_num, uint32_t id, uint32_t *detail, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!seen(qp_num, id, detail)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        auto e = async->wait(left);
        if (!e) return false;
        events.push_back(*e);
    }
    return true;
}

std::string Consumer::events_text() const {
    std::string out;
    for (const auto &e : events) {
        char line[96];
        std::snprintf(line, sizeof line, " [qp %llu event %u detail %#x]", static_cast<unsigned long long>(e.resource_id),
                      e.id, e.detail);
        out += line;
    }
    return out.empty() ? " none" : out;
}

void Consumer::close() {
    events.clear();
    if (adapter) adapter->set_async_dispatchers(nullptr, nullptr);
    adapter.reset();
    al.reset();
}

// ---------------------------------------------------------------------------------------------------------------
// End

std::string End::make(Consumer &c, const EndOptions &o) {
    if (o.pz) {
        pz = o.pz;
    } else {
        auto p = c.adapter->create_pz();
        if (!p) return "create PZ: " + p.error().to_string();
        pz = *p;
    }
    dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 4096);
    cm = *ual::SimpleDispatcher::create(ual::EventStream::cm_message, 64);
    auto q = c.adapter->create_cq(o.cq_depth, dto);
    if (!q) return "create CQ: " + q.error().to_string();
    cq = *q;
    if (o.shared_srq) {
        srq = o.shared_srq;
    } else if (o.srq) {
        auto s = pz->create_srq(o.depth, std::min(4u, c.attr.max_srq_sge));
        if (!s) return "create SRQ: " + s.error().to_string();
        srq = *s;
    }
    ual::EndpointAttributes ea;
    ea.sq_depth = ea.rq_depth = o.depth;
    ea.sq_sge = ea.rq_sge = std::min(4u, c.attr.max_sge);
    ea.rd_sge = std::min(4u, c.attr.max_sge_rd);
    ea.ird = ea.ord = std::min({8u, c.attr.max_ird, c.attr.max_ord});
    ea.max_inline = o.max_inline;
    ea.context = o.context;
    auto e = pz->create_endpoint(ea, cq, cq, srq);
    if (!e) return "create endpoint: " + e.error().to_string();
    ep = *e;
    ep->set_connection_dispatcher(cm);
    buf.assign(o.bytes, 0);
    auto m = pz->register_memory(buf.data(), buf.size(), o.access);
    if (!m) return "register " + std::to_string(buf.size()) + " bytes: " + m.error().to_string();
    mr = *m;
    return "";
}

rdma::Status End::recv(uint64_t id, std::vector<ri_sge_t> sgl) {
    ri_recv_wr_t wr{id, sgl.data(), static_cast<uint32_t>(sgl.size()), 0};
    return srq ? srq->post_recv({&wr, 1}) : ep->post_recv({&wr, 1});
}

rdma::Status End::send(uint64_t id, uint32_t opcode, std::vector<ri_sge_t> sgl, uint32_t flags, uint64_t remote_addr,
                       ri_stag_t rkey, ri_stag_t inv_stag) {
    ri_send_wr_t wr{};
    wr.wr_id = id;
    wr.opcode = opcode;
    wr.flags = flags;
    wr.sgl = sgl.empty() ? nullptr : sgl.data();
    wr.num_sge = static_cast<uint32_t>(sgl.size());
    wr.u.rdma.remote_addr = remote_addr;
    wr.u.rdma.rkey = rkey;
    wr.inv_stag = inv_stag;
    return ep->post_send({&wr, 1});
}

std::optional<ri_wc_t> End::completion(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    ri_wc_t wc{};
    for (;;) {
        auto n = cq->poll({&wc, 1});
        if (n && *n == 1) return wc;
        if (std::chrono::steady_clock::now() >= end) return std::nullopt;
        std::this_thread::sleep_for(50us);
    }
}

std::vector<ri_wc_t> End::completions(size_t n, std::chrono::milliseconds timeout) {
    std::vector<ri_wc_t> out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (out.size() < n) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        auto wc = completion(left);
        if (!wc) break;
        out.push_back(*wc);
    }
    return out;
}

bool End::idle(std::chrono::milliseconds quiet) { return !completion(quiet).has_value(); }

int End::state() const {
    auto q = ep->query();
    return q ? static_cast<int>(q->state) : -1;
}

std::optional<ual::Event> End::cm_event(std::chrono::milliseconds timeout) {
    auto e = cm->wait(timeout);
    if (!e) return std::nullopt;
    return *e;
}

void End::close() {
    // Children before parents, as the provider wants them (a parent answers EBUSY while children exist).
    if (ep) (void)ep->close();
    ep.reset();
    if (srq) (void)srq->close();
    srq.reset();
    if (mr) (void)mr->close();
    mr.reset();
    if (cq) (void)cq->close();
    cq.reset();
    if (pz) (void)pz->close();
    pz.reset();
}

// ---------------------------------------------------------------------------------------------------------------
// Pair

std::string Pair::connect(Consumer &c, const EndOptions &ao, const EndOptions &bo,
                          const std::function<void(Pair &)> &before) {
    EndOptions ea = ao, eb = bo;
    if (ea.context == 0) ea.context = 0xa;
    if (eb.context == 0) eb.context = 0xb;
    if (auto e = a.make(c, ea); !e.empty()) return "active end: " + e;
    if (auto e = b.make(c, eb); !e.empty()) return "passive end: " + e;
    if (before) before(*this);
    auto lp = c.adapter->listen(0, c.requests, 0x1157);
    if (!lp) return "listen: " + lp.error().to_string();
    listen = *lp;
    if (auto st = a.ep->connect(settings().address, listen->port(), bytes_of("conformance")); !st.ok()) {
        return "connect: " + st.error().to_string();
    }
    auto req = c.requests->wait(20s);
    if (!req) return "no connection request: " + req.error().to_string();
    if (req->id != static_cast<uint32_t>(ual::CmEventId::connect_request) || !req->connection) {
        return "listen point got " + cm_name(req->id);
    }
    if (auto st = b.ep->accept(req->connection->request, bytes_of("accepted")); !st.ok()) {
        return "accept: " + st.error().to_string();
    }
    for (End *e : {&a, &b}) {
        auto est = e->cm_event();
        if (!est) return std::string(e == &a ? "active" : "passive") + " end: no connection event";
        if (est->id != static_cast<uint32_t>(ual::CmEventId::established)) {
            return std::string(e == &a ? "active" : "passive") + " end: " + cm_name(est->id) + " (status " +
                   std::to_string(est->connection ? est->connection->status : 0) + ")";
        }
        // Both ends are this consumer's, through one krdmad: an RNIC that takes a same-host channel gets one, and
        // the tests run on that path; one that does not (or whose option turned it off) stays on the wire.
        const bool same_host = est->connection && (est->connection->llp.mpa_flags & RI_LLP_SAME_HOST) != 0;
        if (same_host != c.has(RI_CAP_SAME_HOST)) {
            return std::string(e == &a ? "active" : "passive") + " end: connected on the " +
                   (same_host ? "same-host channel" : "wire") + ", but the RNIC " +
                   (c.has(RI_CAP_SAME_HOST) ? "takes" : "does not take") + " a same-host channel";
        }
    }
    return "";
}

// ---------------------------------------------------------------------------------------------------------------
// The fixture

void Conformance::SetUp() {
    const Settings &s = settings();
    ASSERT_FALSE(s.provider.empty()) << "no --provider given";
    char tmpl[] = "/tmp/openrdma-conformance-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    dir_ = tmpl;
    device_ = dir_ / "krdma.sock";
    nlohmann::json rnic = {{"provider", s.provider}, {"name", kRnicName}, {"address", s.address}};
    if (!s.options.empty()) rnic["options"] = nlohmann::json::parse(s.options);
    const nlohmann::json cfg = {{"device", device_.string()},
                                {"provider_dir", s.provider_dir.string()},
                                {"log_level", "warn"},
                                {"modules", {s.module}},
                                {"rnics", {rnic}}};
    std::ofstream(dir_ / "krdmad.json") << cfg.dump(2);
    krdmad_ = spawn(s.krdmad, {"--config", (dir_ / "krdmad.json").string()}, dir_ / "krdmad.log");
    // Ready, not merely bound: the device file exists a moment before krdmad serves it.
    bool ready = false;
    for (int i = 0; i < 1000 && !ready; ++i) {
        ready = read_text(dir_ / "krdmad.log").find("krdmad: ready on") != std::string::npos;
        int status = 0;
        if (!ready && ::waitpid(krdmad_, &status, WNOHANG) == krdmad_) break;
        if (!ready) std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(ready) << "krdmad (" << s.krdmad << ") did not start with provider " << s.provider << " from "
                       << s.provider_dir << ":\n"
                       << read_text(dir_ / "krdmad.log");
}

void Conformance::TearDown() {
    // Consumers first (their objects close in order), then every process, then the directory.
    for (auto &p : pairs_) p->close();
    pairs_.clear();
    consumer_.close();
    if (HasFailure() && !dir_.empty()) {
        const std::string log = read_text(dir_ / "krdmad.log");
        if (!log.empty()) std::printf("--- krdmad's output ---\n%s\n", log.c_str());
    }
    for (pid_t pg : groups_) ::kill(-pg, SIGKILL);
    for (pid_t pg : groups_) ::waitpid(pg, nullptr, 0);
    groups_.clear();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

void Conformance::open_consumer(const std::string &rnic) {
    ASSERT_EQ(consumer_.open(device_, rnic), "");
}

Pair &Conformance::pair() {
    pairs_.push_back(std::make_unique<Pair>());
    return *pairs_.back();
}

void Conformance::connect(Pair &p, const EndOptions &ao, const EndOptions &bo,
                          const std::function<void(Pair &)> &before) {
    if (!consumer_.adapter) {
        ASSERT_NO_FATAL_FAILURE(open_consumer());
    }
    ASSERT_EQ(p.connect(consumer_, ao, bo, before), "");
}

pid_t Conformance::spawn(const std::filesystem::path &program, const std::vector<std::string> &args,
                         const std::filesystem::path &out) {
    // Everything the child needs is made before fork(): between fork and exec only async-signal-safe calls.
    std::vector<std::string> all{program.string()};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char *> argv;
    for (auto &a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string path = out.string();
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
        ::setpgid(0, 0);
        // Should the runner die (a crash, kill -9), its krdmad and consumers go with it.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(126);
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            ::dup2(fd, STDOUT_FILENO);
            ::dup2(fd, STDERR_FILENO);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    if (pid > 0) {
        ::setpgid(pid, pid);
        groups_.push_back(pid);
    }
    return pid;
}

int Conformance::wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    do {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) {
            groups_.erase(std::remove(groups_.begin(), groups_.end(), pid), groups_.end());
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        std::this_thread::sleep_for(10ms);
    } while (std::chrono::steady_clock::now() < end);
    return -1;
}

std::vector<krdma_client_info> Conformance::clients() {
    std::vector<krdma_client_info> out;
    auto c = ual::DeviceClient::connect(device_);
    EXPECT_OK(c) << c.error().to_string();
    if (!c) return out;
    for (uint32_t i = 0;; ++i) {
        krdma_list_clients q{};
        q.index = i;
        auto r = (*c)->call(KRDMA_CMD_LIST_CLIENTS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        EXPECT_TRUE(r && r->status == 0);
        if (!r || r->status != 0 || r->payload.size() < sizeof q) break;
        std::memcpy(&q, r->payload.data(), sizeof q);
        if (i >= q.count) break;
        out.push_back(q.info);
    }
    return out;
}

std::optional<krdma_rnic_info> Conformance::rnic_info() {
    auto c = ual::DeviceClient::connect(device_);
    EXPECT_OK(c) << c.error().to_string();
    if (!c) return std::nullopt;
    for (uint32_t i = 0;; ++i) {
        krdma_list_rnics q{};
        q.index = i;
        auto r = (*c)->call(KRDMA_CMD_LIST_RNICS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        if (!r || r->status != 0 || r->payload.size() < sizeof q) return std::nullopt;
        std::memcpy(&q, r->payload.data(), sizeof q);
        if (i >= q.count) return std::nullopt;
        if (std::string(q.info.name) == kRnicName) return q.info;
    }
}

std::string Conformance::read_text(const std::filesystem::path &file) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace conformance
