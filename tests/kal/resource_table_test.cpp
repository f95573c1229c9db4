// Resource management: handles that cannot be forged or reused, the ownership tree and references the verbs
// imply, quotas, and teardown in dependency order.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "resource_table.hpp"
#include "status_matchers.hpp"

namespace {

using kal::Handle;
using kal::Quotas;
using kal::ResourceTable;
using kal::ResourceType;

// Records its own destruction, as a provider object would release itself.
struct Tracked : kal::Resource {
    Tracked(std::vector<std::string> &log, std::string name) : log_(log), name_(std::move(name)) {}
    ~Tracked() override { log_.push_back(name_); }
    std::vector<std::string> &log_;
    std::string name_;
};

class Resources : public ::testing::Test {
protected:
    Handle add(ResourceType t, Handle parent, std::vector<Handle> refs, const std::string &name) {
        auto h = table.add(t, parent, refs, std::make_unique<Tracked>(log, name));
        EXPECT_OK(h) << name << ": " << h.error().to_string();
        return h ? *h : 0;
    }
    std::vector<std::string> log;
    ResourceTable table{Quotas{}};
};

TEST_F(Resources, HandlesResolveOnlyToTheirObjectAndType) {
    Handle rnic = add(ResourceType::rnic, 0, {}, "rnic");
    Handle pd = add(ResourceType::pd, rnic, {}, "pd");
    ASSERT_OK(table.get(pd, ResourceType::pd));
    EXPECT_EQ(table.parent(pd), rnic);
    auto wrong_type = table.get(pd, ResourceType::qp);
    ASSERT_FALSE(wrong_type);
    EXPECT_STATUS(wrong_type, RI_EINVAL);
    for (Handle forged : {Handle{0}, Handle{12345}, pd + 1, pd ^ (Handle{7} << 32), ~Handle{0}}) {
        auto r = table.get(forged, ResourceType::pd);
        ASSERT_FALSE(r) << forged;
        EXPECT_STATUS(r, RI_EBADF);
    }
}

TEST_F(Resources, StaleHandlesStayStaleWhenSlotsAreReused) {
    Handle rnic = add(ResourceType::rnic, 0, {}, "rnic");
    Handle pd = add(ResourceType::pd, rnic, {}, "pd");
    ASSERT_OK(table.destroy(pd));
    Handle pd2 = add(ResourceType::pd, rnic, {}, "pd2");
    EXPECT_EQ(static_cast<uint32_t>(pd2), static_cast<uint32_t>(pd));  // the same slot...
    EXPECT_NE(pd2, pd);                                                // ...under a new generation
    EXPECT_FALSE(table.get(pd, ResourceType::pd));
    EXPECT_FALSE(table.destroy(pd));
    EXPECT_OK(table.get(pd2, ResourceType::pd));
}

TEST_F(Resources, OwnershipTreeFollowsTheVerbs) {
    Handle rnic = add(ResourceType::rnic, 0, {}, "rnic");
    auto pd_at_root = table.add(ResourceType::pd, 0, {}, nullptr);
    ASSERT_FALSE(pd_at_root);
    EXPECT_STATUS(pd_at_root, RI_EINVAL);
    auto qp_under_rnic = table.add(ResourceType::qp, rnic, {}, nullptr);
    ASSERT_FALSE(qp_under_rnic);
    EXPECT_NE(qp_under_rnic.error().message().find("cannot belong to a rnic"), std::string::npos);
    auto orphan = table.add(ResourceType::pd, Handle{99} << 32 | 3, {}, nullptr);
    ASSERT_FALSE(orphan);
    EXPECT_STATUS(orphan, RI_EBADF);
}

TEST_F(Resources, ChildrenAndReferrersMakeDestroyBusy) {
    Handle rnic = add(ResourceType::rnic, 0, {}, "rnic");
    Handle pd = add(ResourceType::pd, rnic, {}, "pd");
    Handle cq = add(ResourceType::cq, rnic, {}, "cq");
    Handle qp = add(ResourceType::qp, pd, {cq, cq}, "qp");  // send and receive CQ
    auto busy_pd = table.destroy(pd);
    ASSERT_FALSE(busy_pd);
    EXPECT_STATUS(busy_pd, RI_EBUSY);
    auto busy_cq = table.destroy(cq);
    ASSERT_FALSE(busy_cq);
    EXPECT_NE(busy_cq.error().message().find("still used by 2"), std::string::npos);
    ASSERT_OK(table.destroy(qp));
    EXPECT_OK(table.destroy(cq));
    EXPECT_OK(table.destroy(pd));
    EXPECT_OK(table.destroy(rnic));
    EXPECT_EQ(table.total(), 0u);
    EXPECT_EQ(log, (std::vector<std::string>{"qp", "cq", "pd", "rnic"}));
}

TEST_F(Resources, TeardownDestroysInDependencyOrder) {
    // Created in an order that is the wrong one for destruction.
    Handle rnic = add(ResourceType::rnic, 0, {}, "rnic");
    Handle cq = add(ResourceType::cq, rnic, {}, "cq");
    Handle pd = add(ResourceType::pd, rnic, {}, "pd");
    Handle mr = add(ResourceType::mr, pd, {}, "mr");
    Handle srq = add(ResourceType::srq, pd, {}, "srq");
    Handle qp = add(ResourceType::qp, pd, {cq, cq, srq}, "qp");
    add(ResourceType::mw, pd, {mr, qp}, "mw");
    Handle listener = add(ResourceType::listener, rnic, {}, "listener");
    add(ResourceType::endpoint, listener, {qp}, "ep");
    EXPECT_EQ(table.count(ResourceType::qp), 1u);
    EXPECT_EQ(table.total(), 9u);
    table.clear();
    EXPECT_EQ(log, (std::vector<std::string>{"ep", "listener", "mw", "qp", "srq", "mr", "cq", "pd", "rnic"}));
    EXPECT_EQ(table.total(), 0u);
    EXPECT_EQ(table.count(ResourceType::qp), 0u);
}

TEST_F(Resources, DestroyTreeTakesOnlyThatSubtree) {
    Handle a = add(ResourceType::rnic, 0, {}, "rnicA");
    Handle pa = add(ResourceType::pd, a, {}, "pdA");
    add(ResourceType::mr, pa, {}, "mrA");
    Handle b = add(ResourceType::rnic, 0, {}, "rnicB");
    Handle pb = add(ResourceType::pd, b, {}, "pdB");
    table.destroy_tree(a);
    EXPECT_EQ(log, (std::vector<std::string>{"mrA", "pdA", "rnicA"}));
    EXPECT_OK(table.get(pb, ResourceType::pd));
    EXPECT_EQ(table.total(), 2u);
}

TEST(ResourceQuotas, PerTypeAndTotal) {
    Quotas q;
    q.total = 5;
    q.per_type[static_cast<size_t>(ResourceType::pd)] = 2;
    ResourceTable t(q);
    auto rnic = t.add(ResourceType::rnic, 0, {}, nullptr);
    ASSERT_OK(rnic);
    ASSERT_OK(t.add(ResourceType::pd, *rnic, {}, nullptr));
    ASSERT_OK(t.add(ResourceType::pd, *rnic, {}, nullptr));
    auto third = t.add(ResourceType::pd, *rnic, {}, nullptr);
    ASSERT_FALSE(third);
    EXPECT_STATUS(third, RI_ENOSPC);
    EXPECT_NE(third.error().message().find("quota"), std::string::npos);
    ASSERT_OK(t.add(ResourceType::cq, *rnic, {}, nullptr));
    ASSERT_OK(t.add(ResourceType::cq, *rnic, {}, nullptr));
    auto over_total = t.add(ResourceType::cq, *rnic, {}, nullptr);
    ASSERT_FALSE(over_total);
    EXPECT_STATUS(over_total, RI_ENOSPC);
    EXPECT_EQ(t.total(), 5u);
}

// Two tables (two device connections of one process) share their process's budget, and two processes their user's:
// each limit refuses with its own name and counter, and what a table destroys (or tears down) is given back.
TEST(ResourceQuotas, ProcessAndUserBudgetsSpanTables) {
    std::atomic<uint64_t> refused_process{0}, refused_user{0};
    Quotas of_user;
    of_user.total = 7;
    auto user = std::make_shared<kal::ObjectBudget>(of_user, nullptr, "uid 65534", &refused_user);
    Quotas of_process;
    of_process.total = 4;
    of_process.per_type[static_cast<size_t>(ResourceType::pd)] = 3;
    auto first = std::make_shared<kal::ObjectBudget>(of_process, user, "process 10", &refused_process);
    auto second = std::make_shared<kal::ObjectBudget>(of_process, user, "process 11", &refused_process);
    Quotas roomy;  // the tables' own quotas no longer apply
    roomy.total = 1;
    auto a = std::make_unique<ResourceTable>(roomy, first);
    ResourceTable b(roomy, first);
    auto ra = a->add(ResourceType::rnic, 0, {}, nullptr);
    auto rb = b.add(ResourceType::rnic, 0, {}, nullptr);
    ASSERT_TRUE(ra && rb);
    ASSERT_OK(a->add(ResourceType::pd, *ra, {}, nullptr));
    ASSERT_OK(b.add(ResourceType::pd, *rb, {}, nullptr));
    auto over = b.add(ResourceType::pd, *rb, {}, nullptr);  // the process's 5th object
    ASSERT_FALSE(over);
    EXPECT_STATUS(over, RI_ENOSPC);
    EXPECT_NE(over.error().message().find("process 10"), std::string::npos) << over.error().message();
    EXPECT_EQ(refused_process.load(), 1u);
    EXPECT_EQ(first->total(), 4u);
    EXPECT_EQ(user->total(), 4u);
    // The other process has room of its own, until the user's 7 are reached.
    ResourceTable c(roomy, second);
    auto rc = c.add(ResourceType::rnic, 0, {}, nullptr);
    ASSERT_OK(rc);
    ASSERT_OK(c.add(ResourceType::pd, *rc, {}, nullptr));
    ASSERT_OK(c.add(ResourceType::pd, *rc, {}, nullptr));
    auto user_full = c.add(ResourceType::pd, *rc, {}, nullptr);
    ASSERT_FALSE(user_full);
    EXPECT_NE(user_full.error().message().find("uid 65534"), std::string::npos) << user_full.error().message();
    EXPECT_EQ(refused_user.load(), 1u);
    EXPECT_EQ(second->total(), 3u) << "a refusal by the user leaves the process's count as it was";
    // A connection that goes gives its objects back to its process and its user.
    a.reset();
    EXPECT_EQ(first->total(), 2u);
    EXPECT_EQ(user->total(), 5u);
    EXPECT_OK(c.add(ResourceType::pd, *rc, {}, nullptr));
    EXPECT_EQ(user->total(), 6u);
}

}  // namespace
