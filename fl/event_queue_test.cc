#include "fl/event_queue.h"

#include <vector>

#include "gtest/gtest.h"

namespace fl {
namespace {

std::vector<int64_t> ClientsInOrder(EventQueue queue) {
  std::vector<int64_t> clients;
  while (!queue.empty()) clients.push_back(queue.Pop().client);
  return clients;
}

TEST(EventQueueTest, EarliestFirstThenLowestClientId) {
  EventQueue queue;
  queue.Push({2.5, 7, 0});
  queue.Push({1.0, 9, 0});
  queue.Push({2.5, 3, 1});
  queue.Push({0.5, 4, 0});
  queue.Push({2.5, 5, 0});
  EXPECT_EQ(queue.Next().client, 4);
  EXPECT_EQ(ClientsInOrder(queue), (std::vector<int64_t>{4, 9, 3, 5, 7}));
}

TEST(EventQueueTest, TheOrderDoesNotDependOnTheOrderOfPushes) {
  const std::vector<ClientEvent> events = {{3, 1, 0}, {1, 2, 0}, {3, 0, 2}, {1, 2, 1}, {2, 8, 0}};
  EventQueue forward, backward;
  for (const ClientEvent& e : events) forward.Push(e);
  for (auto it = events.rbegin(); it != events.rend(); ++it) backward.Push(*it);
  std::vector<ClientEvent> a = forward.Pending(), b = backward.Pending();
  ASSERT_EQ(a.size(), events.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].client, b[i].client);
    EXPECT_EQ(a[i].version, b[i].version);
  }
  // Time 1: client 2's older version first; then 2 (client 8); then 3 (clients 0, 1).
  EXPECT_EQ(a[0].version, 0);
  EXPECT_EQ(a[1].version, 1);
  EXPECT_EQ(ClientsInOrder(forward), (std::vector<int64_t>{2, 2, 8, 0, 1}));
}

TEST(EventQueueTest, PendingRestoresTheQueue) {
  EventQueue queue;
  queue.Push({4, 1, 3});
  queue.Push({2, 6, 2});
  queue.Pop();
  queue.Push({3, 0, 4});
  EventQueue restored;
  for (const ClientEvent& e : queue.Pending()) restored.Push(e);
  EXPECT_EQ(restored.size(), 2u);
  EXPECT_EQ(ClientsInOrder(restored), ClientsInOrder(queue));
}

}  // namespace
}  // namespace fl
