#include "fl/rank_set.h"

#include "glog/logging.h"

namespace fl {

RankSet::RankSet(int n) : tree_(static_cast<size_t>(n) + 1, 0), member_(n, 0) {
  while (top_bit_ * 2 <= n) top_bit_ *= 2;
}

void RankSet::Add(int value, int delta) {
  for (int i = value + 1; i < static_cast<int>(tree_.size()); i += i & -i) tree_[i] += delta;
}

void RankSet::Insert(int value) {
  if (member_[value]) return;
  member_[value] = 1;
  ++size_;
  Add(value, 1);
}

void RankSet::Erase(int value) {
  if (!member_[value]) return;
  member_[value] = 0;
  --size_;
  Add(value, -1);
}

int RankSet::Nth(int k) const {
  CHECK(k >= 0 && k < size_) << "rank " << k << " of a set of " << size_;
  // Descend: the largest position whose prefix count is <= k, plus one.
  int position = 0;
  for (int step = top_bit_; step > 0; step /= 2) {
    const int next = position + step;
    if (next < static_cast<int>(tree_.size()) && tree_[next] <= k) {
      position = next;
      k -= tree_[next];
    }
  }
  return position;  // 1-based position + 1 - 1
}

}  // namespace fl
