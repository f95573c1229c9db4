// One suite of access-layer object tests, run against both links: a process reaching a real krdmad through its
// device (uVP verbs, ri_syscall, event records), and a consumer hosted in a kAL running in this process (kVP verbs,
// the kAL's commands on its serving thread, callbacks). The same expectations hold for both, so the two sides of
// the uAL cannot drift apart again.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "config.hpp"
#include "connection_fixtures.hpp"
#include "embedded_kal.hpp"
#include "hosted_link.hpp"
#include "rdma_util.hpp"
#include "ual/access_layer.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;
using rdmatest::bytes_of;

// A process of its own talking to krdmad (started on a private device path by the fixture).
struct ThroughKrdmad {
    static constexpr const char *kName = "krdmad";
    static constexpr bool kConvertsSockets = true;
};
// A consumer hosted in a kAL that runs in this test process.
struct HostedInKal {
    static constexpr const char *kName = "hosted";
    static constexpr bool kConvertsSockets = false;
};

template <class Link>
class LinkSuite : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        const auto config = write_config(rdmatest::krdmad_config(device_, "sr0", "127.0.0.1"));
        if constexpr (std::is_same_v<Link, ThroughKrdmad>) {
            const pid_t pid = start({"--config", config.string()});
            ASSERT_TRUE(wait_ready(pid)) << stderr_text();
            ual::Options o;
            o.device = device_;
            auto al = ual::AccessLayer::open(o);
            ASSERT_OK(al) << al.error().to_string();
            al_ = *al;
        } else {
            auto cfg = kal::load_config(config);
            ASSERT_OK(cfg) << cfg.error().to_string();
            auto k = kal::EmbeddedKal::start(*cfg);
            ASSERT_OK(k) << k.error().to_string();
            kal_ = std::move(*k);
            auto al = ual::AccessLayer::open(kal::hosted_link(kal_->consumer_host(), "link suite"));
            ASSERT_OK(al) << al.error().to_string();
            al_ = *al;
        }
        EXPECT_EQ(al_->link().kind(), Link::kName);
    }

    void TearDown() override {
        listen_.reset();
        side_.reset();
        // A delivery in flight holds the access layer for a moment; an object the test left behind holds it for good.
        for (int i = 0; i < 200 && al_ && al_.use_count() > 1; ++i) std::this_thread::sleep_for(10ms);
        EXPECT_EQ(al_.use_count(), 1) << "an object outlives the test and keeps the access layer";
        al_.reset();
        kal_.reset();  // after every object of its hosted consumer
        testutil::KrdmadFixture::TearDown();
    }

    // One adapter with a PZ, a CQ, dispatchers and a registered buffer.
    struct Side {
        std::shared_ptr<ual::Adapter> adapter;
        std::shared_ptr<ual::ProtectionZone> pz;
        std::shared_ptr<ual::SimpleDispatcher> dto, requests, cm;
        std::shared_ptr<ual::CompletionQueue> cq;
        std::vector<uint8_t> buffer = std::vector<uint8_t>(1 << 16);
        std::shared_ptr<ual::MemoryRegion> mr;
    };

    Side &side() {
        if (side_) return *side_;
        side_ = std::make_unique<Side>();
        auto a = al_->open_adapter("127.0.0.1");  // by address
        EXPECT_OK(a) << a.error().to_string();
        side_->adapter = *a;
        side_->pz = *side_->adapter->create_pz();
        side_->dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 256);
        side_->requests = *ual::SimpleDispatcher::create(ual::EventStream::cm_request, 16);
        side_->cm = *ual::SimpleDispatcher::create(ual::EventStream::cm_message, 64);
        auto cq = side_->adapter->create_cq(256, side_->dto);
        EXPECT_OK(cq) << cq.error().to_string();
        side_->cq = *cq;
        auto mr = side_->pz->register_memory(side_->buffer.data(), side_->buffer.size(),
                                             RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
        EXPECT_OK(mr) << mr.error().to_string();
        side_->mr = *mr;
        return *side_;
    }

    std::shared_ptr<ual::Endpoint> endpoint(uint64_t context) {
        ual::EndpointAttributes ea;
        ea.context = context;
        auto ep = side().pz->create_endpoint(ea, side().cq, side().cq);
        EXPECT_OK(ep) << ep.error().to_string();
        if (!ep) return nullptr;
        (*ep)->set_connection_dispatcher(side().cm);
        return *ep;
    }

    // Connects a new endpoint to a listen point of the same adapter; both ends ESTABLISHED.
    std::pair<std::shared_ptr<ual::Endpoint>, std::shared_ptr<ual::Endpoint>> connected_pair() {
        auto lp = side().adapter->listen(0, side().requests, 77);
        EXPECT_OK(lp) << lp.error().to_string();
        listen_ = *lp;
        auto active = endpoint(1);
        auto passive = endpoint(2);
        EXPECT_OK(active->connect("127.0.0.1", listen_->port(), bytes_of("hello")));
        auto req = side().requests->wait(10s);
        EXPECT_OK(req);
        if (!req) return {};
        EXPECT_EQ(req->id, static_cast<uint32_t>(KRDMA_CM_CONNECT_REQUEST));
        EXPECT_EQ(req->context, 77u);  // the listen point's context
        EXPECT_EQ(rdmatest::text(req->connection->private_data), "hello");
        EXPECT_OK(passive->accept(req->connection->request, bytes_of("welcome")));
        for (int i = 0; i < 2; ++i) {
            auto e = side().cm->wait(10s);
            EXPECT_OK(e);
            if (!e) break;
            EXPECT_EQ(e->id, static_cast<uint32_t>(KRDMA_CM_ESTABLISHED)) << "endpoint " << e->context;
            if (e->context == 1) {
                EXPECT_EQ(rdmatest::text(e->connection->private_data), "welcome");
            }
        }
        return {active, passive};
    }

    std::filesystem::path device_;
    std::unique_ptr<kal::EmbeddedKal> kal_;
    std::shared_ptr<ual::AccessLayer> al_;
    std::unique_ptr<Side> side_;
    std::shared_ptr<ual::ListenPoint> listen_;
};

using Links = ::testing::Types<ThroughKrdmad, HostedInKal>;
class LinkNames {
public:
    template <class T>
    static std::string GetName(int) {
        return T::kName;
    }
};
TYPED_TEST_SUITE(LinkSuite, Links, LinkNames);

TYPED_TEST(LinkSuite, ListsAndOpensRnicsByNameOrAddress) {
    auto list = this->al_->rnics();
    ASSERT_OK(list) << list.error().to_string();
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ((*list)[0].name, "sr0");
    EXPECT_EQ((*list)[0].address, "127.0.0.1");
    auto by_name = this->al_->open_adapter("sr0");
    ASSERT_OK(by_name) << by_name.error().to_string();
    EXPECT_EQ((*by_name)->description().name, "sr0");
    auto attr = (*by_name)->query();
    ASSERT_OK(attr) << attr.error().to_string();
    EXPECT_GT(attr->max_qp, 0u);
    auto none = this->al_->open_adapter("192.0.2.99");
    ASSERT_FALSE(none);
    EXPECT_STATUS(none, RI_ENODEV);
    EXPECT_EQ(this->al_->link().can_convert_sockets(), TypeParam::kConvertsSockets);
}

TYPED_TEST(LinkSuite, EveryObjectKindIsMadeQueriedAndClosedInTheVerbsOrder) {
    auto &s = this->side();
    EXPECT_GE(s.cq->depth(), 256u);
    EXPECT_NE(s.mr->keys().lkey, 0u);
    auto srq = s.pz->create_srq(32, 2, 0, 9);
    ASSERT_OK(srq) << srq.error().to_string();
    auto sq = (*srq)->query();
    ASSERT_OK(sq) << sq.error().to_string();
    EXPECT_GE(sq->max_wr, 32u);
    ri_srq_attr_t limit{};
    limit.limit = 4;
    EXPECT_OK((*srq)->modify(limit, RI_SRQ_ATTR_LIMIT));
    ual::EndpointAttributes ea;
    ea.context = 5;
    auto ep = s.pz->create_endpoint(ea, s.cq, s.cq, *srq);
    ASSERT_OK(ep) << ep.error().to_string();
    EXPECT_NE((*ep)->qp_num(), 0u);
    auto q = (*ep)->query();
    ASSERT_OK(q) << q.error().to_string();
    EXPECT_EQ(q->state, static_cast<uint32_t>(RI_QPS_IDLE));
    auto mw = s.pz->allocate_window(RI_MW_TYPE_2);
    ASSERT_OK(mw) << mw.error().to_string();
    EXPECT_NE((*mw)->rkey(), 0u);
    auto mq = s.mr->query();
    ASSERT_OK(mq) << mq.error().to_string();
    EXPECT_EQ(mq->length, s.buffer.size());

    // Parents refuse to go while children live, on either side of the link.
    EXPECT_STATUS(s.pz->close(), RI_EBUSY);
    EXPECT_STATUS(s.cq->close(), RI_EBUSY);      // the endpoint uses it
    EXPECT_STATUS((*srq)->close(), RI_EBUSY);    // the endpoint uses it
    EXPECT_STATUS(s.adapter->close(), RI_EBUSY);
    EXPECT_OK((*ep)->close());
    EXPECT_OK((*ep)->close());  // closing twice is harmless
    EXPECT_OK((*srq)->close());
    EXPECT_OK((*mw)->close());
    EXPECT_OK(s.mr->close());
    EXPECT_OK(s.cq->close());
    EXPECT_OK(s.pz->close());
    EXPECT_OK(s.adapter->close());
}

TYPED_TEST(LinkSuite, ConnectionEventsAndCompletionsFindTheirObjectsByCookie) {
    auto [active, passive] = this->connected_pair();
    ASSERT_TRUE(active && passive);
    auto &s = this->side();
    const uint32_t lkey = s.mr->keys().lkey;
    ri_sge_t rsge{reinterpret_cast<uint64_t>(s.buffer.data() + 4096), 64, lkey};
    ri_recv_wr_t rwr{11, &rsge, 1, 0};
    ASSERT_OK(passive->post_recv({&rwr, 1}));
    // The DTO dispatcher sleeps (its CQ armed) before anything completes, so the completions wake it by the
    // provider's completion event for this CQ's cookie: the uVP's own, or the kVP's through the kAL.
    auto waiter = std::async(std::launch::async, [&] {
        std::set<uint64_t> ids;
        for (int i = 0; i < 4 && ids.size() < 2; ++i) {
            auto e = s.dto->wait(10s);
            if (!e) break;
            if (e->wc.status == RI_WC_SUCCESS) ids.insert(e->wc.wr_id);
        }
        return ids;
    });
    std::this_thread::sleep_for(50ms);
    std::memcpy(s.buffer.data(), "ping", 4);
    ri_sge_t ssge{reinterpret_cast<uint64_t>(s.buffer.data()), 4, lkey};
    ri_send_wr_t wr{};
    wr.wr_id = 22;
    wr.opcode = RI_WR_SEND;
    wr.flags = RI_SEND_SIGNALED;
    wr.sgl = &ssge;
    wr.num_sge = 1;
    ASSERT_OK(active->post_send({&wr, 1}));
    EXPECT_EQ(waiter.get(), (std::set<uint64_t>{11, 22}));
    EXPECT_EQ(std::memcmp(s.buffer.data() + 4096, "ping", 4), 0);

    // An orderly disconnect: each end hears of it through its own cookie, with its own context.
    ASSERT_OK(active->disconnect());
    std::map<uint64_t, uint32_t> ends;
    for (int i = 0; i < 2; ++i) {
        auto e = s.cm->wait(10s);
        ASSERT_OK(e) << "connection event " << i;
        ends[e->context] = e->id;
    }
    EXPECT_EQ(ends[1], static_cast<uint32_t>(KRDMA_CM_DISCONNECTED));
    EXPECT_EQ(ends[2], static_cast<uint32_t>(KRDMA_CM_PEER_DISCONNECT));
}

TYPED_TEST(LinkSuite, ARejectCarriesItsPrivateDataToTheRequester) {
    auto &s = this->side();
    auto lp = s.adapter->listen(0, s.requests, 3);
    ASSERT_OK(lp) << lp.error().to_string();
    auto ep = this->endpoint(4);
    ASSERT_OK(ep->connect("127.0.0.1", (*lp)->port(), bytes_of("may I")));
    auto req = s.requests->wait(10s);
    ASSERT_OK(req);
    ASSERT_OK(s.adapter->reject(req->connection->request, bytes_of("no")));
    auto e = s.cm->wait(10s);
    ASSERT_OK(e);
    EXPECT_EQ(e->id, static_cast<uint32_t>(KRDMA_CM_REJECTED));
    EXPECT_EQ(e->context, 4u);
    EXPECT_EQ(rdmatest::text(e->connection->private_data), "no");
    // A closed listen point refuses further requests: the connect fails (unreachable or rejected), never hangs.
    EXPECT_OK((*lp)->close());
    auto again = this->endpoint(6);
    ASSERT_OK(again->connect("127.0.0.1", (*lp)->port()));
    auto f = s.cm->wait(10s);
    ASSERT_OK(f);
    EXPECT_EQ(f->context, 6u);
    EXPECT_NE(f->id, static_cast<uint32_t>(KRDMA_CM_ESTABLISHED));
}

// accept_async: the accept goes without a round trip; the connection comes up as with accept(), and a refusal (here
// a request the kAL never made) reaches the endpoint as a broken connection with the refusal's code. A link that
// answers at once (a consumer hosted in the kAL) returns the refusal instead.
TYPED_TEST(LinkSuite, AnAcceptSentWithoutWaitingEstablishesOrBreaksTheConnection) {
    auto &s = this->side();
    auto lp = s.adapter->listen(0, s.requests, 3);
    ASSERT_OK(lp) << lp.error().to_string();
    auto active = this->endpoint(11);
    auto passive = this->endpoint(12);
    ASSERT_OK(active->connect("127.0.0.1", (*lp)->port(), bytes_of("hi")));
    auto req = s.requests->wait(10s);
    ASSERT_OK(req);
    ASSERT_OK(passive->accept_async(req->connection->request, bytes_of("ok")));
    std::set<uint64_t> up;
    for (int i = 0; i < 2; ++i) {
        auto e = s.cm->wait(10s);
        ASSERT_OK(e);
        EXPECT_EQ(e->id, static_cast<uint32_t>(KRDMA_CM_ESTABLISHED)) << "endpoint " << e->context;
        up.insert(e->context);
    }
    EXPECT_EQ(up, (std::set<uint64_t>{11, 12}));

    auto orphan = this->endpoint(13);
    const auto sent = orphan->accept_async(req->connection->request + 1000);
    if (!sent) {
        EXPECT_STATUS(sent, RI_ENOENT) << sent.error().to_string();
        return;
    }
    auto e = s.cm->wait(10s);
    ASSERT_OK(e) << "the kAL's refusal of an accept sent without waiting never reached the endpoint";
    EXPECT_EQ(e->id, static_cast<uint32_t>(KRDMA_CM_BROKEN));
    EXPECT_EQ(e->context, 13u);
    ASSERT_TRUE(e->connection);
    EXPECT_STATUS(e->connection->status, RI_ENOENT);
}

TYPED_TEST(LinkSuite, ARefusedCreateSaysWhyInTheKalsWords) {
    auto &s = this->side();
    // Far beyond any pin limit (and beyond the mapping): the kAL refuses, and its reason reaches the consumer even
    // where the refusal travelled through a uVP, whose RNIC-PI upcall returns only a status.
    auto mr = s.pz->register_memory(s.buffer.data(), uint64_t{1} << 44, RI_ACCESS_LOCAL_WRITE);
    ASSERT_FALSE(mr);
    const std::string plain = std::string("Register Memory Region failed: ") + std::strerror(mr.error().code());
    EXPECT_NE(mr.error().message(), plain) << "only the status's text, not the kAL's reason";
    EXPECT_GT(mr.error().message().size(), std::string("Register Memory Region failed: ").size());
    std::printf("refusal: %s\n", mr.error().to_string().c_str());
}

TYPED_TEST(LinkSuite, HostedConsumersHaveNoSocketsToConvert) {
    auto ep = this->endpoint(8);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    const auto st = ep->convert(fd);
    ::close(fd);
    if (TypeParam::kConvertsSockets) {
        EXPECT_NE(st.code(), RI_EOPNOTSUPP);  // refused for an unconnected socket, but supported
    } else {
        EXPECT_STATUS(st, RI_EOPNOTSUPP);
    }
}

}  // namespace
