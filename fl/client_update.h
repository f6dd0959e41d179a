#ifndef FL_CLIENT_UPDATE_H_
#define FL_CLIENT_UPDATE_H_

#include <cstdint>
#include <map>
#include <string>

#include "fl/model_state.h"

namespace fl {

// What one client sends back after a round of local training.
struct ClientUpdate {
  int64_t client_id = -1;
  // w_local - w_global, parameters and buffers.
  ModelState delta;
  // Size of the data the client trained on (the weight in size-weighted averages).
  int64_t num_examples = 0;
  // Local optimiser steps actually taken (s_k; fewer than asked for an incomplete
  // client, 0 for one that dropped out of the round and sends nothing else).
  int64_t local_steps = 0;
  // The steps it was asked for (E); 0 when not recorded.
  int64_t planned_steps = 0;
  // Method-specific tensors added by client hooks, by name.
  ExtraStates extras;
  // Scalars the client reports, e.g. "train_loss" (mean over its local steps).
  std::map<std::string, double> metrics;
  // Bytes the client uploaded for this update (after any compression).
  int64_t bytes_sent = 0;
};

// A deep copy (tensors included), for handing one update to several aggregators:
// an aggregator may change an update's tensors in place.
inline ClientUpdate CloneUpdate(const ClientUpdate& update) {
  ClientUpdate copy = update;
  copy.delta = update.delta.Clone();
  for (auto& [name, extra] : copy.extras) extra = extra.Clone();
  return copy;
}

}  // namespace fl

#endif  // FL_CLIENT_UPDATE_H_
