#ifndef FL_RANK_SET_H_
#define FL_RANK_SET_H_

// A set of integers in [0, n) that finds its k-th smallest member in O(log n), as
// inserting and erasing take (a Fenwick tree over membership bits). The
// asynchronous loop draws uniformly from changing sets of clients this way: the
// k-th member depends only on the set, not on the order it was built in, so a
// resumed run draws as the uninterrupted one did.

#include <cstdint>
#include <vector>

namespace fl {

class RankSet {
 public:
  explicit RankSet(int n);

  bool contains(int value) const { return member_[value] != 0; }
  int size() const { return size_; }
  // No-ops when already in (or out of) the set.
  void Insert(int value);
  void Erase(int value);
  // The k-th smallest member, k in [0, size()).
  int Nth(int k) const;

 private:
  void Add(int value, int delta);

  std::vector<int> tree_;  // 1-based Fenwick tree of membership counts
  std::vector<uint8_t> member_;
  int size_ = 0;
  int top_bit_ = 1;  // the highest power of two <= n
};

}  // namespace fl

#endif  // FL_RANK_SET_H_
