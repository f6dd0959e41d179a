#ifndef TOOLS_PARTITION_STATS_H_
#define TOOLS_PARTITION_STATS_H_

// What a partition looks like as text: client sizes and classes held, and a
// table. The counts come from fl/report/class_counts.h:
//
//   auto counts = fl::report::CountByClass(shares, labels, 10);
//   std::string text = tools::SummaryText(counts);   // min/median/max + a table

#include <cstdint>
#include <string>
#include <vector>

namespace tools {

// Client sizes and classes held (min / median / max, mean size), then a table with
// one row per client: id, size, classes held and, when there are at most
// `max_class_columns` classes, the count of each.
std::string SummaryText(const std::vector<std::vector<int64_t>>& counts,
                        int max_class_columns = 20);

}  // namespace tools

#endif  // TOOLS_PARTITION_STATS_H_
