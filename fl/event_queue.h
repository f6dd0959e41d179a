#ifndef FL_EVENT_QUEUE_H_
#define FL_EVENT_QUEUE_H_

// The asynchronous loop's pending client completions on the virtual clock, taken
// earliest first and, at equal times, lowest client id first: the order results
// are applied in, whatever the number of workers that trained them, so that
// asynchronous runs are bit-identical for any number of workers. The queue's
// contents (Pending) are what a checkpoint keeps of the clients in flight.

#include <cstddef>
#include <cstdint>
#include <queue>
#include <vector>

namespace fl {

struct ClientEvent {
  // Virtual seconds since the run began at which the client's update arrives.
  double time = 0.0;
  int64_t client = 0;
  // The global model version the client downloaded (its staleness at arrival is
  // the version then minus this).
  int64_t version = 0;
};

// Strict order: earlier time, then lower client id, then older version.
bool ArrivesBefore(const ClientEvent& a, const ClientEvent& b);

class EventQueue {
 public:
  void Push(const ClientEvent& event) { heap_.push(event); }
  // REQUIRES: !empty().
  ClientEvent Pop();
  const ClientEvent& Next() const { return heap_.top(); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // Every pending event, in arrival order (for a checkpoint; pushing them back
  // into an empty queue restores it).
  std::vector<ClientEvent> Pending() const;

 private:
  struct ArrivesLater {
    bool operator()(const ClientEvent& a, const ClientEvent& b) const {
      return ArrivesBefore(b, a);
    }
  };
  std::priority_queue<ClientEvent, std::vector<ClientEvent>, ArrivesLater> heap_;
};

}  // namespace fl

#endif  // FL_EVENT_QUEUE_H_
