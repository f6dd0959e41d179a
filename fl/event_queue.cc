#include "fl/event_queue.h"

#include <algorithm>
#include <tuple>

#include "glog/logging.h"

namespace fl {

bool ArrivesBefore(const ClientEvent& a, const ClientEvent& b) {
  return std::tie(a.time, a.client, a.version) < std::tie(b.time, b.client, b.version);
}

ClientEvent EventQueue::Pop() {
  CHECK(!heap_.empty()) << "no pending client event";
  ClientEvent next = heap_.top();
  heap_.pop();
  return next;
}

std::vector<ClientEvent> EventQueue::Pending() const {
  auto copy = heap_;
  std::vector<ClientEvent> pending;
  pending.reserve(copy.size());
  while (!copy.empty()) {
    pending.push_back(copy.top());
    copy.pop();
  }
  return pending;
}

}  // namespace fl
