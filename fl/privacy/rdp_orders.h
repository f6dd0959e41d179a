#ifndef FL_PRIVACY_RDP_ORDERS_H_
#define FL_PRIVACY_RDP_ORDERS_H_

// The Rényi orders an RdpAccountant tracks by default: 1.1, 1.2, ..., 10.9 (step
// 0.1), 11, 12, ..., 63, then 128, 256 and 512, the grid of Google's dp_accounting
// RdpAccountant (DEFAULT_RDP_ORDERS) without its last entry: dp_accounting 0.3 to
// 0.6 also append 1024. The two lists give the same epsilon unless the best order
// would be above 512, which happens only for epsilons below about 0.01 (one step
// of the plain Gaussian with z = 300 at delta 1e-5: 0.0092 with 1024, 0.0112
// without); there the shorter list gives a larger, still valid, epsilon.
// RdpAccountant::Create takes any other list.
//
// The fine grid below 11 matters: with small sampling rates and many steps the
// best order is often between 1 and 10.

#include <array>
#include <cstddef>

namespace fl::privacy {

inline constexpr std::size_t kNumDefaultRdpOrders = 99 + 53 + 3;

namespace internal {
// Built as dp_accounting builds it (1 + x / 10.0), so every order is the same
// double as in Python: 1 + 10 / 10.0 is exactly 2.0, which is then an integer order.
constexpr std::array<double, kNumDefaultRdpOrders> MakeDefaultRdpOrders() {
  std::array<double, kNumDefaultRdpOrders> orders{};
  std::size_t i = 0;
  for (int x = 1; x < 100; ++x) orders[i++] = 1 + x / 10.0;
  for (int order = 11; order < 64; ++order) orders[i++] = order;
  orders[i++] = 128;
  orders[i++] = 256;
  orders[i++] = 512;
  return orders;
}
}  // namespace internal

inline constexpr std::array<double, kNumDefaultRdpOrders> kDefaultRdpOrders =
    internal::MakeDefaultRdpOrders();

}  // namespace fl::privacy

#endif  // FL_PRIVACY_RDP_ORDERS_H_
